#include <fmt/format.h>

#include <map>
#include <mutex>

#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "compiler/backend_compiler.h"
#include "compiler/ir.h"

namespace baton::compiler {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<DeviceType, BackendCompilerFactory> factories;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend_compiler(DeviceType type, BackendCompilerFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[type] = std::move(factory);
}

Result<std::unique_ptr<BackendCompiler>> make_backend_compiler(const TargetSpec& target) {
  BackendCompilerFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(target.device.type);
    if (it != r.factories.end()) factory = it->second;
  }
  BATON_CHECK_OR_RETURN(factory != nullptr, NotSupported,
                        "this build of Baton cannot compile for {}: it has no {} backend (build "
                        "with a CUDA toolkit present, or compile with --device cpu)",
                        target.device.to_string(), device_type_name(target.device.type));
  return factory(target);
}

std::string BackendCompiler::unsupported_reason(const Graph& graph, const IrNode& node) const {
  (void)graph;
  return fmt::format("backend '{}' does not take {}", id(), node.op_type);
}

}  // namespace baton::compiler
