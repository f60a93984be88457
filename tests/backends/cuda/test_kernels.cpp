#include "test_kernels.h"

#include <nvrtc.h>

#include <string>

#include "baton/core/check.h"

namespace baton::testing {
namespace {

constexpr char kSource[] = R"(
extern "C" __global__ void baton_test_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
extern "C" __global__ void baton_test_probe(int* out) {
  if (threadIdx.x == 0) {
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    out[blockIdx.x] = (int)smid;
  }
}
)";

}  // namespace

Result<TestKernels> TestKernels::load(int device) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  nvrtcProgram prog;
  BATON_CHECK_OR_RETURN(
      nvrtcCreateProgram(&prog, kSource, "test.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS, Internal,
      "nvrtcCreateProgram");
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(major * 10 + minor);
  const char* opts[] = {arch.c_str()};
  const nvrtcResult r = nvrtcCompileProgram(prog, 1, opts);
  size_t size = 0;
  nvrtcGetCUBINSize(prog, &size);
  std::vector<char> cubin(size);
  if (r == NVRTC_SUCCESS) nvrtcGetCUBIN(prog, cubin.data());
  nvrtcDestroyProgram(&prog);
  BATON_CHECK_OR_RETURN(r == NVRTC_SUCCESS, Internal, "test kernels do not compile: {}",
                        nvrtcGetErrorString(r));
  TestKernels k;
  k.device_ = device;
  BATON_CHECK_OR_RETURN(cudaLibraryLoadData(&k.library_, cubin.data(), nullptr, nullptr, 0, nullptr,
                                            nullptr, 0) == cudaSuccess,
                        DeviceError, "cudaLibraryLoadData");
  BATON_CHECK_OR_RETURN(
      cudaLibraryGetKernel(&k.spin_, k.library_, "baton_test_spin") == cudaSuccess &&
          cudaLibraryGetKernel(&k.probe_, k.library_, "baton_test_probe") == cudaSuccess,
      DeviceError, "cudaLibraryGetKernel");
  return k;
}

TestKernels::TestKernels(TestKernels&& o) noexcept
    : library_(o.library_), spin_(o.spin_), probe_(o.probe_), device_(o.device_) {
  o.library_ = nullptr;
}

TestKernels::~TestKernels() {
  if (library_) cudaLibraryUnload(library_);
}

Status TestKernels::spin(cudaStream_t stream, int64_t cycles) { return busy(stream, 1, 1, cycles); }

Status TestKernels::busy(cudaStream_t stream, int blocks, int threads, int64_t cycles) {
  long long c = cycles;
  void* args[] = {&c};
  const cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(spin_), dim3(blocks),
                                         dim3(threads), args, 0, stream);
  BATON_CHECK_OR_RETURN(e == cudaSuccess, DeviceError, "spin launch: {}", cudaGetErrorString(e));
  return Status();
}

Result<std::set<int>> TestKernels::probe_sms(cudaStream_t stream, int blocks) {
  int* out = nullptr;
  BATON_CHECK_OR_RETURN(
      cudaMalloc(reinterpret_cast<void**>(&out), sizeof(int) * blocks) == cudaSuccess, DeviceError,
      "cudaMalloc");
  void* args[] = {&out};
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(probe_), dim3(blocks), dim3(32),
                                   args, 0, stream);
  std::vector<int> host(blocks, -1);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess)
    e = cudaMemcpy(host.data(), out, sizeof(int) * blocks, cudaMemcpyDeviceToHost);
  cudaFree(out);
  BATON_CHECK_OR_RETURN(e == cudaSuccess, DeviceError, "probe: {}", cudaGetErrorString(e));
  return std::set<int>(host.begin(), host.end());
}

}  // namespace baton::testing
