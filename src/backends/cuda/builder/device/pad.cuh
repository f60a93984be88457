// Pad (ops/pad.h's dimensions): output element i of `out` (row-major, R dimensions) reads the
// input element its position maps to, or the fill value. Along dimension d the output index o
// is first made relative to the first kept input element, r = o - lead[d] (lead: the padding
// added before, max(begin, 0)); r in [0, kept[d]) reads input index crop[d] + r (crop: the
// elements cut from the front by a negative begin). Outside that range kMode decides: 0 constant
// (the fill value), 1 edge (the nearest kept element), 2 reflect (mirrored about the first and
// last kept elements, period 2 * (kept - 1)), 3 wrap (the kept elements repeated). The same
// mapping as the CPU kernel's source_index (kernels/cpu/op_pad.cpp).
#pragma once

#include "baton/typed.cuh"

template <int kMode>
__device__ __forceinline__ long long baton_pad_source(long long r, long long kept) {
  if (r >= 0 && r < kept) return r;
  if (kMode == 0) return -1;
  if (kMode == 1) return r < 0 ? 0 : kept - 1;
  if (kMode == 2) {
    if (kept == 1) return 0;
    const long long period = 2 * (kept - 1);
    long long m = r % period;
    if (m < 0) m += period;
    return m < kept ? m : period - m;
  }
  long long m = r % kept;
  if (m < 0) m += kept;
  return m;
}

// `fill()` gives the constant mode's value (a literal, or constant_value read from memory).
template <int R, int kMode, typename TX, typename TY, typename F>
__device__ __forceinline__ void baton_pad(const TX* __restrict__ x, TY* __restrict__ y,
                                          long long count, const long long (&out)[R],
                                          const long long (&xs)[R], const long long (&kept)[R],
                                          const long long (&lead)[R], const long long (&crop)[R],
                                          F fill) {
  baton_for_each(count, [&](long long i) {
    long long rest = i, at = 0;
    bool inside = true;
#pragma unroll
    for (int d = R - 1; d >= 0; --d) {
      const long long o = rest % out[d];
      rest /= out[d];
      const long long r = baton_pad_source<kMode>(o - lead[d], kept[d]);
      inside = inside && r >= 0;
      at += (crop[d] + r) * xs[d];
    }
    if (inside) {
      sto(&y[i], ld(x[at]));
    } else {
      sto(&y[i], fill());
    }
  });
}
