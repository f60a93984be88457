#include "baton/core/check.h"
#include "gpu_run.h"

namespace baton::tool {

Result<std::unique_ptr<GpuRun>> make_gpu_run(const RunArgs& args, const runtime::Method&) {
  BATON_CHECK_OR_RETURN(
      !args.device_io && args.stream == "default" && args.sms == 0 && !args.saturate_rest,
      NotSupported,
      "--device-io, --stream caller, --sms and --saturate-rest need the CUDA "
      "backend, which this build of baton lacks");
  return std::unique_ptr<GpuRun>();
}

}  // namespace baton::tool
