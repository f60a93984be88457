// bn-affine: in a GPU compile an inference BatchNormalization that bn-conv could not fold becomes
// Mul and Add by per-channel constants, which compute what the CPU's BatchNormalization kernel
// computes; a CPU compile, statistics that are graph inputs, a training output and a
// normalization folded into its Conv keep their forms.
#include "compiler/passes/rewrite.h"
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class BnAffinePassTest : public PassTest {};

compiler::OptimizeOptions for_gpu() {
  compiler::OptimizeOptions o;
  o.gpu_target = true;
  return o;
}

// Relu(BatchNormalization(Concat(a, b))): a DenseNet layer's head. Statistics from `rng`, the
// variances positive.
OnnxBuilder dense_head(std::mt19937& rng, const std::vector<int64_t>& half, int64_t* channels) {
  OnnxBuilder b(17);
  b.input("a", half);
  b.input("b", half);
  std::vector<int64_t> cat = half;
  cat[1] *= 2;
  *channels = cat[1];
  const int64_t c = cat[1];
  auto& concat = b.node("Concat", {"a", "b"}, {"x"}, "concat");
  OnnxBuilder::attr_int(concat, "axis", 1);
  std::vector<float> var = PassTest::random_floats(rng, c);
  for (float& v : var) v = 0.2f + std::fabs(v);
  b.initializer("scale", {c}, PassTest::random_floats(rng, c));
  b.initializer("shift", {c}, PassTest::random_floats(rng, c));
  b.initializer("mean", {c}, PassTest::random_floats(rng, c));
  b.initializer("var", {c}, var);
  auto& bn = b.node("BatchNormalization", {"x", "scale", "shift", "mean", "var"}, {"n"}, "bn");
  OnnxBuilder::attr_float(bn, "epsilon", 1e-3f);
  b.node("Relu", {"n"}, {"y"}, "relu");
  b.output("y", cat);
  return b;
}

TEST_F(BnAffinePassTest, AGpuCompileWritesMulAndAddThatComputeTheNormalization) {
  for (const std::vector<int64_t>& half :
       {std::vector<int64_t>{2, 3, 5, 4}, std::vector<int64_t>{1, 8, 7}, {3, 4}}) {
    SCOPED_TRACE(::testing::PrintToString(half));
    std::mt19937 rng(static_cast<uint32_t>(half.size()));
    int64_t c = 0;
    const OnnxBuilder b = dense_head(rng, half, &c);
    const compiler::Graph g = optimized(b, for_gpu());
    const auto ops = op_counts(g);
    EXPECT_EQ(ops.count("BatchNormalization"), 0u);
    const compiler::IrNode* mul = only(g, "Mul");
    const compiler::IrNode* add = only(g, "Add");
    ASSERT_NE(mul, nullptr);
    ASSERT_NE(add, nullptr);
    EXPECT_EQ(add->inputs[0], mul->outputs[0]);
    // [C, 1, ...]: one value per channel, broadcast over the rest.
    std::vector<int64_t> want_sizes(half.size() - 1, 1);
    want_sizes[0] = c;
    EXPECT_EQ(g.values[mul->inputs[1]].sizes, want_sizes);
    EXPECT_EQ(g.values[add->inputs[1]].sizes, want_sizes);
    const auto s = compiler::constant_as_doubles(g, mul->inputs[1]);
    const auto t = compiler::constant_as_doubles(g, add->inputs[1]);
    ASSERT_TRUE(s && t);

    // x * S + T, then the ReLU, against the CPU's BatchNormalization kernel (the unoptimized
    // program: the pass does not run in a CPU compile anyway).
    const Tensor a = random_tensor(rng, half), bb = random_tensor(rng, half);
    const std::vector<Tensor> want = run(b, {a, bb}, false);
    ASSERT_EQ(want.size(), 1u);
    int64_t spatial = 1;
    for (size_t d = 2; d < half.size(); ++d) spatial *= half[d];
    const int64_t per_input = half[1] * spatial;
    for (int64_t i = 0; i < want[0].numel(); ++i) {
      const int64_t n = i / (c * spatial), ch = i / spatial % c;
      const Tensor& src = ch < half[1] ? a : bb;
      const float x = src.data_as<float>()[n * per_input + (ch % half[1]) * spatial + i % spatial];
      const double y = std::max(0.0, double{x} * (*s)[ch] + (*t)[ch]);
      EXPECT_NEAR(want[0].data_as<float>()[i], y, 2e-6 * std::max(1.0, std::fabs(y))) << i;
    }
  }
}

TEST_F(BnAffinePassTest, CpuCompilesRuntimeStatisticsAndFoldedNormalizationsKeepTheirForms) {
  std::mt19937 rng(5);
  int64_t c = 0;
  const OnnxBuilder head = dense_head(rng, {1, 2, 3, 3}, &c);
  EXPECT_EQ(op_counts(optimized(head)).at("BatchNormalization"), 1);  // CPU compile

  // The statistics as graph inputs.
  OnnxBuilder runtime(17);
  runtime.input("x", {1, 4, 3, 3});
  for (const char* p : {"scale", "shift", "mean", "var"}) runtime.input(p, {4});
  runtime.node("BatchNormalization", {"x", "scale", "shift", "mean", "var"}, {"y"}, "bn");
  runtime.output("y", {1, 4, 3, 3});
  EXPECT_EQ(op_counts(optimized(runtime, for_gpu())).at("BatchNormalization"), 1);

  // After a Conv: bn-conv folds it into the Conv's weights; nothing is left for bn-affine.
  OnnxBuilder conv(17);
  conv.input("x", {1, 3, 6, 6});
  conv.initializer("w", {4, 3, 3, 3}, PassTest::random_floats(rng, 4 * 3 * 9));
  for (const char* p : {"scale", "shift", "mean"})
    conv.initializer(p, {4}, PassTest::random_floats(rng, 4));
  conv.initializer("var", {4}, {0.5f, 1.0f, 1.5f, 2.0f});
  conv.node("Conv", {"x", "w"}, {"c"}, "conv");
  conv.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"}, "bn");
  conv.output("y", {1, 4, 4, 4});
  const auto ops = op_counts(optimized(conv, for_gpu()));
  EXPECT_EQ(ops.at("Conv"), 1);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(ops.count("Mul"), 0u);

  // A variance that makes var + epsilon non-positive stays a BatchNormalization (its kernel's
  // result, NaN or infinity, is not what the multiply would give).
  OnnxBuilder bad(17);
  bad.input("x", {1, 2, 3});
  for (const char* p : {"scale", "shift", "mean"}) bad.initializer(p, {2}, {1.0f, 1.0f});
  bad.initializer("var", {2}, {1.0f, -1.0f});
  auto& bn = bad.node("BatchNormalization", {"x", "scale", "shift", "mean", "var"}, {"y"}, "bn");
  OnnxBuilder::attr_float(bn, "epsilon", 1e-5f);
  bad.output("y", {1, 2, 3});
  EXPECT_EQ(op_counts(optimized(bad, for_gpu())).at("BatchNormalization"), 1);
}

}  // namespace
}  // namespace baton::testing
