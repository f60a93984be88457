// LayerNormalization and AddLayerNorm: one row of `n` elements per warp or block (rows.cuh). The
// mean and the variance are taken in float in two passes over the row (so nothing cancels), then
// y = (x - mean) / sqrt(var + epsilon) * scale + bias. With a residual `r` the row is x + r (r's
// row `row % r_rows`: r_rows equals rows unless R is broadcast over the leading dimensions), which
// is also stored into `sum` when that is not null. `scale` and `bias` hold one row's values
// (broadcasting already expanded); absent inputs and outputs are null pointers.
//
// A row that fits in the threads' registers is read from memory once: each thread keeps its
// elements, and the matching scale and bias, in registers, all loaded before the first reduction;
// both passes and the output read them there. kVec > 1 (the builder passes 8 when the row length
// is a multiple of 8) reads and writes kVec neighbouring elements with one vector access when
// every pointer is aligned for it (checked here, at run time: a binding may sit anywhere), up to
// kLayerNormVecChunks such groups a thread. Otherwise, or when the row is longer, a thread keeps
// up to kLayerNormCached single elements. Longer rows still are read three times.
#pragma once

#include "baton/rows.cuh"

constexpr int kLayerNormCached = 8;
constexpr int kLayerNormVecChunks = 4;

// The row at `base`, kept in registers: kChunks groups of kVec elements a thread, group c of
// this thread starting at element (lane + c * width) * kVec. Returns false, having done nothing,
// when the row does not fit (every thread of the row decides alike). n % kVec == 0.
template <bool kWarp, int kVec, int kChunks, typename TX, typename TR, typename TS, typename TB,
          typename TY, typename TSum>
__device__ __forceinline__ bool baton_layer_norm_cached(
    const TX* __restrict__ x, const TR* __restrict__ r, const TS* __restrict__ scale,
    const TB* __restrict__ bias, TY* __restrict__ y, TSum* __restrict__ sum, long long base,
    long long rbase, long long n, float epsilon) {
  const int lane = baton_row_lane<kWarp>(), width = baton_row_width<kWarp>();
  if (n > (long long)kVec * kChunks * width) return false;
  float v[kChunks][kVec], g[kChunks][kVec], b[kChunks][kVec];
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const long long j = ((long long)lane + (long long)c * width) * kVec;
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[c][e] = g[c][e] = b[c][e] = 0.0f;
    if (j < n) {
      baton_vec_load<kVec>(x + base + j, v[c]);
      if (r != nullptr) {
        float rv[kVec];
        baton_vec_load<kVec>(r + rbase + j, rv);
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[c][e] += rv[e];
      }
      baton_vec_load<kVec>(scale + j, g[c]);
      if (bias != nullptr) baton_vec_load<kVec>(bias + j, b[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const long long j = ((long long)lane + (long long)c * width) * kVec;
    if (sum != nullptr && j < n) baton_vec_store<kVec>(sum + base + j, v[c]);
#pragma unroll
    for (int e = 0; e < kVec; ++e) s += v[c][e];
  }
  const float mean = baton_row_reduce<kWarp, false>(s) / (float)n;
  float q = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const long long j = ((long long)lane + (long long)c * width) * kVec;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float d = j < n ? v[c][e] - mean : 0.0f;
      q += d * d;
    }
  }
  const float inv_std = 1.0f / sqrtf(baton_row_reduce<kWarp, false>(q) / (float)n + epsilon);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const long long j = ((long long)lane + (long long)c * width) * kVec;
    if (j >= n) continue;
    float o[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) o[e] = (v[c][e] - mean) * inv_std * g[c][e] + b[c][e];
    baton_vec_store<kVec>(y + base + j, o);
  }
  return true;
}

template <bool kWarp, int kVec, typename TX, typename TR, typename TS, typename TB, typename TY,
          typename TSum>
__device__ __forceinline__ void baton_layer_norm(const TX* __restrict__ x, const TR* __restrict__ r,
                                                 const TS* __restrict__ scale,
                                                 const TB* __restrict__ bias, TY* __restrict__ y,
                                                 TSum* __restrict__ sum, long long rows,
                                                 long long r_rows, long long n, float epsilon) {
  const long long row = baton_row_index<kWarp>();
  if (row >= rows) return;  // whole warps only: in block mode the grid has one block per row
  const long long base = row * n;
  // R may hold fewer rows than X (a position embedding shared by the batch): row % r_rows.
  const long long rbase = (r_rows == rows ? row : row % r_rows) * n;
  if (kVec > 1 && baton_vec_aligned<kVec>(x) && baton_vec_aligned<kVec>(r) &&
      baton_vec_aligned<kVec>(scale) && baton_vec_aligned<kVec>(bias) &&
      baton_vec_aligned<kVec>(y) && baton_vec_aligned<kVec>(sum) &&
      baton_layer_norm_cached<kWarp, kVec, kLayerNormVecChunks>(x, r, scale, bias, y, sum, base,
                                                                rbase, n, epsilon)) {
    return;
  }
  if (baton_layer_norm_cached<kWarp, 1, kLayerNormCached>(x, r, scale, bias, y, sum, base, rbase, n,
                                                          epsilon)) {
    return;
  }
  const int lane = baton_row_lane<kWarp>(), width = baton_row_width<kWarp>();
  auto value = [&](long long j) {
    float v = to_f(x[base + j]);
    if (r != nullptr) v += to_f(r[rbase + j]);
    return v;
  };
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
  for (long long j = lane; j < n; j += width) {
    float o = (value(j) - mean) * inv_std * to_f(scale[j]);
    if (bias != nullptr) o += to_f(bias[j]);
    st(&y[base + j], o);
  }
}
