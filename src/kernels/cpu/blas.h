// GEMM through OpenBLAS for the CPU kernels (Gemm, MatMul), on the calling thread.
//
// OpenBLAS 0.3.21's small-matrix path for row-major A * B (no transposes, m * n * k <= 1e6)
// mallocs on every call on CPUs with AVX-512 (its "Cooperlake" and "SkylakeX" kernels), and
// execute() must not allocate; the transposed forms do not. So a small untransposed product
// copies B, transposed, into scratch the kernel allocated at load and multiplies A * (B^T)^T.
// The allocation-counting kernel test covers this on whatever CPU runs it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton::kernels::cpu {

// Scratch elements gemm() needs for these arguments (0 when none).
size_t gemm_scratch(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);

// Row-major C[m, n] = alpha * op(A) * op(B) + beta * C, for T = float or double. k > 0 and all
// sizes fit BLAS's int (the kernels check at load). `scratch` holds gemm_scratch(...) elements.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc, T* scratch);

// dst[i] = S(src[i]) conversions between a storage type and float, for the float16 and bfloat16
// GEMM paths.
template <typename From, typename To>
void convert(const From* src, To* dst, int64_t n);

}  // namespace baton::kernels::cpu
