// The reductions' shared table and shape rules: ReduceSum, ReduceMean, ... (reduce.cpp) and the
// CPU kernel (kernels/cpu/op_reduce.cpp) both read reduce_rows(), and the kernel recomputes the
// reduced dimensions with the same reduced_dims() the definition checked.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton::ops {

enum class Reduction : uint8_t { Sum, Mean, Prod, SumSquare, L1, L2, LogSum, LogSumExp, Max, Min };

struct ReduceRow {
  std::string_view name;  // ONNX op type
  Reduction reduction;
  DTypeSet types;        // T, in every version
  int input_axes_since;  // the opset where `axes` became an input (13 for ReduceSum, else 18)
  int bool_since;        // the opset that added bool (ReduceMax and ReduceMin: 20), else 0
};

std::span<const ReduceRow> reduce_rows();
// The row of `name`, or null.
const ReduceRow* find_reduce_row(std::string_view name);

// `values` as dimensions of a rank-`rank` tensor: each in [-rank, rank - 1], normalized, none
// named twice. `what` names the node and `name` the attribute or input in errors.
Result<std::vector<int>> normalize_axes(std::span<const int64_t> values, int rank,
                                        std::string_view what, std::string_view name);

// Which dimensions a reduction reduces: those `axes` names; with no axes (absent or empty), every
// dimension, or none when `noop_with_empty_axes` (then each element is reduced alone).
Result<std::vector<bool>> reduced_dims(const std::optional<std::vector<int64_t>>& axes, int rank,
                                       bool noop_with_empty_axes, std::string_view what);

// The output shape: reduced dimensions become 1 (keepdims) or disappear.
std::vector<int64_t> reduced_shape(std::span<const int64_t> sizes, const std::vector<bool>& reduced,
                                   bool keepdims);

}  // namespace baton::ops
