// Lifetime-based memory planning: one arena per device; tensors whose lifetimes do not overlap
// share bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "baton/core/device.h"

namespace baton::compiler {

// Offsets of planned tensors: 256 bytes, the alignment cuBLASLt and vectorized kernels want on
// GPUs (and more than any CPU kernel needs).
inline constexpr uint64_t kTensorAlignment = 256;

struct BufferRequest {
  uint64_t bytes = 0;
  Device device;
  int first = 0;  // first step that writes it (-1: live on entry, e.g. a method input)
  int last = 0;   // last step that reads it (a large number: live on exit)
};

struct MemoryPlan {
  struct Arena {
    Device device;
    uint64_t size = 0;
  };
  std::vector<Arena> arenas;     // sorted: cpu, cuda:0, cuda:1, ...
  std::vector<int> arena;        // per request
  std::vector<uint64_t> offset;  // per request, `alignment`-aligned
};

// Deterministic: the same requests always give the same plan.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests,
                       uint64_t alignment = kTensorAlignment);

}  // namespace baton::compiler
