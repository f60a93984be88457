// The packed-weight GEMM (kernels/cpu/packed_gemm.h) and the Linear kernel that uses it for a
// constant W, against double-precision references, across the kernel's tile, panel and depth
// edges, on several thread counts.
#include "kernels/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "runtime/thread_pool.h"

namespace baton::testing {
namespace {

std::vector<float> normals(std::mt19937& rng, int64_t count) {
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = d(rng);
  return v;
}

// Packs columns [col, col + n) of a W of `ld` columns (or, transposed, rows) and multiplies, with
// a bias for odd row counts; checks every element against a double product within float's
// accumulation bound.
void check_product(std::mt19937& rng, runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k,
                   bool trans, int64_t col) {
  const int64_t ld_w = trans ? k + 3 : n + col + 2;  // W wider than the product, read in place
  const int64_t w_rows = trans ? n + col + 2 : k;
  const int64_t lda = k + 5, ldc = n + 4;
  const std::vector<float> a = normals(rng, m * lda);
  const std::vector<float> w = normals(rng, w_rows * ld_w);
  const std::vector<float> bias = normals(rng, n);
  const float* bias_ptr = m % 2 == 1 ? bias.data() : nullptr;
  std::vector<float> packed(static_cast<size_t>(kernels::cpu::packed_size(k, n)), NAN);
  kernels::cpu::pack_weights(w.data(), trans, k, n, ld_w, col, packed.data());
  // C's padding columns hold a pattern the product must leave alone.
  std::vector<float> c(static_cast<size_t>(m * ldc), 7.0f);
  kernels::cpu::packed_gemm(pool, m, n, k, a.data(), lda, packed.data(), bias_ptr, c.data(), ldc);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[static_cast<size_t>(i * ldc + j)];
      if (j >= n) {
        ASSERT_EQ(got, 7.0f) << "wrote past n at " << i << ", " << j;
        continue;
      }
      double want = bias_ptr ? bias_ptr[j] : 0.0;
      double magnitude = std::abs(want);
      for (int64_t p = 0; p < k; ++p) {
        const double wv = trans ? w[static_cast<size_t>((col + j) * ld_w + p)]
                                : w[static_cast<size_t>(p * ld_w + col + j)];
        const double av = a[static_cast<size_t>(i * lda + p)];
        want += av * wv;
        magnitude += std::abs(av * wv);
      }
      // k fused multiply-adds in float: at most k + 1 roundings of 2^-24 relative to the
      // magnitude.
      const double bound = static_cast<double>(k + 1) * std::ldexp(1.0, -24) * magnitude + 1e-30;
      ASSERT_LE(std::abs(got - want), bound)
          << "m " << m << " n " << n << " k " << k << " trans " << trans << " at " << i << ", " << j
          << ": " << got << " against " << want;
    }
  }
}

