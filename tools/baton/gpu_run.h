// The GPU options of `baton run` (--device-io, --stream, --sms, --saturate-rest). CMake builds
// gpu_run_cuda.cpp when Baton has its CUDA backend and gpu_run_none.cpp (which refuses the options)
// otherwise, so the rest of the tool has no CUDA in it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "baton/runtime/program.h"
#include "commands.h"

namespace baton::tool {

class GpuRun {
 public:
  virtual ~GpuRun() = default;
  // --device-io: copies `inputs` into device buffers once and binds them and device buffers for
  // the outputs, so execute() touches no host memory.
  virtual Status bind_device_io(runtime::Method& method, const std::vector<Tensor>& inputs) = 0;
  // One call under the selected stream (if any), then waits for it; `returned_early` says whether
  // the GPU was still working when execute() returned.
  virtual Status execute(runtime::Method& method, bool* returned_early) = 0;
  // Around the timed runs. With --saturate-rest, the first starts the competing workload on the
  // SMs outside the green context (returning once it occupies them) and the second stops it and
  // waits for it; without, both do nothing. Destroying the GpuRun stops a workload still running.
  virtual Status begin_timed_runs() = 0;
  virtual Status end_timed_runs() = 0;
  // "stream: green context of 16 SMs (asked 16) on cuda:0", and what kept the other SMs busy.
  virtual std::string describe() const = 0;
};

// Whether `args` asks for anything GPU-specific (--device-io, --stream caller, --sms,
// --saturate-rest).
inline bool asks_for_gpu(const RunArgs& args) {
  return args.device_io || args.stream != "default" || args.sms > 0 || args.saturate_rest;
}

// nullptr when the options ask for nothing GPU-specific.
Result<std::unique_ptr<GpuRun>> make_gpu_run(const RunArgs& args, const runtime::Method& method);

// Before anything is loaded: the GPU options (--device-io, --stream caller, --sms,
// --saturate-rest) on a machine without a usable GPU (or a baton without the CUDA backend) are
// refused, saying exactly that.
Status check_gpu_options(const RunArgs& args);

// The GPUs on which this process holds an active CUDA context (none without the CUDA backend).
std::vector<int> gpu_contexts();

// "baton compile mlp.onnx -o PROGRAM --device cpu": the model named in the program's producer.
std::string rebuild_for_cpu(const runtime::Program& program);

// `failure`, the error of loading `program`'s method, explained when the program needs GPUs this
// machine does not have: which devices, and how to rebuild it for the CPU. Otherwise as it is.
Status explain_load_failure(const runtime::Program& program, const std::vector<Device>& needs,
                            Status failure);

}  // namespace baton::tool
