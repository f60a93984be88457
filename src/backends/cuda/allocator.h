// The CUDA device allocator: arenas on a GPU and copies to, from and between GPU memory. Copies
// run on the current stream (device.h), in program order with every delegate.
#pragma once

#include "baton/runtime/device_allocator.h"

namespace baton::cuda {

runtime::DeviceAllocator& cuda_allocator();

}  // namespace baton::cuda
