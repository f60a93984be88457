// NumPy .npy files (format versions 1.0, 2.0 and 3.0; C order) for inputs and outputs.
// Element types: float32, float16, float64, int64, int32, int16, int8, uint8, bool.
#pragma once

#include <string>

#include "baton/core/tensor.h"

namespace baton::extension {

// Errors name the file and what is wrong with it (bad magic, Fortran order, unsupported dtype,
// truncated data).
Result<Tensor> read_npy(const std::string& path);
// Host tensors only. Written atomically.
Status write_npy(const std::string& path, const TensorView& tensor);

}  // namespace baton::extension
