// Attribute and shape checks that several definitions share; each error names the node, the op
// and the attribute or inputs (InferContext::what()).
#pragma once

#include <string_view>

#include "baton/core/error.h"
#include "ops/op_def.h"

namespace baton::ops {

// The int attribute `name` is 0 or 1 (InvalidArgument otherwise). A definition version without
// the attribute passes.
Status check_flag(InferContext& ctx, std::string_view name);

// `epsilon` is finite and non-negative (InvalidArgument otherwise).
Status check_epsilon(InferContext& ctx);

// `stash_type`, where the version has it, is 1: Baton computes a normalization's statistics in
// float or wider (NotSupported otherwise).
Status check_stash_type(InferContext& ctx);

// GatherElements' and ScatterElements' 'indices' (input 1) against 'data' (input 0): the same
// rank, and no larger along every dimension but `axis` (canonical).
Status check_element_indices(InferContext& ctx, int axis);

}  // namespace baton::ops
