// StreamGuard: which CUDA stream Baton's GPU work runs on.
//
//   cudaStream_t stream = ...;                 // yours: cudaStreamCreate, or a green context's
//   {
//     baton::cuda::StreamGuard guard(stream);
//     method.execute();                        // every copy and engine of the method on `stream`
//   }
//   cudaStreamSynchronize(stream);             // before reading device-resident outputs
//
// Contract (docs/device-contract.md):
//  - Scoped, nestable, thread-local: the innermost guard of the calling thread wins; destroying it
//    restores the previous selection. Other threads are unaffected. Guards must be destroyed in
//    reverse order of creation (scopes do this).
//  - Without a guard Baton uses cudaStreamPerThread and synchronizes before execute() returns.
//  - With a guard, execute() returns without synchronizing when nothing was staged through host
//    memory and the program copies nothing between host and device: the results are complete
//    once `stream` has reached that point. A later execute() of the same method, on any stream,
//    is ordered after it on the device (no host wait).
//  - The stream must belong to the GPU the partitions run on; execute() fails naming both devices
//    otherwise. The legacy default stream (0) is refused.
//  - A stream created on a green context keeps every kernel of the method on that context's SMs.
#pragma once

#include <cuda_runtime_api.h>

namespace baton::cuda {

class StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_;
  const StreamGuard* previous_;
};

// The innermost guard of the calling thread, or nullptr when none is active.
const StreamGuard* current_stream_guard();

}  // namespace baton::cuda
