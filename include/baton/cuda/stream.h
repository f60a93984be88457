// Stream: a non-blocking CUDA stream the caller owns, to select with a StreamGuard.
//
//   auto stream = baton::cuda::Stream::create(/*device=*/0);
//   {
//     baton::cuda::StreamGuard guard(stream->get());
//     method.execute();                        // may return before the GPU is done
//   }
//   cudaStreamSynchronize(stream->get());
//
// Move-only. The destructor destroys the stream on its device without waiting for it: work
// already enqueued still completes, but the caller must not use the stream afterwards.
#pragma once

#include <cuda_runtime_api.h>

#include "baton/core/error.h"

namespace baton::cuda {

class Stream {
 public:
  // A stream on `device` (the current device is left as it was). DeviceError naming the device
  // when it does not exist or the stream cannot be created.
  static Result<Stream> create(int device);

  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  Stream(cudaStream_t stream, int device) : stream_(stream), device_(device) {}
  void reset();
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

}  // namespace baton::cuda
