// GreenContext: a CUDA green context owning some of a GPU's SMs, with a stream on it.
//
//   auto pair = baton::cuda::GreenContext::split(/*device=*/0, /*sms=*/16);
//   baton::cuda::StreamGuard guard(pair->first.stream());   // the method runs on 16 SMs
//
// The SM count is rounded up to the device's partition granularity (the actual count is
// reported). Work on the green context's stream stays on its SMs. Move-only; the destructor
// destroys the stream and the context (the caller must have finished using them).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "baton/core/error.h"

namespace baton::cuda {

class GreenContext {
 public:
  // A green context with at least `sm_count` SMs of `device`.
  static Result<GreenContext> create(int device, int sm_count);
  // That context and a second one holding the SMs left over (for a competing workload).
  static Result<std::pair<GreenContext, GreenContext>> split(int device, int sm_count);

  GreenContext(GreenContext&& other) noexcept;
  GreenContext& operator=(GreenContext&& other) noexcept;
  GreenContext(const GreenContext&) = delete;
  GreenContext& operator=(const GreenContext&) = delete;
  ~GreenContext();

  int device() const { return device_; }
  int sm_count() const { return sm_count_; }
  int requested_sm_count() const { return requested_; }
  cudaStream_t stream() const { return stream_; }

 private:
  GreenContext() = default;
  void release();
  int device_ = 0;
  int sm_count_ = 0;
  int requested_ = 0;
  void* context_ = nullptr;  // CUgreenCtx
  cudaStream_t stream_ = nullptr;
};

}  // namespace baton::cuda
