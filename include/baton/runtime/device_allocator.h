// Device allocators: how the runtime gets memory on a device and copies between devices.
//
// One allocator is registered per device type (register_builtins() registers the CPU one; the CUDA
// backend registers its own). Arenas are allocated through it at load; DeviceCopy instructions
// call `copy`. Nothing here is called from a kernel's hot loop.
#pragma once

#include <cstddef>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"
#include "baton/core/tensor.h"

namespace baton::runtime {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual DeviceType type() const = 0;
  // `alignment` is a power of two <= 4096. Returns OutOfMemory or DeviceError on failure.
  virtual Result<void*> allocate(Device device, size_t bytes, size_t alignment) = 0;
  virtual void deallocate(Device device, void* ptr) = 0;
  // Copies `bytes` from src (on src_device) to dst (on dst_device); one side is this allocator's
  // device type, the other is this type or the CPU. Ordering and completion follow the
  // allocator's own contract (the CUDA one enqueues on the caller's stream; see
  // docs/device-contract.md).
  virtual Status copy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t bytes) = 0;
};

// Registry keyed by device type. Registration replaces.
void register_device_allocator(DeviceAllocator* allocator);
DeviceAllocator* find_device_allocator(DeviceType type);
// The allocator that copies between two devices: the non-CPU side's (nullptr where none is
// registered).
DeviceAllocator* copy_allocator(Device dst, Device src);

// A tensor in memory on `device`, through that device's registered allocator; freed when the last
// Tensor sharing it goes. For callers that pass device buffers (Method::bind_input/bind_output).
Result<Tensor> allocate_tensor(DType dtype, std::vector<int64_t> sizes, Device device);
// Copies between two tensors of equal dtype and size, on any registered devices.
Status copy_tensor(const TensorView& dst, const TensorView& src);

}  // namespace baton::runtime
