// The host allocator: aligned malloc, memcpy for copies.
#pragma once

#include "baton/runtime/device_allocator.h"

namespace baton::runtime {

DeviceAllocator& cpu_allocator();

}  // namespace baton::runtime
