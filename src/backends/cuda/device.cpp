#include "backends/cuda/device.h"

#include <mutex>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/driver.h"
#include "baton/cuda/stream_guard.h"

namespace baton::cuda {
namespace {

std::mutex g_override_mutex;
std::optional<std::vector<DeviceInfo>> g_override;

// The primary context of `device`, retained once for the life of the process (as the CUDA runtime
// itself does on first use), so that switching to it never creates or destroys anything.
Result<CUcontext> primary_context(const DriverApi& api, int device) {
  static std::mutex mutex;
  static std::vector<CUcontext> retained;
  std::lock_guard<std::mutex> lock(mutex);
  if (retained.size() <= static_cast<size_t>(device)) retained.resize(device + 1, nullptr);
  if (retained[device] == nullptr) {
    CUdevice dev = 0;
    BATON_CUDA_CHECK_ON(device, api.cuDeviceGet(&dev, device));
    CUcontext ctx = nullptr;
    BATON_CUDA_CHECK_ON(device, api.cuDevicePrimaryCtxRetain(&ctx, dev));
    retained[device] = ctx;
  }
  return retained[device];
}

}  // namespace

// Why the driver API and not cudaGetDevice/cudaSetDevice. On a thread with no current context (a
// fresh process, or after a guard restored "none"), cudaGetDevice reports the runtime's own
// per-thread selection, which a cudaSetDevice(1) left at 1, while the runtime's next call such as
// cudaMalloc binds GPU 0's primary context, creating it, and allocates there
// (tests/backends/cuda/probes/context_selection.cu shows it on a two-H200 host). A guard that
// trusted cudaGetDevice skipped the switch, and a cuda:1 engine's buffers landed on GPU 0, where
// GPU 1's kernels faulted with an illegal address. So the guard asks which device the
// current *context* belongs to, switches by making the device's primary context current, and
// restores exactly the previous context (none included). It never calls cudaSetDevice, so it
// neither creates a context on a GPU the caller did not use nor changes the runtime's per-thread
// selection behind the caller's back.
DeviceGuard::DeviceGuard(int device) {
  // A missing ordinal is refused before any context call: the message names what the machine
  // has, and no CUDA call fails (compute-sanitizer reports every failing call).
  const int count = device_count();
  if (device < 0 || device >= count) {
    status_ = BATON_ERROR(DeviceError, "cuda:{} does not exist: this machine has {} CUDA device{}",
                          device, count, count == 1 ? "" : "s");
    return;
  }
  auto api = driver_api();
  if (!api.ok()) {
    status_ = api.status();
    return;
  }
  CUcontext current = nullptr;
  if (const CUresult r = (*api)->cuCtxGetCurrent(&current); r != CUDA_SUCCESS) {
    status_ = BATON_ERROR(DeviceError, "cuCtxGetCurrent failed: {}", status_string(r));
    return;
  }
  if (current != nullptr) {
    // The caller's own context on that device (its primary context, a green context) stays.
    CUdevice current_device = -1, wanted = -1;
    if ((*api)->cuCtxGetDevice(&current_device) == CUDA_SUCCESS &&
        (*api)->cuDeviceGet(&wanted, device) == CUDA_SUCCESS && current_device == wanted) {
      return;
    }
  }
  Result<CUcontext> primary = primary_context(**api, device);
  if (!primary.ok()) {
    status_ = primary.status();
    return;
  }
  if (const CUresult r = (*api)->cuCtxSetCurrent(*primary); r != CUDA_SUCCESS) {
    status_ = BATON_ERROR(DeviceError, "cannot make cuda:{}'s primary context current: {}", device,
                          status_string(r));
    return;
  }
  previous_context_ = current;
  switched_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (!switched_) return;
  // driver_api() succeeded in the constructor (switched_ is set only then).
  (*driver_api())->cuCtxSetCurrent(static_cast<CUcontext>(previous_context_));
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

std::vector<int> active_contexts() {
  std::vector<int> out;
  auto api = driver_api();
  if (!api.ok()) return out;
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if ((*api)->cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
        (*api)->cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active != 0) {
      out.push_back(i);
    }
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
