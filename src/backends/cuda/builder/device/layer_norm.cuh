// LayerNormalization and AddLayerNorm: one row of `n` elements per warp or block (rows.cuh). The
// mean and the variance are taken in float in two passes over the row (so nothing cancels), then
// y = (x - mean) / sqrt(var + epsilon) * scale + bias. With a residual `r` the row is x + r, which
// is also stored into `sum` when that is not null. `scale` and `bias` hold one row's values
// (broadcasting already expanded); absent inputs and outputs are null pointers.
//
// A row of up to kLayerNormCached elements per thread (every row row_launch gives a block, and
// rows of up to 256 elements under a warp) is read from memory once: each thread keeps its
// elements in registers, loaded together before the first reduction, and both passes and the
// output read them there. Longer rows are read three times.
#pragma once

#include "baton/rows.cuh"

constexpr int kLayerNormCached = 8;

template <bool kWarp, typename TX, typename TR, typename TS, typename TB, typename TY,
          typename TSum>
__device__ __forceinline__ void baton_layer_norm(const TX* __restrict__ x, const TR* __restrict__ r,
                                                 const TS* __restrict__ scale,
                                                 const TB* __restrict__ bias, TY* __restrict__ y,
                                                 TSum* __restrict__ sum, long long rows,
                                                 long long n, float epsilon) {
  const long long row = baton_row_index<kWarp>();
  if (row >= rows) return;  // whole warps only: in block mode the grid has one block per row
  const int lane = baton_row_lane<kWarp>(), width = baton_row_width<kWarp>();
  const long long base = row * n;
  auto value = [&](long long j) {
    float v = to_f(x[base + j]);
    if (r != nullptr) v += to_f(r[base + j]);
    return v;
  };
  auto output = [&](long long j, float v, float mean, float inv_std) {
    float o = (v - mean) * inv_std * to_f(scale[j]);
    if (bias != nullptr) o += to_f(bias[j]);
    st(&y[base + j], o);
  };
  if (n <= (long long)kLayerNormCached * width) {
    float cached[kLayerNormCached];
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < kLayerNormCached; ++c) {
      const long long j = lane + (long long)c * width;
      cached[c] = j < n ? value(j) : 0.0f;
    }
#pragma unroll
    for (int c = 0; c < kLayerNormCached; ++c) {
      const long long j = lane + (long long)c * width;
      if (sum != nullptr && j < n) st(&sum[base + j], cached[c]);
      s += cached[c];
    }
    const float mean = baton_row_reduce<kWarp, false>(s) / (float)n;
    float q = 0.0f;
#pragma unroll
    for (int c = 0; c < kLayerNormCached; ++c) {
      const long long j = lane + (long long)c * width;
      const float d = j < n ? cached[c] - mean : 0.0f;
      q += d * d;
    }
    const float inv_std = 1.0f / sqrtf(baton_row_reduce<kWarp, false>(q) / (float)n + epsilon);
#pragma unroll
    for (int c = 0; c < kLayerNormCached; ++c) {
      const long long j = lane + (long long)c * width;
      if (j < n) output(j, cached[c], mean, inv_std);
    }
    return;
  }
  float s = 0.0f;
  for (long long j = lane; j < n; j += width) {
    const float v = value(j);
    if (sum != nullptr) st(&sum[base + j], v);
    s += v;
  }
  const float mean = baton_row_reduce<kWarp, false>(s) / (float)n;
  float q = 0.0f;
  for (long long j = lane; j < n; j += width) {
    const float d = value(j) - mean;
    q += d * d;
  }
  const float inv_std = 1.0f / sqrtf(baton_row_reduce<kWarp, false>(q) / (float)n + epsilon);
  for (long long j = lane; j < n; j += width) output(j, value(j), mean, inv_std);
}
