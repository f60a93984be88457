#include "backends/cuda/device.h"

#include <mutex>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/driver.h"
#include "baton/cuda/stream_guard.h"

namespace baton::cuda {
namespace {

std::mutex g_override_mutex;
std::optional<std::vector<DeviceInfo>> g_override;

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_device_) != cudaSuccess) {
    cudaGetLastError();
    previous_device_ = -1;
  }
  if (previous_device_ == device) return;
  auto api = driver_api();
  if (api.ok()) {
    CUcontext ctx = nullptr;
    if ((*api)->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS) previous_context_ = ctx;
  }
  // A missing ordinal is refused before cudaSetDevice: the message names what the machine has,
  // and no CUDA call fails (compute-sanitizer reports every failing call).
  const int count = device_count();
  if (device < 0 || device >= count) {
    status_ = BATON_ERROR(DeviceError, "cuda:{} does not exist: this machine has {} CUDA device{}",
                          device, count, count == 1 ? "" : "s");
    return;
  }
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    status_ = BATON_ERROR(DeviceError, "cudaSetDevice({}) failed: {}", device, status_string(e));
    return;
  }
  switched_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (!switched_) return;
  auto api = driver_api();
  if (api.ok()) {
    (*api)->cuCtxSetCurrent(static_cast<CUcontext>(previous_context_));
  } else if (previous_device_ >= 0) {
    cudaSetDevice(previous_device_);
  }
}

ContextGuard::ContextGuard(const DriverApi& api, void* context) : api_(api) {
  CUcontext current = nullptr;
  CUresult r = api_.cuCtxGetCurrent(&current);
  if (r == CUDA_SUCCESS && current != context) {
    r = api_.cuCtxSetCurrent(static_cast<CUcontext>(context));
    switched_ = r == CUDA_SUCCESS;
    previous_ = current;
  }
  if (r != CUDA_SUCCESS) {
    status_ = BATON_ERROR(DeviceError, "cannot make the stream's CUDA context current: {}",
                          status_string(r));
  }
}

ContextGuard::~ContextGuard() {
  if (switched_) api_.cuCtxSetCurrent(static_cast<CUcontext>(previous_));
}

cudaStream_t current_stream() {
  const StreamGuard* guard = current_stream_guard();
  return guard ? guard->stream() : cudaStreamPerThread;
}

bool stream_selected() { return current_stream_guard() != nullptr; }

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

void override_devices_for_testing(std::optional<std::vector<DeviceInfo>> devices) {
  std::lock_guard<std::mutex> lock(g_override_mutex);
  g_override = std::move(devices);
}

std::vector<DeviceInfo> visible_devices() {
  {
    std::lock_guard<std::mutex> lock(g_override_mutex);
    if (g_override) return *g_override;
  }
  return devices();
}

}  // namespace baton::cuda
