// What Gemm and MatMul share: the BLAS type of a storage type, and the buffers that carry float16
// and bfloat16 operands through float GEMMs (sized at create, so run() allocates nothing).
#pragma once

#include <climits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"

namespace baton::kernels::cpu {

// OpenBLAS's sgemm for float, float16 and bfloat16 (converted to float), dgemm for double.
template <typename S>
using blas_t = std::conditional_t<std::is_same_v<S, double>, double, float>;

// An operand as the BLAS type: the tensor itself, or a converted copy in `buffer` (scratch
// reserved at create for the tensor's element count).
template <typename S>
const blas_t<S>* as_blas(const TensorView& t, const runtime::ScratchRef& buffer) {
  if constexpr (std::is_same_v<S, blas_t<S>>) {
    return t.data_as<const S>();
  } else {
    float* copy = buffer.data<float>();
    convert<S, float>(t.data_as<const S>(), copy, t.numel());
    return copy;
  }
}

inline Status check_blas_range(const runtime::KernelCall& call, int64_t m, int64_t n, int64_t k) {
  BATON_CHECK_OR_RETURN(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, NotSupported,
                        "{}: M={}, N={}, K={} exceed the BLAS int range", call.describe(), m, n, k);
  return Status();
}

}  // namespace baton::kernels::cpu
