// The middle of Baton's Attention (ops/attention.cpp), between its two GEMMs: for one row of the
// scores S [rows, sk] (float, already scaled), the mask applied, a softmax in float, and NaN
// turned into 0 when asked (a row whose scores are all -inf), written to P. One row per warp or
// block (rows.cuh).
//
// kMask 0: no mask. 1: S + mask. 2: S where mask is nonzero, else `fill` (mask bytes of a bool
// tensor; any nonzero byte keeps the score). The mask's element offset for row `row` is
// baton_offset over the rows' dimensions (the batch dimensions and Sq) with the mask's
// strides (0 where it broadcasts), plus column * col_stride.
#pragma once

#include "baton/rows.cuh"

template <int kMask, bool kWarp, int R, typename TM, typename TP>
__device__ __forceinline__ void baton_attention_softmax(
    const float* __restrict__ s, const TM* __restrict__ mask, TP* __restrict__ p, long long rows,
    long long sk, const long long (&sizes)[R], const long long (&strides)[R], long long col_stride,
    float fill, bool nan_to_zero) {
  const long long row = baton_row_index<kWarp>();
  if (row >= rows) return;  // whole warps only: in block mode the grid has one block per row
  const int lane = baton_row_lane<kWarp>(), width = baton_row_width<kWarp>();
  const long long base = row * sk;
  const long long mask_base = kMask != 0 ? baton_offset<R>(row, sizes, strides) : 0;
  auto score = [&](long long j) {
    float v = s[base + j];
    if constexpr (kMask == 1) v += to_f(mask[mask_base + j * col_stride]);
    if constexpr (kMask == 2) {
      if (!mask[mask_base + j * col_stride]) v = fill;
    }
    return v;
  };
  float m = __int_as_float(0xff800000);
  for (long long j = lane; j < sk; j += width) m = fmaxf(m, score(j));
  m = baton_row_reduce<kWarp, true>(m);
  float total = 0.0f;
  for (long long j = lane; j < sk; j += width) total += expf(score(j) - m);
  const float inv = 1.0f / baton_row_reduce<kWarp, false>(total);
  for (long long j = lane; j < sk; j += width) {
    float v = expf(score(j) - m) * inv;
    if (nan_to_zero && v != v) v = 0.0f;
    st(&p[base + j], v);
  }
}
