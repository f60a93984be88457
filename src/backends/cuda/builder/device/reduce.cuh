// Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, and the global pools) in float. The
// caller splits the input's dimensions into kept ones (K: sizes in the output's memory order and
// their input strides) and reduced ones (M: sizes and input strides), so any input layout is read
// in place and the output is written in memory order. Two shapes of kernel:
//  - baton_reduce_thread: one thread per output element, walking its `count` inputs; coalesced
//    when the innermost kept dimension is the input's innermost (channels-last pools);
//  - baton_reduce_block: one block per output element, threads striding its inputs (reductions
//    along the input's innermost dimension), combined through warp shuffles.
// Max and Min propagate NaN, as the CPU kernel does.
// The sizes are kernel arguments or constants (ops/reduce.cpp): kFast (arguments, every index
// below 2^31) divides through the sizes' magics, else through the sizes themselves.
#pragma once

#include "baton/common.cuh"

// OP: 0 sum, 1 mean, 2 max, 3 min.
template <int OP>
__device__ __forceinline__ float baton_reduce_identity() {
  return OP == 2 ? __int_as_float(0xff800000) : (OP == 3 ? __int_as_float(0x7f800000) : 0.0f);
}
template <int OP>
__device__ __forceinline__ float baton_reduce_combine(float acc, float v) {
  if (OP == 2) return (v > acc || v != v) ? v : acc;
  if (OP == 3) return (v < acc || v != v) ? v : acc;
  return acc + v;
}

// baton_offset, or baton_offset_fast with the sizes' magics when kFast.
template <int R, bool kFast>
__device__ __forceinline__ long long baton_offset_of(long long i, const long long (&sizes)[R],
                                                     const long long (&magic)[R],
                                                     const long long (&strides)[R]) {
  if (kFast) return baton_offset_fast<R>(i, sizes, magic, strides);
  return baton_offset<R>(i, sizes, strides);
}

// The kept and reduced dimensions: sizes, their magics (zeros unless kFast) and input strides.
template <int R>
struct BatonDims {
  const long long (&sizes)[R];
  const long long (&magic)[R];
  const long long (&strides)[R];
};

template <int K, int M, int OP, bool kFast, typename TIn, typename TOut>
__device__ __forceinline__ void baton_reduce_thread(const TIn* __restrict__ x, TOut* __restrict__ y,
                                                    long long n, BatonDims<K> kept,
                                                    BatonDims<M> reduced, long long count) {
  baton_for_each(n, [&](long long i) {
    const long long base = baton_offset_of<K, kFast>(i, kept.sizes, kept.magic, kept.strides);
    float acc = baton_reduce_identity<OP>();
    for (long long j = 0; j < count; ++j) {
      acc = baton_reduce_combine<OP>(
          acc, to_f(x[base + baton_offset_of<M, kFast>(j, reduced.sizes, reduced.magic,
                                                       reduced.strides)]));
    }
    st(&y[i], OP == 1 ? acc / (float)count : acc);
  });
}

template <int K, int M, int OP, bool kFast, typename TIn, typename TOut>
__device__ __forceinline__ void baton_reduce_block(const TIn* __restrict__ x, TOut* __restrict__ y,
                                                   long long n, BatonDims<K> kept,
                                                   BatonDims<M> reduced, long long count) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (long long o = blockIdx.x; o < n; o += gridDim.x) {
    const long long base = baton_offset_of<K, kFast>(o, kept.sizes, kept.magic, kept.strides);
    float acc = baton_reduce_identity<OP>();
    for (long long j = threadIdx.x; j < count; j += blockDim.x) {
      acc = baton_reduce_combine<OP>(
          acc, to_f(x[base + baton_offset_of<M, kFast>(j, reduced.sizes, reduced.magic,
                                                       reduced.strides)]));
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      acc = baton_reduce_combine<OP>(acc, __shfl_xor_sync(0xffffffffu, acc, off));
    }
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < warps ? partial[lane] : baton_reduce_identity<OP>();
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        acc = baton_reduce_combine<OP>(acc, __shfl_xor_sync(0xffffffffu, acc, off));
      }
      if (lane == 0) st(&y[o], OP == 1 ? acc / (float)count : acc);
    }
    __syncthreads();
  }
}

