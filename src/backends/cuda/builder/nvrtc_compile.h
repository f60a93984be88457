// NVRTC: CUDA C++ source -> cubin for one SM architecture. Needs no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::cuda {

// Errors carry NVRTC's log (with the failing lines) in the message.
Result<std::vector<uint8_t>> compile_to_cubin(const std::string& source, uint32_t sm_arch,
                                              const std::string& what);

// Partitions with more kernels than this are compiled in units of kKernelsPerUnit kernels, in
// parallel, and linked; smaller ones are one NVRTC unit, exactly as compile_to_cubin compiles.
inline constexpr size_t kKernelsInOneUnit = 256;
inline constexpr size_t kKernelsPerUnit = 64;

// The cubin of `kernels` (the source of one kernel each, after `prelude`). NVRTC's time grows
// faster than the number of kernels in a unit (3000 one-node kernels took 78 s as one unit), so a
// partition of more than kKernelsInOneUnit kernels is split into units of kKernelsPerUnit,
// compiled as relocatable device code on `threads` threads (0: one per core) and linked into one
// cubin by nvJitLink; long compiles report their progress in the log.
Result<std::vector<uint8_t>> compile_kernels_to_cubin(const std::string& prelude,
                                                      std::span<const std::string> kernels,
                                                      uint32_t sm_arch, const std::string& what,
                                                      unsigned threads = 0);
// major * 1000 + minor * 10
uint32_t nvrtc_version();

}  // namespace baton::cuda
