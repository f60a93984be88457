// The CUDA backend: runs the GPU partitions (engines) of a program on NVIDIA GPUs.
//
//   baton::register_builtins();
//   baton::cuda::register_backend();   // the "cuda" delegate and the CUDA device allocator
//
// Engines run on the GPU their blob was built for (the engine's baked device id); the current
// device is switched only when it differs and restored afterwards. docs/device-contract.md is the
// full contract.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace baton::cuda {

// Registers the "cuda" backend and the CUDA device allocator (idempotent, thread-safe).
void register_backend();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_arch = 0;  // major * 10 + minor
  int multiprocessors = 0;
  size_t total_memory = 0;
};

// Empty when there is no usable GPU (no driver, no device).
std::vector<DeviceInfo> devices();

// The GPUs on which this process holds an active primary context, ascending (empty without a
// driver). A context costs about half a GiB of its GPU's memory, so a process that runs only
// programs built for cuda:1 should list 1 alone: what `baton run --json` reports as
// "gpu_contexts".
std::vector<int> active_contexts();

// Engines currently loaded in this process. Every method loaded from one program shares its
// engines: their weights are resident once, however many methods (threads) run them.
struct EngineStats {
  size_t engines = 0;
  uint64_t weight_bytes = 0;
};
EngineStats engine_stats();

}  // namespace baton::cuda
