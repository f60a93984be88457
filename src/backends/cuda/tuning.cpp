#include "backends/cuda/tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "backends/cuda/cuda_check.h"

namespace baton::cuda {

int tune_candidates() {
  if (const char* env = std::getenv("BATON_TUNE_CANDIDATES")) {
    const int n = std::atoi(env);
    if (n >= 1) return std::min(n, 32);
  }
  return 4;
}

Result<Stopwatch> Stopwatch::create(int device) {
  Stopwatch w;
  w.device_ = device;
  cudaStream_t stream = nullptr;
  BATON_CUDA_CHECK_ON(device, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  w.stream_ = OwnedStream(stream, device);
  BATON_ASSIGN_OR_RETURN(w.start_, create_event(device));
  BATON_ASSIGN_OR_RETURN(w.stop_, create_event(device));
  return w;
}

Result<float> Stopwatch::time(const std::function<Status(cudaStream_t)>& run) {
  constexpr int kWarmup = 2;
  constexpr int kRuns = 8;
  cudaStream_t s = stream_.get();
  for (int i = 0; i < kWarmup; ++i) BATON_TRY(run(s));
  float best = 0;
  for (int round = 0; round < 2; ++round) {
    BATON_CUDA_CHECK_ON(device_, cudaEventRecord(start_.get(), s));
    for (int i = 0; i < kRuns; ++i) BATON_TRY(run(s));
    BATON_CUDA_CHECK_ON(device_, cudaEventRecord(stop_.get(), s));
    BATON_CUDA_CHECK_ON(device_, cudaEventSynchronize(stop_.get()));
    float ms = 0;
    BATON_CUDA_CHECK_ON(device_, cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    const float us = ms * 1000.0f / kRuns;
    best = round == 0 ? us : std::min(best, us);
  }
  return best;
}

Result<void*> Stopwatch::operands(uint64_t bytes) {
  if (bytes > operand_bytes_) {
    operands_.reset();
    BATON_ASSIGN_OR_RETURN(operands_,
                           allocate_device_buffer(device_, bytes, "operands for timing choices"));
    // 0x3c in every byte: 1.06 in float16, 0.0115 in bfloat16 and float32.
    BATON_CUDA_CHECK_ON(device_, cudaMemsetAsync(operands_.get(), 0x3c, bytes, stream_.get()));
    operand_bytes_ = bytes;
  }
  return operands_.get();
}

Result<void*> Stopwatch::workspace(uint64_t bytes) {
  if (bytes > workspace_bytes_) {
    workspace_.reset();
    BATON_ASSIGN_OR_RETURN(workspace_,
                           allocate_device_buffer(device_, bytes, "workspace for timing choices"));
    workspace_bytes_ = bytes;
  }
  return workspace_.get();
}

}  // namespace baton::cuda
