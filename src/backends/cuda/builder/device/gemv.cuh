// Products of a few rows with a matrix: y[m, k] = sum_c x[m, c] * w[k, c] for m < M (M at most
// 8, a compile-time constant) and k < K, with w stored row-major [K, C] (a 1x1 convolution's
// filters). Squeeze-excite layers at batch 1 are such products ([1, 960] by [960, 240] in
// MobileNetV3), where a tensor-core convolution or GEMM spends most of its few microseconds on
// tiles that are almost all padding; here the cost is reading w once.
//
// One warp per output column k, grid-striding over k: its lanes walk row k of w and the M rows of
// x together, V elements per access (16 bytes) when the builder found C, x's row stride and the
// column stride fit (V > 1 only when x's columns are contiguous and C and x's row stride are
// multiples of V) and the pointers are aligned for it (checked here), one element per access
// otherwise. The lanes' partial sums meet through shuffles, and lane 0 hands each of the M sums
// to `finish(m, k, sum)` (bias, activation, store).
#pragma once

#include "baton/common.cuh"

template <int M, int V, typename TX, typename TW, typename F>
__device__ __forceinline__ void baton_gemv(const TX* __restrict__ x, long long x_row_stride,
                                           long long x_col_stride, const TW* __restrict__ w,
                                           long long C, long long K, F finish) {
  const int lane = threadIdx.x & 31;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const bool vec = V > 1 && baton_vec_aligned<V>(w) && baton_vec_aligned<V>(x);
  for (long long k = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; k < K; k += warps) {
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.0f;
    const TW* wk = w + k * C;
    if (vec) {
      for (long long c = (long long)lane * V; c < C; c += 32 * V) {
        float wv[V];
        baton_vec_load<V>(wk + c, wv);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xv[V];
          baton_vec_load<V>(x + m * x_row_stride + c, xv);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[m] = fmaf(wv[e], xv[e], acc[m]);
        }
      }
    } else {
      for (long long c = lane; c < C; c += 32) {
        const float wv = to_f(wk[c]);
#pragma unroll
        for (int m = 0; m < M; ++m)
          acc[m] = fmaf(wv, to_f(x[m * x_row_stride + c * x_col_stride]), acc[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = warp_sum(acc[m]);
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < M; ++m) finish(m, k, acc[m]);
    }
  }
}
