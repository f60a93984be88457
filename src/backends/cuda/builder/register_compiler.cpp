#include <mutex>

#include "backends/cuda/builder/engine_builder.h"
#include "backends/cuda/device.h"
#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/core/log.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"

namespace baton::cuda {
namespace {

Result<std::unique_ptr<compiler::BackendCompiler>> make_builder(const compiler::TargetSpec& t) {
  EngineTarget target;
  target.device_id = t.device.index;
  BATON_ASSIGN_OR_RETURN(target.options, BuildOptions::parse(t.options));
  if (!t.precision.empty()) {
    BATON_CHECK_OR_RETURN(parse_precision(t.precision, &target.precision), InvalidArgument,
                          "--precision {}: expected fp32, tf32, fp16 or bf16", t.precision);
  }
  uint32_t gpu_arch = 0;
  for (const DeviceInfo& d : devices()) {
    if (d.index == t.device.index) gpu_arch = static_cast<uint32_t>(d.sm_arch);
  }
  if (!t.arch.empty()) {
    BATON_CHECK_OR_RETURN(parse_sm_arch(t.arch, &target.sm_arch), InvalidArgument,
                          "--arch {}: expected sm_XY, e.g. sm_90 for H100 and H200, sm_80 for A100",
                          t.arch);
    if (gpu_arch != 0 && !cubin_runs_on(target.sm_arch, gpu_arch)) {
      log_message(LogLevel::Warn, "cuda",
                  fmt::format("building for {} as asked, although {} here is {}: the program "
                              "will not run on this GPU",
                              t.arch, t.device.to_string(), sm_arch_name(gpu_arch)));
    }
  } else {
    BATON_CHECK_OR_RETURN(gpu_arch != 0, InvalidArgument,
                          "cannot tell which GPU architecture to build {} for: this machine has no "
                          "GPU {}. Pass --arch sm_XY (sm_90 for H100/H200, sm_80 for A100)",
                          t.device.to_string(), t.device.to_string());
    target.sm_arch = gpu_arch;
  }
  return std::unique_ptr<compiler::BackendCompiler>(std::make_unique<EngineBuilder>(target));
}

}  // namespace

void register_compiler() {
  static std::once_flag once;
  std::call_once(once,
                 [] { compiler::register_backend_compiler(DeviceType::CUDA, &make_builder); });
}

}  // namespace baton::cuda
