// Empty tensors whose other dimensions are huge: [0, 2^40, 2^40] holds no elements, but the outer
// and inner sizes, strides and broadcast steps that inference and kernel creation compute from it
// are 2^80. The definitions refuse such shapes (naming the node and the shape) before any kernel
// multiplies them; empty tensors whose nonzero sizes fit still run.
#include <gtest/gtest.h>

#include <functional>

#include "kernels/kernel_test_util.h"

namespace baton::testing {
namespace {

constexpr int64_t kBig = int64_t{1} << 40;

HostTensor empty_huge() { return HostTensor(DType::Float32, {0, kBig, kBig}); }

TEST(EmptyShapes, HugeOtherDimensionsAreRefusedBeforeAnyKernelMultipliesThem) {
  struct Case {
    const char* op;
    std::function<void(OpTester&)> build;
  };
  const Case cases[] = {
      {"Concat", [](OpTester& t) { t.input(empty_huge()).input(empty_huge()).attr("axis", 0); }},
      {"Concat", [](OpTester& t) { t.input(empty_huge()).input(empty_huge()).attr("axis", 2); }},
      {"Flatten", [](OpTester& t) { t.input(empty_huge()).attr("axis", 1); }},
      {"Softmax", [](OpTester& t) { t.input(empty_huge()).attr("axis", 0); }},
      {"Transpose", [](OpTester& t) { t.input(empty_huge()); }},
      {"Transpose",
       [](OpTester& t) {
         t.input(empty_huge()).attr("perm", std::vector<int64_t>{2, 0, 1});
       }},
      {"Add", [](OpTester& t) { t.input(empty_huge()).input(HostTensor(DType::Float32, {1})); }},
      {"Relu", [](OpTester& t) { t.input(empty_huge()); }},
      {"ReduceSum", [](OpTester& t) { t.input(empty_huge()).input(int64s({1})); }},
      {"ArgMin", [](OpTester& t) { t.input(empty_huge()).attr("axis", 1); }},
      {"Pad",
       [](OpTester& t) {
         t.input(empty_huge()).input(int64s({0, 0, 0, 0, 0, 0}));
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    OpTester t(c.op);
    c.build(t);
    // run(): inference, then kernel creation and one run, as the loader and the folder do. Under
    // UBSan a kernel that got this far would trip on signed overflow.
    expect_error(t.run(), Error::InvalidArgument, c.op, "[0, 1099511627776, 1099511627776]");
  }
}

// The same ops on empty tensors whose nonzero sizes fit: accepted, and nothing is written or
// allocated for them (a kernel that sized a buffer by the nonzero dimensions would ask for
// terabytes and throw std::bad_alloc out of the runtime).
TEST(EmptyShapes, EmptyTensorsWithLargeButFittingDimensionsStillRun) {
  const int64_t large = int64_t{1} << 20;
  const std::vector<int64_t> shape = {0, large, large};
  BATON_ASSERT_OK(
      OpTester("Softmax").input(HostTensor(DType::Float32, shape)).attr("axis", 0).run());
  BATON_ASSERT_OK(
      OpTester("Flatten").input(HostTensor(DType::Float32, shape)).attr("axis", 2).run());
  BATON_ASSERT_OK(OpTester("Transpose").input(HostTensor(DType::Float32, shape)).run());
  BATON_ASSERT_OK(OpTester("Concat")
                      .input(HostTensor(DType::Float32, shape))
                      .input(HostTensor(DType::Float32, shape))
                      .attr("axis", 1)
                      .run());
  BATON_ASSERT_OK(OpTester("Add")
                      .input(HostTensor(DType::Float32, shape))
                      .input(HostTensor(DType::Float32, {large}))
                      .run());
  // 2^40 broadcast batches of nothing: no per-batch bookkeeping may be sized by them.
  OpTester matmul("MatMul");
  matmul.input(HostTensor(DType::Float32, {int64_t{1} << 24, 1, 0, 1}))
      .input(HostTensor(DType::Float32, {1, int64_t{1} << 16, 1, 1}));
  BATON_ASSERT_OK(matmul.run());
  EXPECT_EQ(matmul.output().sizes, (std::vector<int64_t>{int64_t{1} << 24, 1 << 16, 0, 1}));
  // Softmax in a type computed through a buffer (float16), along an axis with a huge inner size.
  BATON_ASSERT_OK(
      OpTester("Softmax").input(HostTensor(DType::Float16, shape)).attr("axis", 0).run());
  // Reductions, ArgMax, Pad and Resize whose outputs are empty: no accumulator, plan or tap
  // table may be sized by the huge dimensions.
  for (const char* op : {"ReduceSum", "ReduceLogSumExp", "ReduceMean"}) {
    SCOPED_TRACE(op);
    BATON_ASSERT_OK(OpTester(op).input(HostTensor(DType::Float16, shape)).input(int64s({1})).run());
    BATON_ASSERT_OK(
        OpTester(op).input(HostTensor(DType::Float32, shape)).input(int64s({2, 1})).run());
  }
  BATON_ASSERT_OK(
      OpTester("ArgMax").input(HostTensor(DType::Float32, shape)).attr("axis", 2).run());
  BATON_ASSERT_OK(OpTester("Pad")
                      .input(HostTensor(DType::Float32, shape))
                      .input(int64s({0, 1, -3, 0, 2, 0}))
                      .attr("mode", std::string("edge"))
                      .run());
  OpTester resize("Resize");
  resize.input(HostTensor(DType::Float32, shape)).absent_input().absent_input();
  resize.input(int64s({0, large, large})).attr("mode", std::string("linear"));
  BATON_ASSERT_OK(resize.run());
  // LayerNormalization of no rows of 2^40 elements, with a broadcast Scale and B: at 52eb145 create
  // built an offset table for every element of a row (8 TiB) and threw std::bad_alloc.
  OpTester norm("LayerNormalization");
  norm.input(HostTensor(DType::Float32, {0, int64_t{1} << 40}))
      .input(HostTensor(DType::Float32, {1}))
      .input(HostTensor(DType::Float32, {1}))
      .attr("axis", 1);
  BATON_ASSERT_OK(norm.run());
}

// Concat's output size along the axis is a sum: refused when it leaves int64.
TEST(EmptyShapes, ConcatSizesThatSumPastInt64AreRefused) {
  const int64_t half = (int64_t{1} << 62) + 1;
  expect_error(OpTester("Concat")
                   .input(HostTensor(DType::UInt8, {0, half}))
                   .input(HostTensor(DType::UInt8, {0, half}))
                   .attr("axis", 1)
                   .infer(),
               Error::InvalidArgument, "Concat", "add up to more than int64 holds");
}

}  // namespace
}  // namespace baton::testing
