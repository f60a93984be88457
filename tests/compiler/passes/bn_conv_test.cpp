// bn-conv: an inference BatchNormalization after a Conv with constant weights is folded into the
// Conv; near misses stay.
#include <algorithm>

#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class BnConvPassTest : public PassTest {};

struct ConvCase {
  std::string label;
  std::vector<int64_t> x;  // [N, C, D1, ...]
  int64_t m = 0;           // output channels
  int64_t group = 1;
  std::vector<int64_t> kernel;
  bool bias = true;
  int64_t stride = 1, pad = 0, dilation = 1;
};

// The statistics are initializers unless named in `runtime` (then graph inputs). `dtype`: the
// ONNX element type the Conv and the normalization compute in; other than float, X, the weights
// and the statistics are Cast to it (the casts of constants fold) and Y is Cast back.
OnnxBuilder conv_bn(std::mt19937& rng, const ConvCase& c, std::vector<std::string> runtime = {},
                    int dtype = 1) {
  OnnxBuilder b;
  b.input("x", c.x);
  const int64_t spatial = static_cast<int64_t>(c.kernel.size());
  std::vector<int64_t> w = {c.m, c.x[1] / c.group};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  int64_t w_numel = 1;
  for (int64_t d : w) w_numel *= d;
  b.initializer("w", w, PassTest::random_floats(rng, w_numel));
  std::vector<std::string> conv_in = {"x", "w"};
  if (c.bias) {
    b.initializer("b", {c.m}, PassTest::random_floats(rng, c.m));
    conv_in.push_back("b");
  }
  const std::vector<std::pair<std::string, std::pair<float, float>>> stats = {
      {"scale", {0.5f, 1.5f}},
      {"shift", {-1.0f, 1.0f}},
      {"mean", {-1.0f, 1.0f}},
      {"var", {0.1f, 2.0f}}};
  std::vector<std::string> bn_in = {"y"};
  for (const auto& [name, range] : stats) {
    if (std::find(runtime.begin(), runtime.end(), name) != runtime.end()) {
      b.input(name, {c.m});
    } else {
      b.initializer(name, {c.m}, PassTest::random_floats(rng, c.m, range.first, range.second));
    }
    bn_in.push_back(name);
  }
  if (dtype != 1) {
    for (std::string* name : {&conv_in[0], &conv_in[1]}) {
      auto& cast = b.node("Cast", {*name}, {*name + "_t"}, *name + "/cast");
      OnnxBuilder::attr_int(cast, "to", dtype);
      *name += "_t";
    }
    if (c.bias) {
      auto& cast = b.node("Cast", {"b"}, {"b_t"}, "b/cast");
      OnnxBuilder::attr_int(cast, "to", dtype);
      conv_in[2] = "b_t";
    }
    for (size_t i = 1; i < bn_in.size(); ++i) {
      auto& cast = b.node("Cast", {bn_in[i]}, {bn_in[i] + "_t"}, bn_in[i] + "/cast");
      OnnxBuilder::attr_int(cast, "to", dtype);
      bn_in[i] += "_t";
    }
  }
  auto& conv = b.node("Conv", conv_in, {"y"}, "conv");
  OnnxBuilder::attr_int(conv, "group", c.group);
  OnnxBuilder::attr_ints(conv, "strides", std::vector<int64_t>(spatial, c.stride));
  OnnxBuilder::attr_ints(conv, "pads", std::vector<int64_t>(2 * spatial, c.pad));
  OnnxBuilder::attr_ints(conv, "dilations", std::vector<int64_t>(spatial, c.dilation));
  auto& bn = b.node("BatchNormalization", bn_in, {dtype != 1 ? "z_t" : "z"}, "bn");
  OnnxBuilder::attr_float(bn, "epsilon", 1e-3f);
  if (dtype != 1) {
    auto& cast = b.node("Cast", {"z_t"}, {"z"}, "z/cast");
    OnnxBuilder::attr_int(cast, "to", 1);
  }
  std::vector<int64_t> z = {c.x[0], c.m};
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t dk = (c.kernel[i] - 1) * c.dilation + 1;
    z.push_back((c.x[2 + i] + 2 * c.pad - dk) / c.stride + 1);
  }
  b.output("z", z);
  return b;
}

