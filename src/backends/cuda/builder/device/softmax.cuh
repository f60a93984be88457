// Softmax along one axis: one block per row of `len` elements spaced `inner` apart; the grid has
// outer * inner blocks. Max and sum are reduced in float through warp shuffles.
#pragma once

#include "baton/common.cuh"

template <typename TIn, typename TOut>
__device__ __forceinline__ void baton_softmax(const TIn* __restrict__ x, TOut* __restrict__ y,
                                              long long len, long long inner) {
  __shared__ float partial[32];
  const long long row = blockIdx.x;
  const long long base = (row / inner) * len * inner + (row % inner);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  float m = __int_as_float(0xff800000);
  for (long long j = threadIdx.x; j < len; j += blockDim.x) m = fmaxf(m, to_f(x[base + j * inner]));
  m = warp_max(m);
  if (lane == 0) partial[warp] = m;
  __syncthreads();
  m = lane < warps ? partial[lane] : __int_as_float(0xff800000);
  m = warp_max(m);
  __syncthreads();
  float s = 0.0f;
  for (long long j = threadIdx.x; j < len; j += blockDim.x)
    s += expf(to_f(x[base + j * inner]) - m);
  s = warp_sum(s);
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  s = lane < warps ? partial[lane] : 0.0f;
  s = warp_sum(s);
  const float inv = 1.0f / s;
  for (long long j = threadIdx.x; j < len; j += blockDim.x) {
    st(&y[base + j * inner], expf(to_f(x[base + j * inner]) - m) * inv);
  }
}
