// Baton's top-level set-up.
#pragma once

namespace baton {

// Registers Baton's CPU kernels and the CPU device allocator with the global registries.
// Explicit by design (no static initializers): call it once before loading or compiling programs.
// Idempotent and thread-safe. Backends with their own library register separately
// (baton::cuda::register_backend()).
void register_builtins();

}  // namespace baton