const std::vector<ConvCase>& cases() {
  static const std::vector<ConvCase> all = {
      {"2-D, bias, pad 1", {2, 4, 7, 6}, 6, 1, {3, 3}, true, 1, 1, 1},
      {"1-D, no bias, stride 2", {1, 3, 11}, 5, 1, {3}, false, 2, 0, 1},
      {"3-D, group 2, bias", {1, 4, 5, 4, 3}, 4, 2, {2, 2, 2}, true, 1, 0, 1},
      {"depthwise, no bias, dilation 2", {2, 6, 8, 8}, 6, 6, {3, 3}, false, 1, 2, 2},
      {"depthwise x2 channels, bias", {1, 3, 5, 5}, 6, 3, {3, 3}, true, 1, 1, 1},
      {"1x1, odd sizes", {3, 5, 3, 7}, 7, 1, {1, 1}, true, 1, 0, 1},
  };
  return all;
}

TEST_F(BnConvPassTest, ConvThenBatchNormBecomesOneConvWithTheSameOutputs) {
  std::mt19937 rng(20);
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.label);
    const OnnxBuilder b = conv_bn(rng, c);
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("Conv"), 1);
    EXPECT_EQ(ops.count("BatchNormalization"), 0u);
    expect_same_outputs(b, {random_tensor(rng, c.x)});
  }
}

TEST_F(BnConvPassTest, Float64IsFoldedAndFloat16IsLeftAlone) {
  std::mt19937 rng(21);
  const ConvCase& c = cases()[0];
  const OnnxBuilder f64 = conv_bn(rng, c, {}, 11);
  auto ops = op_counts(optimized(f64));
  EXPECT_EQ(ops.at("Conv"), 1);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);
  expect_same_outputs(f64, {random_tensor(rng, c.x)}, 1e-6);

  const OnnxBuilder f16 = conv_bn(rng, c, {}, 10);
  ops = op_counts(optimized(f16));
  EXPECT_EQ(ops.at("Conv"), 1);
  EXPECT_EQ(ops.at("BatchNormalization"), 1);
}

TEST_F(BnConvPassTest, RuntimeStatisticsOrAConvOutputReadElsewhereAreLeftUnchanged) {
  std::mt19937 rng(22);
  const ConvCase& c = cases()[0];
  {
    SCOPED_TRACE("mean is a graph input");
    const OnnxBuilder b = conv_bn(rng, c, {"mean"});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("Conv"), 1);
    EXPECT_EQ(ops.at("BatchNormalization"), 1);
  }
  {
    SCOPED_TRACE("the Conv's output is also a graph output");
    OnnxBuilder b = conv_bn(rng, c);
    b.output("y", {2, 6, 7, 6});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("BatchNormalization"), 1);
    expect_same_outputs(b, {random_tensor(rng, c.x)});
  }
  {
    SCOPED_TRACE("the Conv's output is read twice");
    OnnxBuilder b = conv_bn(rng, c);
    b.node("Relu", {"y"}, {"r"}, "relu");
    b.output("r", {2, 6, 7, 6});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("BatchNormalization"), 1);
    EXPECT_EQ(ops.at("Relu"), 1);
    expect_same_outputs(b, {random_tensor(rng, c.x)});
  }
}

// var + eps == 0 makes the normalization divide by zero: unfolded, each element is +-inf (NaN only
// where the Conv's output equals the mean); folded, inf * W made every output NaN. Such a channel
// is not folded, and the optimized program gives what the unoptimized one gives.
TEST_F(BnConvPassTest, AZeroVarianceWithZeroEpsilonIsNotFolded) {
  std::mt19937 rng(25);
  const ConvCase& c = cases()[0];
  OnnxBuilder b = conv_bn(rng, c);
  for (auto& t : *b.graph().mutable_initializer()) {
    if (t.name() != "var") continue;
    for (int i = 0; i < t.float_data_size(); ++i) t.set_float_data(i, 0.0f);
  }
  for (auto& n : *b.graph().mutable_node()) {
    if (n.op_type() != "BatchNormalization") continue;
    for (auto& a : *n.mutable_attribute()) {
      if (a.name() == "epsilon") a.set_f(0.0f);
    }
  }
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.at("BatchNormalization"), 1);
  const std::vector<Tensor> inputs = {random_tensor(rng, c.x)};
  const std::vector<Tensor> want = run(b, inputs, false);
  const std::vector<Tensor> got = run(b, inputs, true);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want.size(), 1u);
  int infinite = 0;
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    const float w = want[0].data_as<float>()[i], g = got[0].data_as<float>()[i];
    infinite += std::isinf(w);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << i;
    } else {
      EXPECT_EQ(g, w) << i;
    }
  }
  EXPECT_GT(infinite, want[0].numel() / 2) << "the reference should be mostly +-inf";
}

