// Shape arithmetic shared by the operator definitions' inference (and by kernels that need the
// same rules at load time).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::ops {

// Multidirectional (numpy) broadcast of two shapes ("Broadcasting in ONNX"); `what` names the
// node in the error.
Result<std::vector<int64_t>> broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b,
                                             std::string_view what);

// Unidirectional broadcast: can `from` be broadcast to exactly `to`?
bool broadcasts_to(std::span<const int64_t> from, std::span<const int64_t> to);

// Product of sizes[begin, end). Safe for any shape checked_nbytes accepts (every input and output
// of a call that passed ops::infer): the product of its nonzero sizes fits in int64, so the
// product of any sub-range does too.
int64_t product(std::span<const int64_t> sizes, size_t begin, size_t end);
inline int64_t product(std::span<const int64_t> sizes) { return product(sizes, 0, sizes.size()); }

}  // namespace baton::ops
