// GEMM through OpenBLAS for the CPU kernels (Gemm, MatMul, Conv, ...), single-threaded BLAS
// calls made on the calling thread or split over the Method's ThreadPool.
//
// OpenBLAS 0.3.21's small-matrix path for row-major A * B (no transposes, m * n * k <= 1e6)
// mallocs on every call on CPUs with AVX-512 (its "Cooperlake" and "SkylakeX" kernels), and
// execute() must not allocate; the transposed forms do not. So a small untransposed product
// copies B, transposed, into scratch the kernel allocated at load and multiplies A * (B^T)^T.
// The allocation-counting kernel test covers this on whatever CPU runs it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/thread_pool.h"

namespace baton::kernels::cpu {

// Scratch elements gemm() needs for these arguments (0 when none).
size_t gemm_scratch(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);
// The most gemm_scratch over every product of at most these sizes: what a kernel of a dynamic
// call (runtime::KernelCall::dynamic) reserves, since OpenBLAS's small-matrix path, which needs a
// copy of B, may serve a smaller product when the created one is too large for it.
size_t gemm_scratch_bound(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);

// Row-major C[m, n] = alpha * op(A) * op(B) + beta * C, for T = float or double. k > 0 and all
// sizes fit BLAS's int (the kernels check at load). `scratch` holds gemm_scratch(...) elements.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc, T* scratch);

// gemm() split over `pool`'s threads (null or a pool of one: the calling thread): the larger of
// op(A)'s rows and op(B)'s columns is cut into even pieces, each at least kParallelGemmWork
// multiply-adds (above OpenBLAS's small-matrix limit, so a split piece needs no scratch; a product
// too small to split runs as gemm() with `scratch`). Each element of C is still one BLAS dot
// product, but OpenBLAS may block a piece differently, so the last bits can differ from gemm().
inline constexpr double kParallelGemmWork = 1.5e6;
template <typename T>
void parallel_gemm(runtime::ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                   int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
                   T* c, int64_t ldc, T* scratch);

// Runs task(i, slot) for i in [0, count) over `pool`, or in order on the calling thread when it
// is null.
template <typename F>
void parallel_for(runtime::ThreadPool* pool, int64_t count, F&& task) {
  if (pool != nullptr) {
    pool->parallel_for(count, task);
  } else {
    for (int64_t i = 0; i < count; ++i) task(i, 0u);
  }
}

// The threads a kernel made with this call can use at once (its per-thread scratch count).
inline unsigned pool_slots(const runtime::ThreadPool* pool) { return pool ? pool->size() : 1; }

// dst[i] = S(src[i]) conversions between a storage type and float, for the float16 and bfloat16
// GEMM paths.
template <typename From, typename To>
void convert(const From* src, To* dst, int64_t n);

}  // namespace baton::kernels::cpu
