#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>

#include "baton/core/check.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/competing_workload.h"
#include "baton/cuda/green_context.h"
#include "baton/cuda/stream.h"
#include "baton/cuda/stream_guard.h"
#include "baton/runtime/device_allocator.h"
#include "gpu_run.h"

namespace baton::tool {
namespace {

class CudaRun final : public GpuRun {
 public:
  static Result<std::unique_ptr<GpuRun>> create(const RunArgs& args, const runtime::Method& m) {
    auto run = std::make_unique<CudaRun>();
    // The GPU the program's partitions run on: the first device arena.
    run->device_ = 0;
    for (const auto& a : m.arenas()) {
      if (a.device.is_cuda()) {
        run->device_ = a.device.index;
        break;
      }
    }
    if (args.sms > 0 && args.saturate_rest) {
      // The remainder's context and the workload are made here, before anything is timed.
      BATON_ASSIGN_OR_RETURN(auto split, cuda::GreenContext::split(run->device_, args.sms));
      run->green_.emplace(std::move(split.first));
      run->rest_.emplace(std::move(split.second));
      BATON_ASSIGN_OR_RETURN(auto load, cuda::CompetingWorkload::create(run->device_));
      run->load_.emplace(std::move(load));
      run->stream_ = run->green_->stream();
    } else if (args.sms > 0) {
      BATON_ASSIGN_OR_RETURN(auto green, cuda::GreenContext::create(run->device_, args.sms));
      run->green_.emplace(std::move(green));
      run->stream_ = run->green_->stream();
    } else if (args.stream == "caller") {
      BATON_ASSIGN_OR_RETURN(auto stream, cuda::Stream::create(run->device_));
      run->own_stream_.emplace(std::move(stream));
      run->stream_ = run->own_stream_->get();
    }
    return std::unique_ptr<GpuRun>(std::move(run));
  }

  Status bind_device_io(runtime::Method& m, const std::vector<Tensor>& inputs) override {
    const Device device = Device::cuda(static_cast<int16_t>(device_));
    for (size_t i = 0; i < m.num_inputs(); ++i) {
      // The input's own shape: a dynamic program's input may have any in its ranges (the
      // program's input_info holds the largest before the first call).
      const runtime::TensorInfo info = m.input_info(i);
      BATON_ASSIGN_OR_RETURN(Tensor t,
                             runtime::allocate_tensor(info.dtype, inputs[i].sizes(), device));
      BATON_TRY(runtime::copy_tensor(t.view(), inputs[i].view()));
      BATON_TRY(m.bind_input(i, t.view()));
      buffers_.push_back(std::move(t));
    }
    for (size_t i = 0; i < m.num_outputs(); ++i) {
      // A dynamic output's shape is known only after execute() (bind_output refuses it): it
      // stays where the program put it, in GPU memory for a program compiled with --io device.
      const std::vector<runtime::Method::Dim> dims = m.output_dims(i);
      if (std::any_of(dims.begin(), dims.end(),
                      [](const runtime::Method::Dim& d) { return !d.expr.empty(); })) {
        continue;
      }
      const runtime::TensorInfo info = m.output_info(i);
      BATON_ASSIGN_OR_RETURN(
          Tensor t,
          runtime::allocate_tensor(info.dtype, {info.sizes.begin(), info.sizes.end()}, device));
      BATON_TRY(m.bind_output(i, t.view()));
      buffers_.push_back(std::move(t));
    }
    return Status();
  }

  Status execute(runtime::Method& m, bool* returned_early) override {
    *returned_early = false;
    if (stream_ == nullptr) return m.execute();
    {
      cuda::StreamGuard guard(stream_);
      BATON_TRY(m.execute());
    }
    *returned_early = cudaStreamQuery(stream_) == cudaErrorNotReady;
    cudaGetLastError();
    const cudaError_t e = cudaStreamSynchronize(stream_);
    BATON_CHECK_OR_RETURN(e == cudaSuccess, DeviceError,
                          "cudaStreamSynchronize failed on cuda:{}: {} ({})", device_,
                          cudaGetErrorName(e), cudaGetErrorString(e));
    return Status();
  }

