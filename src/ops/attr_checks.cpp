#include "ops/attr_checks.h"

#include <cmath>

#include "baton/core/check.h"

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

}  // namespace baton::ops
