// attention: the exporters' decomposed attention becomes one baton Attention; near misses stay.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class AttentionPassTest : public PassTest {};

// Q [2, 3, 5, 8] (batch, heads, queries, head size); K arrives as [batch, keys, heads, size] and
// is transposed to [batch, heads, size, keys] in one Transpose, as the TorchScript exporter does
// for BERT; both sides are scaled by 8^-1/4; an additive mask [2, 1, 1, 5].
OnnxBuilder bert_like(int64_t softmax_axis = -1) {
  OnnxBuilder b;
  b.input("q", {2, 3, 5, 8});
  b.input("k", {2, 5, 3, 8});
  b.input("v", {2, 3, 5, 8});
  b.input("mask", {2, 1, 1, 5});
  PassTest::scalar(b, "c", 0.5946035575f);  // 8^-1/4
  auto& t = b.node("Transpose", {"k"}, {"kt"}, "kt");
  OnnxBuilder::attr_ints(t, "perm", {0, 2, 3, 1});
  b.node("Mul", {"q", "c"}, {"qs"}, "mul_q");
  b.node("Mul", {"kt", "c"}, {"ks"}, "mul_k");
  b.node("MatMul", {"qs", "ks"}, {"s"}, "qk");
  b.node("Add", {"s", "mask"}, {"sm"}, "mask_add");
  auto& sm = b.node("Softmax", {"sm"}, {"p"}, "softmax");
  OnnxBuilder::attr_int(sm, "axis", softmax_axis);
  b.node("MatMul", {"p", "v"}, {"y"}, "pv");
  b.output("y", {2, 3, 5, 8});
  return b;
}

std::vector<Tensor> bert_inputs(std::mt19937& rng) {
  Tensor mask = random_tensor(rng, {2, 1, 1, 5}, -3.0f, 0.0f);
  mask.data_as<float>()[4] = -1e30f;  // one masked key
  return {random_tensor(rng, {2, 3, 5, 8}), random_tensor(rng, {2, 5, 3, 8}),
          random_tensor(rng, {2, 3, 5, 8}), mask};
}

TEST_F(AttentionPassTest, BertPatternWithAdditiveMaskBecomesOneAttention) {
  const OnnxBuilder b = bert_like();
  const compiler::Graph g = optimized(b);
  const auto ops = op_counts(g);
  EXPECT_EQ(ops.at("Attention"), 1);
  EXPECT_EQ(ops.count("Softmax"), 0u);
  EXPECT_EQ(ops.count("MatMul"), 0u);
  EXPECT_EQ(ops.count("Mul"), 0u);
  for (const compiler::IrNode& n : g.nodes) {
    if (n.op_type != "Attention") continue;
    EXPECT_NEAR(n.attr_float("scale"), 1.0 / std::sqrt(8.0), 1e-7);
    EXPECT_EQ(n.attr_int("k_transposed"), 1);
    EXPECT_EQ(n.attr_string("mask_kind"), "add");
  }
  std::mt19937 rng(5);
  expect_same_outputs(b, bert_inputs(rng));
}

// K [.., keys, size] through a Transpose of its last two dimensions, the scale as a Div after
// the product, no mask: the Transpose is absorbed (k_transposed 0).
TEST_F(AttentionPassTest, SwappedKAndDivisionAfterTheProductWithoutMask) {
  OnnxBuilder b;
  b.input("q", {3, 4, 16});
  b.input("k", {3, 6, 16});
  b.input("v", {3, 6, 5});
  scalar(b, "d", 4.0f);
  auto& t = b.node("Transpose", {"k"}, {"kt"}, "kt");
  OnnxBuilder::attr_ints(t, "perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  b.node("Div", {"s", "d"}, {"ss"}, "scale");
  auto& sm = b.node("Softmax", {"ss"}, {"p"}, "softmax");
  OnnxBuilder::attr_int(sm, "axis", -1);
  b.node("MatMul", {"p", "v"}, {"y"}, "pv");
  b.output("y", {3, 4, 5});
  const compiler::Graph g = optimized(b);
  const auto ops = op_counts(g);
  EXPECT_EQ(ops.at("Attention"), 1);
  EXPECT_EQ(ops.count("Transpose"), 0u);
  for (const compiler::IrNode& n : g.nodes) {
    if (n.op_type != "Attention") continue;
    EXPECT_DOUBLE_EQ(n.attr_float("scale"), 0.25);
    EXPECT_EQ(n.attr_int("k_transposed"), 0);
    EXPECT_EQ(n.attr_string("mask_kind"), "none");
  }
  std::mt19937 rng(6);
  expect_same_outputs(b, {random_tensor(rng, {3, 4, 16}), random_tensor(rng, {3, 6, 16}),
                          random_tensor(rng, {3, 6, 5})});
}

TEST_F(AttentionPassTest, SoftmaxOverAnotherAxisIsLeftUnchanged) {
  const auto ops = op_counts(optimized(bert_like(2)));
  EXPECT_EQ(ops.count("Attention"), 0u);
  EXPECT_EQ(ops.at("Softmax"), 1);
  EXPECT_EQ(ops.at("MatMul"), 2);
}

TEST_F(AttentionPassTest, ScoresReadElsewhereAreLeftUnchanged) {
  OnnxBuilder b = bert_like();
  b.output("p", {2, 3, 5, 5});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Attention"), 0u);
  EXPECT_EQ(ops.at("Softmax"), 1);
}

// A mask that broadcasts the scores to a larger shape is not an attention mask.
TEST_F(AttentionPassTest, AMaskThatWidensTheScoresIsLeftUnchanged) {
  OnnxBuilder b = bert_like();
  b.graph().mutable_input(3)->mutable_type()->mutable_tensor_type()->mutable_shape()->Clear();
  auto* shape = b.graph().mutable_input(3)->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int64_t d : {4, 2, 1, 1, 5}) shape->add_dim()->set_dim_value(d);
  b.graph().mutable_output(0)->Clear();
  b.graph().mutable_output()->RemoveLast();
  b.output("y", {4, 2, 3, 5, 8});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Attention"), 0u);
  EXPECT_EQ(ops.at("Softmax"), 1);
}

}  // namespace
}  // namespace baton::testing
