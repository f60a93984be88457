// GEMM through OpenBLAS for the CPU kernels (Gemm, MatMul, Conv, ...), single-threaded BLAS
// calls made on the calling thread or split over the Method's ThreadPool.
//
// OpenBLAS 0.3.21's small-matrix path for row-major A * B (no transposes, m * n * k <= 1e6)
// mallocs on every call on CPUs with AVX-512 (its "Cooperlake" and "SkylakeX" kernels), and
// execute() must not allocate; the transposed forms do not. So a small untransposed product
// copies B, transposed, into scratch the kernel allocated at load and multiplies A * (B^T)^T.
// The allocation-counting kernel test covers this on whatever CPU runs it.
//
// OpenBLAS picks its kernels by the CPU's model when the library loads, and a CPU model it does
// not know (a cloud VM that hides it, a CPU newer than the library) gets its oldest x86-64
// kernels: on this project's 2-core VM (AVX-512) OpenBLAS 0.3.21 chose "Prescott" (SSE3), and a
// 4 x 1024 MLP at batch 8 ran 2.4x slower than with its SkylakeX kernels. So when the library
// loads, Baton asks OpenBLAS which kernels it chose and, when they are older than what the CPU
// has (AVX-512: SkylakeX; AVX2 and FMA: Haswell), re-selects them the way OpenBLAS's own
// OPENBLAS_CORETYPE does. A user's OPENBLAS_CORETYPE is left alone, and so is an OpenBLAS built
// for one CPU (no DYNAMIC_ARCH). `baton run` prints the kernels in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/thread_pool.h"

namespace baton::kernels::cpu {

// The OpenBLAS kernels the GEMMs run ("SkylakeX"), and the ones OpenBLAS had chosen itself when
// Baton re-selected them ("Prescott"; empty when it did not).
struct BlasKernels {
  std::string core;
  std::string replaced;
  bool user_choice = false;  // OPENBLAS_CORETYPE was set before Baton loaded
  bool unavailable = false;  // re-selection was tried, but this OpenBLAS has no newer kernels
};
BlasKernels blas_kernels();
// Whether `core` (an OpenBLAS kernel set's name) is one for x86-64 CPUs without AVX2 and FMA.
bool blas_core_before_avx2(std::string_view core);

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
