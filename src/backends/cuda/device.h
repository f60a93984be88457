// Device selection and the stream Baton's GPU work runs on.
#pragma once

#include <cuda_runtime_api.h>

#include "baton/core/error.h"

namespace baton::cuda {

// Makes `device` current for its scope and restores the previous current device, switching only
// when they differ (cudaSetDevice is skipped when the device is already current).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // The cudaSetDevice failure, if any (e.g. the device does not exist).
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  bool switched_ = false;
  Status status_;
};

// The stream all of a method's GPU work is enqueued on.
cudaStream_t current_stream();

int device_count();

}  // namespace baton::cuda
