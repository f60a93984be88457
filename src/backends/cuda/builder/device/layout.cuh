// Data movement: a transpose is a gather through permuted strides; a concatenation reads each
// output element from the input whose slice of the axis it falls in.
#pragma once

#include "baton/common.cuh"

template <int R, typename TIn, typename TOut>
__device__ __forceinline__ void baton_transpose(const TIn* __restrict__ x, TOut* __restrict__ y,
                                                long long n, const long long (&sizes)[R],
                                                const long long (&strides)[R]) {
  baton_for_each(n, [&](long long i) { st(&y[i], to_f(x[baton_offset<R>(i, sizes, strides)])); });
}

// Position of output element i in [outer, total, inner] terms.
struct ConcatIndex {
  long long outer, axis, inner;
};
__device__ __forceinline__ ConcatIndex baton_concat_index(long long i, long long total,
                                                          long long inner) {
  return ConcatIndex{i / (total * inner), (i / inner) % total, i % inner};
}
