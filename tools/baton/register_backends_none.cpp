#include "commands.h"

namespace baton::tool {

// Built without a CUDA toolkit: the CPU is the only target.
void register_backends() {}

std::vector<GpuLowering> gpu_lowered_ops() { return {}; }

}  // namespace baton::tool
