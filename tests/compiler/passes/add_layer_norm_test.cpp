// add-layernorm: a residual Add followed by LayerNormalization becomes AddLayerNorm, producing
// the sum too when something else reads it; a broadcasting Add stays.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class AddLayerNormPassTest : public PassTest {};

OnnxBuilder residual_norm(std::mt19937& rng, bool sum_read_again, bool broadcast = false) {
  OnnxBuilder b;
  b.input("x", {2, 4, 16});
  if (broadcast) {
    b.initializer("r", {16}, PassTest::random_floats(rng, 16));
  } else {
    b.input("r", {2, 4, 16});
  }
  b.initializer("g", {16}, PassTest::random_floats(rng, 16, 0.5f, 1.5f));
  b.initializer("beta", {16}, PassTest::random_floats(rng, 16));
  b.node("Add", {"x", "r"}, {"s"}, "residual");
  auto& ln = b.node("LayerNormalization", {"s", "g", "beta"}, {"y"}, "ln");
  OnnxBuilder::attr_float(ln, "epsilon", 1e-5f);
  b.output("y", {2, 4, 16});
  if (sum_read_again) {  // the next block's residual (pre-norm transformers)
    b.node("Mul", {"s", "s"}, {"z"}, "next");
    b.output("z", {2, 4, 16});
  }
  return b;
}

TEST_F(AddLayerNormPassTest, PostNormResidualBecomesAddLayerNorm) {
  std::mt19937 rng(12);
  const OnnxBuilder b = residual_norm(rng, false);
  const compiler::Graph g = optimized(b);
  const auto ops = op_counts(g);
  EXPECT_EQ(ops.at("AddLayerNorm"), 1);
  EXPECT_EQ(ops.count("Add"), 0u);
  EXPECT_EQ(ops.count("LayerNormalization"), 0u);
  for (const compiler::IrNode& n : g.nodes) {
    if (n.op_type == "AddLayerNorm") {
      EXPECT_EQ(n.outputs.size(), 1u);
    }
  }
  expect_same_outputs(
      b, {random_tensor(rng, {2, 4, 16}, -3.0f, 3.0f), random_tensor(rng, {2, 4, 16})});
}

TEST_F(AddLayerNormPassTest, PreNormResidualKeepsTheSumAsASecondOutput) {
  std::mt19937 rng(13);
  const OnnxBuilder b = residual_norm(rng, true);
  const compiler::Graph g = optimized(b);
  EXPECT_EQ(op_counts(g).at("AddLayerNorm"), 1);
  for (const compiler::IrNode& n : g.nodes) {
    if (n.op_type == "AddLayerNorm") {
      EXPECT_EQ(n.outputs.size(), 2u);
    }
  }
  expect_same_outputs(b, {random_tensor(rng, {2, 4, 16}), random_tensor(rng, {2, 4, 16})});
}

TEST_F(AddLayerNormPassTest, ABroadcastingAddIsLeftUnchanged) {
  std::mt19937 rng(14);
  const auto ops = op_counts(optimized(residual_norm(rng, false, true)));
  EXPECT_EQ(ops.count("AddLayerNorm"), 0u);
  EXPECT_EQ(ops.at("LayerNormalization"), 1);
}

}  // namespace
}  // namespace baton::testing
