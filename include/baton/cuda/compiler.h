// The CUDA backend's compile-time side (the engine builder), for tools that compile programs.
#pragma once

namespace baton::cuda {

// Registers the engine builder as the compiler::BackendCompiler factory for cuda devices.
// The factory reads the SM architecture from the target GPU when it exists, else takes the
// TargetSpec's arch ("sm_90"); with neither it fails and says to pass --arch.
void register_compiler();

}  // namespace baton::cuda
