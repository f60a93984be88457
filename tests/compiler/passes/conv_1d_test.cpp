// conv-1d: in a GPU compile a 1-D Conv with constant weights becomes Unsqueeze, a 2-D Conv over a
// height of 1 and Squeeze; a CPU compile keeps it. The rewrite's form is checked node by node, and
// that form (written out by hand as ONNX) computes what the 1-D Conv computes on the CPU.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class Conv1dPassTest : public PassTest {};

struct Case {
  std::string label;
  std::vector<int64_t> x;  // [N, C, L]
  int64_t m = 0, group = 1, kernel = 3, stride = 1, dilation = 1;
  std::vector<int64_t> pads;  // [begin, end]; empty: auto_pad
  std::string auto_pad;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"k3 stride 2 pads 1 (Whisper)", {2, 8, 15}, 6, 1, 3, 2, 1, {1, 1}, ""},
      {"group 2 dilation 2 SAME_LOWER", {1, 4, 11}, 6, 2, 3, 1, 2, {}, "SAME_LOWER"},
      {"depthwise k5 asymmetric pads", {3, 5, 9}, 5, 5, 5, 1, 1, {2, 0}, ""},
  };
  return all;
}

int64_t out_length(const Case& c) {
  const int64_t span = (c.kernel - 1) * c.dilation + 1;
  if (c.pads.empty()) return (c.x[2] + c.stride - 1) / c.stride;  // SAME
  return (c.x[2] + c.pads[0] + c.pads[1] - span) / c.stride + 1;
}

void set_window(onnx::NodeProto& conv, const Case& c, bool two_d) {
  auto with_leading = [&](std::vector<int64_t> v, int64_t first) {
    if (two_d) v.insert(v.begin(), first);
    return v;
  };
  OnnxBuilder::attr_int(conv, "group", c.group);
  OnnxBuilder::attr_ints(conv, "strides", with_leading({c.stride}, 1));
  OnnxBuilder::attr_ints(conv, "dilations", with_leading({c.dilation}, 1));
  if (c.pads.empty()) {
    OnnxBuilder::attr_string(conv, "auto_pad", c.auto_pad);
  } else {
    OnnxBuilder::attr_ints(conv, "pads",
                           two_d ? std::vector<int64_t>{0, c.pads[0], 0, c.pads[1]} : c.pads);
  }
}

// The 1-D Conv (two_d false) or the form the pass writes (two_d true), W and B from `rng`.
OnnxBuilder model(const Case& c, bool two_d, uint32_t seed) {
  std::mt19937 rng(seed);
  OnnxBuilder b(17);
  b.input("x", c.x);
  const int64_t per_group = c.x[1] / c.group;
  std::vector<int64_t> w = {c.m, per_group, c.kernel};
  if (two_d) w.insert(w.begin() + 2, 1);
  b.initializer("w", w, PassTest::random_floats(rng, c.m * per_group * c.kernel));
  b.initializer("b", {c.m}, PassTest::random_floats(rng, c.m));
  std::string conv_in = "x", conv_out = "y";
  if (two_d) {
    b.initializer_int64("axes", {1}, {2});
    b.node("Unsqueeze", {"x", "axes"}, {"x4"}, "to_2d");
    conv_in = "x4";
    conv_out = "y4";
  }
  auto& conv = b.node("Conv", {conv_in, "w", "b"}, {conv_out}, "conv");
  set_window(conv, c, two_d);
  if (two_d) b.node("Squeeze", {"y4", "axes"}, {"y"}, "to_1d");
  b.output("y", {c.x[0], c.m, out_length(c)});
  return b;
}

compiler::OptimizeOptions for_gpu() {
  compiler::OptimizeOptions o;
  o.gpu_target = true;
  return o;
}

TEST_F(Conv1dPassTest, AGpuCompileMakesItATwoDimensionalConvOfHeightOne) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const compiler::Graph g = optimized(model(c, false, 1), for_gpu());
    const auto ops = op_counts(g);
    EXPECT_EQ(ops.at("Conv"), 1);
    EXPECT_EQ(ops.at("Unsqueeze"), 1);
    EXPECT_EQ(ops.at("Squeeze"), 1);
    for (const compiler::IrNode& n : g.nodes) {
      if (n.dead || n.op_type != "Conv") continue;
      const std::vector<int64_t> x = g.values[n.inputs[0]].sizes;
      EXPECT_EQ(x, (std::vector<int64_t>{c.x[0], c.x[1], 1, c.x[2]}));
      EXPECT_EQ(g.values[n.inputs[1]].sizes,
                (std::vector<int64_t>{c.m, c.x[1] / c.group, 1, c.kernel}));
      EXPECT_EQ(n.attr_ints("kernel_shape"), (std::vector<int64_t>{1, c.kernel}));
      EXPECT_EQ(n.attr_ints("strides"), (std::vector<int64_t>{1, c.stride}));
      EXPECT_EQ(n.attr_ints("dilations"), (std::vector<int64_t>{1, c.dilation}));
      const std::vector<int64_t> pads = n.attr_ints("pads");
      ASSERT_EQ(pads.size(), 4u);
      EXPECT_EQ(pads[0], 0);
      EXPECT_EQ(pads[2], 0);
      EXPECT_EQ(n.attr_int("group"), c.group);
      EXPECT_EQ(g.values[n.outputs[0]].sizes,
                (std::vector<int64_t>{c.x[0], c.m, 1, out_length(c)}));
    }
  }
}

// What the pass writes computes the 1-D convolution (the CPU runs both forms).
TEST_F(Conv1dPassTest, TheTwoDimensionalFormComputesTheSameOutputs) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const std::vector<Tensor> inputs = {random_tensor(rng, c.x)};
    const std::vector<Tensor> want = run(model(c, false, 3), inputs, false);
    const std::vector<Tensor> got = run(model(c, true, 3), inputs, false);
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].sizes(), want[0].sizes());
    for (int64_t i = 0; i < want[0].numel(); ++i) {
      EXPECT_NEAR(got[0].data_as<float>()[i], want[0].data_as<float>()[i], 1e-5) << i;
    }
  }
}

TEST_F(Conv1dPassTest, ACpuCompileOrARuntimeWeightKeepsTheOneDimensionalConv) {
  const Case& c = cases()[0];
  auto ops = op_counts(optimized(model(c, false, 1)));
  EXPECT_EQ(ops.at("Conv"), 1);
  EXPECT_EQ(ops.count("Unsqueeze"), 0u);
  // W a graph input: the GPU needs constant filters anyway.
  OnnxBuilder b(17);
  b.input("x", c.x);
  b.input("w", {c.m, c.x[1], c.kernel});
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  set_window(conv, c, false);
  b.output("y", {c.x[0], c.m, out_length(c)});
  ops = op_counts(optimized(b, for_gpu()));
  EXPECT_EQ(ops.at("Conv"), 1);
  EXPECT_EQ(ops.count("Unsqueeze"), 0u);
}

}  // namespace
}  // namespace baton::testing
