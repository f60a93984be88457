// Sqrt, Erf, Relu, Tanh, Sigmoid, Gelu and Softmax against double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/kernel_test_util.h"
#include "runtime/thread_pool.h"

namespace baton::testing {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{}, {1}, {7}, {3, 17}, {2, 3, 33}, {0, 5}};

struct UnaryCase {
  const char* op;
  float lo, hi;
  std::function<double(double)> ref;
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// 0.5 x (1 + erf(x / sqrt 2)), written with erfc so that double keeps the tail for x << 0.
double gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Unary, MatchesReference) {
  const UnaryCase cases[] = {
      {"Sqrt", 0.01f, 9.0f, [](double x) { return std::sqrt(x); }},
      {"Erf", -3.0f, 3.0f, [](double x) { return std::erf(x); }},
      {"Relu", -2.0f, 2.0f, [](double x) { return std::max(0.0, x); }},
      {"Tanh", -4.0f, 4.0f, [](double x) { return std::tanh(x); }},
      {"Sigmoid", -8.0f, 8.0f, sigmoid},
      {"Gelu", -5.0f, 5.0f, gelu_erf},
  };
  std::mt19937 rng(3);
  for (const UnaryCase& c : cases) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(std::string(c.op) + " " + shape_str(shape));
      HostTensor x = random_floats(rng, shape, c.lo, c.hi);
      OpTester t(c.op);
      t.input(x);
      BATON_ASSERT_OK(t.run());
      ASSERT_EQ(t.output().sizes, shape);
      std::vector<double> ref;
      for (double v : to_double(x)) ref.push_back(c.ref(v));
      expect_close(t.output(), ref);
    }
  }
}

// Large inputs split over a pool's threads (tasks of kElementwiseTaskElements): the same bits as
// one thread, for a row with an array form (Sigmoid), one without (Sqrt), a float16 tensor and a
// length that leaves a short last task; a small input stays on the calling thread.
TEST(Unary, LargeInputsSplitOverThePoolWithTheSameBits) {
  std::mt19937 rng(9);
  runtime::ThreadPool pool(3);
  for (const char* op : {"Sigmoid", "Sqrt", "Gelu"}) {
    for (DType dtype : {DType::Float32, DType::Float16}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(dtype)));
      const int64_t n = 3 * kernels::cpu::kElementwiseTaskElements + 123;
      HostTensor x = random_floats(rng, {n}, 0.01f, 6.0f);
      if (dtype != DType::Float32) x = cast_floats(x, dtype);
      expect_pool_gives_the_same_bits(op, {x}, pool);
    }
  }
  const uint64_t before = pool.dispatched();
  OpTester small("Sigmoid");
  small.pool(&pool).input(random_floats(rng, {1000}));
  BATON_ASSERT_OK(small.run());
  EXPECT_EQ(pool.dispatched(), before) << "a 1000-element Sigmoid went to the workers";
}

TEST(Unary, GeluTanhApproximation) {
  std::mt19937 rng(4);
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(shape_str(shape));
    HostTensor x = random_floats(rng, shape, -5.0f, 5.0f);
    OpTester t("Gelu");
    t.input(x).attr("approximate", std::string("tanh"));
    BATON_ASSERT_OK(t.run());
    std::vector<double> ref;
    for (double v : to_double(x)) ref.push_back(gelu_tanh(v));
    expect_close(t.output(), ref);
  }
}

