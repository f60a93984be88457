// A probe, not part of the build (issue 41): Baton's packed-weight GEMM (kernels/cpu/
// packed_gemm.h) against OpenBLAS's sgemm, one thread, at the GEMM shapes of the CPU models
// (bench/make_cpu_models.py's MLP and BERT-small, BERT-base at sequence 128, ViT-B/16's QKV):
// built against the default build's libraries (cmake --build --preset default first):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/packed_gemm.cpp -o /tmp/packed_gemm \
//       -Wl,--start-group build/src/libbaton_kernels_cpu.a build/src/libbaton_runtime.a \
//       build/src/libbaton_ops.a build/src/libbaton_format.a build/src/libbaton_core.a \
//       -Wl,--end-group -lfmt -lopenblas -lpthread
//   OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX /tmp/packed_gemm
// Results: bench/RESULTS.md, "CPU: Linear with packed constant weights".
#include "kernels/cpu/packed_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "median_us.h"
using namespace baton::kernels::cpu;
int main() {
  printf("isa %s\n", packed_gemm_isa());
  std::mt19937 r(1);
  std::normal_distribution<float> d;
  struct S {
    int m, k, n;
  };
  for (S s : {S{8, 1024, 1024}, S{1, 1024, 1024}, S{64, 256, 256}, S{64, 256, 1024},
              S{64, 1024, 256}, S{128, 768, 768}, S{128, 768, 3072}, S{128, 3072, 768},
              S{197, 768, 2304}, S{13, 100, 77}}) {
    std::vector<float> A(s.m * s.k), B(s.k * s.n), C(s.m * s.n), C2(s.m * s.n),
        P(packed_size(s.k, s.n));
    for (auto& v : A) v = d(r);
    for (auto& v : B) v = d(r);
    pack_weights(B.data(), false, s.k, s.n, s.n, 0, P.data());
    int it = s.m * s.k * s.n > 50e6 ? 100 : 1000;
    double tb = median_us(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.f, A.data(), s.k,
                      B.data(), s.n, 0.f, C.data(), s.n);
        },
        it);
    double tp = median_us(
        [&] {
          packed_gemm(nullptr, s.m, s.n, s.k, A.data(), s.k, P.data(), nullptr, C2.data(), s.n);
        },
        it);
    double err = 0;
    for (size_t i = 0; i < C.size(); ++i) err = std::max(err, (double)std::fabs(C[i] - C2[i]));
    printf(
        "%4d x %4d x %4d  openblas %8.1f us  packed %8.1f us  ratio %.2f  GFLOP/s %.1f  maxdiff "
        "%.2e\n",
        s.m, s.k, s.n, tb, tp, tp / tb, 2.0 * s.m * s.k * s.n / tp / 1e3, err);
  }
}
