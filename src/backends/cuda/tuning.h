// Timing candidates on the GPU: the cuBLASLt algorithms of a GEMM step and the cuDNN engines of a
// convolution step are timed, and the fastest is used. This happens when an engine is built on
// the GPU it is for (the choices are recorded in the blob: engine_format.h, StepChoice) or, for an
// engine built without its GPU or whose recorded choices no longer apply, when it is loaded.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "backends/cuda/handles.h"
#include "baton/core/error.h"

namespace baton::cuda {

// How many candidates are timed per GEMM or convolution: BATON_TUNE_CANDIDATES (default 4, at
// most 32). 1 takes the heuristics' first choice and times nothing.
int tune_candidates();

// The fastest of the candidates timed so far: `index` (-1: none yet), its time, how many timed.
struct Fastest {
  int64_t index = -1;
  float us = 0;
  uint32_t timed = 0;
  void offer(int64_t candidate, float candidate_us) {
    ++timed;
    if (index < 0 || candidate_us < us) {
      index = candidate;
      us = candidate_us;
    }
  }
};

// A private stream with two events on one GPU, and device memory for the operands of the step
// being timed. Made on the engine's GPU (current when created and used).
class Stopwatch {
 public:
  static Result<Stopwatch> create(int device);

  // Enqueues `run` twice to warm up, then times it back to back on the stream; microseconds per
  // run, the lower of two rounds. An error from `run` is returned as is.
  Result<float> time(const std::function<Status(cudaStream_t)>& run);
  // Device memory of at least `bytes` holding a finite, non-zero pattern in every float type,
  // reused across calls (grown when needed).
  Result<void*> operands(uint64_t bytes);
  // Device memory of at least `bytes` for a candidate's workspace, reused across calls.
  Result<void*> workspace(uint64_t bytes);
  cudaStream_t stream() const { return stream_.get(); }

 private:
  Stopwatch() = default;
  int device_ = -1;
  OwnedStream stream_;
  Event start_, stop_;
  DeviceBuffer operands_, workspace_;
  uint64_t operand_bytes_ = 0, workspace_bytes_ = 0;
};

}  // namespace baton::cuda
