// cuDNN's graph API for the engine's convolution steps, through cudnn-frontend (header-only; it
// loads libcudnn with dlopen the first time a plan is made, so a program without convolutions
// never needs cuDNN). Only cudnn_graph.cpp includes cudnn-frontend: its headers are large and
// throw exceptions, which stay inside that file.
//
// A ConvPlan is one ConvStep's operation graph (convolution, then its fused bias, residual Add
// and activation as pointwise operations) with the execution plan cuDNN's heuristics rank first
// among those that build. It is made when an execution context is created, on that context's
// cuDNN handle, and enqueued on the caller's stream (and so captured into the engine's graph).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backends/cuda/engine_format.h"
#include "baton/core/error.h"

// cudnn.h's handle type, without including cudnn.h here.
struct cudnnContext;
using cudnnHandle_t = cudnnContext*;

namespace baton::cuda {

// An owned cuDNN handle on one GPU.
class CudnnHandle {
 public:
  CudnnHandle() = default;
  // Loads libcudnn (once per process) and creates a handle on `device`; the error names the
  // library that is missing and how to provide it.
  static Result<CudnnHandle> create(int device);
  ~CudnnHandle();
  CudnnHandle(CudnnHandle&& other) noexcept;
  CudnnHandle& operator=(CudnnHandle&& other) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }

 private:
  cudnnHandle_t handle_ = nullptr;
  int device_ = -1;
};

// The cuDNN version loaded at run time (major * 10000 + minor * 100 + patch), 0 before any handle
// was created.
uint32_t loaded_cudnn_version();

class ConvPlan {
 public:
  ConvPlan();
  // Builds the graph for `step` and its execution plan. `what` names the step in errors
  // ("partition 'cuda_0' step 3").
  static Result<ConvPlan> create(cudnnHandle_t handle, const ConvStep& step,
                                 const std::string& what);
  ~ConvPlan();
  ConvPlan(ConvPlan&&) noexcept;
  ConvPlan& operator=(ConvPlan&&) noexcept;

  explicit operator bool() const { return impl_ != nullptr; }
  uint64_t workspace_bytes() const;
  // The engine cuDNN runs (its name from the plan), for inspection and profiles.
  const std::string& engine_name() const;
  // Enqueues the convolution on `stream` (set on `handle`). Pointers: the step's tensors as
  // bound; `bias` / `residual` null when the step has none. Allocates nothing.
  Status enqueue(cudnnHandle_t handle, cudaStream_t stream, void* x, void* w, void* bias,
                 void* residual, void* y, void* workspace) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::cuda
