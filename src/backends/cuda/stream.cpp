#include "baton/cuda/stream.h"

#include <utility>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"

namespace baton::cuda {

Result<Stream> Stream::create(int device) {
  DeviceGuard guard(device);
  BATON_TRY(guard.status());
  cudaStream_t stream = nullptr;
  BATON_CUDA_CHECK_ON(device, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream, device);
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

Stream::~Stream() { reset(); }

void Stream::reset() { OwnedStream(std::exchange(stream_, nullptr), device_).reset(); }

}  // namespace baton::cuda
