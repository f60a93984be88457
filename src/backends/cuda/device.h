// Device selection, device queries and the stream Baton's GPU work runs on.
#pragma once

#include <cuda_runtime_api.h>

#include <optional>
#include <vector>

#include "baton/core/error.h"
#include "baton/cuda/backend.h"

namespace baton::cuda {

struct DriverApi;

// Makes `device` current for its scope: when the thread's current context belongs to another
// device, or no context is current, the device's primary context is made current; on exit exactly
// the context that was current before (none included) is restored. All through the driver API:
// it never creates a context on a GPU the caller had not touched, and leaves the runtime's
// cudaSetDevice selection as the caller set it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // Why the switch failed, if it did (e.g. the device does not exist).
  const Status& status() const { return status_; }

 private:
  void* previous_context_ = nullptr;  // CUcontext
  bool switched_ = false;
  Status status_;
};

// Makes `context` (a CUcontext: a primary or a green context) current for its scope when another
// one is, and restores the previous one on exit.
class ContextGuard {
 public:
  ContextGuard(const DriverApi& api, void* context);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  const DriverApi& api_;
  void* previous_ = nullptr;
  bool switched_ = false;
  Status status_;
};

// The stream selected by the innermost StreamGuard of this thread, or cudaStreamPerThread.
cudaStream_t current_stream();
// Whether a StreamGuard is active on this thread.
bool stream_selected();

int device_count();

// Tests replace what the load-time checks see (device count and architectures) to exercise them
// without, or with other, GPUs. nullopt restores the real query.
void override_devices_for_testing(std::optional<std::vector<DeviceInfo>> devices);
// The devices the load-time checks see.
std::vector<DeviceInfo> visible_devices();

}  // namespace baton::cuda
