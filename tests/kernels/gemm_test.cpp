// Gemm and MatMul against naive double-precision GEMM references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kernels/cpu/blas.h"
#include "kernels/kernel_test_util.h"
#include "runtime/thread_pool.h"

namespace baton::testing {
namespace {

// Y[i][j] = alpha * sum_k A'[i][k] B'[k][j] + beta * C[i][j] (C broadcast), in double.
std::vector<double> gemm_reference(const HostTensor& a, const HostTensor& b, const HostTensor* c,
                                   bool trans_a, bool trans_b, double alpha, double beta) {
  const int64_t m = trans_a ? a.sizes[1] : a.sizes[0];
  const int64_t k = trans_a ? a.sizes[0] : a.sizes[1];
  const int64_t n = trans_b ? b.sizes[0] : b.sizes[1];
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const std::vector<int64_t> out = {m, n};
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = trans_a ? pa[p * m + i] : pa[i * k + p];
        const double bv = trans_b ? pb[j * k + p] : pb[p * n + j];
        acc += av * bv;
      }
      double v = alpha * acc;
      if (c != nullptr) {
        const int64_t idx[2] = {i, j};
        v += beta * c->data<float>()[broadcast_offset(idx, c->sizes)];
      }
      y[static_cast<size_t>(i * n + j)] = v;
    }
  }
  return y;
}

struct GemmCase {
  int64_t m, k, n;
};

HostTensor absolute(const HostTensor& t) {
  HostTensor out = t;
  float* p = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) p[i] = std::fabs(p[i]);
  return out;
}

// Each element within float32's worst-case error for its sum: (k + 3) roundings of at most
// 2^-24 each, relative to the same sum over absolute values (a dot product that cancels to almost
// nothing is only as exact as its terms were large; ‖out − ref‖ / ‖ref‖ would blame the kernel
// for the order its BLAS adds in, which differs between CPUs).
void expect_gemm_close(const HostTensor& out, const std::vector<double>& ref,
                       const std::vector<double>& magnitude, int64_t k) {
  ASSERT_EQ(static_cast<size_t>(out.numel()), ref.size());
  const double unit = std::ldexp(1.0, -24);
  const float* p = out.data<float>();
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_LE(std::fabs(p[i] - ref[i]), double(k + 3) * unit * magnitude[i] + 1e-30)
        << "element " << i << ": " << p[i] << " against " << ref[i];
  }
}

