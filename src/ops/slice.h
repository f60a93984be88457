// ONNX Slice's rules (opset 13), shared by its definition (the output shape) and its CPU kernel
// (where each dimension starts and how it steps).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::ops {

// What a Slice keeps of one dimension: `size` elements from `start`, `step` apart.
struct SliceDim {
  int64_t start = 0;
  int64_t step = 1;
  int64_t size = 0;
};

// One SliceDim per dimension of `sizes`. `axes` and `steps` are null when absent (every axis in
// order, steps of 1). Negative starts, ends and axes count from the end; starts and ends are
// clamped into the dimension (for negative steps, ends to [-1, dim - 1]). Errors name `what`.
Result<std::vector<SliceDim>> slice_dims(std::span<const int64_t> sizes,
                                         std::span<const int64_t> starts,
                                         std::span<const int64_t> ends,
                                         const std::vector<int64_t>* axes,
                                         const std::vector<int64_t>* steps, std::string_view what);

}  // namespace baton::ops
