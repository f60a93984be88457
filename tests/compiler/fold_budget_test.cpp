// Constant folding within a byte budget (CompileOptions::max_fold_bytes, max_total_fold_bytes),
// and arenas within CompileOptions::max_arena_bytes: a few bytes of model asking for terabytes get
// an error naming the node, and nothing of that size is ever allocated.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>

#include "compiler/robustness.h"
#include "testing/run_compiled.h"

namespace baton::testing {
namespace {

using compiler::CompileOptions;

// Add of a constant [n, 1] and [1, n]: 2n floats of model, n^2 floats folded.
OnnxBuilder outer_sum(int64_t n) {
  OnnxBuilder b;
  b.input("x", {1});
  b.initializer("col", {n, 1}, std::vector<float>(static_cast<size_t>(n), 1.0f));
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = static_cast<float>(i % 7);
  b.initializer("row", {1, n}, row);
  b.node("Add", {"col", "row"}, {"grid"}, "outer_sum");
  b.node("Add", {"grid", "x"}, {"y"}, "plus_x");
  b.output("y", {n, n});
  return b;
}

TEST_F(RobustnessTest, FoldingOverTheBudgetKeepsTheNodeAndGivesTheSameResult) {
  const OnnxBuilder b = outer_sum(64);  // a 16 KiB folded output
  Tensor x = Tensor::empty(DType::Float32, {1}).value();
  x.data_as<float>()[0] = 0.5f;

  auto folded = compile(b);
  ASSERT_TRUE(folded.ok()) << folded.status().to_string();
  EXPECT_EQ(folded->summary().folded_nodes, 1u);
  EXPECT_TRUE(folded->summary().unfolded_nodes.empty());
  EXPECT_EQ(folded->summary().kernel_calls, 1u);

  CompileOptions small;
  small.max_fold_bytes = 16 * 1024 - 1;
  auto kept = compile(b, small);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_EQ(kept->summary().folded_nodes, 0u);
  EXPECT_EQ(kept->summary().unfolded_nodes,
            std::vector<std::string>{"Add node 'outer_sum' (16384 bytes)"});
  EXPECT_EQ(kept->summary().kernel_calls, 2u);
  EXPECT_LT(kept->summary().constant_bytes, folded->summary().constant_bytes);

  const auto a = run_compiled(*folded, {x});
  const auto c = run_compiled(*kept, {x});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(c.size(), 1u);
  ASSERT_EQ(a[0].sizes(), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(std::memcmp(a[0].data(), c[0].data(), a[0].nbytes()), 0);
  EXPECT_FLOAT_EQ(a[0].data_as<float>()[64 + 3], 1.0f + 3.0f + 0.5f);
}

// A constant MatMul whose batch dimensions broadcast ([64, 1, 1, 32] x [1, 64, 32, 16]: 4096
// products of [1, 32] x [32, 16], 2.1e6 multiply-adds from 36K weights) is not folded under a
// work budget of 1e6: it is named with its work and runs at run time, with the same result. An
// Einsum of disjoint constant operands ("abcd,efgh,ijkl->", 2.8e14 steps as one loop nest at
// 52eb145, a hang in folding) is cheap pairwise and folds.
TEST_F(RobustnessTest, FoldingOverTheWorkBudgetIsLeftToRunTime) {
  OnnxBuilder b;
  b.input("x", {1});
  b.initializer("a", {64, 1, 1, 32}, std::vector<float>(64 * 32, 0.5f));
  b.initializer("b", {1, 64, 32, 16}, std::vector<float>(64 * 32 * 16, 0.25f));
  b.node("MatMul", {"a", "b"}, {"ab"}, "broadcast_matmul");  // [64, 64, 1, 16]
  b.node("Add", {"ab", "x"}, {"y"}, "plus_x");
  b.output("y", {64, 64, 1, 16});
  CompileOptions tight;
  tight.max_fold_work = 1e6;
  auto kept = compile(b, tight);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_EQ(kept->summary().folded_nodes, 0u);
  EXPECT_EQ(kept->summary().unfolded_nodes,
            std::vector<std::string>{"MatMul node 'broadcast_matmul' (2.1e+06 operations)"});
  auto folded = compile(b);
  ASSERT_TRUE(folded.ok()) << folded.status().to_string();
  EXPECT_EQ(folded->summary().folded_nodes, 1u);
  Tensor x = Tensor::empty(DType::Float32, {1}).value();
  x.data_as<float>()[0] = 1.0f;
  const auto a = run_compiled(*kept, {x});
  const auto c = run_compiled(*folded, {x});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(std::memcmp(a[0].data(), c[0].data(), a[0].nbytes()), 0);
  EXPECT_FLOAT_EQ(a[0].data_as<float>()[5], 32 * 0.5f * 0.25f + 1.0f);

  OnnxBuilder e;
  e.input("x", {1});
  for (const char* name : {"p", "q", "r"}) {
    e.initializer(name, {16, 16, 16, 16}, std::vector<float>(65536, 1.0f / 256));
  }
  auto& n = e.node("Einsum", {"p", "q", "r"}, {"s"}, "disjoint");
  auto* eq = n.add_attribute();
  eq->set_name("equation");
  eq->set_type(onnx::AttributeProto::STRING);
  eq->set_s("abcd,efgh,ijkl->");
  e.node("Add", {"s", "x"}, {"y"}, "plus_x");
  e.output("y", {1});
  auto einsum = compile(e);
  ASSERT_TRUE(einsum.ok()) << einsum.status().to_string();
  EXPECT_EQ(einsum->summary().folded_nodes, 1u);
  const auto y = run_compiled(*einsum, {x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_FLOAT_EQ(y[0].data_as<float>()[0], 256.0f * 256.0f * 256.0f + 1.0f);
}

// A kept ConstantOfShape carries its `value` as a constant tensor attribute: the program the
// compiler writes loads and runs (the verifier used to refuse every tensor attribute).
TEST_F(RobustnessTest, AConstantOfShapeOverTheBudgetLoadsAndRuns) {
  OnnxBuilder b;
  b.input("x", {1});
  b.initializer_int64("shape", {2}, {64, 64});
  auto& fill = b.node("ConstantOfShape", {"shape"}, {"c"}, "fill");
  OnnxBuilder::attr_float_tensor(fill, "value", 1.5f);
  b.node("Add", {"c", "x"}, {"y"}, "plus_x");
  b.output("y", {64, 64});
  CompileOptions small;
  small.max_fold_bytes = 1024;
  auto kept = compile(b, small);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_EQ(kept->summary().unfolded_nodes,
            std::vector<std::string>{"ConstantOfShape node 'fill' (16384 bytes)"});
  Tensor x = Tensor::empty(DType::Float32, {1}).value();
  x.data_as<float>()[0] = 0.25f;
  const auto y = run_compiled(*kept, {x});
  ASSERT_EQ(y.size(), 1u);
  ASSERT_EQ(y[0].sizes(), (std::vector<int64_t>{64, 64}));
  for (int64_t i = 0; i < 64 * 64; ++i) ASSERT_EQ(y[0].data_as<float>()[i], 1.75f) << i;
}

TEST_F(RobustnessTest, TheTotalFoldBudgetStopsFoldingOnceSpent) {
  // Two independent 16 KiB folds; a total budget for one of them.
  OnnxBuilder b = outer_sum(64);
  b.node("Mul", {"col", "row"}, {"grid2"}, "outer_product");
  b.node("Add", {"grid2", "x"}, {"y2"}, "plus_x2");
  b.output("y2", {64, 64});
  CompileOptions options;
  options.max_total_fold_bytes = 20 * 1024;
  auto r = compile(b, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->summary().folded_nodes, 1u);
  EXPECT_EQ(r->summary().unfolded_nodes,
            std::vector<std::string>{"Mul node 'outer_product' (16384 bytes)"});
  EXPECT_TRUE(load(*r).ok());
}

// 8 MiB of model asking for a 4 TiB tensor: not folded (nothing allocated), and the arena it
// would need is refused at compile time, naming the node that makes it.
TEST_F(RobustnessTest, ATerabyteBroadcastIsNeverAllocated) {
  const OnnxBuilder b = outer_sum(int64_t{1} << 20);
  auto r = compile(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Error::InvalidArgument) << r.status().to_string();
  for (const char* needle :
       {"memory arena on cpu would be at least 4398046511104 bytes", "--max-arena-bytes",
        "'grid' float32 [1048576, 1048576] (4398046511104 bytes, made by Add node 'outer_sum')"}) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << needle << "\n"
                                                                    << r.status().to_string();
  }
  // Even with the arena limit at the format's maximum, folding never materializes it: the program
  // compiles (its runtime would have to allocate 8 TiB, and says so at load).
  CompileOptions unlimited;
  unlimited.max_arena_bytes = UINT64_MAX;
  r = compile(b, unlimited);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->summary().folded_nodes, 0u);
  EXPECT_EQ(r->summary().unfolded_nodes.size(), 1u);
  ASSERT_EQ(r->summary().arenas.size(), 1u);
  EXPECT_GE(r->summary().arenas[0].second, uint64_t{8} << 40);  // 'grid' and 'y', and 'x'
  EXPECT_LE(r->summary().arenas[0].second, (uint64_t{8} << 40) + 4096);
}

TEST_F(RobustnessTest, ArenasOverTheLimitAreNamedWithTheirLargestTensors) {
  OnnxBuilder b;
  b.input("x", {1024, 1024});  // 4 MiB in, 4 MiB out
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", {1024, 1024});
  CompileOptions options;
  options.max_arena_bytes = 6 << 20;
  auto r = compile(b, options);
  expect_error(r.status(), Error::InvalidArgument,
               "memory arena on cpu would be 8388608 bytes, over the limit of 6291456 bytes");
  expect_error(r.status(), Error::InvalidArgument, "made by Relu node 'relu'");
  options.max_arena_bytes = 8 << 20;
  EXPECT_TRUE(compile(b, options).ok());
}

}  // namespace
}  // namespace baton::testing
