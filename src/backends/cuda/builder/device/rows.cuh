// Row-wise kernels (LayerNorm, attention's masked softmax): the threads that work on one row are
// a warp (kWarp: short rows, blockDim.x / 32 rows per block) or the whole block (long rows, one
// row per block). Reductions over a row are done in float.
#pragma once

#include "baton/common.cuh"

template <bool kWarp>
__device__ __forceinline__ long long baton_row_index() {
  return kWarp ? (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)
               : (long long)blockIdx.x;
}
// This thread's first element of the row, and the step between its elements.
template <bool kWarp>
__device__ __forceinline__ int baton_row_lane() {
  return kWarp ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
}
template <bool kWarp>
__device__ __forceinline__ int baton_row_width() {
  return kWarp ? 32 : (int)blockDim.x;
}

// The sum (kMax false) or maximum (kMax true) of `v` over the row's threads, in every thread.
// Block mode synchronizes the block, so every thread of the block must call it.
template <bool kWarp, bool kMax>
__device__ __forceinline__ float baton_row_reduce(float v) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if (kWarp) return v;
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const float identity = kMax ? __int_as_float(0xff800000) : 0.0f;
  v = lane < warps ? partial[lane] : identity;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // `partial` is free for the next reduction
  return v;
}
