// The value a Constant node stands for, from its bound attributes (the importer folds Constant
// nodes into compile-time values; the definition in constant.cpp checks the attributes).
#pragma once

#include <span>

#include "ops/op_def.h"

namespace baton::ops {

// `attrs` bound to Constant's definition and checked by its inference.
TensorValue constant_value(std::span<const AttrValue> attrs, const OpDef& def);

}  // namespace baton::ops
