// The engine's device code: the .cuh files under builder/device/, embedded into the builder at
// build time (embed_device_code.cmake). Generated kernels #include them by these names, and NVRTC
// receives them as in-memory headers.
#pragma once

#include <span>

namespace baton::cuda {

struct DeviceHeader {
  const char* name;  // "baton/common.cuh"
  const char* text;
};

std::span<const DeviceHeader> device_headers();

}  // namespace baton::cuda