TEST_F(BnConvPassTest, PerElementStatisticsOfSpatialZeroAreLeftUnchanged) {
  std::mt19937 rng(23);
  OnnxBuilder b(7);  // BatchNormalization-7 still has 'spatial'
  b.input("x", {2, 3, 4, 4});
  b.initializer("w", {5, 3, 1, 1}, random_floats(rng, 15));
  b.node("Conv", {"x", "w"}, {"y"}, "conv");
  const char* names[] = {"scale", "shift", "mean", "var"};
  for (const char* name : names) {
    b.initializer(name, {5, 4, 4}, random_floats(rng, 80, 0.5f, 1.5f));
  }
  auto& bn = b.node("BatchNormalization", {"y", "scale", "shift", "mean", "var"}, {"z"}, "bn");
  OnnxBuilder::attr_int(bn, "spatial", 0);
  b.output("z", {2, 5, 4, 4});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.at("Conv"), 1);
  EXPECT_EQ(ops.at("BatchNormalization"), 1);
  expect_same_outputs(b, {random_tensor(rng, {2, 3, 4, 4})});
}

TEST_F(BnConvPassTest, ABatchNormWithTrainingOutputsIsLeftUnchanged) {
  // Inference refuses such a node (Baton runs BatchNormalization for inference only), so the
  // pass is run straight on the imported graph: it must not take the node either.
  std::mt19937 rng(24);
  OnnxBuilder b(7);
  b.input("x", {1, 2, 3, 3});
  b.initializer("w", {2, 2, 1, 1}, random_floats(rng, 4));
  b.node("Conv", {"x", "w"}, {"y"}, "conv");
  for (const char* name : {"scale", "shift", "mean", "var"}) {
    b.initializer(name, {2}, random_floats(rng, 2, 0.5f, 1.5f));
  }
  b.node("BatchNormalization", {"y", "scale", "shift", "mean", "var"},
         {"z", "run_mean", "run_var", "saved_mean", "saved_var"}, "bn");
  b.output("z", {1, 2, 3, 3});
  const std::vector<uint8_t> bytes = b.bytes();
  auto graph = compiler::import_onnx_bytes(bytes, "<test>", ".", {});
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  auto changed = compiler::fold_batch_norm_into_conv(*graph);
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_EQ(*changed, 0u);
  EXPECT_EQ(op_counts(*graph).at("BatchNormalization"), 1);
}

TEST_F(BnConvPassTest, CompileReportsTheFoldAndRunsOneKernelFewer) {
  std::mt19937 rng(25);
  const OnnxBuilder b = conv_bn(rng, cases()[0]);
  auto compiled = compiler::compile_bytes(b.bytes(), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  // It runs before the passes that rewrite ops (only cse, which writes none, runs before it).
  const auto& passes = compiled->summary().passes;
  ASSERT_GE(passes.size(), 2u);
  EXPECT_EQ(passes[0].first, "cse");
  EXPECT_EQ(passes[1].first, "bn-conv");
  EXPECT_EQ(passes[1].second, 1);
  EXPECT_EQ(compiled->summary().kernel_calls, 1u);

  compiler::CompileOptions off;
  off.disabled_passes = {"bn-conv"};
  auto plain = compiler::compile_bytes(b.bytes(), off);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->summary().passes[1].second, -1);
  EXPECT_EQ(plain->summary().kernel_calls, 2u);
}

}  // namespace
}  // namespace baton::testing
