// Kernels that walk one axis of a tensor seen as [outer, n, inner] (the axis in the middle): one
// thread per line of n elements spaced `inner` apart, `lines` = outer * inner lines, the
// grid striding over them. Each thread walks its line in order, as the CPU kernels do, so the
// results are the CPU's bit for bit in float32. A long axis with few lines would leave most of
// the GPU idle (ArgMax over a vocabulary's 50257 logits as one thread's walk): ArgMax, ArgMin and
// TopK over long lines take a block per line instead (baton_arg_extreme_block, baton_topk_block,
// combining candidates in the sequential walk's order, baton_block_first).
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

// Whether (v, i) replaces (best, at) as the line's extreme in baton_arg_extreme's order: NaN beats
// every number, a larger (smaller) number beats a smaller (larger) one, and among equals the
// first index wins (the last with kLast), so combining candidates in any order gives the
// sequential walk's answer.
template <bool kMax, bool kLast, typename V>
__device__ __forceinline__ bool baton_arg_better(V v, long long i, V best, long long at) {
  const bool v_nan = v != v, best_nan = best != best;
  if (v_nan != best_nan) return v_nan;
  if (!v_nan && v != best) return kMax ? v > best : v < best;
  return kLast ? i > at : i < at;
}

// The block's first candidate in an order: each thread holds one (`best` at index `at`, -1 for
// none) and `before(u, m, v, j)` says whether u at m comes before v at j; on return thread 0
// holds the block's first. Warp shuffles, then thread 0 over the warps' picks (`warp_best` and
// `warp_at` are the caller's shared arrays of 32).
template <typename V, typename Before>
__device__ __forceinline__ void baton_block_first(V& best, long long& at, V* warp_best,
                                                  long long* warp_at, Before before) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const V ov = __shfl_down_sync(0xffffffffu, best, offset);
    const long long oat = __shfl_down_sync(0xffffffffu, at, offset);
    if (oat >= 0 && (at < 0 || before(ov, oat, best, at))) {
      best = ov;
      at = oat;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_best[warp] = best;
    warp_at[warp] = at;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)((blockDim.x + 31) >> 5); ++w) {
      if (warp_at[w] >= 0 && (at < 0 || before(warp_best[w], warp_at[w], best, at))) {
        best = warp_best[w];
        at = warp_at[w];
      }
    }
  }
}

// ArgMax / ArgMin with a block per line, for long lines (a language model's logits: 50257 per
// token, which one thread would walk in 50257 dependent steps). Each thread keeps the extreme of
// its strided share, then the block combines them (baton_arg_better); the grid has one block
// per line, and the result is baton_arg_extreme's.
template <bool kMax, bool kLast, typename T>
__device__ __forceinline__ void baton_arg_extreme_block(const T* __restrict__ x,
                                                        long long* __restrict__ y, long long n,
                                                        long long inner) {
  const long long l = blockIdx.x;
  const long long o = l / inner, i = l - o * inner;
  const T* col = x + o * n * inner + i;
  using V = decltype(ld(col[0]));
  V best = ld(col[0]);
  long long at = -1;  // -1: this thread has no element yet
  for (long long j = threadIdx.x; j < n; j += blockDim.x) {
    const V v = ld(col[j * inner]);
    if (at < 0 || baton_arg_better<kMax, kLast>(v, j, best, at)) {
      best = v;
      at = j;
    }
  }
  __shared__ V warp_best[32];
  __shared__ long long warp_at[32];
  baton_block_first(best, at, warp_best, warp_at, [](V u, long long m, V v, long long j) {
    return baton_arg_better<kMax, kLast>(u, m, v, j);
  });
  if (threadIdx.x == 0) y[l] = at;
}

