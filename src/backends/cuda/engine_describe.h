// A CUDA engine blob described for `baton inspect` and the Python binding (the "engine" object of
// docs/cli.md): device, sm_arch, precision, the CUDA / cuBLASLt / cuDNN / NVRTC versions it was
// built with, weight, scratch, workspace and cubin sizes, bindings, and one line per step. Plain
// C++ (no CUDA, no GPU): the cuda backend's describe_blob hook returns it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "baton/core/error.h"

namespace baton::cuda {

// One JSON object as text; the errors of EngineBlob::parse when the blob does not validate.
Result<std::string> describe_engine_json(std::span<const uint8_t> blob);

}  // namespace baton::cuda
