// einsum: in a GPU compile an Einsum of two operands that is one batched matrix product becomes
// Transposes, Reshapes and a MatMul, each checked here node by node (the GPU conformance cases run
// the result against the CPU's Einsum kernel); other forms, and CPU compiles, keep the Einsum.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class EinsumPassTest : public PassTest {};

OnnxBuilder einsum(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes,
                   const std::vector<int64_t>& out) {
  OnnxBuilder b(17);
  std::vector<std::string> names;
  for (size_t i = 0; i < shapes.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    b.input(names.back(), shapes[i]);
  }
  auto& n = b.node("Einsum", names, {"y"}, "einsum");
  OnnxBuilder::attr_string(n, "equation", equation);
  b.output("y", out);
  return b;
}

compiler::OptimizeOptions for_gpu() {
  compiler::OptimizeOptions o;
  o.gpu_target = true;
  return o;
}

TEST_F(EinsumPassTest, AttentionScoresBecomeOneBatchedMatMulWithKTransposed) {
  const compiler::Graph g =
      optimized(einsum("bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}, {2, 3, 4, 5}), for_gpu());
  const auto ops = op_counts(g);
  EXPECT_EQ(ops.count("Einsum"), 0u);
  EXPECT_EQ(ops.at("MatMul"), 1);
  EXPECT_EQ(ops.at("Transpose"), 1);  // K only: Q is already [batch, free, summed]
  EXPECT_EQ(ops.at("Reshape"), 3);
  const compiler::IrNode* mm = only(g, "MatMul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(g.values[mm->inputs[0]].sizes, (std::vector<int64_t>{6, 4, 8}));
  EXPECT_EQ(g.values[mm->inputs[1]].sizes, (std::vector<int64_t>{6, 8, 5}));
  const compiler::IrNode* t = only(g, "Transpose");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->attr_ints("perm"), (std::vector<int64_t>{0, 1, 3, 2}));
  EXPECT_EQ(g.values[g.outputs[0]].sizes, (std::vector<int64_t>{2, 3, 4, 5}));
}

TEST_F(EinsumPassTest, AnOutputInAnotherOrderEndsWithATranspose) {
  // C = (A B)^T: the product is [i, k], the output [k, i].
  const compiler::Graph g = optimized(einsum("ij,jk->ki", {{5, 7}, {7, 3}}, {3, 5}), for_gpu());
  const auto ops = op_counts(g);
  EXPECT_EQ(ops.at("MatMul"), 1);
  const compiler::IrNode* t = only(g, "Transpose");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->attr_ints("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(g.values[t->inputs[0]].sizes, (std::vector<int64_t>{5, 3}));
  // An outer product sums nothing: K = 1.
  const compiler::Graph outer = optimized(einsum("i,j->ij", {{3}, {4}}, {3, 4}), for_gpu());
  const compiler::IrNode* mm = only(outer, "MatMul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(outer.values[mm->inputs[0]].sizes, (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(outer.values[mm->inputs[1]].sizes, (std::vector<int64_t>{1, 1, 4}));
}

TEST_F(EinsumPassTest, OtherFormsAndCpuCompilesKeepTheEinsum) {
  struct Kept {
    const char* equation;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<int64_t> out;
  };
  const Kept kept[] = {
      {"ii->i", {{4, 4}}, {4}},                                  // a diagonal
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {2, 2}},        // three operands
      {"ij,jk->i", {{2, 3}, {3, 4}}, {2}},                       // k summed in B alone
      {"...ij,...jk", {{2, 1, 3, 4}, {3, 4, 2}}, {2, 3, 3, 2}},  // a broadcast dimension
      {"ij,jk->ik", {{2, 0}, {0, 3}}, {2, 3}},                   // nothing to multiply
  };
  for (const Kept& k : kept) {
    SCOPED_TRACE(k.equation);
    const auto ops = op_counts(optimized(einsum(k.equation, k.shapes, k.out), for_gpu()));
    EXPECT_EQ(ops.at("Einsum"), 1);
    EXPECT_EQ(ops.count("MatMul"), 0u);
  }
  const auto cpu = op_counts(optimized(einsum("ij,jk->ik", {{5, 7}, {7, 3}}, {5, 3})));
  EXPECT_EQ(cpu.at("Einsum"), 1);
}

}  // namespace
}  // namespace baton::testing
