// Add, Sub, Mul, Div and Pow against double / exact-integer references with numpy broadcasting.
#include <gtest/gtest.h>

#include <climits>
#include <functional>

#include "kernels/kernel_test_util.h"

namespace baton::testing {
namespace {

struct ShapePair {
  std::vector<int64_t> a, b, out;
};

const std::vector<ShapePair>& broadcast_cases() {
  static const std::vector<ShapePair> cases = {
      {{}, {}, {}},
      {{3}, {}, {3}},
      {{}, {7}, {7}},
      {{1}, {5}, {5}},
      {{2, 3}, {3}, {2, 3}},
      {{2, 3}, {2, 1}, {2, 3}},
      {{17, 33}, {17, 33}, {17, 33}},
      {{7, 1, 5}, {1, 3, 1}, {7, 3, 5}},
      {{4, 1, 3, 1, 2}, {5, 1, 1, 2}, {4, 5, 3, 1, 2}},
      {{2, 3, 4}, {1, 1, 1}, {2, 3, 4}},
      {{1, 33}, {17, 1}, {17, 33}},
      {{3, 1, 1, 7}, {3, 1, 7}, {3, 3, 1, 7}},
      {{0, 3}, {1, 3}, {0, 3}},
      {{2, 0, 3}, {3}, {2, 0, 3}},
  };
  return cases;
}

// Reference output of a broadcasting binary op, element by element.
std::vector<double> broadcast_reference(const ShapePair& s, const std::vector<double>& a,
                                        const std::vector<double>& b,
                                        const std::function<double(double, double)>& op) {
  std::vector<double> out;
  for (int64_t i = 0; i < numel_of(s.out); ++i) {
    const std::vector<int64_t> index = unravel(i, s.out);
    out.push_back(op(a[broadcast_offset(index, s.a)], b[broadcast_offset(index, s.b)]));
  }
  return out;
}

struct ArithOp {
  const char* name;
  std::function<double(double, double)> fn;
};

const ArithOp kFloatOps[] = {
    {"Add", [](double a, double b) { return a + b; }},
    {"Sub", [](double a, double b) { return a - b; }},
    {"Mul", [](double a, double b) { return a * b; }},
    {"Div", [](double a, double b) { return a / b; }},
};

TEST(Binary, Float32MatchesReference) {
  std::mt19937 rng(42);
  for (const ArithOp& op : kFloatOps) {
    for (const ShapePair& s : broadcast_cases()) {
      SCOPED_TRACE(std::string(op.name) + " " + shape_str(s.a) + " " + shape_str(s.b));
      HostTensor a = random_floats(rng, s.a, -2.0f, 2.0f);
      HostTensor b = random_floats(rng, s.b, -2.0f, 2.0f, /*min_abs=*/0.25f);
      OpTester t(op.name);
      t.input(a).input(b);
      BATON_ASSERT_OK(t.run());
      ASSERT_EQ(t.output().dtype, DType::Float32);
      ASSERT_EQ(t.output().sizes, s.out);
      expect_close(t.output(), broadcast_reference(s, to_double(a), to_double(b), op.fn));
    }
  }
}

// Integer ops, exactly: Div truncates toward zero like C.
template <typename T>
void check_integer_ops(uint32_t seed) {
  std::mt19937 rng(seed);
  const std::pair<const char*, std::function<T(T, T)>> ops[] = {
      {"Add", [](T a, T b) { return static_cast<T>(a + b); }},
      {"Sub", [](T a, T b) { return static_cast<T>(a - b); }},
      {"Mul", [](T a, T b) { return static_cast<T>(a * b); }},
      {"Div", [](T a, T b) { return static_cast<T>(a / b); }},
  };
  for (const auto& [name, fn] : ops) {
    for (const ShapePair& s : broadcast_cases()) {
      SCOPED_TRACE(std::string(name) + " " + std::string(dtype_name(dtype_of<T>())) + " " +
                   shape_str(s.a) + " " + shape_str(s.b));
      HostTensor a = random_ints<T>(rng, s.a, -1000, 1000);
      HostTensor b = random_ints<T>(rng, s.b, -9, 9, /*nonzero=*/true);
      OpTester t(name);
      t.input(a).input(b);
      BATON_ASSERT_OK(t.run());
      ASSERT_EQ(t.output().dtype, dtype_of<T>());
      ASSERT_EQ(t.output().sizes, s.out);
      std::vector<T> ref;
      for (int64_t i = 0; i < numel_of(s.out); ++i) {
        const std::vector<int64_t> index = unravel(i, s.out);
        ref.push_back(fn(a.data<T>()[broadcast_offset(index, s.a)],
                         b.data<T>()[broadcast_offset(index, s.b)]));
      }
      expect_equal_values(t.output(), ref);
    }
  }
}

TEST(Binary, Int32MatchesReference) { check_integer_ops<int32_t>(5); }
TEST(Binary, Int64MatchesReference) { check_integer_ops<int64_t>(6); }

TEST(Binary, IntegerDivTruncatesAndWraps) {
  OpTester t("Div");
  t.input(make_tensor<int32_t>({6}, {7, -7, 7, -7, INT32_MIN, 0}))
      .input(make_tensor<int32_t>({6}, {2, 2, -2, -2, -1, 5}));
  BATON_ASSERT_OK(t.run());
  expect_equal_values<int32_t>(t.output(), {3, -3, -3, 3, INT32_MIN, 0});

  OpTester add("Add");
  add.input(make_tensor<int64_t>({1}, {INT64_MAX})).input(make_tensor<int64_t>({}, {1}));
  BATON_ASSERT_OK(add.run());
  expect_equal_values<int64_t>(add.output(), {INT64_MIN});
}

TEST(Binary, IntegerDivisionByZeroIsAnError) {
  OpTester t("Div");
  t.input(make_tensor<int64_t>({3}, {1, 2, 3})).input(make_tensor<int64_t>({3}, {1, 0, 1}));
  expect_error(t.run(), Error::InvalidArgument, "Div", "division by zero");
}

TEST(Pow, FloatExponentMatchesReference) {
  std::mt19937 rng(11);
  for (const ShapePair& s : broadcast_cases()) {
    SCOPED_TRACE(shape_str(s.a) + " " + shape_str(s.b));
    HostTensor x = random_floats(rng, s.a, 0.25f, 3.0f);
    HostTensor y = random_floats(rng, s.b, -3.0f, 3.0f);
    OpTester t("Pow");
    t.input(x).input(y);
    BATON_ASSERT_OK(t.run());
    ASSERT_EQ(t.output().sizes, s.out);
    expect_close(t.output(),
                 broadcast_reference(s, to_double(x), to_double(y),
                                     [](double a, double b) { return std::pow(a, b); }));
  }
}

template <typename T>
void check_integer_exponent(uint32_t seed) {
  std::mt19937 rng(seed);
  for (const ShapePair& s : broadcast_cases()) {
    SCOPED_TRACE(shape_str(s.a) + " " + shape_str(s.b));
    HostTensor x = random_floats(rng, s.a, -2.0f, 2.0f, /*min_abs=*/0.25f);
    HostTensor y = random_ints<T>(rng, s.b, -4, 6);
    OpTester t("Pow");
    t.input(x).input(y);
    BATON_ASSERT_OK(t.run());
    ASSERT_EQ(t.output().dtype, DType::Float32);
    ASSERT_EQ(t.output().sizes, s.out);
    expect_close(t.output(),
                 broadcast_reference(s, to_double(x), to_double(y),
                                     [](double a, double b) { return std::pow(a, b); }));
  }
}

TEST(Pow, Int32ExponentMatchesReference) { check_integer_exponent<int32_t>(12); }
TEST(Pow, Int64ExponentMatchesReference) { check_integer_exponent<int64_t>(13); }

TEST(Binary, Errors) {
  expect_error(OpTester("Add")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Float32, {4}))
                   .infer(),
               Error::InvalidArgument, "Add", "shapes [2, 3] and [4] cannot broadcast");
  expect_error(OpTester("Mul")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Int32, {3}))
                   .infer(),
               Error::InvalidArgument, "Mul", "int32");
  // Outside the definition's type constraints: ONNX's T of Sub has no bool, Pow's T no int8.
  expect_error(OpTester("Sub")
                   .input(HostTensor(DType::Bool, {2}))
                   .input(HostTensor(DType::Bool, {2}))
                   .infer(),
               Error::InvalidArgument, "Sub", "bool");
  expect_error(OpTester("Pow")
                   .input(HostTensor(DType::Int8, {2}))
                   .input(HostTensor(DType::Int8, {2}))
                   .infer(),
               Error::InvalidArgument, "Pow", "int8");
  expect_error(OpTester("Div").input(HostTensor(DType::Float32, {2})).infer(),
               Error::InvalidArgument, "Div", "takes 2 inputs");
}

}  // namespace
}  // namespace baton::testing