TEST(PackedGemm, MatchesADoubleProductAcrossTileRowsPanelColumnsAndDepthBlocks) {
  if (!kernels::cpu::packed_gemm_available()) {
    GTEST_SKIP() << "this CPU has neither AVX2 with FMA nor AVX-512: Linear keeps OpenBLAS";
  }
  std::mt19937 rng(3);
  // Rows around both tile heights (6 and 12) and over many 120-row blocks (an A over 1 MB at the
  // deeper depths), columns around both
  // panel widths (16 and 32), depths around the 256-row block.
  for (int64_t m : {1, 5, 6, 7, 12, 13, 25, 1100}) {
    for (int64_t n : {1, 15, 16, 17, 32, 33, 70}) {
      for (int64_t k : {1, 9, 256, 257, 530}) {
        for (bool trans : {false, true}) {
          check_product(rng, nullptr, m, n, k, trans, (m + n) % 3);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(PackedGemm, GivesTheSameBitsOnEveryThreadCount) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(4);
  // Many panels (cut by panel), few (cut by rows too), and many rows (cut in 120-row blocks
  // that each go through every panel).
  for (auto [m, n, k] : {std::array<int64_t, 3>{100, 300, 333}, {61, 40, 700}, {1500, 96, 384}}) {
    const std::vector<float> a = normals(rng, m * k), w = normals(rng, k * n);
    std::vector<float> packed(static_cast<size_t>(kernels::cpu::packed_size(k, n)));
    kernels::cpu::pack_weights(w.data(), false, k, n, n, 0, packed.data());
    std::vector<float> one(static_cast<size_t>(m * n));
    kernels::cpu::packed_gemm(nullptr, m, n, k, a.data(), k, packed.data(), nullptr, one.data(), n);
    for (unsigned threads : {2u, 3u}) {
      runtime::ThreadPool pool(threads);
      std::vector<float> many(one.size(), NAN);
      const uint64_t before = pool.dispatched();
      kernels::cpu::packed_gemm(&pool, m, n, k, a.data(), k, packed.data(), nullptr, many.data(),
                                n);
      EXPECT_GT(pool.dispatched(), before) << "the product was not split over the pool";
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
          << m << " x " << n << " x " << k << " on " << threads << " threads";
    }
  }
}

// A Linear whose W is a constant of the program packs it at create: afterwards it reads the
// packed copy, not W (which a program never changes), and gives the product of the W it packed:
// with every output of a split, or W transposed with a fused Relu (a split Linear has no
// activation and no transW), bias applied, at every row count of a dynamic call.
TEST(PackedGemm, LinearPacksAConstantWeightAtCreate) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(5);
  for (bool trans : {false, true}) {
    const HostTensor x = random_floats(rng, {3, 20, 40});
    const HostTensor w = trans ? random_floats(rng, {70, 40}) : random_floats(rng, {40, 70});
    const HostTensor b = random_floats(rng, {70});
    auto make = [&](bool constant) {
      auto t = std::make_unique<OpTester>("Linear", "node_1", kTestOpset, "baton");
      t->input(x).input(w).input(b).attr("transW", int64_t{trans ? 1 : 0});
      if (trans) {
        t->attr("activation", std::string("Relu")).dynamic();
      } else {
        t->attr("splits", std::vector<int64_t>{30, 33, 7}).outputs(3).dynamic();
      }
      if (constant) t->constant_input(1);
      return t;
    };
    const size_t outputs = trans ? 1 : 3;
    auto packed = make(true), plain = make(false);
    BATON_ASSERT_OK(packed->run());
    BATON_ASSERT_OK(plain->run());
    for (size_t o = 0; o < outputs; ++o) {
      expect_norm_close(packed->output(o), to_double(plain->output(o)));
    }
    // W's storage changed after create: the plain kernel reads the new values, the packed one
    // still multiplies by the W it packed.
    const std::vector<double> before = to_double(packed->output(0));
    packed->rebind_input(1, random_floats(rng, w.sizes));
    BATON_ASSERT_OK(packed->rerun());
    EXPECT_EQ(to_double(packed->output(0)), before);
    plain->rebind_input(1, random_floats(rng, w.sizes));
    BATON_ASSERT_OK(plain->rerun());
    EXPECT_NE(to_double(plain->output(0)), before);
    // Fewer rows (dynamic shapes): the product of the packed W with the new X.
    auto fresh = make(false);
    const HostTensor small_x = random_floats(rng, {2, 7, 40});
    BATON_ASSERT_OK(packed->resize({small_x, w, b}));
    BATON_ASSERT_OK(packed->rerun());
    fresh->rebind_input(0, small_x);
    BATON_ASSERT_OK(fresh->run());
    for (size_t o = 0; o < outputs; ++o) {
      ASSERT_EQ(packed->output(o).sizes, fresh->output(o).sizes);
      expect_norm_close(packed->output(o), to_double(fresh->output(o)));
    }
  }
}

// A MatMul whose B is a 2-D constant (a Linear without bias) packs B at create likewise: the
// batches of A as one tall product, A as a single row (1-D), and fewer rows after a resize.
TEST(PackedGemm, MatMulPacksAConstantTwoDimensionalB) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(6);
  for (std::vector<int64_t> a_sizes : {std::vector<int64_t>{3, 5, 40}, {40}}) {
    const HostTensor a = random_floats(rng, a_sizes), b = random_floats(rng, {40, 70});
    auto make = [&](bool constant) {
      auto t = std::make_unique<OpTester>("MatMul");
      t->input(a).input(b).dynamic();
      if (constant) t->constant_input(1);
      return t;
    };
    auto packed = make(true), plain = make(false);
    BATON_ASSERT_OK(packed->run());
    BATON_ASSERT_OK(plain->run());
    expect_norm_close(packed->output(), to_double(plain->output()));
    const std::vector<double> before = to_double(packed->output());
    packed->rebind_input(1, random_floats(rng, b.sizes));
    BATON_ASSERT_OK(packed->rerun());
    EXPECT_EQ(to_double(packed->output()), before) << "B was read at run, not packed at create";
    if (a_sizes.size() == 3) {
      const HostTensor small = random_floats(rng, {2, 3, 40});
      BATON_ASSERT_OK(packed->resize({small, b}));
      BATON_ASSERT_OK(packed->rerun());
      auto fresh = make(false);
      fresh->rebind_input(0, small);
      BATON_ASSERT_OK(fresh->run());
      ASSERT_EQ(packed->output().sizes, fresh->output().sizes);
      expect_norm_close(packed->output(), to_double(fresh->output()));
    }
  }
}

// A packed copy the host cannot hold is an OutOfMemory error naming the node and what it was
// for, not a std::bad_alloc out of the loader (2^31 x 2^31 floats: W itself is never read, the
// size is refused first).
TEST(PackedGemm, ACopyTooLargeForTheHostIsAnErrorNamingTheNode) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  runtime::KernelCall call;
  call.def = ops::op_registry().find("Linear", "baton", 1);
  call.node_name = "huge_projection";
  const int64_t huge = int64_t{1} << 31;
  const float w = 1.0f;
  kernels::cpu::PackedWeights packed;
  const std::vector<int64_t> splits = {huge};
  const Status st = packed.pack(call, &w, false, huge, huge, splits);
  EXPECT_EQ(st.code(), Error::OutOfMemory) << st.message();
  EXPECT_NE(st.message().find("Linear (node 'huge_projection')"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("packed copy of the weights"), std::string::npos) << st.message();
  EXPECT_TRUE(packed.empty());
}

}  // namespace
}  // namespace baton::testing
