// NVRTC: CUDA C++ source -> cubin for one SM architecture. Needs no GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::cuda {

// Errors carry NVRTC's log (with the failing lines) in the message.
Result<std::vector<uint8_t>> compile_to_cubin(const std::string& source, uint32_t sm_arch,
                                              const std::string& what);
// major * 1000 + minor * 10
uint32_t nvrtc_version();

}  // namespace baton::cuda
