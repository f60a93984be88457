// Kernels that walk one axis of a tensor seen as [outer, n, inner] (the axis in the middle): one
// thread per line of n elements spaced `inner` apart, `lines` = outer * inner lines, the
// grid striding over them. Each thread walks its line in order, as the CPU kernels do, so the
// results are the CPU's bit for bit in float32; a long axis with few lines leaves most of the GPU
// idle (ArgMax over a classifier's 1000 logits is one thread's 1000 loads), which is acceptable
// for the models that use these ops (a head, or a mask CumSum that usually folds at compile).
#pragma once

#include "baton/typed.cuh"

// ArgMax (kMax) or ArgMin: the int64 index of the largest (smallest) element of each line, the
// first one or, with kLast (select_last_index), the last. NaN counts as larger (smaller) than
// every number, as in numpy and Baton's CPU kernel (kernels/cpu/op_argmax.cpp), so the first (last)
// NaN wins. `v != v` is never true for integers.
template <bool kMax, bool kLast, typename T>
__device__ __forceinline__ void baton_arg_extreme(const T* __restrict__ x,
                                                  long long* __restrict__ y, long long lines,
                                                  long long n, long long inner) {
  baton_for_each(lines, [&](long long l) {
    const long long o = l / inner, i = l - o * inner;
    const T* col = x + o * n * inner + i;
    auto best = ld(col[0]);
    long long index = 0;
    for (long long j = 1; j < n; ++j) {
      const auto v = ld(col[j * inner]);
      const bool v_nan = v != v, best_nan = best != best;
      const bool beats = kMax ? v > best : v < best;
      if ((beats && !best_nan) || (v_nan && !best_nan) ||
          (kLast && (v == best || (v_nan && best_nan)))) {
        best = v;
        index = j;
      }
    }
    y[l] = index;
  });
}

// CumSum: each line's running sum, from its start or (kReverse) its end, each element's own value
// included or (kExclusive) not. TA is the accumulator: float for the float types (float16 and
// bfloat16 sums are rounded only when stored, as on the CPU), an unsigned integer of the
// element's width for integers, so that overflow wraps as two's complement does on the CPU
// instead of being undefined.
template <bool kExclusive, bool kReverse, typename TA, typename T>
__device__ __forceinline__ void baton_cumsum(const T* __restrict__ x, T* __restrict__ y,
                                             long long lines, long long n, long long inner) {
  baton_for_each(lines, [&](long long l) {
    const long long o = l / inner, i = l - o * inner;
    const long long base = o * n * inner + i;
    TA sum = 0;
    for (long long k = 0; k < n; ++k) {
      const long long at = base + (kReverse ? n - 1 - k : k) * inner;
      const TA v = (TA)ld(x[at]);
      if (kExclusive) {
        sto(&y[at], sum);
        sum += v;
      } else {
        sum += v;
        sto(&y[at], sum);
      }
    }
  });
}
