// Method::execute allocates nothing: every heap allocation in the process (our code, the C++
// library, fmt, OpenBLAS's threads) is counted while execute runs.
#include <gtest/gtest.h>

#include <random>

#include "baton/baton.h"
#include "baton/runtime/program.h"
#include "testing/alloc/counting_allocator.h"
#include "testing/program_builder.h"
#include "testing/random.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

// A program touching many kernels: Gemm with bias, MatMul, Softmax, Transpose, Reshape, Concat,
// Gelu, elementwise ops, and a delegate call.
std::vector<uint8_t> busy_program() {
  testing::ProgramBuilder b;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto floats = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng);
    return v;
  };
  const int x = b.tensor("x", DType::Float32, {8, 64});
  const int w = b.constant_floats("w", {96, 64}, floats(96 * 64));
  const int bias = b.constant_floats("bias", {96}, floats(96));
  const int h = b.tensor("h", DType::Float32, {8, 96});
  b.kernel(b.op("Gemm"), {x, w, bias},
           {b.float_value(1.0), b.float_value(1.0), b.int_value(0), b.int_value(1)}, {h}, "fc");
  const int g = b.tensor("g", DType::Float32, {8, 96});
  b.kernel(b.op("Gelu", 20), {h}, {b.string_value("none")}, {g}, "gelu");
  const int shape = b.constant_int64s("shape", {3}, {8, 12, 8});
  const int r = b.tensor("r", DType::Float32, {8, 12, 8});
  b.kernel(b.op("Reshape"), {g, shape}, {b.int_value(0)}, {r}, "reshape");
  const int t = b.tensor("t", DType::Float32, {8, 8, 12});
  b.kernel(b.op("Transpose"), {r}, {b.ints_value({0, 2, 1})}, {t}, "transpose");
  const int mm = b.tensor("mm", DType::Float32, {8, 12, 12});
  b.kernel(b.op("MatMul"), {r, t}, {}, {mm}, "matmul");
  const int sm = b.tensor("sm", DType::Float32, {8, 12, 12});
  b.kernel(b.op("Softmax"), {mm}, {b.int_value(2)}, {sm}, "softmax");
  const int cat = b.tensor("cat", DType::Float32, {8, 24, 12});
  b.kernel(b.op("Concat"), {sm, sm}, {b.int_value(1)}, {cat}, "concat");
  const int added = b.tensor("added", DType::Float32, {8, 24, 12});
  b.kernel(b.op("Add"), {cat, cat}, {}, {added}, "add");
  const int out = b.tensor("out", DType::Float32, {8, 24, 12});
  const auto blob = testing::make_test_blob(
      1, 1, {}, 1, {{testing::TestOp::Relu, 0, 0, 1}, {testing::TestOp::Mul, 1, 1, 2}},
      8 * 24 * 12);
  b.delegate_call(b.delegate(testing::kTestBackendId, {}, blob), {added}, {out});
  b.inputs({x});
  b.outputs({out});
  return b.bytes();
}

TEST(NoAllocTest, ExecuteAllocatesNothing) {
  if (!testing::counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  register_builtins();
  testing::register_test_backend();
  auto program = runtime::Program::load_bytes(busy_program());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  std::mt19937 rng(1);
  Tensor x = testing::random_tensor(rng, {8, 64});
  ASSERT_TRUE((*method)->set_input(0, x.view()).ok());
  // First runs may let libraries set up their thread pools and buffers.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*method)->execute().ok());
  int64_t allocations = 0;
  {
    testing::CountAllocations count;
    for (int i = 0; i < 20; ++i) {
      if (!(*method)->execute().ok()) break;
    }
    allocations = count.count();
  }
  EXPECT_EQ(allocations, 0);
  // The counter works: an allocation in scope is seen.
  {
    testing::CountAllocations count;
    auto* p = new std::vector<int>(100);
    delete p;
    EXPECT_GE(count.count(), 1);
  }
}

}  // namespace
}  // namespace baton
