#include "ops/shape.h"

#include <algorithm>
#include <cstring>

#include "baton/core/check.h"
#include "baton/core/tensor.h"

namespace baton::ops {

Result<std::vector<int64_t>> broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b,
                                             std::string_view what) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Aligned from the right; a missing dimension acts as 1.
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    BATON_CHECK_OR_RETURN(da == db || da == 1 || db == 1, InvalidArgument,
                          "{}: shapes {} and {} cannot broadcast (dimension {} of the result: {} "
                          "vs {})",
                          what, shape_to_string(a), shape_to_string(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcasts_to(std::span<const int64_t> from, std::span<const int64_t> to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::vector<int64_t> int_values_of(DType dtype, const void* data, int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (int64_t k = 0; k < n; ++k) {
    if (dtype == DType::Int64) {
      std::memcpy(&out[k], bytes + 8 * k, 8);
    } else {
      int32_t v;
      std::memcpy(&v, bytes + 4 * k, 4);
      out[k] = v;
    }
  }
  return out;
}

Status index_out_of_range(std::string_view what, std::string_view input, int64_t position,
                          int64_t index, int64_t n) {
  if (n == 0) {
    return BATON_ERROR(InvalidArgument,
                       "{}: '{}' holds {} at flat position {}, but the dimension it indexes has "
                       "size 0",
                       what, input, index, position);
  }
  return BATON_ERROR(InvalidArgument,
                     "{}: '{}' holds {} at flat position {}, outside [{}, {}] (a dimension of "
                     "size {})",
                     what, input, index, position, -n, n - 1, n);
}

int64_t product(std::span<const int64_t> sizes, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= sizes[i];
  return n;
}

}  // namespace baton::ops
