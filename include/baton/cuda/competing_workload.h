// CompetingWorkload: a kernel that keeps every SM a stream can reach busy until it is stopped,
// to measure how well a green context isolates a method from the rest of the GPU.
//
//   auto split = baton::cuda::GreenContext::split(0, 66);
//   auto load = baton::cuda::CompetingWorkload::create(0);
//   load->start(split->second.stream(), split->second.sm_count());  // the other SMs, busy
//   ... time the method on split->first.stream() ...
//   auto was_running = load->stop();  // true: it was busy for the whole measurement
//
// The kernel is compiled with NVRTC for the device's architecture, so this class lives in the
// CUDA builder library (baton_cuda_builder), not in the deployable runtime. Each block runs
// dependent FP32 FMAs on all its threads (no memory traffic) until the host sets a stop flag in
// device memory (copied there on a stream of its own), or until `max_seconds` have passed. The
// kernel does not poll mapped host memory: on an H100, blocks reading a host flag between rounds
// slowed a green context's launches on the other SMs from 0.02 to 7.8 ms. Move-only, not
// thread-safe; the destructor stops a running kernel and waits for it, so nothing is left on the
// device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "baton/core/error.h"

namespace baton::cuda {

class CompetingWorkload {
 public:
  // Compiles and loads the kernel for `device` and allocates the flags. Launches nothing.
  static Result<CompetingWorkload> create(int device);
  // The kernel compiled for sm_<sm_arch> (e.g. 90), as create() does; needs no GPU.
  static Result<std::vector<uint8_t>> cubin(uint32_t sm_arch);

  // Launches blocks_per_sm() x `sm_count` blocks on `stream` (as many as its SMs hold at once)
  // and returns when every block is running; DeviceError (with the workload stopped again) if
  // they do not all start within 10 s, e.g. because the stream reaches fewer SMs than
  // `sm_count`. Leaves the kernel running on `stream` until stop() or `max_seconds`.
  Status start(cudaStream_t stream, int sm_count, double max_seconds = 600.0);
  // Asks the kernel to end and waits for it on its stream. The value: whether it was still
  // running when asked (false: it had reached max_seconds first). InvalidArgument when not
  // started.
  Result<bool> stop();

  bool running() const { return stream_ != nullptr; }
  int blocks() const { return blocks_; }
  int blocks_per_sm() const { return blocks_per_sm_; }
  static constexpr int kThreadsPerBlock = 512;

  CompetingWorkload(CompetingWorkload&& other) noexcept;
  CompetingWorkload& operator=(CompetingWorkload&& other) noexcept;
  CompetingWorkload(const CompetingWorkload&) = delete;
  CompetingWorkload& operator=(const CompetingWorkload&) = delete;
  ~CompetingWorkload();

 private:
  CompetingWorkload() = default;
  void release();
  int device_ = 0;
  int blocks_per_sm_ = 0;
  int blocks_ = 0;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  // Mapped, pinned host memory: [0] the value 1 (copied to stop_ to stop the kernel), then one
  // "started" flag per block (each written once), then one float per block the kernel never
  // writes in practice (it keeps the FMAs from being dropped).
  unsigned* flags_ = nullptr;
  unsigned* stop_ = nullptr;        // device memory: the flag the kernel reads
  cudaStream_t control_ = nullptr;  // copies the stop flag while the kernel runs
  int flag_capacity_ = 0;           // blocks the allocation has room for
  cudaStream_t stream_ = nullptr;   // while running
};

}  // namespace baton::cuda
