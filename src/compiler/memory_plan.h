// Lifetime-based memory planning: one arena per device; tensors whose lifetimes do not overlap
// share bytes. plan_memory works on bare requests (the CUDA engine builder plans its scratch with
// it); plan_values plans the values of a placed schedule (compiler/placement.h).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"
#include "compiler/state.h"

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

// Deterministic: the same requests always give the same plan. The requests' sizes, each rounded
// up to `alignment`, must sum to less than 2^63 (callers check: offsets never exceed that sum).
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests,
                       uint64_t alignment = kTensorAlignment);

struct Graph;
struct Schedule;

// Where the bytes of each value a schedule touches live: every non-constant tensor the method
// reads or writes, in one arena per device, with lifetimes taken from the schedule's order
// (method inputs stay intact for the whole call, method outputs live to its end). The output of a
// CPU layout operator shares its input's bytes (a view) unless the input is a constant or a method
// input.
struct ValuePlan {
  struct Slot {
    int arena = 0;
    uint64_t offset = 0;
  };
  std::vector<MemoryPlan::Arena> arenas;  // sorted: cpu, cuda:0, cuda:1, ...
  std::map<int, Slot> slots;              // value id -> slot
  // Outputs of layout operators (Reshape, Flatten, Squeeze, Unsqueeze, Identity on the CPU) given
  // their input's slot: views, whose kernels then copy nothing.
  size_t views = 0;
};

// The program format's limit on one arena or tensor (format/program_file_internal.h's kMaxBytes):
// the loader refuses anything larger, so the compiler never writes it.
inline constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 50;

// Internal when a value's byte size overflows (shape inference refuses those earlier).
// InvalidArgument when an arena would be larger than `max_arena_bytes` (capped at kMaxArenaBytes),
// naming the device, the size and the largest tensors in it; nothing is allocated either way.
// `state` (compiler/state.h): each pair's value and update share one slot that no other value
// of the method ever shares (live from before the first step to after the last).
Result<ValuePlan> plan_values(const Graph& graph, const Schedule& schedule,
                              uint64_t max_arena_bytes = kMaxArenaBytes,
                              const std::vector<StateBinding>& state = {});

}  // namespace baton::compiler
