// Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, and the global pools) in float. The
// caller splits the input's dimensions into kept ones (K: sizes in the output's memory order and
// their input strides) and reduced ones (M: sizes and input strides), so any input layout is read
// in place and the output is written in memory order. Two shapes of kernel:
//  - baton_reduce_thread: one thread per output element, walking its `count` inputs; coalesced
//    when the innermost kept dimension is the input's innermost (channels-last pools);
//  - baton_reduce_block: one block per output element, threads striding its inputs (reductions
//    along the input's innermost dimension), combined through warp shuffles.
// Max and Min propagate NaN, as the CPU kernel does.
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

template <int K, int M, int OP, typename TIn, typename TOut>
__device__ __forceinline__ void baton_reduce_thread(const TIn* __restrict__ x, TOut* __restrict__ y,
                                                    long long n, const long long (&ksizes)[K],
                                                    const long long (&kstrides)[K],
                                                    const long long (&rsizes)[M],
                                                    const long long (&rstrides)[M],
                                                    long long count) {
  baton_for_each(n, [&](long long i) {
    const long long base = baton_offset<K>(i, ksizes, kstrides);
    float acc = baton_reduce_identity<OP>();
    for (long long j = 0; j < count; ++j) {
      acc = baton_reduce_combine<OP>(acc, to_f(x[base + baton_offset<M>(j, rsizes, rstrides)]));
    }
    st(&y[i], OP == 1 ? acc / (float)count : acc);
  });
}

template <int K, int M, int OP, typename TIn, typename TOut>
__device__ __forceinline__ void baton_reduce_block(const TIn* __restrict__ x, TOut* __restrict__ y,
                                                   long long n, const long long (&ksizes)[K],
                                                   const long long (&kstrides)[K],
                                                   const long long (&rsizes)[M],
                                                   const long long (&rstrides)[M],
                                                   long long count) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (long long o = blockIdx.x; o < n; o += gridDim.x) {
    const long long base = baton_offset<K>(o, ksizes, kstrides);
    float acc = baton_reduce_identity<OP>();
    for (long long j = threadIdx.x; j < count; j += blockDim.x) {
      acc = baton_reduce_combine<OP>(acc, to_f(x[base + baton_offset<M>(j, rsizes, rstrides)]));
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