TEST(Gemm, MatchesReferenceOverShapesTransposesAndC) {
  std::mt19937 rng(1234);
  const GemmCase cases[] = {{1, 1, 1},  {3, 7, 5},  {17, 33, 7}, {33, 17, 65},
                            {64, 1, 3}, {1, 65, 1}, {7, 3, 1},   {1, 37, 23}};
  const std::pair<double, double> scalings[] = {{1.0, 1.0}, {0.5, -2.0}, {1.7, 0.0}};
  int runs = 0;
  for (const GemmCase& gc : cases) {
    const int64_t m = gc.m, k = gc.k, n = gc.n;
    const std::vector<std::vector<int64_t>> c_shapes = {{m, n}, {n}, {1, n}, {m, 1},
                                                        {1, 1}, {1}, {}};
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (int ci = -1; ci < static_cast<int>(c_shapes.size()); ++ci) {
          for (const auto& [alpha, beta] : scalings) {
            HostTensor a =
                random_floats(rng, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
            HostTensor b =
                random_floats(rng, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
            std::unique_ptr<HostTensor> c;
            if (ci >= 0) c = std::make_unique<HostTensor>(random_floats(rng, c_shapes[ci]));
            SCOPED_TRACE(::testing::Message()
                         << "M=" << m << " K=" << k << " N=" << n << " transA=" << ta
                         << " transB=" << tb << " C=" << (c ? shape_str(c->sizes) : "none")
                         << " alpha=" << alpha << " beta=" << beta);
            const std::vector<double> ref = gemm_reference(a, b, c.get(), ta, tb, alpha, beta);
            const HostTensor abs_c = c ? absolute(*c) : HostTensor();
            const std::vector<double> magnitude =
                gemm_reference(absolute(a), absolute(b), c ? &abs_c : nullptr, ta, tb,
                               std::fabs(alpha), std::fabs(beta));
            OpTester t("Gemm");
            t.input(a).input(b);
            if (c) t.input(*c);
            t.attr("alpha", alpha).attr("beta", beta).attr("transA", ta).attr("transB", tb);
            BATON_ASSERT_OK(t.run());
            ASSERT_EQ(t.output().sizes, (std::vector<int64_t>{m, n}));
            expect_gemm_close(t.output(), ref, magnitude, k);
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_EQ(runs, 8 * 2 * 2 * 8 * 3);
}

TEST(Gemm, AbsentCAsNoneInput) {
  std::mt19937 rng(7);
  HostTensor a = random_floats(rng, {5, 3});
  HostTensor b = random_floats(rng, {3, 4});
  OpTester t("Gemm");
  t.input(a).input(b).absent_input().attr("alpha", 2.0);
  BATON_ASSERT_OK(t.run());
  expect_norm_close(t.output(), gemm_reference(a, b, nullptr, false, false, 2.0, 1.0));
}

TEST(Gemm, EmptyDimensions) {
  std::mt19937 rng(8);
  // K = 0: Y = beta * C, or zeros without C.
  {
    HostTensor c = random_floats(rng, {3, 4});
    OpTester t("Gemm");
    t.input(HostTensor(DType::Float32, {3, 0})).input(HostTensor(DType::Float32, {0, 4}));
    t.input(c).attr("beta", 0.5);
    BATON_ASSERT_OK(t.run());
    std::vector<double> ref;
    for (float v : c.values<float>()) ref.push_back(0.5 * v);
    expect_close(t.output(), ref);
  }
  {
    OpTester t("Gemm");
    t.input(HostTensor(DType::Float32, {3, 0})).input(HostTensor(DType::Float32, {0, 4}));
    BATON_ASSERT_OK(t.run());
    expect_close(t.output(), std::vector<double>(12, 0.0));
  }
  {
    OpTester t("Gemm");
    t.input(HostTensor(DType::Float32, {0, 5})).input(random_floats(rng, {5, 4}));
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{0, 4}));
  }
}

TEST(Gemm, Errors) {
  expect_error(OpTester("Gemm")
                   .input(HostTensor(DType::Float32, {2, 3, 4}))
                   .input(HostTensor(DType::Float32, {4, 5}))
                   .infer(),
               Error::InvalidArgument, "Gemm", "2-D");
  expect_error(OpTester("Gemm")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Float32, {4, 5}))
                   .infer(),
               Error::InvalidArgument, "Gemm",
               "inner dimensions differ: op(A) is [2, 3] and op(B) is [4, 5]");
  expect_error(OpTester("Gemm")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Float32, {5, 3}))
                   .attr("transB", 1)
                   .input(HostTensor(DType::Float32, {3, 5}))
                   .infer(),
               Error::InvalidArgument, "Gemm", "does not broadcast");
  // ONNX allows integer Gemm; Baton's CPU kernel does not take it.
  expect_error(OpTester("Gemm")
                   .input(HostTensor(DType::Int32, {2, 3}))
                   .input(HostTensor(DType::Int32, {3, 5}))
                   .run(),
               Error::NotSupported, "Gemm", "int32");
  expect_error(OpTester("Gemm")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Int64, {3, 5}))
                   .infer(),
               Error::InvalidArgument, "Gemm", "int64");
}

