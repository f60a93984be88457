// cuDNN's graph API for the engine's convolution and attention steps, through cudnn-frontend
// (header-only; it loads libcudnn with dlopen the first time a plan is made, so a program without
// such steps never needs cuDNN). Only cudnn_graph.cpp includes cudnn-frontend: its headers are
// large and throw exceptions, which stay inside that file.
//
// A CudnnPlan is one cuDNN step's operation graph with one execution plan: a cuDNN engine and its
// knob values (a CudnnChoice). A ConvStep's graph is the convolution, then its fused bias,
// residual Add and activation as pointwise operations; an SdpaStep's is cuDNN's fused scaled
// dot-product attention reading Q, K and V through their strides. The engine chooses the plan
// once, timing the candidates cuDNN's heuristics rank highest (CudnnPlan::choose), or takes the
// one recorded in the blob; each execution context then builds that choice on its own cuDNN
// handle (CudnnPlan::create) and enqueues it on the caller's stream (and so into the engine's
// graph).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backends/cuda/engine_format.h"
#include "backends/cuda/tuning.h"
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

// One of the plans cuDNN's heuristics offer for a step's operation graph, by cuDNN's name
// for it (engine and knob values): what is timed, recorded and replayed. The heuristics offer the
// same plans for the same graph with the same cuDNN on the same GPU, which is when a recorded
// choice is replayed.
struct CudnnChoice {
  int64_t engine = -1;
  std::string plan;
  float time_us = 0;        // when timed
  uint32_t candidates = 0;  // how many were timed (0: the heuristics' first choice, untimed)
};

class CudnnPlan {
 public:
  CudnnPlan();
  // Chooses a plan for `step` (a Conv, Sdpa or Matmul step): builds up to `candidates` of the
  // engines cuDNN's heuristics rank highest and times each on `stopwatch`'s memory, filled with
  // random values, keeping the fastest whose output agrees with a reference plan's (the
  // heuristics' first without a Winograd or FFT transform) within agreement_tolerance; each
  // output checked comes from one more run after the output and the workspace were overwritten
  // (as in an engine, where other steps share the workspace). Plans noted as reducing in reduced
  // precision are never taken. With one candidate (or no stopwatch) the first that builds,
  // untimed and unchecked. `what` names the step in errors ("partition 'cuda_0' step 3");
  // BATON_LOG_LEVEL=debug logs every plan tried, with its notes, time and deviation.
  static Result<CudnnPlan> choose(cudnnHandle_t handle, const StepRecord& step, int candidates,
                                  Stopwatch* stopwatch, const std::string& what);
  // Builds the plan of `choice` (made by choose, here or when the blob was built); an error when
  // this cuDNN cannot build it for `step` on this GPU.
  static Result<CudnnPlan> create(cudnnHandle_t handle, const StepRecord& step,
                                  const CudnnChoice& choice, const std::string& what);
  // The heuristics' first plan for `step` that builds and needs at most `max_workspace` bytes of
  // workspace, untimed (one that transforms, Winograd or FFT, only when no other does): what a
  // dynamic engine runs at a shape other than its largest when the plan timed for its OPT shape
  // (or its largest) is not offered there or needs more workspace (ExecutionContext::fit_cudnn).
  static Result<CudnnPlan> first_fitting(cudnnHandle_t handle, const StepRecord& step,
                                         uint64_t max_workspace, const std::string& what);
  ~CudnnPlan();
  CudnnPlan(CudnnPlan&&) noexcept;
  CudnnPlan& operator=(CudnnPlan&&) noexcept;

  explicit operator bool() const { return impl_ != nullptr; }
  uint64_t workspace_bytes() const;
  const CudnnChoice& choice() const;
  // The engine cuDNN runs (its name from the plan), for inspection and profiles.
  const std::string& engine_name() const;
  // Enqueues the step on `stream` (set on `handle`). `pointers`: its tensors as bound, in
  // cudnn_operands' order. Allocates nothing.
  Status enqueue(cudnnHandle_t handle, cudaStream_t stream, void** pointers, int count,
                 void* workspace) const;

 private:
  struct Impl;
  // A new plan that `build` fills in; cudnn-frontend's exceptions become errors naming `what`.
  static Result<CudnnPlan> make(const std::string& what, const std::function<Status(Impl&)>& build);
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::cuda