// CumSum: each line's running sum, from its start or (kReverse) its end, each element's own value
// included or (kExclusive) not. TA is the accumulator: float for the float types (float16 and
// bfloat16 sums are rounded only when stored, as on the CPU), an unsigned integer of the
// element's width for integers, so that overflow wraps as two's complement does on the CPU
// instead of being undefined. x and y may be stored in different float types (an fp16 engine's
// scratch in, a float32 binding out).
template <bool kExclusive, bool kReverse, typename TA, typename TX, typename TY>
__device__ __forceinline__ void baton_cumsum(const TX* __restrict__ x, TY* __restrict__ y,
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

// TopK: each element of each line finds its rank among the line's elements (how many come before
// it in the order larger first, or smaller first, with NaN above every number and ties by the
// lower index: the CPU kernel's strict total order, kernels/cpu/op_topk.cpp) and, when the rank is
// below k, writes itself and its index there, so the outputs are sorted. One thread per element
// of the input, each reading its whole line (stopping once the rank reaches k): O(n^2) per line,
// for the short axes of detection heads and classifiers, not a vocabulary of 50k. x and values may
// be stored in different float types (an fp16 engine's scratch in, a float32 binding out).
template <bool kLargest, typename T, typename TV>
__device__ __forceinline__ void baton_topk(const T* __restrict__ x, TV* __restrict__ values,
                                           long long* __restrict__ indices, long long total,
                                           long long n, long long inner, long long k) {
  baton_for_each(total, [&](long long e) {
    const long long i = e % inner, r = e / inner, j = r % n, o = r / n;
    const T* line = x + o * n * inner + i;
    const auto v = ld(line[j * inner]);
    const bool v_nan = v != v;  // never true for integers
    long long rank = 0;
    for (long long m = 0; m < n && rank < k; ++m) {
      if (m == j) continue;
      const auto u = ld(line[m * inner]);
      const bool u_nan = u != u;
      bool before;
      if (u_nan != v_nan) {
        before = kLargest ? u_nan : v_nan;
      } else if (!u_nan && u != v) {
        before = kLargest ? u > v : u < v;
      } else {
        before = m < j;
      }
      rank += before ? 1 : 0;
    }
    if (rank < k) {
      const long long at = (o * k + rank) * inner + i;
      sto(&values[at], v);
      indices[at] = j;
    }
  });
}

// Whether (u at index m) comes before (v at index j) in TopK's order (baton_topk's: larger, or
// smaller, first; NaN above every number; ties by the lower index).
template <bool kLargest, typename V>
__device__ __forceinline__ bool baton_topk_before(V u, long long m, V v, long long j) {
  const bool u_nan = u != u, v_nan = v != v;
  if (u_nan != v_nan) return kLargest ? u_nan : v_nan;
  if (!u_nan && u != v) return kLargest ? u > v : u < v;
  return m < j;
}

// TopK over long lines with a small K (a vocabulary's logits for sampling: K of 50 from 50257),
// a block per line: K rounds, each finding the first element of the order that comes after the
// previous round's pick (the block's threads each take a strided share, then combine their
// candidates), so the picks come out sorted and equal to baton_topk's. K * n loads per line
// instead of baton_topk's n * n. The grid has one block per line.
template <bool kLargest, typename T, typename TV>
__device__ __forceinline__ void baton_topk_block(const T* __restrict__ x, TV* __restrict__ values,
                                                 long long* __restrict__ indices, long long n,
                                                 long long inner, long long k) {
  const long long l = blockIdx.x;
  const long long o = l / inner, i = l - o * inner;
  const T* line = x + o * n * inner + i;
  using V = decltype(ld(line[0]));
  __shared__ V warp_best[32];
  __shared__ long long warp_at[32];
  __shared__ V prev;
  __shared__ long long prev_at;
  for (long long r = 0; r < k; ++r) {
    V best = ld(line[0]);
    long long at = -1;  // -1: no candidate yet
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
      const V v = ld(line[j * inner]);
      if (r > 0 && !baton_topk_before<kLargest>(prev, prev_at, v, j)) continue;  // taken
      if (at < 0 || baton_topk_before<kLargest>(v, j, best, at)) {
        best = v;
        at = j;
      }
    }
    baton_block_first(best, at, warp_best, warp_at, [](V u, long long m, V v, long long j) {
      return baton_topk_before<kLargest>(u, m, v, j);
    });
    if (threadIdx.x == 0) {
      prev = best;
      prev_at = at;
      const long long out = (o * k + r) * inner + i;
      sto(&values[out], best);
      indices[out] = at;
    }
    __syncthreads();
  }
}
