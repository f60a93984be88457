// cse: the same op on the same inputs (equal constants count as the same) is computed once.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class CsePassTest : public PassTest {};

// What BERT's exporters write per layer: the mask becomes an additive bias through a Where with
// the layer's own copies of the two constants. `fill` gives each layer's masked value.
OnnxBuilder layers_with_their_own_mask_bias(const std::vector<float>& fill) {
  OnnxBuilder b;
  b.input("x", {2, 4, 6});
  b.input("m", {2, 4, 6});
  PassTest::scalar(b, "zero", 0.0f);
  b.node("Greater", {"m", "zero"}, {"keep"}, "keep");
  std::string h = "x";
  for (size_t i = 0; i < fill.size(); ++i) {
    const std::string l = std::to_string(i);
    PassTest::scalar(b, "open" + l, 0.0f);
    PassTest::scalar(b, "fill" + l, fill[i]);
    b.node("Where", {"keep", "open" + l, "fill" + l}, {"bias" + l}, "where" + l);
    b.node("Add", {h, "bias" + l}, {"sum" + l}, "add" + l);
    b.node("Tanh", {"sum" + l}, {"h" + l}, "tanh" + l);
    h = "h" + l;
  }
  b.node("Identity", {h}, {"y"}, "y");
  b.output("y", {2, 4, 6});
  return b;
}

TEST_F(CsePassTest, EachLayersMaskBiasIsComputedOnce) {
  std::mt19937 rng(1);
  const OnnxBuilder b = layers_with_their_own_mask_bias({-5.0f, -5.0f, -5.0f});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.at("Where"), 1);
  EXPECT_EQ(ops.at("Add"), 3);
  EXPECT_EQ(ops.at("Tanh"), 3);
  expect_same_outputs(b, {random_tensor(rng, {2, 4, 6}), random_tensor(rng, {2, 4, 6})});

  compiler::OptimizeOptions no_cse;
  no_cse.disabled = {"cse"};
  EXPECT_EQ(op_counts(optimized(b, no_cse)).at("Where"), 3);
}

TEST_F(CsePassTest, ConstantsOfOtherValuesKeepTheirNodes) {
  std::mt19937 rng(2);
  const OnnxBuilder b = layers_with_their_own_mask_bias({-5.0f, -5.0f, -4.0f});
  EXPECT_EQ(op_counts(optimized(b)).at("Where"), 2);
  expect_same_outputs(b, {random_tensor(rng, {2, 4, 6}), random_tensor(rng, {2, 4, 6})});
}

TEST_F(CsePassTest, OtherAttributesKeepTheirNodes) {
  std::mt19937 rng(3);
  OnnxBuilder b;
  b.input("x", {3, 5});
  for (int i = 0; i < 3; ++i) {
    auto& s = b.node("Softmax", {"x"}, {"s" + std::to_string(i)}, "softmax" + std::to_string(i));
    OnnxBuilder::attr_int(s, "axis", i == 2 ? 0 : 1);  // two over rows, one over columns
  }
  b.node("Add", {"s0", "s1"}, {"a"}, "add");
  b.node("Add", {"a", "s2"}, {"y"}, "add2");
  b.output("y", {3, 5});
  EXPECT_EQ(op_counts(optimized(b)).at("Softmax"), 2);
  expect_same_outputs(b, {random_tensor(rng, {3, 5})});
}

TEST_F(CsePassTest, ChainsMergeThroughMergedNodes) {
  std::mt19937 rng(4);
  OnnxBuilder b;
  b.input("x", {7});
  for (const char* l : {"a", "b"}) {
    const std::string s(l);
    b.node("Relu", {"x"}, {"r" + s}, "relu_" + s);
    b.node("Neg", {"r" + s}, {"n" + s}, "neg_" + s);
  }
  b.node("Sub", {"na", "x"}, {"d"}, "sub");   // the operands' order matters: not merged with...
  b.node("Sub", {"x", "nb"}, {"e"}, "sub2");  // ...this one
  b.node("Mul", {"d", "e"}, {"y"}, "mul");
  b.output("y", {7});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.at("Relu"), 1);
  EXPECT_EQ(ops.at("Neg"), 1);
  EXPECT_EQ(ops.at("Sub"), 2);
  expect_same_outputs(b, {random_tensor(rng, {7})});
}

TEST_F(CsePassTest, GraphOutputsKeepTheirOwnNodes) {
  std::mt19937 rng(5);
  OnnxBuilder b;
  b.input("x", {2, 3});
  b.node("Relu", {"x"}, {"y0"}, "relu0");
  b.node("Relu", {"x"}, {"y1"}, "relu1");
  b.node("Relu", {"x"}, {"r"}, "relu2");  // not an output: merged into relu0
  b.node("Neg", {"r"}, {"y2"}, "neg");
  b.output("y0", {2, 3});
  b.output("y1", {2, 3});
  b.output("y2", {2, 3});
  EXPECT_EQ(op_counts(optimized(b)).at("Relu"), 2);
  expect_same_outputs(b, {random_tensor(rng, {2, 3})});
}

}  // namespace
}  // namespace baton::testing