// Large |x| must not overflow into inf / inf or lose the tail to cancellation.
TEST(Unary, ExtremeInputs) {
  const std::vector<float> xs = {-1000.0f, -88.0f, -30.0f, -9.0f,  -0.0f,
                                 0.0f,     9.0f,   30.0f,  1000.0f};
  const std::vector<int64_t> shape = {static_cast<int64_t>(xs.size())};
  const std::pair<const char*, std::function<double(double)>> cases[] = {
      {"Sigmoid", sigmoid}, {"Tanh", [](double x) { return std::tanh(x); }}, {"Gelu", gelu_erf}};
  for (const auto& [op, fn] : cases) {
    SCOPED_TRACE(op);
    OpTester t(op);
    t.input(make_tensor<float>(shape, xs));
    BATON_ASSERT_OK(t.run());
    std::vector<double> ref;
    // Float32 cannot hold the reference below its smallest subnormal: compare with what it can.
    for (float x : xs) ref.push_back(static_cast<float>(fn(x)));
    expect_close(t.output(), ref, 1e-5, 1e-30);
  }
  OpTester t("Gelu");
  t.input(make_tensor<float>(shape, xs)).attr("approximate", std::string("tanh"));
  BATON_ASSERT_OK(t.run());
  for (float v : t.output().values<float>()) EXPECT_FALSE(std::isnan(v));
}

TEST(Unary, Errors) {
  expect_error(OpTester("Sqrt").input(HostTensor(DType::Int32, {3})).infer(),
               Error::InvalidArgument, "Sqrt", "int32");
  expect_error(OpTester("Gelu")
                   .input(HostTensor(DType::Float32, {3}))
                   .attr("approximate", std::string("fast"))
                   .infer(),
               Error::InvalidArgument, "Gelu", "'fast'");
  EXPECT_EQ(OpTester("Gelu").def().since_version, 20);
}

// Softmax along `axis`, in double.
std::vector<double> softmax_reference(const HostTensor& x, int axis) {
  const std::vector<int64_t>& s = x.sizes;
  if (axis < 0) axis += static_cast<int>(s.size());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  const std::vector<double> v = to_double(x);
  std::vector<double> y(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, v[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(v[(o * n + j) * inner + i] - m);
      for (int64_t j = 0; j < n; ++j) {
        y[(o * n + j) * inner + i] = std::exp(v[(o * n + j) * inner + i] - m) / sum;
      }
    }
  }
  return y;
}

TEST(Softmax, MatchesReference) {
  const std::pair<std::vector<int64_t>, int> cases[] = {
      {{1}, 0},        {{7}, -1},        {{3, 17}, -1},  {{3, 17}, 0},
      {{2, 3, 33}, 1}, {{2, 3, 33}, -3}, {{4, 1, 5}, 1}, {{2, 7, 3, 5}, 2},
      {{2, 0, 3}, 0},  {{2, 3, 0}, 1},   {{1, 1}, -1},
  };
  std::mt19937 rng(21);
  for (const auto& [shape, axis] : cases) {
    for (float scale : {1.0f, 100.0f}) {  // 100: exp would overflow without subtracting the max
      SCOPED_TRACE(shape_str(shape) + " axis " + std::to_string(axis) + " scale " +
                   std::to_string(scale));
      HostTensor x = random_floats(rng, shape, -scale, scale);
      OpTester t("Softmax");
      t.input(x).attr("axis", axis);
      BATON_ASSERT_OK(t.run());
      ASSERT_EQ(t.output().sizes, shape);
      expect_close(t.output(), softmax_reference(x, axis), 1e-5, 1e-7);
    }
  }
  // The default axis is -1.
  HostTensor x = random_floats(rng, {3, 5});
  OpTester t("Softmax");
  t.input(x);
  BATON_ASSERT_OK(t.run());
  expect_close(t.output(), softmax_reference(x, -1));
}

TEST(Softmax, Errors) {
  expect_error(
      OpTester("Softmax").input(HostTensor(DType::Float32, {2, 3})).attr("axis", 2).infer(),
      Error::InvalidArgument, "Softmax", "'axis' is 2, out of range [-2, 1]");
  expect_error(OpTester("Softmax").input(HostTensor(DType::Float32, {})).infer(),
               Error::InvalidArgument, "Softmax", "'axis' is -1");
  expect_error(OpTester("Softmax").input(HostTensor(DType::Int64, {3})).infer(),
               Error::InvalidArgument, "Softmax", "int64");
}

}  // namespace
}  // namespace baton::testing