// numpy.matmul in double.
std::vector<double> matmul_reference(const HostTensor& a, const HostTensor& b,
                                     const std::vector<int64_t>& out_sizes) {
  std::vector<int64_t> as = a.sizes, bs = b.sizes;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  std::vector<int64_t> batch(std::max(a_batch.size(), b_batch.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t la = batch.size() - a_batch.size(), lb = batch.size() - b_batch.size();
    const int64_t da = i < la ? 1 : a_batch[i - la], db = i < lb ? 1 : b_batch[i - lb];
    batch[i] = da == 1 ? db : da;
  }
  const int64_t batches = numel_of(batch);
  std::vector<double> y;
  for (int64_t bi = 0; bi < batches; ++bi) {
    const std::vector<int64_t> index = unravel(bi, batch);
    const int64_t ao = broadcast_offset(index, a_batch) * m * k;
    const int64_t bo = broadcast_offset(index, b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<double>(a.data<float>()[ao + i * k + p]) *
                 b.data<float>()[bo + p * n + j];
        }
        y.push_back(acc);
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(y.size()), numel_of(out_sizes));
  return y;
}

struct MatMulCase {
  std::vector<int64_t> a, b, out;
};

// Linear's and FusedConv's fused activation (ops/activation.h): an unknown name, the wrong number
// of parameters, a non-finite one, and an activation on split outputs are refused by name.
TEST(GemmOps, BadActivationsAreRefusedByName) {
  auto linear = [](const std::string& act, std::vector<double> params) {
    OpTester t("Linear", "node_1", kTestOpset, "baton");
    t.input(HostTensor(DType::Float32, {2, 4})).input(HostTensor(DType::Float32, {4, 3}));
    t.attr("activation", act);
    t.attr("activation_params", std::move(params));
    return t.infer();
  };
  expect_error(linear("Swish", {}), Error::InvalidArgument, "Linear",
               "activation 'Swish' is not one Baton fuses; use Gelu, GeluTanh, Silu or a "
               "unary elementwise op");
  expect_error(linear("Silu", {1.0}), Error::InvalidArgument, "Linear",
               "activation 'Silu' takes no activation_params, got 1");
  expect_error(linear("IsNaN", {}), Error::InvalidArgument, "Linear", "not one Baton fuses");
  expect_error(linear("HardSigmoid", {0.2}), Error::InvalidArgument, "Linear",
               "activation HardSigmoid takes 2 activation_params (its attributes in order), got 1");
  expect_error(linear("LeakyRelu", {std::nan("")}), Error::InvalidArgument, "Linear",
               "activation LeakyRelu's alpha is nan; it must be finite");
  expect_error(linear("Gelu", {1.0}), Error::InvalidArgument, "Linear",
               "activation 'Gelu' takes no activation_params");
  OpTester split("Linear", "node_1", kTestOpset, "baton");
  split.input(HostTensor(DType::Float32, {2, 4})).input(HostTensor(DType::Float32, {4, 3}));
  split.attr("splits", std::vector<int64_t>{1, 2}).attr("activation", std::string("Relu"));
  expect_error(split.outputs(2).infer(), Error::InvalidArgument, "Linear",
               "a Linear with split outputs has no activation");
  OpTester conv("FusedConv", "node_1", kTestOpset, "baton");
  conv.input(HostTensor(DType::Float32, {1, 2, 5, 5}))
      .input(HostTensor(DType::Float32, {3, 2, 3, 3}));
  conv.absent_input().input(HostTensor(DType::Float32, {1, 3, 5, 5}));
  expect_error(conv.infer(), Error::InvalidArgument, "FusedConv",
               "the residual Z [1, 3, 5, 5] must have the output's shape [1, 3, 3, 3]");
}

TEST(MatMul, MatchesReference) {
  std::mt19937 rng(99);
  const MatMulCase cases[] = {
      {{3}, {3}, {}},
      {{1}, {1}, {}},
      {{5}, {5, 7}, {7}},
      {{4, 5}, {5}, {4}},
      {{1, 1}, {1, 1}, {1, 1}},
      {{3, 4}, {4, 5}, {3, 5}},
      {{17, 33}, {33, 7}, {17, 7}},
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},
      {{2, 3, 17, 33}, {33, 1}, {2, 3, 17, 1}},
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{1, 3, 4}, {5, 4, 6}, {5, 3, 6}},
      {{2, 1, 3, 4}, {5, 4, 7}, {2, 5, 3, 7}},
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{7}, {2, 3, 7, 4}, {2, 3, 4}},
      {{2, 3, 7, 4}, {4}, {2, 3, 7}},
      {{3, 1, 5, 2}, {1, 4, 2, 3}, {3, 4, 5, 3}},
      {{3, 0, 4}, {4, 5}, {3, 0, 5}},
      {{3, 4}, {4, 0}, {3, 0}},
      {{0, 3, 4}, {4, 5}, {0, 3, 5}},
      {{2, 3, 0}, {2, 0, 5}, {2, 3, 5}},
      // Swin-T's windowed attention scores: each batch's GEMM is small enough to take the
      // copied-B path (and its scratch) while all batches' rows together are not.
      {{9, 3, 49, 32}, {9, 3, 32, 49}, {9, 3, 49, 49}},
  };
  for (const MatMulCase& mc : cases) {
    SCOPED_TRACE(shape_str(mc.a) + " x " + shape_str(mc.b));
    HostTensor a = random_floats(rng, mc.a);
    HostTensor b = random_floats(rng, mc.b);
    OpTester t("MatMul");
    t.input(a).input(b);
    BATON_ASSERT_OK(t.run());
    ASSERT_EQ(t.output().sizes, mc.out);
    expect_norm_close(t.output(), matmul_reference(a, b, mc.out));
  }
}

