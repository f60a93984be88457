// A GEMM of a few rows against constant weights (M <= 16: a batch-8 MLP, a classifier head), which
// is bound by reading the weights once: y[m, n] = act(alpha * sum_k x[m, k] w[n, k] + bias[n]).
// The builder stores w as [N, K] rows (each output column's weights contiguous) in the operand
// dtype T, K a multiple of kV = 16 / sizeof(T) elements. A warp computes kCols neighbouring
// columns for all kM rows: its lanes split K in groups of kV elements (one 16-byte load of each
// column's weights and of each row of x per group, kUnroll groups in flight a lane), accumulate
// in float, and sum over the warp at the end. x is read through the caches by every warp (it is
// kM * K elements; the weights are N * K); a misaligned x (a binding may sit anywhere) is read
// element by element. `act` is the fused activation (identity when there is none).
#pragma once

#include "baton/layer_norm.cuh"  // baton_vec, baton_vec_load

template <int kM, int kCols, int kUnroll, typename T, typename TB, typename TY, typename Act>
__device__ __forceinline__ void baton_gemv(const T* __restrict__ x, const T* __restrict__ w,
                                           const TB* __restrict__ bias, TY* __restrict__ y,
                                           int n, int k, float alpha, Act act) {
  constexpr int kV = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  const long long col0 = ((long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * kCols;
  if (col0 >= n) return;  // whole warps
  const int groups = k / kV;
  const bool x_vec = baton_vec_aligned<kV>(x);
  float acc[kCols][kM];
#pragma unroll
  for (int c = 0; c < kCols; ++c)
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[c][m] = 0.0f;
  for (int g0 = lane; g0 < groups; g0 += 32 * kUnroll) {
    // The weights of every group of this step first (the loads that go to memory), then x.
    baton_vec<kV, T> wv[kUnroll][kCols];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + 32 * u;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const long long col = col0 + c < n ? col0 + c : n - 1;
        if (g < groups)
          wv[u][c] = *reinterpret_cast<const baton_vec<kV, T>*>(w + col * k + (long long)g * kV);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + 32 * u;
      if (g >= groups) break;
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        float xv[kV];
        const T* xp = x + (long long)m * k + (long long)g * kV;
        if (x_vec) {
          baton_vec_load<kV>(xp, xv);
        } else {
#pragma unroll
          for (int e = 0; e < kV; ++e) xv[e] = to_f(xp[e]);
        }
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
          for (int e = 0; e < kV; ++e) acc[c][m] = fmaf(to_f(wv[u][c].v[e]), xv[e], acc[c][m]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const long long col = col0 + c;
    const float b = bias != nullptr && col < n ? to_f(bias[col]) : 0.0f;
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      const float s = warp_sum(acc[c][m]);
      if (lane == (c * kM + m) % 32 && col < n) st(&y[(long long)m * n + col], act(alpha * s + b));
    }
  }
}