  Status begin_timed_runs() override {
    if (!load_) return Status();
    BATON_TRY(load_->start(rest_->stream(), rest_->sm_count()));
    return Status();
  }

  Status end_timed_runs() override {
    if (!load_ || !load_->running()) return Status();
    BATON_ASSIGN_OR_RETURN(const bool was_running, load_->stop());
    covered_ = was_running;
    return Status();
  }

  std::string describe() const override {
    if (green_ && load_) {
      return fmt::format(
          "stream: green context of {} SMs (asked {}) on cuda:{}; the other {} SMs kept busy by a "
          "competing kernel ({} blocks x {} threads of dependent FP32 FMAs, {} per SM, all "
          "resident) {}",
          green_->sm_count(), green_->requested_sm_count(), device_, rest_->sm_count(),
          load_->blocks(), cuda::CompetingWorkload::kThreadsPerBlock, load_->blocks_per_sm(),
          covered_ ? "for the whole timed loop"
                   : "that ENDED before the timed loop did (its time limit): the timings are not "
                     "all saturated");
    }
    if (green_) {
      return fmt::format("stream: green context of {} SMs (asked {}) on cuda:{}",
                         green_->sm_count(), green_->requested_sm_count(), device_);
    }
    return stream_ ? fmt::format("stream: caller's (non-blocking) on cuda:{}", device_)
                   : std::string("stream: default (cudaStreamPerThread, synchronized by execute)");
  }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;  // the green context's, the owned one, or none (default)
  std::optional<cuda::Stream> own_stream_;
  std::optional<cuda::GreenContext> green_;
  // --saturate-rest: the SMs outside green_, and the kernel that keeps them busy. Declared after
  // green_ and rest_, so the workload is stopped (its destructor waits) before they go.
  std::optional<cuda::GreenContext> rest_;
  std::optional<cuda::CompetingWorkload> load_;
  bool covered_ = false;  // the workload was still running when the timed runs ended
  std::vector<Tensor> buffers_;
};

}  // namespace

std::vector<int> gpu_contexts() { return cuda::active_contexts(); }

Status check_gpu_options(const RunArgs& args) {
  if (!asks_for_gpu(args)) return Status();
  const char* option = args.sms > 0         ? "--sms"
                       : args.saturate_rest ? "--saturate-rest"
                       : args.device_io     ? "--device-io"
                                            : "--stream caller";
  BATON_CHECK_OR_RETURN(!cuda::devices().empty(), NotSupported,
                        "{} needs a usable NVIDIA GPU, and this machine has none (no CUDA device "
                        "or no NVIDIA driver). Run without --device-io, --stream, --sms and "
                        "--saturate-rest on a CPU program",
                        option);
  return Status();
}

Status explain_load_failure(const runtime::Program& program, const std::vector<Device>& needs,
                            Status failure) {
  if (needs.empty()) return failure;
  const std::vector<cuda::DeviceInfo> have = cuda::devices();
  std::string missing;
  for (const Device& d : needs) {
    bool found = false;
    for (const cuda::DeviceInfo& g : have) found = found || g.index == d.index;
    if (!found) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", d.to_string());
  }
  if (missing.empty()) return failure;
  return BATON_ERROR(
      NotSupported,
      "{} needs {}, and this machine has {}. Run it where that GPU is, {}or rebuild "
      "the program for this machine: {} (for the CPU){}",
      program.origin(), missing,
      have.empty() ? std::string("no usable NVIDIA GPU") : fmt::format("{} GPU(s)", have.size()),
      have.empty() ? std::string()
                   : fmt::format("map it to one this machine has (--device-map {}=cuda:0), ",
                                 missing.substr(0, missing.find(','))),
      rebuild_for_cpu(program), have.empty() ? "" : ", or with --device cuda:0");
}

Result<std::unique_ptr<GpuRun>> make_gpu_run(const RunArgs& args, const runtime::Method& method) {
  if (!asks_for_gpu(args)) return std::unique_ptr<GpuRun>();
  return CudaRun::create(args, method);
}

}  // namespace baton::tool
