// ONNX Einsum's equation (opset 12), parsed once for its definition (the output shape and the
// canonical equation) and its CPU kernel (the loop nest).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::ops {

// Labels are numbered: first the dimensions an ellipsis stands for (aligned right across
// operands, as numpy broadcasts them), then the letters in order of first appearance.
struct EinsumPlan {
  std::vector<int64_t> label_sizes;            // by label (broadcast size for ellipsis dims)
  std::vector<std::vector<int>> input_labels;  // per input, the label of each dimension
  std::vector<int> output_labels;              // the label of each output dimension
  // The equation in explicit form: no spaces, "->" and the output subscripts always written
  // (the implicit output is the ellipsis, then the letters used once, in ASCII order).
  std::string canonical;
};

// Parses `equation` against the input shapes. Letters a-z and A-Z, "..." at most once per term,
// repeated letters within one term (diagonals) and letters summed over are all allowed; a letter's
// dimensions must agree, ellipsis dimensions broadcast. Errors name `what`.
Result<EinsumPlan> plan_einsum(std::string_view equation,
                               std::span<const std::span<const int64_t>> shapes,
                               std::string_view what);

}  // namespace baton::ops
