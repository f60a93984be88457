// Data movement: a concatenation reads each output element from the input whose slice of the axis
// it falls in.
#pragma once

#include "baton/common.cuh"

// Position of output element i in [outer, total, inner] terms.
struct ConcatIndex {
  long long outer, axis, inner;
};
__device__ __forceinline__ ConcatIndex baton_concat_index(long long i, long long total,
                                                          long long inner) {
  return ConcatIndex{i / (total * inner), (i / inner) % total, i % inner};
}
