// gelu: the erf and tanh chains both exporters write become one Gelu; near misses stay.
#include "passes/pass_test.h"
#include "testing/onnx_builder.h"

namespace baton::testing {
namespace {

class GeluPassTest : public PassTest {};

// in -> MatMul -> x -> GELU chain -> g -> MatMul -> y: the Gelu the pass appends has a reader
// before it in node order until the pipeline restores topological order.
OnnxBuilder erf_chain(bool torchscript_order, float half = 0.5f) {
  OnnxBuilder b;
  b.input("in", {3, 8});
  std::mt19937 rng(1);
  b.initializer("w", {8, 8}, PassTest::random_floats(rng, 64, -2.0f, 2.0f));
  b.node("MatMul", {"in", "w"}, {"x"}, "mm");
  PassTest::scalar(b, "sqrt2", 1.4142135f);
  PassTest::scalar(b, "one", 1.0f);
  PassTest::scalar(b, "half", half);
  b.node("Div", {"x", "sqrt2"}, {"d"}, "div");
  b.node("Erf", {"d"}, {"e"}, "erf");
  b.node("Add", {"e", "one"}, {"a"}, "add");
  if (torchscript_order) {  // (x * a) * 0.5
    b.node("Mul", {"x", "a"}, {"m"}, "mul");
    b.node("Mul", {"m", "half"}, {"g"}, "mul_half");
  } else {  // x * (0.5 * a), the dynamo exporter's order
    b.node("Mul", {"half", "a"}, {"m"}, "mul_half");
    b.node("Mul", {"x", "m"}, {"g"}, "mul");
  }
  b.initializer("w2", {8, 4}, PassTest::random_floats(rng, 32));
  b.node("MatMul", {"g", "w2"}, {"y"}, "mm2");
  b.output("y", {3, 4});
  return b;
}

// The optimizer without fuse-linear, which would fold the Gelu into the MatMul before it (the
// outputs are compared with every pass on).
compiler::OptimizeOptions without_fuse_linear() {
  compiler::OptimizeOptions options;
  options.disabled = {"fuse-linear"};
  return options;
}

TEST_F(GeluPassTest, ErfChainInBothExporterOrdersBecomesOneGelu) {
  std::mt19937 rng(2);
  for (bool torchscript : {true, false}) {
    SCOPED_TRACE(torchscript ? "TorchScript order" : "dynamo order");
    const OnnxBuilder b = erf_chain(torchscript);
    const auto ops = op_counts(optimized(b, without_fuse_linear()));
    EXPECT_EQ(ops.count("Erf"), 0u);
    EXPECT_EQ(ops.count("Div"), 0u);
    EXPECT_EQ(ops.at("Gelu"), 1);
    EXPECT_EQ(ops.at("MatMul"), 2);
    expect_same_outputs(b, {random_tensor(rng, {3, 8})});
  }
}

TEST_F(GeluPassTest, TanhChainBecomesGeluWithTheTanhApproximation) {
  OnnxBuilder b;
  b.input("in", {4, 6});
  std::mt19937 rng(3);
  b.initializer("w", {6, 6}, random_floats(rng, 36, -2.0f, 2.0f));
  b.node("MatMul", {"in", "w"}, {"x"}, "mm");
  scalar(b, "half", 0.5f);
  scalar(b, "three", 3.0f);
  scalar(b, "c", 0.044715f);
  scalar(b, "k", 0.7978845834732056f);
  scalar(b, "one", 1.0f);
  // GPT-2 as the TorchScript exporter writes it.
  b.node("Mul", {"x", "half"}, {"xh"}, "mul");
  b.node("Pow", {"x", "three"}, {"x3"}, "pow");
  b.node("Mul", {"x3", "c"}, {"cx3"}, "mul_1");
  b.node("Add", {"x", "cx3"}, {"inner"}, "add");
  b.node("Mul", {"inner", "k"}, {"u"}, "mul_2");
  b.node("Tanh", {"u"}, {"t"}, "tanh");
  b.node("Add", {"t", "one"}, {"t1"}, "add_1");
  b.node("Mul", {"xh", "t1"}, {"y"}, "mul_3");
  b.output("y", {4, 6});
  const compiler::Graph g = optimized(b, without_fuse_linear());
  const auto ops = op_counts(g);
  EXPECT_EQ(ops.count("Tanh"), 0u);
  EXPECT_EQ(ops.count("Pow"), 0u);
  ASSERT_EQ(ops.at("Gelu"), 1);
  for (const compiler::IrNode& n : g.nodes) {
    if (n.op_type == "Gelu") {
      EXPECT_EQ(n.attr_string("approximate"), "tanh");
    }
  }
  expect_same_outputs(b, {random_tensor(rng, {4, 6})});
}

// A chain that is almost GELU (0.6 instead of 0.5) is left as it is.
TEST_F(GeluPassTest, AnAlmostGeluChainIsLeftUnchanged) {
  const OnnxBuilder b = erf_chain(true, 0.6f);
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Gelu"), 0u);
  EXPECT_EQ(ops.at("Erf"), 1);
  EXPECT_EQ(ops.at("Mul"), 2);
}

// An intermediate value read outside the chain keeps the chain (rewriting would lose it).
TEST_F(GeluPassTest, AChainWhoseIntermediateIsReadElsewhereIsLeftUnchanged) {
  OnnxBuilder b = erf_chain(true);
  b.output("e", {3, 8});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Gelu"), 0u);
  EXPECT_EQ(ops.at("Erf"), 1);
}

TEST_F(GeluPassTest, DisablingThePassKeepsTheChain) {
  const OnnxBuilder b = erf_chain(true);
  compiler::OptimizeOptions options;
  options.disabled = {"gelu"};
  const auto ops = op_counts(optimized(b, options));
  EXPECT_EQ(ops.count("Gelu"), 0u);
  EXPECT_EQ(ops.at("Erf"), 1);
}

}  // namespace
}  // namespace baton::testing
