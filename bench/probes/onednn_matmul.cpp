// A probe, not part of the build (issue 41): OpenBLAS's sgemm against oneDNN's matmul with its
// weights reordered once into the layout oneDNN picks (as a kernel would at load), one thread, at
// the GEMM shapes of bench/make_cpu_models.py's MLP and BERT-small. Needs Debian's libdnnl-dev
// (oneDNN 2.6), which scripts/setup.sh does not install yet:
//   g++ -O2 -std=c++17 bench/probes/onednn_matmul.cpp -o /tmp/onednn_matmul -ldnnl -lopenblas
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX /tmp/onednn_matmul
// Results: bench/RESULTS.md, "CPU: oneDNN's matmul against OpenBLAS".
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "median_us.h"
using namespace dnnl;
int main() {
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  std::mt19937 r(1);
  std::normal_distribution<float> d;
  struct S {
    int m, k, n;
    const char* what;
  };
  for (S sh : {S{8, 1024, 1024, "mlp_1024 Linear (batch 8)"}, S{64, 256, 256, "bert_small QKV/out"},
               S{64, 256, 1024, "bert_small FFN up"}, S{64, 1024, 256, "bert_small FFN down"},
               S{1, 1024, 1024, "batch 1 Linear"}}) {
    std::vector<float> A(sh.m * sh.k), B(sh.k * sh.n), C(sh.m * sh.n), C2(sh.m * sh.n);
    for (auto& v : A) v = d(r);
    for (auto& v : B) v = d(r);
    double blas = median_us(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh.m, sh.n, sh.k, 1.f, A.data(),
                      sh.k, B.data(), sh.n, 0.f, C.data(), sh.n);
        },
        2000);
    memory::desc a_md({sh.m, sh.k}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc b_any({sh.k, sh.n}, memory::data_type::f32, memory::format_tag::any);
    memory::desc b_plain({sh.k, sh.n}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc c_md({sh.m, sh.n}, memory::data_type::f32, memory::format_tag::ab);
    matmul::primitive_desc pd(matmul::desc(a_md, b_any, c_md), eng);
    memory bw(pd.weights_desc(), eng);
    memory bp(b_plain, eng, B.data());
    reorder(bp, bw).execute(s, bp, bw);
    s.wait();  // once, at load
    memory am(a_md, eng, A.data()), cm(c_md, eng, C2.data());
    // One matmul call on A and C with weights `w`, waited for.
    auto timed = [&](const matmul& mm, const memory& w) {
      return median_us(
          [&] {
            mm.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, cm}});
            s.wait();
          },
          2000);
    };
    const double dnn = timed(matmul(pd), bw);
    // plain weights (no reorder) for comparison
    matmul::primitive_desc pd2(matmul::desc(a_md, b_plain, c_md), eng);
    const double dnn_plain = timed(matmul(pd2), bp);
    // The rows given at each call (DNNL_RUNTIME_DIM_VAL), as a dynamic batch or sequence needs:
    // which implementation oneDNN takes then, and whether it still takes reordered weights.
    double dnn_runtime = -1;
    std::string runtime_impl = "none";
    try {
      memory::desc a_rt({DNNL_RUNTIME_DIM_VAL, sh.k}, memory::data_type::f32,
                        memory::format_tag::ab);
      memory::desc c_rt({DNNL_RUNTIME_DIM_VAL, sh.n}, memory::data_type::f32,
                        memory::format_tag::ab);
      matmul::primitive_desc pd3(matmul::desc(a_rt, b_any, c_rt), eng);
      runtime_impl = pd3.impl_info_str();
      memory bw3(pd3.weights_desc(), eng);
      reorder(bp, bw3).execute(s, bp, bw3);
      s.wait();
      dnn_runtime = timed(matmul(pd3), bw3);
    } catch (const dnnl::error& e) {
      runtime_impl = e.what();
    }
    double err = 0;
    for (size_t i = 0; i < C.size(); ++i) err = std::max(err, (double)std::abs(C[i] - C2[i]));
    std::printf(
        "%-28s m=%3d k=%4d n=%4d  openblas %7.1f us  onednn reordered %7.1f us (%s), plain %7.1f "
        "us, rows at run time %7.1f us (%s)  maxdiff %.2g\n",
        sh.what, sh.m, sh.k, sh.n, blas, dnn, pd.impl_info_str(), dnn_plain, dnn_runtime,
        runtime_impl.c_str(), err);
  }
}
