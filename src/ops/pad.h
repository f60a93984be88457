// Pad's per-dimension amounts, shared by the definition (pad.cpp) and the CPU kernel
// (kernels/cpu/op_pad.cpp), which recomputes them from the same constants at create.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::ops {

// What is added before and after one dimension; negative amounts crop. A dimension of size n
// keeps its elements [max(0, -begin), n - max(0, -end)) (the `kept` ones) and pads that range by
// max(0, begin) and max(0, end): edge, reflect and wrap read the kept elements only.
struct PadDim {
  int64_t begin = 0, end = 0;
  int64_t crop_begin = 0;  // max(0, -begin)
  int64_t kept = 0;        // elements kept
  int64_t out = 0;         // kept + max(0, begin) + max(0, end)
};

// `pads` (all begins, then all ends) for `axes` (every dimension when absent), checked against
// `sizes` and `mode` ("constant", "reflect", "edge" or "wrap"; the others need kept elements
// wherever they pad). Errors name `what`.
Result<std::vector<PadDim>> pad_dims(std::span<const int64_t> sizes, std::span<const int64_t> pads,
                                     const std::optional<std::vector<int64_t>>& axes,
                                     std::string_view mode, std::string_view what);

}  // namespace baton::ops
