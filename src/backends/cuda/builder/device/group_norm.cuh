// InstanceNormalization and GroupNormalization: X [N, C, spatial...] seen as rows of
// `per_group` channels x `spatial` positions, one row per (n, group) (InstanceNormalization: one
// channel a group), each taken by a warp or a block (rows.cuh). Mean and variance in float, two
// passes over the row (so nothing cancels), then y = (x - mean) / sqrt(var + epsilon) * scale +
// bias, scale and bias per channel, or per group (kPerGroup: GroupNormalization-18).
#pragma once

#include "baton/rows.cuh"

template <bool kWarp, bool kPerGroup, typename TX, typename TS, typename TB, typename TY>
__device__ __forceinline__ void baton_group_norm(const TX* __restrict__ x,
                                                 const TS* __restrict__ scale,
                                                 const TB* __restrict__ bias, TY* __restrict__ y,
                                                 long long rows, long long groups,
                                                 long long per_group, long long spatial,
                                                 float epsilon) {
  const long long row = baton_row_index<kWarp>();
  if (row >= rows) return;  // whole warps only: in block mode the grid has one block per row
  const int lane = baton_row_lane<kWarp>(), width = baton_row_width<kWarp>();
  const long long n = per_group * spatial, base = row * n, g = row % groups;
  float s = 0.0f;
  for (long long j = lane; j < n; j += width) s += to_f(x[base + j]);
  const float mean = baton_row_reduce<kWarp, false>(s) / (float)n;
  float q = 0.0f;
  for (long long j = lane; j < n; j += width) {
    const float d = to_f(x[base + j]) - mean;
    q += d * d;
  }
  const float inv_std = 1.0f / sqrtf(baton_row_reduce<kWarp, false>(q) / (float)n + epsilon);
  for (long long j = lane; j < n; j += width) {
    const long long c = kPerGroup ? g : g * per_group + j / spatial;
    st(&y[base + j], (to_f(x[base + j]) - mean) * inv_std * to_f(scale[c]) + to_f(bias[c]));
  }
}
