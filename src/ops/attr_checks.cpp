#include "ops/attr_checks.h"

#include <cmath>

#include "baton/core/check.h"
#include "baton/core/tensor.h"

namespace baton::ops {

Status check_flag(InferContext& ctx, std::string_view name) {
  if (ctx.def().attr_index(name) < 0) return Status();
  const int64_t v = ctx.attr_int(name);
  BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument,
                        "{}: attribute '{}' is {}; it must be 0 or 1", ctx.what(), name, v);
  return Status();
}

Status check_epsilon(InferContext& ctx) {
  const double epsilon = ctx.attr_float("epsilon");
  BATON_CHECK_OR_RETURN(epsilon >= 0.0 && std::isfinite(epsilon), InvalidArgument,
                        "{}: attribute 'epsilon' is {}; it must be finite and non-negative",
                        ctx.what(), epsilon);
  return Status();
}

Status check_stash_type(InferContext& ctx) {
  if (ctx.def().attr_index("stash_type") < 0) return Status();
  const int64_t stash = ctx.attr_int("stash_type");
  BATON_CHECK_OR_RETURN(stash == 1, NotSupported,
                        "{}: attribute 'stash_type' is {}; Baton computes the statistics in float "
                        "(stash_type 1) or wider",
                        ctx.what(), stash);
  return Status();
}

Status check_element_indices(InferContext& ctx, int axis) {
  const auto data = ctx.sizes(0);
  const auto indices = ctx.sizes(1);
  const int rank = ctx.rank(0);
  BATON_CHECK_OR_RETURN(ctx.rank(1) == rank, InvalidArgument,
                        "{}: 'indices' {} must have the rank of 'data' {}", ctx.what(),
                        shape_to_string(indices), shape_to_string(data));
  for (int d = 0; d < rank; ++d) {
    // Along the other dimensions position i of indices names data's element at i.
    BATON_CHECK_OR_RETURN(d == axis || indices[d] <= data[d], InvalidArgument,
                          "{}: 'indices' {} is larger than 'data' {} along dimension {} (only "
                          "the axis, {}, may differ)",
                          ctx.what(), shape_to_string(indices), shape_to_string(data), d, axis);
  }
  return Status();
}

}  // namespace baton::ops
