// Timing candidates on the GPU: the cuBLASLt algorithms of a GEMM step and the cuDNN engines of a
// convolution step are timed, and the fastest is used. This happens when an engine is built on
// the GPU it is for (the choices are recorded in the blob: engine_format.h, StepChoice) or, for an
// engine built without its GPU or whose recorded choices no longer apply, when it is loaded.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/handles.h"
#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton::cuda {

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

// How far a candidate's output (`count` elements of `dtype`) is from a reference's: the largest
// absolute difference over the reference's largest magnitude. +inf when either holds a NaN or an
// infinity; 0 when both are all zeros.
float output_deviation(const void* candidate, const void* reference, uint64_t count, DType dtype);

// The largest output_deviation two correct plans of one step show on the same inputs: both
// accumulate in fp32 and differ in the order of the sum and in the rounding of the output, so
// eight units of roundoff of the coarsest of the inputs' type (TF32's when `tf32`) and the
// output's, and never less than 2^-12 (the order of an fp32 sum over many terms). A plan that
// accumulates in fp16, or a wrong one, is well beyond it.
float agreement_tolerance(DType inputs, DType output, bool tf32);

// A private stream with two events on one GPU, and device memory for the operands of the step
// being timed. Made on the engine's GPU (current when created and used).
class Stopwatch {
 public:
  static Result<Stopwatch> create(int device);

  // Enqueues `run` twice to warm up, then times it back to back on the stream, eight runs
  // captured in one CUDA graph (enqueued one by one where they cannot be captured); microseconds
  // per run, the lower of two rounds. An error from `run` is returned as is.
  Result<float> time(const std::function<Status(cudaStream_t)>& run);
  // Device memory of at least `bytes` holding a finite, non-zero pattern in every float type,
  // reused across calls (grown when needed).
  Result<void*> operands(uint64_t bytes);
  // The byte operands() holds in every byte (1.06 in float16, 0.0115 in bfloat16 and float32),
  // and the one a plan's workspace is overwritten with before it is checked.
  static constexpr uint8_t kTimingByte = 0x3c, kScribbleByte = 0xa5;
  // Sets `bytes` at `p` (device memory) to `value`, on the stream.
  Status set_bytes(void* p, uint64_t bytes, uint8_t value);
  // A second device buffer of at least `bytes`, uninitialized, for a step's checked operands
  // (reused across calls, grown when needed).
  Result<void*> check_operands(uint64_t bytes);
  // Copies `bytes` from `src` to `dst` (device memory), on the stream.
  Status copy(void* dst, const void* src, uint64_t bytes);
  // Device memory of at least `bytes` for a candidate's workspace, reused across calls.
  Result<void*> workspace(uint64_t bytes);
  // Fills `bytes` at `p` (device memory) with `dtype` values drawn uniformly from [0, 1), the
  // sequence set by `seed`; returns once they are there.
  Status fill_uniform(void* p, uint64_t bytes, DType dtype, uint32_t seed);
  // Captures what `enqueue` puts on the stream in a CUDA graph, then launches the graph once on
  // the stream, as an engine runs its steps; an error (the capture ended) when `enqueue` fails or
  // the work cannot be captured.
  Status replay_captured(const std::function<Status(cudaStream_t)>& enqueue);
  // `bytes` at `p` (device memory) once the stream's work is done.
  Status download(const void* p, uint64_t bytes, std::vector<uint8_t>* out);
  cudaStream_t stream() const { return stream_.get(); }

 private:
  Stopwatch() = default;
  int device_ = -1;
  OwnedStream stream_;
  Event start_, stop_;
  DeviceBuffer operands_, check_operands_, workspace_;
  uint64_t operand_bytes_ = 0, check_operand_bytes_ = 0, workspace_bytes_ = 0;
  // Replaces `buffer` (of `size` bytes) by one of `bytes` when it is smaller; whether it did.
  Result<bool> grow(DeviceBuffer* buffer, uint64_t* size, uint64_t bytes, const char* what);
  // What `enqueue` puts on the stream, captured and instantiated; NotSupported when the work
  // cannot be captured, an error of the instantiation, or `enqueue`'s own error as is (time()
  // falls back to enqueuing the runs one by one on any of them).
  Result<GraphExec> capture(const std::function<Status(cudaStream_t)>& enqueue);
  std::vector<uint8_t> staging_;  // fill_uniform's values on the host
};

struct GemmStep;

// The shape of a step without its buffers (its record's bytes up to `buffers_offset`, where the
// buffer references begin): steps with equal signatures get the same choice.
template <typename Step>
std::string step_signature(const Step& step, size_t buffers_offset) {
  return std::string(reinterpret_cast<const char*>(&step), buffers_offset);
}

// A GEMM's cuBLASLt objects for choosing its algorithm: its operation and the layouts of A, B, C
// (D's when it has no C) and D, set to the sizes the algorithm is for.
struct GemmLayouts {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c, d;
};

// The fastest of cuBLASLt's top `candidates` algorithms for GEMM `g` with `layouts` and at most
// `workspace` bytes of workspace, each timed on `stopwatch`'s memory (a candidate that cannot run
// there is not chosen); `us` and `timed` receive its time and how many were timed. An error names
// `what` when cuBLASLt offers none or none runs.
Result<cublasLtMatmulAlgo_t> fastest_gemm_algo(cublasLtHandle_t handle, const GemmStep& g,
                                               const GemmLayouts& layouts, uint64_t workspace,
                                               int candidates, Stopwatch& stopwatch,
                                               const std::string& what, float* us, uint32_t* timed);

}  // namespace baton::cuda