// GEMMs large enough to split, both ways (rows when op(A) is taller, columns otherwise), every
// transpose, against the reference; `dispatched` shows the workers took part.
TEST(Gemm, SplitOverThreadsMatchesReference) {
  std::mt19937 rng(4321);
  const GemmCase cases[] = {{150, 300, 80}, {40, 200, 600}, {97, 131, 253}};
  for (unsigned threads : {2u, 3u, 4u}) {
    runtime::ThreadPool pool(threads);
    for (const GemmCase& gc : cases) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          SCOPED_TRACE(::testing::Message() << threads << " threads, " << gc.m << "x" << gc.k << "x"
                                            << gc.n << " transA " << ta << " transB " << tb);
          HostTensor a = random_floats(
              rng, ta ? std::vector<int64_t>{gc.k, gc.m} : std::vector<int64_t>{gc.m, gc.k});
          HostTensor b = random_floats(
              rng, tb ? std::vector<int64_t>{gc.n, gc.k} : std::vector<int64_t>{gc.k, gc.n});
          HostTensor c = random_floats(rng, {gc.n});
          OpTester t("Gemm");
          t.pool(&pool).input(a).input(b).input(c).attr("transA", ta).attr("transB", tb);
          t.attr("alpha", 0.75).attr("beta", -1.5);
          const uint64_t before = pool.dispatched();
          BATON_ASSERT_OK(t.run());
          EXPECT_GT(pool.dispatched(), before) << "the GEMM was not split";
          expect_norm_close(t.output(), gemm_reference(a, b, &c, ta, tb, 0.75, -1.5));
        }
      }
    }
  }
}

// One tall GEMM (a batch against one B) split, and batches of GEMMs spread over the threads.
TEST(MatMul, ThreadedMatchesReference) {
  std::mt19937 rng(98);
  const MatMulCase cases[] = {
      {{4, 64, 192}, {192, 160}, {4, 64, 160}},
      {{6, 33, 17}, {6, 17, 29}, {6, 33, 29}},
      {{2, 1, 40, 70}, {3, 70, 50}, {2, 3, 40, 50}},
  };
  runtime::ThreadPool pool(3);
  for (const MatMulCase& mc : cases) {
    SCOPED_TRACE(shape_str(mc.a) + " x " + shape_str(mc.b));
    HostTensor a = random_floats(rng, mc.a);
    HostTensor b = random_floats(rng, mc.b);
    OpTester t("MatMul");
    t.pool(&pool).input(a).input(b);
    const uint64_t before = pool.dispatched();
    BATON_ASSERT_OK(t.run());
    EXPECT_GT(pool.dispatched(), before);
    ASSERT_EQ(t.output().sizes, mc.out);
    expect_norm_close(t.output(), matmul_reference(a, b, mc.out));
  }
}

// Linear (a split GEMM per output) and Attention (heads in parallel, each thread with its own
// scores) give what they give on one thread.
TEST(GemmOps, LinearAndAttentionOnThreadsMatchOneThread) {
  runtime::ThreadPool pool(3);
  auto linear = [](std::mt19937& rng, runtime::ThreadPool* p) {
    OpTester t("Linear", "node_1", kTestOpset, "baton");
    t.pool(p).input(random_floats(rng, {2, 64, 256})).input(random_floats(rng, {256, 768}));
    t.input(random_floats(rng, {768})).attr("splits", std::vector<int64_t>{256, 256, 256});
    t.outputs(3);
    EXPECT_TRUE(t.run().ok());
    return std::vector<std::vector<double>>{to_double(t.output(0)), to_double(t.output(1)),
                                            to_double(t.output(2))};
  };
  auto attention = [](std::mt19937& rng, runtime::ThreadPool* p) {
    OpTester t("Attention", "node_1", kTestOpset, "baton");
    t.pool(p).input(random_floats(rng, {2, 4, 9, 16})).input(random_floats(rng, {2, 4, 16, 11}));
    t.input(random_floats(rng, {2, 4, 11, 8})).input(random_floats(rng, {2, 1, 9, 11}));
    t.attr("scale", 0.25).attr("k_transposed", 1).attr("mask_kind", std::string("add"));
    EXPECT_TRUE(t.run().ok());
    return std::vector<std::vector<double>>{to_double(t.output(0))};
  };
  for (auto* op : {+linear, +attention}) {
    std::mt19937 rng1(5), rng2(5);  // the same inputs
    const auto one = op(rng1, nullptr);
    const uint64_t before = pool.dispatched();
    const auto three = op(rng2, &pool);
    EXPECT_GT(pool.dispatched(), before);
    ASSERT_EQ(one.size(), three.size());
    for (size_t o = 0; o < one.size(); ++o) {
      ASSERT_EQ(one[o].size(), three[o].size());
      for (size_t i = 0; i < one[o].size(); ++i) {
        EXPECT_NEAR(three[o][i], one[o][i], 1e-5 * (1.0 + std::abs(one[o][i]))) << i;
      }
    }
  }
}

