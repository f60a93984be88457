#include "value_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "run_common.h"

namespace baton::tool {

Tolerance default_tolerance(std::string_view precision) {
  if (precision == "bf16") return {5e-2, 5e-2, 3.3895313892515355e38};
  if (precision == "fp16") return {1e-2, 1e-2, 65504.0};
  if (precision == "tf32") return {1e-3, 1e-2, 0};
  return {1e-5, 1e-4, 0};
}

std::string_view looser(std::string_view a, std::string_view b) {
  auto rank = [](std::string_view p) {
    return p == "bf16" ? 3 : p == "fp16" ? 2 : p == "tf32" ? 1 : 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

Comparison compare_values(const TensorView& b, const TensorView& r, Tolerance tol) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Comparison c;
  c.tolerance = tol;
  c.dtype = std::string(dtype_name(b.dtype));
  c.reference_dtype = std::string(dtype_name(r.dtype));
  c.shape.assign(b.sizes.begin(), b.sizes.end());
  c.reference_shape.assign(r.sizes.begin(), r.sizes.end());
  c.shapes_match = c.shape == c.reference_shape;
  if (!c.shapes_match) return c;
  c.elements = b.numel();
  double diff2 = 0, ref2 = 0, worst_score = -1;
  for (int64_t i = 0; i < c.elements; ++i) {
    const double x = element_as_double(b, i);
    const double y = element_as_double(r, i);
    double score = 0;
    if (std::isnan(x) || std::isnan(y)) {
      score = std::isnan(x) && std::isnan(y) ? 0 : kInf;
    } else if (std::isinf(x) || std::isinf(y)) {
      const bool beyond = tol.largest > 0 && std::isinf(x) && std::fabs(y) > tol.largest &&
                          std::signbit(x) == std::signbit(y);
      score = x == y || beyond ? 0 : kInf;
    } else {
      const double d = std::fabs(x - y);
      const double allowed = tol.atol + tol.rtol * std::fabs(y);
      score = allowed > 0 ? d / allowed : (d > 0 ? kInf : 0);
      c.max_abs = std::max(c.max_abs, d);
      if (y != 0) c.max_rel = std::max(c.max_rel, d / std::fabs(y));
      diff2 += d * d;
      ref2 += y * y;
    }
    if (score > 1) ++c.mismatches;
    if (score > worst_score) {
      worst_score = score;
      c.worst = i;
      c.worst_baton = x;
      c.worst_reference = y;
    }
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return c;
}

std::vector<int64_t> unflatten(int64_t flat, std::span<const int64_t> sizes) {
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(sizes[d], 1);
    index[d] = flat % extent;
    flat /= extent;
  }
  return index;
}

std::string index_text(const std::vector<int64_t>& index) {
  std::string out = "[";
  for (size_t i = 0; i < index.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", index[i]);
  return out + "]";
}

}  // namespace baton::tool
