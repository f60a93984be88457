// Statistics shared by the normalization kernels (LayerNormalization, InstanceNormalization,
// GroupNormalization).
#pragma once

#include <cstdint>

#include "kernels/cpu/dispatch.h"

namespace baton::kernels::cpu {

struct Moments {
  double mean = 0.0;
  double variance = 0.0;  // population variance (divided by n)
};

// Mean and variance of x[0, n) in double, in two passes (so nothing cancels); 0 and 0 when n is 0.
template <typename S>
Moments moments(const S* x, int64_t n) {
  Moments m;
  if (n <= 0) return m;
  for (int64_t j = 0; j < n; ++j) m.mean += static_cast<double>(load(x[j]));
  m.mean /= static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) {
    const double d = static_cast<double>(load(x[j])) - m.mean;
    m.variance += d * d;
  }
  m.variance /= static_cast<double>(n);
  return m;
}

}  // namespace baton::kernels::cpu