// Attention's scores are kept for a tile of query rows at a time: at sequence 131072 create asked
// for Sq * Sk floats per thread (64 GiB) at 52eb145, an uncaught std::bad_alloc. Now create needs
// a few MiB, and a tiled run (Sq 40 over two tiles of Sk 3000) matches a direct computation.
TEST(GemmOps, AttentionScratchDoesNotGrowWithSqTimesSk) {
  std::mt19937 rng(9);
  {
    OpTester t("Attention", "long", kTestOpset, "baton");
    t.input(random_floats(rng, {1, 1, 131072, 1})).input(random_floats(rng, {1, 1, 1, 131072}));
    t.input(random_floats(rng, {1, 1, 131072, 1}));
    t.attr("scale", 1.0).attr("k_transposed", 1);
    BATON_ASSERT_OK(t.create());
  }
  const int64_t sq = 40, sk = 3000, d = 4, dv = 3;
  OpTester t("Attention", "tiled", kTestOpset, "baton");
  const HostTensor q = random_floats(rng, {1, 2, sq, d});
  const HostTensor k = random_floats(rng, {1, 2, sk, d});
  const HostTensor v = random_floats(rng, {1, 2, sk, dv});
  t.input(q).input(k).input(v).attr("scale", 0.5);
  BATON_ASSERT_OK(t.run());
  const std::vector<double> got = to_double(t.output());
  const std::vector<double> qd = to_double(q), kd = to_double(k), vd = to_double(v);
  double worst = 0;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> p(sk);
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += qd[(h * sq + i) * d + e] * kd[(h * sk + j) * d + e];
        p[j] = 0.5 * dot;
        m = std::max(m, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - m));
      for (int64_t c = 0; c < dv; ++c) {
        double y = 0;
        for (int64_t j = 0; j < sk; ++j) y += p[j] / sum * vd[(h * sk + j) * dv + c];
        worst = std::max(worst, std::abs(got[(h * sq + i) * dv + c] - y));
      }
    }
  }
  EXPECT_LT(worst, 1e-5);
}

TEST(MatMul, Errors) {
  expect_error(OpTester("MatMul")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(HostTensor(DType::Float32, {5, 6}))
                   .infer(),
               Error::InvalidArgument, "MatMul", "K=4");
  expect_error(OpTester("MatMul")
                   .input(HostTensor(DType::Float32, {2, 3, 4}))
                   .input(HostTensor(DType::Float32, {3, 4, 5}))
                   .infer(),
               Error::InvalidArgument, "MatMul", "cannot broadcast");
  expect_error(OpTester("MatMul")
                   .input(HostTensor(DType::Float32, {}))
                   .input(HostTensor(DType::Float32, {3}))
                   .infer(),
               Error::InvalidArgument, "MatMul", "rank >= 1");
  expect_error(OpTester("MatMul")
                   .input(HostTensor(DType::Int64, {2, 3}))
                   .input(HostTensor(DType::Int64, {3, 2}))
                   .run(),
               Error::NotSupported, "MatMul", "int64");
}

// OpenBLAS's kernels are not older than the CPU: on a CPU with AVX2 and FMA, no pre-AVX2 kernel
// set, whatever OpenBLAS made of the CPU's model (kernels/cpu/blas.h). This project's VM hides
// its model and OpenBLAS 0.3.21 chose "Prescott" there, 2.4x slower on an MLP.
TEST(BlasKernels, AreNotOlderThanTheCpu) {
  const kernels::cpu::BlasKernels k = kernels::cpu::blas_kernels();
  if (k.user_choice) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the kernels are the user's choice";
  if (k.unavailable) GTEST_SKIP() << "this OpenBLAS has no kernels newer than " << k.core;
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  }
  ASSERT_FALSE(k.core.empty());
  EXPECT_FALSE(kernels::cpu::blas_core_before_avx2(k.core))
      << "OpenBLAS runs its " << k.core << " kernels on a CPU with AVX2 and FMA";
  if (!k.replaced.empty()) {
    EXPECT_TRUE(kernels::cpu::blas_core_before_avx2(k.replaced)) << k.replaced;
  }
}

}  // namespace
}  // namespace baton::testing
