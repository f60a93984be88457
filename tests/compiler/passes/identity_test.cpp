// identity: nodes that copy their input unchanged (a Cast to its own dtype, an Expand to its own
// shape, a Gather of every index of an axis in order) become Identity; near-misses stay.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class IdentityPassTest : public PassTest {};

// x -> Cast(float) -> Expand(own shape) -> Gather(0..3, axis 2) -> Gather(-4..-1, axis -1) -> Tanh.
OnnxBuilder copies() {
  OnnxBuilder b;
  b.input("x", {2, 3, 4});
  b.initializer_int64("shape", {3}, {2, 3, 4});
  b.initializer_int64("all", {4}, {0, 1, 2, 3});
  b.initializer_int64("all_negative", {4}, {-4, -3, -2, -1});
  auto& cast = b.node("Cast", {"x"}, {"c"}, "cast");
  OnnxBuilder::attr_int(cast, "to", 1);  // float
  b.node("Expand", {"c", "shape"}, {"e"}, "expand");
  auto& g = b.node("Gather", {"e", "all"}, {"g"}, "gather");
  OnnxBuilder::attr_int(g, "axis", 2);
  auto& g2 = b.node("Gather", {"g", "all_negative"}, {"g2"}, "gather_negative");
  OnnxBuilder::attr_int(g2, "axis", -1);
  b.node("Tanh", {"g2"}, {"y"}, "tanh");
  b.output("y", {2, 3, 4});
  return b;
}

TEST_F(IdentityPassTest, CopiesOfTheInputBecomeIdentity) {
  std::mt19937 rng(1);
  const OnnxBuilder b = copies();
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Cast"), 0u);
  EXPECT_EQ(ops.count("Expand"), 0u);
  EXPECT_EQ(ops.count("Gather"), 0u);
  EXPECT_EQ(ops.at("Identity"), 4);
  expect_same_outputs(b, {random_tensor(rng, {2, 3, 4})});

  compiler::OptimizeOptions off;
  off.disabled = {"identity"};
  const auto kept = op_counts(optimized(b, off));
  EXPECT_EQ(kept.at("Cast"), 1);
  EXPECT_EQ(kept.at("Expand"), 1);
  EXPECT_EQ(kept.at("Gather"), 2);
}

// A Gather of every index in order whose indices have another shape ([2, 2] over an axis of 4)
// is the input reshaped: a Reshape (BERT's mask chain gathers its positions this way).
TEST_F(IdentityPassTest, AGatherOfEveryIndexUnderAnotherShapeBecomesReshape) {
  std::mt19937 rng(3);
  OnnxBuilder b;
  b.input("x", {3, 4});
  b.initializer_int64("all", {2, 2}, {0, 1, 2, 3});
  auto& g = b.node("Gather", {"x", "all"}, {"g"}, "gather");
  OnnxBuilder::attr_int(g, "axis", 1);
  b.node("Tanh", {"g"}, {"y"}, "tanh");
  b.output("y", {3, 2, 2});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Gather"), 0u);
  EXPECT_EQ(ops.at("Reshape"), 1);
  expect_same_outputs(b, {random_tensor(rng, {3, 4})});
}

// Baton defines Identity and Reshape from opset 13: an opset-9 model keeps its copies, and
// compiles (ONNX's test_expand_shape_model1 is such a model).
TEST_F(IdentityPassTest, ModelsBeforeOpset13KeepTheirCopies) {
  std::mt19937 rng(4);
  OnnxBuilder b(9);
  b.input("x", {2, 3});
  b.initializer_int64("shape", {2}, {2, 3});
  b.node("Expand", {"x", "shape"}, {"e"}, "expand");
  b.node("Tanh", {"e"}, {"y"}, "tanh");
  b.output("y", {2, 3});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.at("Expand"), 1);
  EXPECT_EQ(ops.count("Identity"), 0u);
  expect_same_outputs(b, {random_tensor(rng, {2, 3})});
}

// A Cast to another dtype, an Expand that broadcasts, a Gather that permutes, one that takes a
// subset and one whose indices are an input all change their input: none is rewritten.
TEST_F(IdentityPassTest, NodesThatChangeTheirInputStay) {
  std::mt19937 rng(2);
  OnnxBuilder b;
  b.input("x", {2, 1, 4});
  b.input("i", {4}, /*elem=*/7);  // int64 indices known only at run time
  b.initializer_int64("shape", {3}, {2, 3, 4});
  b.initializer_int64("permuted", {4}, {0, 2, 1, 3});
  b.initializer_int64("subset", {3}, {0, 1, 2});
  auto& cast = b.node("Cast", {"x"}, {"h"}, "to_half");
  OnnxBuilder::attr_int(cast, "to", 10);  // float16
  auto& back = b.node("Cast", {"h"}, {"c"}, "to_float");
  OnnxBuilder::attr_int(back, "to", 1);
  b.node("Expand", {"c", "shape"}, {"e"}, "broadcast");
  auto& p = b.node("Gather", {"e", "permuted"}, {"p"}, "permute");
  OnnxBuilder::attr_int(p, "axis", 2);
  auto& s = b.node("Gather", {"p", "subset"}, {"s"}, "subset");
  OnnxBuilder::attr_int(s, "axis", 2);
  auto& r = b.node("Gather", {"e", "i"}, {"r"}, "runtime_indices");
  OnnxBuilder::attr_int(r, "axis", 2);
  b.output("s", {2, 3, 3});
  b.output("r", {2, 3, 4});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Identity"), 0u);
  EXPECT_EQ(ops.at("Cast"), 2);
  EXPECT_EQ(ops.at("Expand"), 1);
  EXPECT_EQ(ops.at("Gather"), 3);
  (void)rng;
}

}  // namespace
}  // namespace baton::testing
