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

class EngineBlob;

// Step `index` of a parsed blob in one line ("cuBLASLt m=768 n=128 k=768 ..."): the "what" of
// the description's steps, and of the CUDA backend's step profiles.
std::string describe_step(const EngineBlob& blob, size_t index);

// The whole blob as one JSON object, as text; the errors of EngineBlob::parse when the blob does
// not validate.
Result<std::string> describe_engine_json(std::span<const uint8_t> blob);

}  // namespace baton::cuda