// Reductions that keep the input's innermost dimension (stride 1) and reduce over `count`
// positions for each kept element: channels-last pools (squeeze-excite's mean over H and W, a
// global pool of NHWC values). Output element (o, c) is y[o * inner + c], reducing
// x[o * outer_stride + c + offset(j)] over j. A block takes kLanes * V consecutive kept elements
// of one outer index o: kLanes threads across them, each reading V neighbours with one access when
// `x` is aligned for it (checked here; the builder passes V > 1 only when inner, outer_stride and
// every reduced stride are multiples of V), and kRows rows of threads striding the positions, so a
// warp reads whole lines; the rows are combined through shared memory. Grid: outer *
// ceil(inner / (kLanes * V)) blocks of kLanes * kRows threads (256, or 1024 when there are few
// blocks: ops/reduce.cpp); or, split (baton_reduce_columns_part below), that many times kSplits.
//
// baton_columns_rows is the block's work over positions [j0, j1) of its columns; put(c, r) stores
// column c's result r (combined over those positions, a mean not yet divided).
template <int M, int OP, int V, int kLanes, int kRows, bool kFast, typename TIn, typename Put>
__device__ __forceinline__ void baton_columns_rows(const TIn* __restrict__ x, long long inner,
                                                   long long outer_stride, BatonDims<M> reduced,
                                                   long long o, long long g, long long j0,
                                                   long long j1, Put put) {
  constexpr int kCols = kLanes * V;
  __shared__ float part[kRows * kCols];
  const int lane = threadIdx.x % kLanes, row = threadIdx.x / kLanes;
  const long long c0 = g * kCols + (long long)lane * V;
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = baton_reduce_identity<OP>();
  if (c0 < inner) {
    const TIn* base = x + o * outer_stride + c0;
    const bool vec = V > 1 && baton_vec_aligned<V>(x);
    // kUnroll rows per step, all loaded before any is combined, so their reads are in flight
    // together (a column of a few hundred rows is otherwise a chain of dependent waits).
    constexpr int kUnroll = 4;
    long long j = j0 + row;
    for (; j + (kUnroll - 1) * kRows < j1; j += kUnroll * kRows) {
      float v[kUnroll][V];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const long long off =
            baton_offset_of<M, kFast>(j + u * kRows, reduced.sizes, reduced.magic, reduced.strides);
        if (vec) {
          baton_vec_load<V>(base + off, v[u]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) v[u][e] = to_f(base[off + e]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] = baton_reduce_combine<OP>(acc[e], v[u][e]);
      }
    }
    for (; j < j1; j += kRows) {
      const long long off =
          baton_offset_of<M, kFast>(j, reduced.sizes, reduced.magic, reduced.strides);
      float v[V];
      if (vec) {
        baton_vec_load<V>(base + off, v);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) v[e] = to_f(base[off + e]);
      }
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = baton_reduce_combine<OP>(acc[e], v[e]);
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e) part[row * kCols + lane * V + e] = acc[e];
  __syncthreads();
  for (int t = threadIdx.x; t < kCols; t += blockDim.x) {
    const long long c = g * kCols + t;
    if (c >= inner) continue;
    float r = baton_reduce_identity<OP>();
#pragma unroll 16
    for (int k = 0; k < kRows; ++k) r = baton_reduce_combine<OP>(r, part[k * kCols + t]);
    put(c, r);
  }
}

template <int M, int OP, int V, int kLanes, int kRows, bool kFast, typename TIn, typename TOut>
__device__ __forceinline__ void baton_reduce_columns(const TIn* __restrict__ x,
                                                     TOut* __restrict__ y, long long inner,
                                                     long long outer_stride, BatonDims<M> reduced,
                                                     long long count) {
  constexpr int kCols = kLanes * V;
  const long long groups = (inner + kCols - 1) / kCols;
  const long long o = blockIdx.x / groups, g = blockIdx.x % groups;
  baton_columns_rows<M, OP, V, kLanes, kRows, kFast>(
      x, inner, outer_stride, reduced, o, g, 0, count,
      [&](long long c, float r) { st(&y[o * inner + c], OP == 1 ? r / (float)count : r); });
}

// Split columns: few blocks over long columns (EfficientNet's first squeeze-excite pool at batch
// 1, 112x112 positions of 32 channels, is one block of columns, which alone ran at a sixth of the
// H200's bandwidth). Each block of columns becomes kSplits blocks, block s taking the s-th of
// kSplits equal runs of positions and writing its partial result to p[(o * kSplits + s) * inner +
// c] (float); baton_reduce_columns_finish then combines the kSplits partials of each output in
// order, so the result does not depend on which block ran first. Grid: outer * ceil(inner /
// (kLanes * V)) * kSplits blocks.
template <int M, int OP, int V, int kLanes, int kRows, int kSplits, bool kFast, typename TIn>
__device__ __forceinline__ void baton_reduce_columns_part(const TIn* __restrict__ x,
                                                          float* __restrict__ p, long long inner,
                                                          long long outer_stride,
                                                          BatonDims<M> reduced, long long count) {
  constexpr int kCols = kLanes * V;
  const long long groups = (inner + kCols - 1) / kCols;
  const long long s = blockIdx.x % kSplits, og = blockIdx.x / kSplits;
  const long long o = og / groups, g = og % groups;
  const long long run = (count + kSplits - 1) / kSplits;
  const long long j0 = s * run < count ? s * run : count;
  const long long j1 = j0 + run < count ? j0 + run : count;
  baton_columns_rows<M, OP, V, kLanes, kRows, kFast>(
      x, inner, outer_stride, reduced, o, g, j0, j1,
      [&](long long c, float r) { p[(o * kSplits + s) * inner + c] = r; });
}

// The second kernel of a split: one thread per output element (n = outer * inner of them).
template <int OP, int kSplits, typename TOut>
__device__ __forceinline__ void baton_reduce_columns_finish(const float* __restrict__ p,
                                                            TOut* __restrict__ y, long long inner,
                                                            long long n, long long count) {
  baton_for_each(n, [&](long long i) {
    const long long o = i / inner, c = i - o * inner;
    float r = baton_reduce_identity<OP>();
#pragma unroll 8
    for (int s = 0; s < kSplits; ++s) {
      r = baton_reduce_combine<OP>(r, p[(o * kSplits + s) * inner + c]);
    }
    st(&y[i], OP == 1 ? r / (float)count : r);
  });
}
