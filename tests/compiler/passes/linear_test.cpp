// matmul-add and qkv: MatMul + bias Add becomes a Linear; Linears sharing their input become one
// Linear with split outputs; near misses stay.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class LinearPassTest : public PassTest {};

TEST_F(LinearPassTest, MatMulThenBiasAddOnEitherSideBecomesLinear) {
  std::mt19937 rng(7);
  for (bool bias_first : {false, true}) {
    SCOPED_TRACE(bias_first ? "Add(B, XW)" : "Add(XW, B)");
    OnnxBuilder b;
    b.input("x", {2, 3, 8});
    b.initializer("w", {8, 5}, random_floats(rng, 40));
    b.initializer("b", {5}, random_floats(rng, 5));
    b.node("MatMul", {"x", "w"}, {"xw"}, "mm");
    if (bias_first) {
      b.node("Add", {"b", "xw"}, {"y"}, "add");
    } else {
      b.node("Add", {"xw", "b"}, {"y"}, "add");
    }
    b.output("y", {2, 3, 5});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("Linear"), 1);
    EXPECT_EQ(ops.count("MatMul"), 0u);
    EXPECT_EQ(ops.count("Add"), 0u);
    expect_same_outputs(b, {random_tensor(rng, {2, 3, 8})});
  }
}

TEST_F(LinearPassTest, ABiasOfShapeOneByNIsReshaped) {
  std::mt19937 rng(8);
  OnnxBuilder b;
  b.input("x", {4, 6});
  b.initializer("w", {6, 3}, random_floats(rng, 18));
  b.initializer("b", {1, 3}, random_floats(rng, 3));
  b.node("MatMul", {"x", "w"}, {"xw"}, "mm");
  b.node("Add", {"xw", "b"}, {"y"}, "add");
  b.output("y", {4, 3});
  EXPECT_EQ(op_counts(optimized(b)).at("Linear"), 1);
  expect_same_outputs(b, {random_tensor(rng, {4, 6})});
}

TEST_F(LinearPassTest, AFullMatrixAddOrAProductReadElsewhereIsLeftUnchanged) {
  std::mt19937 rng(9);
  {
    OnnxBuilder b;  // the addend is [M, N], not a bias
    b.input("x", {4, 6});
    b.input("c", {4, 3});
    b.initializer("w", {6, 3}, random_floats(rng, 18));
    b.node("MatMul", {"x", "w"}, {"xw"}, "mm");
    b.node("Add", {"xw", "c"}, {"y"}, "add");
    b.output("y", {4, 3});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.count("Linear"), 0u);
    EXPECT_EQ(ops.at("MatMul"), 1);
  }
  {
    OnnxBuilder b;  // the product is also an output
    b.input("x", {4, 6});
    b.initializer("w", {6, 3}, random_floats(rng, 18));
    b.initializer("b", {3}, random_floats(rng, 3));
    b.node("MatMul", {"x", "w"}, {"xw"}, "mm");
    b.node("Add", {"xw", "b"}, {"y"}, "add");
    b.output("y", {4, 3});
    b.output("xw", {4, 3});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.count("Linear"), 0u);
    EXPECT_EQ(ops.at("Add"), 1);
  }
}

// BERT's query, key and value projections of one input.
OnnxBuilder three_projections(std::mt19937& rng, bool constant_weights) {
  OnnxBuilder b;
  b.input("x", {2, 5, 12});
  const char* names[] = {"q", "k", "v"};
  const int64_t widths[] = {12, 12, 8};
  for (int i = 0; i < 3; ++i) {
    const std::string n = names[i];
    if (constant_weights) {
      b.initializer("w" + n, {12, widths[i]}, PassTest::random_floats(rng, 12 * widths[i]));
    } else {
      b.input("w" + n, {12, widths[i]});
    }
    b.initializer("b" + n, {widths[i]}, PassTest::random_floats(rng, widths[i]));
    b.node("MatMul", {"x", "w" + n}, {n + "_mm"}, n + "/MatMul");
    b.node("Add", {"b" + n, n + "_mm"}, {n}, n + "/Add");
    b.output(n, {2, 5, widths[i]});
  }
  return b;
}

TEST_F(LinearPassTest, ProjectionsOfOneInputBecomeOneLinearWithSplits) {
  std::mt19937 rng(10);
  const OnnxBuilder b = three_projections(rng, true);
  const compiler::Graph g = optimized(b);
  const auto ops = op_counts(g);
  ASSERT_EQ(ops.at("Linear"), 1);
  for (const compiler::IrNode& n : g.nodes) {
    if (n.op_type != "Linear") continue;
    EXPECT_EQ(n.attr_ints("splits"), (std::vector<int64_t>{12, 12, 8}));
    EXPECT_EQ(n.outputs.size(), 3u);
  }
  expect_same_outputs(b, {random_tensor(rng, {2, 5, 12})});
}

TEST_F(LinearPassTest, ProjectionsWithRuntimeWeightsStaySeparate) {
  std::mt19937 rng(11);
  const OnnxBuilder b = three_projections(rng, false);
  EXPECT_EQ(op_counts(optimized(b)).at("Linear"), 3);
  compiler::OptimizeOptions no_qkv;
  no_qkv.disabled = {"qkv"};
  EXPECT_EQ(op_counts(optimized(three_projections(rng, true), no_qkv)).at("Linear"), 3);
}

}  // namespace
}  // namespace baton::testing
