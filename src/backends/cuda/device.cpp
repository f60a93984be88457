#include "backends/cuda/device.h"

#include "backends/cuda/cuda_check.h"
#include "baton/cuda/backend.h"

namespace baton::cuda {

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ == device) return;
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    status_ = BATON_ERROR(DeviceError, "cudaSetDevice({}) failed: {}", device, status_string(e));
    return;
  }
  switched_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (switched_ && previous_ >= 0) cudaSetDevice(previous_);
}

cudaStream_t current_stream() { return cudaStreamPerThread; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    out.push_back({i, prop.name, prop.major * 10 + prop.minor, prop.multiProcessorCount,
                   prop.totalGlobalMem});
  }
  return out;
}

}  // namespace baton::cuda
