#include "backends/cuda/tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "backends/cuda/cuda_check.h"

namespace baton::cuda {

namespace {

// Element `i` of `data` (of `dtype`: float32, float16 or bfloat16) as a float.
float element(const void* data, uint64_t i, DType dtype) {
  switch (dtype) {
    case DType::Float16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(data) + 2 * i, 2);
      return half_to_float(h);
    }
    case DType::BFloat16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const uint8_t*>(data) + 2 * i, 2);
      return bfloat16_to_float(b);
    }
    default: {
      float f;
      std::memcpy(&f, static_cast<const uint8_t*>(data) + 4 * i, 4);
      return f;
    }
  }
}

// The unit roundoff of `dtype`'s significand.
float unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return std::ldexp(1.0f, -11);
    case DType::BFloat16:
      return std::ldexp(1.0f, -8);
    default:
      return std::ldexp(1.0f, -24);
  }
}

}  // namespace

float output_deviation(const void* candidate, const void* reference, uint64_t count, DType dtype) {
  float largest_difference = 0, largest_reference = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const float c = element(candidate, i, dtype), r = element(reference, i, dtype);
    if (!std::isfinite(c) || !std::isfinite(r)) return std::numeric_limits<float>::infinity();
    largest_difference = std::max(largest_difference, std::fabs(c - r));
    largest_reference = std::max(largest_reference, std::fabs(r));
  }
  if (largest_difference == 0) return 0;
  if (largest_reference == 0) return std::numeric_limits<float>::infinity();
  return largest_difference / largest_reference;
}

float agreement_tolerance(DType inputs, DType output, bool tf32) {
  const float u =
      std::max({unit_roundoff(inputs), unit_roundoff(output), tf32 ? std::ldexp(1.0f, -11) : 0.0f});
  return std::max(8 * u, std::ldexp(1.0f, -12));
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

Result<bool> Stopwatch::grow(DeviceBuffer* buffer, uint64_t* size, uint64_t bytes,
                             const char* what) {
  if (bytes <= *size) return false;
  buffer->reset();
  BATON_ASSIGN_OR_RETURN(*buffer, allocate_device_buffer(device_, bytes, what));
  *size = bytes;
  return true;
}

Result<void*> Stopwatch::operands(uint64_t bytes) {
  BATON_ASSIGN_OR_RETURN(const bool grown,
                         grow(&operands_, &operand_bytes_, bytes, "operands for timing choices"));
  if (grown) BATON_TRY(set_bytes(operands_.get(), bytes, kTimingByte));
  return operands_.get();
}

Status Stopwatch::set_bytes(void* p, uint64_t bytes, uint8_t value) {
  BATON_CUDA_CHECK_ON(device_, cudaMemsetAsync(p, value, bytes, stream_.get()));
  return Status();
}

Result<void*> Stopwatch::check_operands(uint64_t bytes) {
  BATON_TRY(grow(&check_operands_, &check_operand_bytes_, bytes, "operands for checking choices")
                .status());
  return check_operands_.get();
}

Status Stopwatch::copy(void* dst, const void* src, uint64_t bytes) {
  BATON_CUDA_CHECK_ON(device_,
                      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.get()));
  return Status();
}

Result<void*> Stopwatch::workspace(uint64_t bytes) {
  BATON_TRY(grow(&workspace_, &workspace_bytes_, bytes, "workspace for timing choices").status());
  return workspace_.get();
}

Status Stopwatch::fill_uniform(void* p, uint64_t bytes, DType dtype, uint32_t seed) {
  staging_.resize(bytes);
  const uint64_t size = dtype == DType::Float32 ? 4 : 2;
  uint64_t state = 0x9e3779b97f4a7c15ull ^ seed;
  for (uint64_t i = 0; i + size <= bytes; i += size) {
    // xorshift64*: the top 24 bits as a fraction in [0, 1).
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const float v = static_cast<float>((state * 0x2545f4914f6cdd1dull) >> 40) * 0x1p-24f;
    if (dtype == DType::Float32) {
      std::memcpy(&staging_[i], &v, 4);
    } else {
      const uint16_t h = dtype == DType::Float16 ? float_to_half(v) : float_to_bfloat16(v);
      std::memcpy(&staging_[i], &h, 2);
    }
  }
  BATON_CUDA_CHECK_ON(
      device_, cudaMemcpyAsync(p, staging_.data(), bytes, cudaMemcpyHostToDevice, stream_.get()));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(stream_.get()));
  return Status();
}

Status Stopwatch::replay_captured(const std::function<Status(cudaStream_t)>& enqueue) {
  cudaStream_t s = stream_.get();
  BATON_CUDA_CHECK_ON(device_, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status enqueued = enqueue(s);
  cudaGraph_t captured = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &captured);
  Graph graph(captured, device_);
  BATON_TRY(enqueued);
  if (ended != cudaSuccess) {
    cudaGetLastError();
    return BATON_ERROR(NotSupported, "cannot be captured in a CUDA graph: {}",
                       cudaGetErrorString(ended));
  }
  cudaGraphExec_t instantiated = nullptr;
  BATON_CUDA_CHECK_ON(device_, cudaGraphInstantiate(&instantiated, graph.get(), 0));
  GraphExec exec(instantiated, device_);
  BATON_CUDA_CHECK_ON(device_, cudaGraphLaunch(exec.get(), s));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(s));
  return Status();
}

Status Stopwatch::download(const void* p, uint64_t bytes, std::vector<uint8_t>* out) {
  out->resize(bytes);
  BATON_CUDA_CHECK_ON(
      device_, cudaMemcpyAsync(out->data(), p, bytes, cudaMemcpyDeviceToHost, stream_.get()));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(stream_.get()));
  return Status();
}

}  // namespace baton::cuda
