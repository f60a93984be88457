#include "backends/cuda/builder/ops/registry.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "commands.h"

namespace baton::tool {

void register_backends() {
  cuda::register_backend();
  cuda::register_compiler();
}

std::vector<GpuLowering> gpu_lowered_ops() {
  std::vector<GpuLowering> out;
  for (const cuda::OpLowering& l : cuda::op_lowerings()) {
    out.push_back({std::string(l.domain), std::string(l.op), l.types});
  }
  return out;
}

}  // namespace baton::tool
