// Helper kernels for GPU tests, compiled with NVRTC at test time: a spin kernel that keeps a
// stream busy for a while, and a probe that records which SM each block ran on (%smid).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <set>
#include <vector>

#include "baton/core/error.h"

namespace baton::testing {

class TestKernels {
 public:
  static Result<TestKernels> load(int device);
  ~TestKernels();
  TestKernels(TestKernels&&) noexcept;
  TestKernels& operator=(TestKernels&&) = delete;
  TestKernels(const TestKernels&) = delete;

  // One thread spinning for `cycles` clock cycles (about cycles / 1.7e9 seconds on an H100/H200).
  Status spin(cudaStream_t stream, int64_t cycles);
  // `blocks` blocks of `threads` threads each spinning `cycles`, to occupy every SM they can reach.
  Status busy(cudaStream_t stream, int blocks, int threads, int64_t cycles);
  // The distinct SMs `blocks` blocks of a probe kernel ran on, launched on `stream`.
  Result<std::set<int>> probe_sms(cudaStream_t stream, int blocks);

 private:
  TestKernels() = default;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t spin_ = nullptr;
  cudaKernel_t probe_ = nullptr;
  int device_ = 0;
};

}  // namespace baton::testing
