#include "baton/core/check.h"
#include "gpu_run.h"

namespace baton::tool {

std::vector<int> gpu_contexts() { return {}; }

Status check_gpu_options(const RunArgs& args) {
  BATON_CHECK_OR_RETURN(!asks_for_gpu(args), NotSupported,
                        "--device-io, --stream caller, --sms and --saturate-rest need the CUDA "
                        "backend, which this build of baton lacks");
  return Status();
}

Result<std::unique_ptr<GpuRun>> make_gpu_run(const RunArgs& args, const runtime::Method&) {
  BATON_TRY(check_gpu_options(args));
  return std::unique_ptr<GpuRun>();
}

Status explain_load_failure(const runtime::Program& program, const std::vector<Device>& needs,
                            Status failure) {
  if (needs.empty()) return failure;
  return BATON_ERROR(NotSupported,
                     "{} needs {} (it has GPU partitions), and this build of baton has no CUDA "
                     "backend. Run it with a baton built with CUDA, or rebuild the program for "
                     "the CPU: {}",
                     program.origin(), needs.front().to_string(), rebuild_for_cpu(program));
}

}  // namespace baton::tool
