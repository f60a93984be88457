// add-layernorm: a residual Add followed by LayerNormalization becomes AddLayerNorm, producing
// the sum too when something else reads it, also when R is broadcast over X's leading dimensions;
// other broadcasting Adds stay.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class AddLayerNormPassTest : public PassTest {};

OnnxBuilder residual_norm(std::mt19937& rng, bool sum_read_again) {
  OnnxBuilder b;
  b.input("x", {2, 4, 16});
  b.input("r", {2, 4, 16});
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

// R broadcast over X's leading dimensions ([16], [4, 16], [1, 4, 16] against [2, 4, 16]: a
// position embedding shared by the batch), on either side of the Add: AddLayerNorm, whose row i
// adds R's row i % rows(R), on the CPU as the decomposition computes it.
OnnxBuilder broadcast_residual(const std::vector<int64_t>& r_shape, bool r_first) {
  std::mt19937 rng(15);
  OnnxBuilder b;
  b.input("x", {2, 4, 16});
  b.input("r", r_shape);
  b.initializer("g", {16}, PassTest::random_floats(rng, 16, 0.5f, 1.5f));
  b.initializer("beta", {16}, PassTest::random_floats(rng, 16));
  b.node("Add", r_first ? std::vector<std::string>{"r", "x"} : std::vector<std::string>{"x", "r"},
         {"s"}, "residual");
  auto& ln = b.node("LayerNormalization", {"s", "g", "beta"}, {"y"}, "ln");
  OnnxBuilder::attr_float(ln, "epsilon", 1e-5f);
  b.output("y", {2, 4, 16});
  b.node("Mul", {"s", "s"}, {"z"}, "next");  // the sum read again: AddLayerNorm's Sum output
  b.output("z", {2, 4, 16});
  return b;
}

TEST_F(AddLayerNormPassTest, AResidualBroadcastOverTheLeadingDimensionsBecomesAddLayerNorm) {
  std::mt19937 rng(14);
  for (const std::vector<int64_t>& r_shape :
       {std::vector<int64_t>{16}, std::vector<int64_t>{4, 16}, std::vector<int64_t>{1, 4, 16}}) {
    for (bool r_first : {false, true}) {
      const OnnxBuilder b = broadcast_residual(r_shape, r_first);
      const auto ops = op_counts(optimized(b));
      EXPECT_EQ(ops.at("AddLayerNorm"), 1) << r_shape.size() << " " << r_first;
      EXPECT_EQ(ops.count("LayerNormalization"), 0u);
      expect_same_outputs(
          b, {random_tensor(rng, {2, 4, 16}, -3.0f, 3.0f), random_tensor(rng, r_shape)});
    }
  }
}

// R broadcast inside the rows' leading dimensions ([2, 1, 16]: one row per batch item, not a
// run of X's last rows) is not a row of R per i % rows(R): the Add stays.
TEST_F(AddLayerNormPassTest, AResidualBroadcastAnywhereElseIsLeftUnchanged) {
  const auto ops = op_counts(optimized(broadcast_residual({2, 1, 16}, false)));
  EXPECT_EQ(ops.count("AddLayerNorm"), 0u);
  EXPECT_EQ(ops.at("LayerNormalization"), 1);
}

}  // namespace
}  // namespace baton::testing
