// Shape arithmetic shared by the operator definitions' inference (and by kernels that need the
// same rules at load time).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton::ops {

// Multidirectional (numpy) broadcast of two shapes ("Broadcasting in ONNX"); `what` names the
// node in the error.
Result<std::vector<int64_t>> broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b,
                                             std::string_view what);

// Unidirectional broadcast: can `from` be broadcast to exactly `to`?
bool broadcasts_to(std::span<const int64_t> from, std::span<const int64_t> to);

// a * b for sizes (>= 0); nullopt when it overflows int64.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);

// `n` int64 or int32 values at `data` (little-endian, any alignment) as int64.
std::vector<int64_t> int_values_of(DType dtype, const void* data, int64_t n);

// The error of an index outside its dimension of size `n` (ONNX indices lie in [-n, n - 1]):
// compile-time checks of constant indices and the kernels' run-time checks say the same.
Status index_out_of_range(std::string_view what, std::string_view input, int64_t position,
                          int64_t index, int64_t n);

// Product of sizes[begin, end). Safe for any shape checked_nbytes accepts (every input and output
// of a call that passed ops::infer): the product of its nonzero sizes fits in int64, so the
// product of any sub-range does too.
int64_t product(std::span<const int64_t> sizes, size_t begin, size_t end);
inline int64_t product(std::span<const int64_t> sizes) { return product(sizes, 0, sizes.size()); }

}  // namespace baton::ops
