#include "baton/cuda/competing_workload.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "backends/cuda/builder/nvrtc_compile.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"

namespace baton::cuda {

Result<std::vector<uint8_t>> CompetingWorkload::cubin(uint32_t sm_arch) {
  return compile_to_cubin("#include \"baton/competing_workload.cuh\"\n", sm_arch,
                          "the competing workload");
}

Result<CompetingWorkload> CompetingWorkload::create(int device) {
  BATON_CHECK_OR_RETURN(device >= 0 && device < device_count(), InvalidArgument,
                        "competing workload on cuda:{}: this machine has {} CUDA device(s)", device,
                        device_count());
  DeviceGuard guard(device);
  BATON_TRY(guard.status());
  int major = 0, minor = 0, sms = 0, threads_per_sm = 0;
  BATON_CUDA_CHECK_ON(device,
                      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  BATON_CUDA_CHECK_ON(device,
                      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  BATON_CUDA_CHECK_ON(device, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  BATON_CUDA_CHECK_ON(device, cudaDeviceGetAttribute(
                                  &threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> code,
                         cubin(static_cast<uint32_t>(major * 10 + minor)));

  CompetingWorkload w;
  w.device_ = device;
  BATON_CUDA_CHECK_ON(device, cudaLibraryLoadData(&w.library_, code.data(), nullptr, nullptr, 0,
                                                  nullptr, nullptr, 0));
  BATON_CUDA_CHECK_ON(device,
                      cudaLibraryGetKernel(&w.kernel_, w.library_, "baton_competing_workload"));
  // As many blocks per SM as fit at once; the thread limit when the occupancy query does not
  // take a library kernel (start() checks that every block became resident either way).
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, reinterpret_cast<const void*>(w.kernel_), kThreadsPerBlock, 0) != cudaSuccess ||
      per_sm <= 0) {
    cudaGetLastError();
    per_sm = threads_per_sm / kThreadsPerBlock;
  }
  w.blocks_per_sm_ = per_sm > 0 ? per_sm : 1;
  w.flag_capacity_ = sms * w.blocks_per_sm_;
  // Portable: the flags are read by kernels of any context on the device (a green context's too).
  void* flags = nullptr;
  const size_t bytes = sizeof(unsigned) * (1 + static_cast<size_t>(w.flag_capacity_)) +
                       sizeof(float) * static_cast<size_t>(w.flag_capacity_);
  BATON_CUDA_CHECK_ON(device,
                      cudaHostAlloc(&flags, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  w.flags_ = static_cast<unsigned*>(flags);
  BATON_CUDA_CHECK_ON(device, cudaMalloc(reinterpret_cast<void**>(&w.stop_), sizeof(unsigned)));
  BATON_CUDA_CHECK_ON(device, cudaStreamCreateWithFlags(&w.control_, cudaStreamNonBlocking));
  return w;
}

Status CompetingWorkload::start(cudaStream_t stream, int sm_count, double max_seconds) {
  BATON_CHECK_OR_RETURN(!running(), InvalidArgument, "the competing workload is running already");
  BATON_CHECK_OR_RETURN(stream != nullptr, InvalidArgument,
                        "the competing workload needs a stream of its own, not the default one");
  BATON_CHECK_OR_RETURN(
      sm_count >= 1 && sm_count * blocks_per_sm_ <= flag_capacity_, InvalidArgument,
      "a competing workload on {} SMs: cuda:{} has {} (ask for 1 to {})", sm_count, device_,
      flag_capacity_ / blocks_per_sm_, flag_capacity_ / blocks_per_sm_);
  BATON_CHECK_OR_RETURN(max_seconds > 0.0, InvalidArgument,
                        "the competing workload's time limit must be positive (got {} s)",
                        max_seconds);
  DeviceGuard guard(device_);
  BATON_TRY(guard.status());
  blocks_ = sm_count * blocks_per_sm_;
  volatile unsigned* flags = flags_;
  for (int i = 0; i <= blocks_; ++i) flags[i] = 0u;
  std::atomic_thread_fence(std::memory_order_seq_cst);

  unsigned* device_flags = nullptr;
  BATON_CUDA_CHECK_ON(device_,
                      cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flags), flags_, 0));
  BATON_CUDA_CHECK_ON(device_, cudaMemsetAsync(stop_, 0, sizeof(unsigned), stream));
  const unsigned* stop_flag = stop_;
  unsigned* started = device_flags + 1;
  float* sink = reinterpret_cast<float*>(device_flags + 1 + flag_capacity_);
  unsigned long long max_ns = static_cast<unsigned long long>(max_seconds * 1e9);
  void* args[] = {&stop_flag, &started, &sink, &max_ns};
  BATON_CUDA_CHECK_ON(device_,
                      cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(blocks_),
                                       dim3(kThreadsPerBlock), args, 0, stream));
  stream_ = stream;

  // Every block resident before the caller measures anything.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int started_blocks = 0;
  for (;;) {
    started_blocks = 0;
    for (int b = 0; b < blocks_; ++b) started_blocks += flags[1 + b] != 0u ? 1 : 0;
    if (started_blocks == blocks_) return Status();
    const cudaError_t state = cudaStreamQuery(stream_);
    const bool ended = state != cudaErrorNotReady;
    if (ended || std::chrono::steady_clock::now() > deadline) {
      if (ended) cudaGetLastError();
      auto stopped = stop();
      const std::string after = stopped.ok() ? "stopped again" : stopped.status().to_string();
      if (ended) {
        return BATON_ERROR(DeviceError,
                           "the competing workload on cuda:{} ended before all its blocks had "
                           "started ({} of {}): {}; {}",
                           device_, started_blocks, blocks_, status_string(state), after);
      }
      return BATON_ERROR(DeviceError,
                         "only {} of the {} blocks of the competing workload ({} per SM on {} "
                         "SMs) started within 10 s on cuda:{}: its stream reaches fewer SMs, or "
                         "other work holds them; {}",
                         started_blocks, blocks_, blocks_per_sm_, sm_count, device_, after);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Result<bool> CompetingWorkload::stop() {
  BATON_CHECK_OR_RETURN(running(), InvalidArgument, "the competing workload is not running");
  const bool was_running = cudaStreamQuery(stream_) == cudaErrorNotReady;
  volatile unsigned* flags = flags_;
  flags[0] = 1u;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  cudaStream_t stream = std::exchange(stream_, nullptr);
  DeviceGuard guard(device_);
  BATON_TRY(guard.status());
  BATON_CUDA_CHECK_ON(
      device_, cudaMemcpyAsync(stop_, flags_, sizeof(unsigned), cudaMemcpyHostToDevice, control_));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(control_));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(stream));
  return was_running;
}

CompetingWorkload::CompetingWorkload(CompetingWorkload&& o) noexcept { *this = std::move(o); }

CompetingWorkload& CompetingWorkload::operator=(CompetingWorkload&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    blocks_per_sm_ = o.blocks_per_sm_;
    blocks_ = o.blocks_;
    library_ = std::exchange(o.library_, nullptr);
    kernel_ = std::exchange(o.kernel_, nullptr);
    flags_ = std::exchange(o.flags_, nullptr);
    stop_ = std::exchange(o.stop_, nullptr);
    control_ = std::exchange(o.control_, nullptr);
    flag_capacity_ = o.flag_capacity_;
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

CompetingWorkload::~CompetingWorkload() { release(); }

void CompetingWorkload::release() {
  // The kernel reads the flags: it must have ended before they are freed.
  if (running()) (void)stop();
  if (flags_) cudaFreeHost(std::exchange(flags_, nullptr));
  if (stop_ || control_) {
    DeviceGuard guard(device_);
    if (stop_) cudaFree(std::exchange(stop_, nullptr));
    if (control_) cudaStreamDestroy(std::exchange(control_, nullptr));
  }
  if (library_) cudaLibraryUnload(std::exchange(library_, nullptr));
  kernel_ = nullptr;
}

}  // namespace baton::cuda
