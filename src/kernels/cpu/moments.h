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
// Each pass keeps eight running sums, added up at the end: with one, every addition waits for
// the previous one (four cycles), and a LayerNorm over BERT-small's 64 x 256 values took 85 us.
template <typename S>
Moments moments(const S* x, int64_t n) {
  Moments m;
  if (n <= 0) return m;
  constexpr int kLanes = 8;
  const int64_t whole = n / kLanes * kLanes;
  auto total = [](const double(&lane)[kLanes]) {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  };
  double sum[kLanes] = {};
  for (int64_t j = 0; j < whole; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) sum[l] += static_cast<double>(load(x[j + l]));
  }
  for (int64_t j = whole; j < n; ++j) sum[j - whole] += static_cast<double>(load(x[j]));
  m.mean = total(sum) / static_cast<double>(n);
  double squares[kLanes] = {};
  for (int64_t j = 0; j < whole; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double d = static_cast<double>(load(x[j + l])) - m.mean;
      squares[l] += d * d;
    }
  }
  for (int64_t j = whole; j < n; ++j) {
    const double d = static_cast<double>(load(x[j])) - m.mean;
    squares[j - whole] += d * d;
  }
  m.variance = total(squares) / static_cast<double>(n);
  return m;
}

}  // namespace baton::kernels::cpu
