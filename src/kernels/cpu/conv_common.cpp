#include "kernels/cpu/conv_common.h"

namespace baton::kernels::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
// As vector_math.cpp: one clone per instruction set, picked when the library loads.
#define BATON_STRIDE2_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BATON_STRIDE2_CLONES
#endif

// A plain loop: the vectorizer turns the stride-2 reads into two vector loads and one permute
// per output vector (a copy, so every clone gives the same bits).
BATON_STRIDE2_CLONES void copy_stride2(const float* src, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; ++i) dst[i] = src[2 * i];
}

}  // namespace baton::kernels::cpu
