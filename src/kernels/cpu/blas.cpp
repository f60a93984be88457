#include "kernels/cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "baton/core/dtype.h"

// OpenBLAS's own (exported by its DYNAMIC_ARCH builds): gotoblas_dynamic_init chooses the kernels
// (OPENBLAS_CORETYPE when set, else by the CPU's model) unless some are chosen; quit forgets
// them. Weak: an OpenBLAS built for one CPU has neither, and then nothing is re-selected.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace baton::kernels::cpu {

bool blas_core_before_avx2(std::string_view core) {
  for (std::string_view old :
       {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge", "Katmai",
        "Coppermine", "Northwood", "Banias", "Atom", "Athlon", "Opteron", "Opteron_SSE3",
        "Barcelona", "Bobcat", "Nano", "Generic"}) {
    if (core == old) return true;
  }
  return false;
}

namespace {

// Runs when the library loads (after OpenBLAS's own initialization, a library it depends on): see
// blas.h. Between quit and init OpenBLAS has no kernels, so a thread of the process inside the
// same OpenBLAS at that moment would fail; at load, before main() or while Python imports the
// module, no Baton thread exists, and another library sharing the system OpenBLAS and calling it
// from a thread of its own during that import is the one case this cannot rule out.
std::string& replaced_kernels() {
  static std::string replaced;
  return replaced;
}
bool& reselection_unavailable() {
  static bool unavailable = false;
  return unavailable;
}
// OpenBLAS's own variable, read to leave a user's choice alone; not a Baton knob (those are typed
// options, DESIGN.md section 9).
const bool kUserChoice = std::getenv("OPENBLAS_CORETYPE") != nullptr;
const bool kKernelsSelected = [] {
  if (kUserChoice) return false;  // the user's choice
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return false;
  const char* chosen = openblas_get_corename();
  if (chosen == nullptr || !blas_core_before_avx2(chosen)) return false;
  __builtin_cpu_init();
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    better = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    better = "Haswell";
  }
  if (better == nullptr) return false;
  const std::string before = chosen;
  // OpenBLAS reads OPENBLAS_CORETYPE only inside gotoblas_dynamic_init: set for that call and
  // removed after it, so that child processes (and another OpenBLAS loaded later) see the
  // environment as the user left it.
  setenv("OPENBLAS_CORETYPE", better, 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  // An OpenBLAS built without those kernels (NO_AVX512, a DYNAMIC_LIST) maps the name to what it
  // has: then nothing better was found, and nothing is reported as replaced.
  const char* now = openblas_get_corename();
  if (now == nullptr || blas_core_before_avx2(now)) {
    reselection_unavailable() = true;
    return false;
  }
  replaced_kernels() = before;
  return true;
}();

// Where OpenBLAS takes its allocating small-matrix path (kernel/x86_64 small-matrix permit);
// a single row goes to GEMV instead.
bool small_untransposed(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return !trans_a && !trans_b && m != 1 &&
         static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <= 1e6;
}

void call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
          const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemv(CBLAS_TRANSPOSE t, int rows, int cols, float alpha, const float* a, int lda,
          const float* x, int incx, float beta, float* y) {
  cblas_sgemv(CblasRowMajor, t, rows, cols, alpha, a, lda, x, incx, beta, y, 1);
}
void gemv(CBLAS_TRANSPOSE t, int rows, int cols, double alpha, const double* a, int lda,
          const double* x, int incx, double beta, double* y) {
  cblas_dgemv(CblasRowMajor, t, rows, cols, alpha, a, lda, x, incx, beta, y, 1);
}

}  // namespace

BlasKernels blas_kernels() {
  (void)kKernelsSelected;
  const char* core = openblas_get_corename();
  return {core != nullptr ? core : "", replaced_kernels(), kUserChoice, reselection_unavailable()};
}

size_t gemm_scratch(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return small_untransposed(trans_a, trans_b, m, n, k) ? static_cast<size_t>(k * n) : 0;
}

size_t gemm_scratch_bound(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  if (trans_a || trans_b || m < 2) return 0;
  // A smaller product m' n' k' <= 1e6 with m' >= 2 copies k' n' <= min(k n, 1e6 / 2) elements.
  constexpr int64_t kLargestCopy = 500000;
  return std::max(gemm_scratch(false, false, m, n, k),
                  static_cast<size_t>(std::min(n * k, kLargestCopy)));
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc, T* scratch) {
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  if (m == 1) {
    // A single row (a classifier head, one token): OpenBLAS's GEMV, about 4x faster here than its
    // GEMM with M = 1. C's row is op(B)^T times A's row, which is strided when A is transposed.
    const int incx = trans_a ? static_cast<int>(lda) : 1;
    // beta = 0 must ignore C's old contents, NaN included (newer OpenBLAS scales by beta,
    // which keeps a NaN).
    if (beta == T(0)) std::fill(c, c + n, T(0));
    if (trans_b) {  // B is [n, k]
      gemv(CblasNoTrans, static_cast<int>(n), static_cast<int>(k), alpha, b, static_cast<int>(ldb),
           a, incx, beta, c);
    } else {  // B is [k, n]
      gemv(CblasTrans, static_cast<int>(k), static_cast<int>(n), alpha, b, static_cast<int>(ldb), a,
           incx, beta, c);
    }
    return;
  }
  if (small_untransposed(trans_a, trans_b, m, n, k)) {
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t j = 0; j < n; ++j) scratch[j * k + r] = b[r * ldb + j];
    }
    call(ta, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
         static_cast<int>(lda), scratch, static_cast<int>(k), beta, c, static_cast<int>(ldc));
    return;
  }
  call(ta, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
       static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
       static_cast<int>(ldc));
}

template <typename T>
void parallel_gemm(runtime::ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                   int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
                   T* c, int64_t ldc, T* scratch) {
  const bool split_n = n >= m;
  const int64_t extent = split_n ? n : m;
  const double other = static_cast<double>(split_n ? m : n) * static_cast<double>(k);
  // The smallest of `p` even pieces has extent / p of the split dimension.
  int64_t pieces = pool == nullptr ? 1 : std::min<int64_t>(pool->size(), extent);
  while (pieces > 1 && static_cast<double>(extent / pieces) * other < kParallelGemmWork) --pieces;
  if (pieces <= 1) {
    gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, scratch);
    return;
  }
  pool->parallel_for(pieces, [&](int64_t i, unsigned) {
    const int64_t lo = i * extent / pieces, hi = (i + 1) * extent / pieces;
    if (split_n) {
      gemm<T>(trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb,
              beta, c + lo, ldc, nullptr);
    } else {
      gemm<T>(trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb,
              beta, c + lo * ldc, ldc, nullptr);
    }
  });
}

template void parallel_gemm<float>(runtime::ThreadPool*, bool, bool, int64_t, int64_t, int64_t,
                                   float, const float*, int64_t, const float*, int64_t, float,
                                   float*, int64_t, float*);
template void parallel_gemm<double>(runtime::ThreadPool*, bool, bool, int64_t, int64_t, int64_t,
                                    double, const double*, int64_t, const double*, int64_t, double,
                                    double*, int64_t, double*);

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t, float*);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t, double*);

template <typename From, typename To>
void convert(const From* src, To* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = To(static_cast<float>(src[i]));
}

template void convert<Half, float>(const Half*, float*, int64_t);
template void convert<BFloat16, float>(const BFloat16*, float*, int64_t);
template void convert<float, Half>(const float*, Half*, int64_t);
template void convert<float, BFloat16>(const float*, BFloat16*, int64_t);

}  // namespace baton::kernels::cpu
