// The elementwise family beyond arithmetic: comparisons, logic, IsNaN / IsInf, the activations
// with attributes, the trigonometric rows, Mod, Where, Cast / CastLike, Clip and the variadic
// Max / Min / Mean / Sum, against double or exact references, with their error paths.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/kernel_test_util.h"
#include "runtime/thread_pool.h"

namespace baton::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

HostTensor bools(std::vector<int64_t> sizes, const std::vector<uint8_t>& values) {
  HostTensor t(DType::Bool, std::move(sizes));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.data<uint8_t>(), values.data(), values.size());
  return t;
}

std::vector<uint8_t> bool_values(const HostTensor& t) {
  EXPECT_EQ(t.dtype, DType::Bool);
  return t.values<uint8_t>();
}

// ---- Comparisons and logic ---------------------------------------------------------------------

TEST(Comparison, FloatBroadcastingWithNaN) {
  const HostTensor a = make_tensor<float>({2, 3}, {1.0f, 2.0f, kNaN, -1.0f, 0.0f, 5.0f});
  const HostTensor b = make_tensor<float>({3}, {1.0f, 3.0f, 1.0f});
  const std::pair<const char*, std::vector<uint8_t>> cases[] = {
      {"Equal", {1, 0, 0, 0, 0, 0}},          {"Less", {0, 1, 0, 1, 1, 0}},
      {"LessOrEqual", {1, 1, 0, 1, 1, 0}},    {"Greater", {0, 0, 0, 0, 0, 1}},
      {"GreaterOrEqual", {1, 0, 0, 0, 0, 1}},
  };
  for (const auto& [op, want] : cases) {
    SCOPED_TRACE(op);
    OpTester t(op);
    t.input(a).input(b);
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(bool_values(t.output()), want);
  }
}

TEST(Comparison, IntegersAndBools) {
  OpTester less("Less");
  less.input(make_tensor<int64_t>({3}, {INT64_MIN, 0, INT64_MAX}))
      .input(make_tensor<int64_t>({}, {0}));
  BATON_ASSERT_OK(less.run());
  EXPECT_EQ(bool_values(less.output()), (std::vector<uint8_t>{1, 0, 0}));

  OpTester eq("Equal");
  eq.input(bools({4}, {0, 1, 0, 1})).input(bools({4}, {0, 0, 1, 1}));
  BATON_ASSERT_OK(eq.run());
  EXPECT_EQ(bool_values(eq.output()), (std::vector<uint8_t>{1, 0, 0, 1}));

  OpTester eq8("Equal");
  eq8.input(make_tensor<uint8_t>({2, 1}, {3, 200})).input(make_tensor<uint8_t>({2}, {200, 3}));
  BATON_ASSERT_OK(eq8.run());
  EXPECT_EQ(bool_values(eq8.output()), (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST(Logic, TruthTablesWithBroadcasting) {
  const HostTensor a = bools({2, 1}, {0, 1});
  const HostTensor b = bools({2}, {0, 1});
  const std::pair<const char*, std::vector<uint8_t>> cases[] = {
      {"And", {0, 0, 0, 1}}, {"Or", {0, 1, 1, 1}}, {"Xor", {0, 1, 1, 0}}};
  for (const auto& [op, want] : cases) {
    SCOPED_TRACE(op);
    OpTester t(op);
    t.input(a).input(b);
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(bool_values(t.output()), want);
  }
  OpTester n("Not");
  n.input(bools({3}, {0, 1, 0}));
  BATON_ASSERT_OK(n.run());
  EXPECT_EQ(bool_values(n.output()), (std::vector<uint8_t>{1, 0, 1}));
}

TEST(Predicate, IsNaNAndIsInf) {
  const HostTensor x = make_tensor<float>({5}, {1.0f, kNaN, kInf, -kInf, -0.0f});
  OpTester nan("IsNaN");
  nan.input(x);
  BATON_ASSERT_OK(nan.run());
  EXPECT_EQ(bool_values(nan.output()), (std::vector<uint8_t>{0, 1, 0, 0, 0}));
  const std::tuple<int, int, std::vector<uint8_t>> inf_cases[] = {
      {1, 1, {0, 0, 1, 1, 0}}, {0, 1, {0, 0, 1, 0, 0}}, {1, 0, {0, 0, 0, 1, 0}}};
  for (const auto& [negative, positive, want] : inf_cases) {
    OpTester t("IsInf");
    t.input(x).attr("detect_negative", negative).attr("detect_positive", positive);
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(bool_values(t.output()), want) << negative << " " << positive;
  }
  // float16 and float64 too.
  OpTester h("IsInf");
  h.input(cast_floats(x, DType::Float16));
  BATON_ASSERT_OK(h.run());
  EXPECT_EQ(bool_values(h.output()), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  OpTester d("IsNaN");
  d.input(cast_floats(x, DType::Float64));
  BATON_ASSERT_OK(d.run());
  EXPECT_EQ(bool_values(d.output()), (std::vector<uint8_t>{0, 1, 0, 0, 0}));
}

// ---- Unary rows against double references ------------------------------------------------------

struct UnaryRef {
  const char* op;
  float lo, hi;
  std::vector<std::pair<std::string, double>> attrs;
  std::function<double(double)> ref;
};

TEST(UnaryRows, MatchReferences) {
  const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
  const UnaryRef cases[] = {
      {"Sin", -6, 6, {}, [](double x) { return std::sin(x); }},
      {"Cos", -6, 6, {}, [](double x) { return std::cos(x); }},
      {"Tan", -1.4f, 1.4f, {}, [](double x) { return std::tan(x); }},
      {"Asin", -1, 1, {}, [](double x) { return std::asin(x); }},
      {"Acos", -1, 1, {}, [](double x) { return std::acos(x); }},
      {"Atan", -9, 9, {}, [](double x) { return std::atan(x); }},
      {"Sinh", -4, 4, {}, [](double x) { return std::sinh(x); }},
      {"Cosh", -4, 4, {}, [](double x) { return std::cosh(x); }},
      {"Asinh", -9, 9, {}, [](double x) { return std::asinh(x); }},
      {"Acosh", 1, 9, {}, [](double x) { return std::acosh(x); }},
      {"Atanh", -0.99f, 0.99f, {}, [](double x) { return std::atanh(x); }},
      {"Softplus", -30, 30, {}, [](double x) { return std::log1p(std::exp(x)); }},
      {"Softsign", -9, 9, {}, [](double x) { return x / (1 + std::fabs(x)); }},
      {"HardSwish", -5, 5, {}, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
      {"LeakyRelu", -3, 3, {}, [](double x) { return x < 0 ? 0.01 * x : x; }},
      {"LeakyRelu", -3, 3, {{"alpha", 0.3}}, [](double x) { return x < 0 ? 0.3 * x : x; }},
      {"Elu", -3, 3, {}, [](double x) { return x < 0 ? std::exp(x) - 1 : x; }},
      {"Elu", -3, 3, {{"alpha", 2.0}}, [](double x) { return x < 0 ? 2 * (std::exp(x) - 1) : x; }},
      {"Selu", -3, 3, {}, [=](double x) { return x > 0 ? sg * x : sg * (sa * std::exp(x) - sa); }},
      {"Selu",
       -3,
       3,
       {{"alpha", 2.0}, {"gamma", 3.0}},
       [](double x) { return x > 0 ? 3 * x : 3 * (2 * std::exp(x) - 2); }},
      {"HardSigmoid", -5, 5, {}, [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }},
      {"HardSigmoid",
       -5,
       5,
       {{"alpha", 0.5}, {"beta", 0.6}},
       [](double x) { return std::clamp(0.5 * x + 0.6, 0.0, 1.0); }},
      {"Celu",
       -3,
       3,
       {},
       [](double x) { return std::max(0.0, x) + std::min(0.0, std::exp(x) - 1); }},
      {"Celu",
       -3,
       3,
       {{"alpha", 2.0}},
       [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); }},
      {"ThresholdedRelu", -3, 3, {}, [](double x) { return x > 1 ? x : 0.0; }},
      {"ThresholdedRelu", -3, 3, {{"alpha", -0.5}}, [](double x) { return x > -0.5 ? x : 0.0; }},
      {"Shrink", -3, 3, {}, [](double x) { return x < -0.5 ? x : (x > 0.5 ? x : 0.0); }},
      {"Shrink",
       -3,
       3,
       {{"bias", 1.5}, {"lambd", 1.5}},
       [](double x) { return x < -1.5 ? x + 1.5 : (x > 1.5 ? x - 1.5 : 0.0); }},
  };
  std::mt19937 rng(11);
  for (const UnaryRef& c : cases) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{}, {7}, {3, 17}, {0, 4}}) {
      SCOPED_TRACE(std::string(c.op) + " " + shape_str(shape));
      HostTensor x = random_floats(rng, shape, c.lo, c.hi);
      OpTester t(c.op);
      t.input(x);
      // The attributes are float32 in ONNX; the reference uses the same rounded values.
      for (const auto& [name, value] : c.attrs) t.attr(name, static_cast<double>(value));
      BATON_ASSERT_OK(t.run());
      std::vector<double> ref;
      for (double v : to_double(x)) ref.push_back(c.ref(v));
      expect_close(t.output(), ref, 1e-5, 1e-6);
    }
  }
}

TEST(UnaryRows, RoundHalfToEvenAndEdgeValues) {
  OpTester r("Round");
  r.input(make_tensor<float>({9}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4999998f, -2.7f, kNaN, kInf}));
  BATON_ASSERT_OK(r.run());
  const std::vector<float> got = r.output().values<float>();
  const std::vector<float> want = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 2.0f, -3.0f, kNaN, kInf};
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << i;
    }
  }
  // Softplus does not overflow; NaN passes through the clamping activations.
  OpTester s("Softplus");
  s.input(make_tensor<float>({3}, {100.0f, -100.0f, kNaN}));
  BATON_ASSERT_OK(s.run());
  EXPECT_FLOAT_EQ(s.output().values<float>()[0], 100.0f);
  EXPECT_GE(s.output().values<float>()[1], 0.0f);
  EXPECT_TRUE(std::isnan(s.output().values<float>()[2]));
  for (const char* op : {"HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu", "Celu"}) {
    OpTester t(op);
    t.input(make_tensor<float>({1}, {kNaN}));
    BATON_ASSERT_OK(t.run());
    EXPECT_TRUE(std::isnan(t.output().values<float>()[0])) << op;
  }
}

TEST(UnaryRows, ShrinkOnIntegersSaturates) {
  OpTester t("Shrink");
  t.input(make_tensor<int8_t>({5}, {-128, -2, 0, 2, 127})).attr("bias", -100.0).attr("lambd", 1.0);
  BATON_ASSERT_OK(t.run());
  // -128 - 100 and 127 + 100 leave int8: they saturate instead of being undefined.
  EXPECT_EQ(t.output().values<int8_t>(), (std::vector<int8_t>{-128, -102, 0, 102, 127}));
}

// Large binary ops split over a pool's threads in element ranges that start and end inside
// broadcast rows: the same bits as one thread, for equal shapes, a bias row, a column, both
// sides broadcast, and an integer division whose zero divisor is found by one of the tasks.
TEST(BinaryRows, LargeOpsSplitOverThePoolWithTheSameBits) {
  std::mt19937 rng(21);
  runtime::ThreadPool pool(3);
  const int64_t big = 2 * kernels::cpu::kElementwiseTaskElements + 777;
  struct Case {
    const char* op;
    std::vector<int64_t> a, b;
  };
  const Case cases[] = {{"Add", {big}, {big}},
                        {"Mul", {3, big / 3 + 5}, {big / 3 + 5}},
                        {"Sub", {big / 7 + 1, 7}, {big / 7 + 1, 1}},
                        {"Div", {5, 1, big / 15 + 3}, {1, 3, 1}},
                        {"Pow", {2, big / 2 + 1}, {1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const HostTensor a = random_floats(rng, c.a, 0.5f, 2.0f);
    const HostTensor b = random_floats(rng, c.b, 0.5f, 2.0f);
    expect_pool_gives_the_same_bits(c.op, {a, b}, pool);
  }
  // Integer division by zero in the last task's range still fails the run.
  HostTensor num(DType::Int32, {big}), den(DType::Int32, {big});
  for (int64_t i = 0; i < big; ++i) {
    num.data<int32_t>()[i] = static_cast<int32_t>(i);
    den.data<int32_t>()[i] = i == big - 5 ? 0 : 3;
  }
  OpTester div("Div");
  div.pool(&pool).input(num).input(den);
  EXPECT_EQ(div.run().code(), Error::InvalidArgument);
}

TEST(BinaryRows, PReluBroadcastsTheSlopeToX) {
  const HostTensor x = make_tensor<float>({2, 3}, {-1.0f, 2.0f, -3.0f, 4.0f, -5.0f, 0.0f});
  OpTester t("PRelu");
  t.input(x).input(make_tensor<float>({3}, {0.5f, 0.25f, 2.0f}));
  BATON_ASSERT_OK(t.run());
  EXPECT_EQ(t.output().values<float>(),
            (std::vector<float>{-0.5f, 2.0f, -6.0f, 4.0f, -1.25f, 0.0f}));
  OpTester i("PRelu");
  i.input(make_tensor<int32_t>({3}, {-4, 5, INT_MIN})).input(make_tensor<int32_t>({}, {3}));
  BATON_ASSERT_OK(i.run());
  EXPECT_EQ(i.output().values<int32_t>(), (std::vector<int32_t>{-12, 5, INT_MIN}));  // wraps
}

// int16 products wrap modulo 2^16: -16706 * -16706 = 279090436 = 4258 * 2^16 + 38148, -27388 as
// int16. Wrapped through uint16 (48830 * 48830), both operands promote to int, which overflows:
// the wrapping type must be at least unsigned int (found by fuzz_program under UBSan).
TEST(BinaryRows, Int16MulWraps) {
  OpTester t("Mul");
  t.input(make_tensor<int16_t>({3}, {-16706, 32767, -32768}))
      .input(make_tensor<int16_t>({3}, {-16706, 32767, -32768}));
  BATON_ASSERT_OK(t.run());
  EXPECT_EQ(t.output().values<int16_t>(), (std::vector<int16_t>{-27388, 1, 0}));
}

// ---- Mod ----------------------------------------------------------------------------------------

TEST(Mod, IntegerSignFollowsTheDivisorUnlessFmod) {
  const std::vector<int32_t> a = {-4, 7, 5, 4, -7, 8, INT_MIN, 6};
  const std::vector<int32_t> b = {2, -3, 8, -2, 3, 5, -1, 4};
  OpTester m("Mod");
  m.input(make_tensor<int32_t>({8}, a)).input(make_tensor<int32_t>({8}, b));
  BATON_ASSERT_OK(m.run());
  EXPECT_EQ(m.output().values<int32_t>(), (std::vector<int32_t>{0, -2, 5, 0, 2, 3, 0, 2}));
  OpTester f("Mod");
  f.input(make_tensor<int32_t>({8}, a)).input(make_tensor<int32_t>({8}, b)).attr("fmod", 1);
  BATON_ASSERT_OK(f.run());
  EXPECT_EQ(f.output().values<int32_t>(), (std::vector<int32_t>{0, 1, 5, 0, -1, 3, 0, 2}));
  OpTester u("Mod");
  u.input(make_tensor<uint8_t>({3}, {250, 7, 0})).input(make_tensor<uint8_t>({}, {7}));
  BATON_ASSERT_OK(u.run());
  EXPECT_EQ(u.output().values<uint8_t>(), (std::vector<uint8_t>{5, 0, 0}));
}

TEST(Mod, FloatFmodAndIntegerDivisionByZero) {
  OpTester f("Mod");
  f.input(make_tensor<float>({4}, {-4.5f, 7.25f, 5.0f, 1.0f}))
      .input(make_tensor<float>({4}, {2.0f, -3.0f, 0.0f, kInf}))
      .attr("fmod", 1);
  BATON_ASSERT_OK(f.run());
  const std::vector<float> got = f.output().values<float>();
  EXPECT_EQ(got[0], -0.5f);
  EXPECT_EQ(got[1], 1.25f);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], 1.0f);

  OpTester z("Mod");
  z.input(make_tensor<int64_t>({2}, {5, 6})).input(make_tensor<int64_t>({2}, {3, 0}));
  expect_error(z.run(), Error::InvalidArgument, "Mod", "division by zero");
}

TEST(BitShift, BothDirectionsAndWideShifts) {
  const HostTensor x = make_tensor<uint8_t>({2, 3}, {1, 255, 16, 3, 128, 7});
  const HostTensor bits = make_tensor<uint8_t>({3}, {1, 4, 8});
  OpTester left("BitShift");
  left.input(x).input(bits).attr("direction", std::string("LEFT"));
  BATON_ASSERT_OK(left.run());
  EXPECT_EQ(left.output().values<uint8_t>(), (std::vector<uint8_t>{2, 240, 0, 6, 0, 0}));
  OpTester right("BitShift");
  right.input(x).input(bits).attr("direction", std::string("RIGHT"));
  BATON_ASSERT_OK(right.run());
  EXPECT_EQ(right.output().values<uint8_t>(), (std::vector<uint8_t>{0, 15, 0, 1, 8, 0}));
  expect_error(
      OpTester("BitShift").input(x).input(bits).attr("direction", std::string("UP")).infer(),
      Error::InvalidArgument, "BitShift", "'UP'");
}

// ---- Where --------------------------------------------------------------------------------------

TEST(Where, BroadcastsAllThreeInputs) {
  std::mt19937 rng(5);
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>> shapes[] = {
      {{3, 5}, {3, 5}, {3, 5}},
      {{3, 1}, {1, 5}, {}},
      {{5}, {2, 1, 5}, {2, 3, 1}},
      {{0, 2}, {2}, {1}},
  };
  for (const auto& [cs, xs, ys] : shapes) {
    SCOPED_TRACE(shape_str(cs) + " " + shape_str(xs) + " " + shape_str(ys));
    const HostTensor c = random_bools(rng, cs);
    const HostTensor x = random_ints<int64_t>(rng, xs, -100, 100);
    const HostTensor y = random_ints<int64_t>(rng, ys, -100, 100);
    OpTester t("Where");
    t.input(c).input(x).input(y);
    BATON_ASSERT_OK(t.run());
    std::vector<int64_t> out = cs;
    for (const auto* s : {&xs, &ys}) {
      if (s->size() > out.size()) out.insert(out.begin(), s->size() - out.size(), 1);
      for (size_t d = 0; d < s->size(); ++d) {
        int64_t& o = out[out.size() - s->size() + d];
        if ((*s)[d] != 1) o = (*s)[d];
      }
    }
    ASSERT_EQ(t.output().sizes, out);
    std::vector<int64_t> want;
    for (int64_t i = 0; i < numel_of(out); ++i) {
      const auto index = unravel(i, out);
      want.push_back(c.data<uint8_t>()[broadcast_offset(index, cs)]
                         ? x.data<int64_t>()[broadcast_offset(index, xs)]
                         : y.data<int64_t>()[broadcast_offset(index, ys)]);
    }
    expect_equal_values(t.output(), want);
  }
  // Two-byte elements (float16) move as bits.
  OpTester h("Where");
  h.input(bools({2}, {1, 0}))
      .input(make_tensor<uint16_t>({2}, {0x3c00, 0x4000}))
      .input(make_tensor<uint16_t>({2}, {0x7e00, 0xbc00}));
  BATON_ASSERT_OK(h.run());
  EXPECT_EQ(h.output().values<uint16_t>(), (std::vector<uint16_t>{0x3c00, 0xbc00}));
}

// ---- Cast ---------------------------------------------------------------------------------------

template <typename T>
std::vector<T> cast_values(const HostTensor& in, DType to) {
  OpTester t("Cast");
  t.input(in).attr("to", static_cast<int>(to));
  const Status s = t.run();
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!s.ok()) return {};
  EXPECT_EQ(t.output().dtype, to);
  return t.output().values<T>();
}

TEST(Cast, FloatToIntegerTruncatesAndSaturates) {
  const HostTensor x = make_tensor<float>({7}, {2.9f, -2.9f, 300.0f, -300.0f, kNaN, kInf, 1e20f});
  EXPECT_EQ(cast_values<int8_t>(x, DType::Int8),
            (std::vector<int8_t>{2, -2, 127, -128, 0, 127, 127}));
  EXPECT_EQ(cast_values<uint8_t>(x, DType::UInt8),
            (std::vector<uint8_t>{2, 0, 255, 0, 0, 255, 255}));
  EXPECT_EQ(cast_values<int64_t>(x, DType::Int64),
            (std::vector<int64_t>{2, -2, 300, -300, 0, INT64_MAX, INT64_MAX}));
  // To bool: x != 0, so NaN is true.
  EXPECT_EQ(cast_values<uint8_t>(make_tensor<float>({4}, {0.0f, -0.0f, 0.5f, kNaN}), DType::Bool),
            (std::vector<uint8_t>{0, 0, 1, 1}));
}

TEST(Cast, IntegersWrapAndBoolsAreZeroOrOne) {
  EXPECT_EQ(cast_values<int8_t>(make_tensor<int32_t>({3}, {200, -129, 5}), DType::Int8),
            (std::vector<int8_t>{-56, 127, 5}));
  EXPECT_EQ(cast_values<uint8_t>(make_tensor<int64_t>({2}, {-1, 256}), DType::UInt8),
            (std::vector<uint8_t>{255, 0}));
  EXPECT_EQ(cast_values<float>(bools({2}, {1, 0}), DType::Float32),
            (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(cast_values<uint8_t>(make_tensor<int64_t>({3}, {0, -7, 1LL << 40}), DType::Bool),
            (std::vector<uint8_t>{0, 1, 1}));
}

TEST(Cast, HalfAndBFloat16RoundOnce) {
  // 1 + 2^-11 + 2^-40 lies just above the halfway point between two float16 values: rounded
  // through float32 first it would become the halfway point and round to even (down); rounded
  // once, it goes up.
  const double just_above = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const auto h = cast_values<uint16_t>(make_tensor<double>({1}, {just_above}), DType::Float16);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0], 0x3c01);
  EXPECT_EQ(cast_values<uint16_t>(make_tensor<double>({1}, {1.0 + std::ldexp(1.0, -11)}),
                                  DType::Float16)[0],
            0x3c00);  // the halfway point itself: to even
  // The same for bfloat16 from int32: 2^24 + 2^16 + 1 is just above a bfloat16 halfway point.
  const auto b = cast_values<uint16_t>(make_tensor<int32_t>({1}, {(1 << 24) + (1 << 16) + 1}),
                                       DType::BFloat16);
  EXPECT_EQ(b[0], 0x4b81);
  // float32 -> bfloat16 rounds to nearest even; NaN stays NaN; overflow to float16 is infinity.
  EXPECT_EQ(cast_values<uint16_t>(make_tensor<float>({1}, {1.00390625f}), DType::BFloat16)[0],
            0x3f80);
  const auto nan16 = cast_values<uint16_t>(make_tensor<float>({2}, {kNaN, 1e6f}), DType::Float16);
  EXPECT_EQ(nan16[0] & 0x7c00, 0x7c00);
  EXPECT_NE(nan16[0] & 0x03ff, 0);
  EXPECT_EQ(nan16[1], 0x7c00);
}

TEST(Cast, CastLikeTakesTheTargetsDtype) {
  OpTester t("CastLike");
  t.input(make_tensor<float>({2, 2}, {1.5f, -2.5f, 3.0f, 0.0f}))
      .input(HostTensor(DType::Int32, {}));
  BATON_ASSERT_OK(t.run());
  EXPECT_EQ(t.output().dtype, DType::Int32);
  EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.output().values<int32_t>(), (std::vector<int32_t>{1, -2, 3, 0}));
}

TEST(Cast, Versions) {
  OpTester old("Cast", "node_1", 13);
  EXPECT_EQ(old.def().since_version, 6);
  EXPECT_EQ(old.def().attr_index("saturate"), -1);
  OpTester now("Cast");
  EXPECT_EQ(now.def().since_version, 19);
  EXPECT_GE(now.def().attr_index("saturate"), 0);
  EXPECT_EQ(OpTester("CastLike", "node_1", 15).def().since_version, 15);
}

// ---- Clip ---------------------------------------------------------------------------------------

TEST(Clip, BoundsInputsAbsentBoundsAndMinAboveMax) {
  const HostTensor x = make_tensor<float>({6}, {-3.0f, -1.0f, 0.0f, 1.0f, 3.0f, kNaN});
  auto run = [&](std::optional<float> lo, std::optional<float> hi) {
    OpTester t("Clip");
    t.input(x);
    if (lo) {
      t.input(make_tensor<float>({}, {*lo}));
    } else if (hi) {
      t.absent_input();
    }
    if (hi) t.input(make_tensor<float>({1}, {*hi}));
    const Status s = t.run();
    EXPECT_TRUE(s.ok()) << s.to_string();
    return s.ok() ? t.output().values<float>() : std::vector<float>{};
  };
  auto expect = [](const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
      } else {
        EXPECT_EQ(got[i], want[i]) << i;
      }
    }
  };
  expect(run(-1.5f, 2.0f), {-1.5f, -1.0f, 0.0f, 1.0f, 2.0f, kNaN});
  expect(run(0.5f, std::nullopt), {0.5f, 0.5f, 0.5f, 1.0f, 3.0f, kNaN});
  expect(run(std::nullopt, 0.5f), {-3.0f, -1.0f, 0.0f, 0.5f, 0.5f, kNaN});
  expect(run(std::nullopt, std::nullopt), {-3.0f, -1.0f, 0.0f, 1.0f, 3.0f, kNaN});
  expect(run(2.0f, -2.0f), {-2.0f, -2.0f, -2.0f, -2.0f, -2.0f, kNaN});  // min > max: max

  OpTester i("Clip");
  i.input(make_tensor<int8_t>({4}, {-128, -5, 5, 127})).input(make_tensor<int8_t>({}, {-6}));
  BATON_ASSERT_OK(i.run());
  EXPECT_EQ(i.output().values<int8_t>(), (std::vector<int8_t>{-6, -5, 5, 127}));
}

// ---- Max, Min, Mean, Sum ------------------------------------------------------------------------

TEST(Variadic, FoldsBroadcastInputs) {
  std::mt19937 rng(9);
  const HostTensor a = random_floats(rng, {2, 1, 4});
  const HostTensor b = random_floats(rng, {3, 1});
  const HostTensor c = random_floats(rng, {4});
  const std::vector<int64_t> out = {2, 3, 4};
  const std::pair<const char*, std::function<double(double, double, double)>> cases[] = {
      {"Max",
       [](double x, double y, double z) {
         return std::max({x, y, z});
       }},
      {"Min",
       [](double x, double y, double z) {
         return std::min({x, y, z});
       }},
      {"Sum", [](double x, double y, double z) { return x + y + z; }},
      {"Mean", [](double x, double y, double z) { return (x + y + z) / 3; }},
  };
  for (const auto& [op, fn] : cases) {
    SCOPED_TRACE(op);
    OpTester t(op);
    t.input(a).input(b).input(c);
    BATON_ASSERT_OK(t.run());
    ASSERT_EQ(t.output().sizes, out);
    std::vector<double> ref;
    for (int64_t i = 0; i < numel_of(out); ++i) {
      const auto index = unravel(i, out);
      ref.push_back(fn(a.data<float>()[broadcast_offset(index, a.sizes)],
                       b.data<float>()[broadcast_offset(index, b.sizes)],
                       c.data<float>()[broadcast_offset(index, c.sizes)]));
    }
    expect_close(t.output(), ref);
    // One input is a copy.
    OpTester one(op);
    one.input(c);
    BATON_ASSERT_OK(one.run());
    EXPECT_EQ(one.output().values<float>(), c.values<float>());
  }
}

TEST(Variadic, NaNPropagatesAndIntegersAndHalves) {
  OpTester mx("Max");
  mx.input(make_tensor<float>({3}, {kNaN, 1.0f, 2.0f}))
      .input(make_tensor<float>({3}, {0.0f, kNaN, 3.0f}));
  BATON_ASSERT_OK(mx.run());
  const std::vector<float> m = mx.output().values<float>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_EQ(m[2], 3.0f);

  OpTester mn("Min");
  mn.input(make_tensor<int8_t>({2}, {-128, 5})).input(make_tensor<int8_t>({2}, {127, -3}));
  BATON_ASSERT_OK(mn.run());
  EXPECT_EQ(mn.output().values<int8_t>(), (std::vector<int8_t>{-128, -3}));

  // float16 accumulates in float and rounds once: 2048 + 1 + 1 is 2050, where adding in float16
  // would round 2049 back to 2048 at each step.
  OpTester sum("Sum");
  for (float v : {2048.0f, 1.0f, 1.0f}) {
    sum.input(cast_floats(make_tensor<float>({1}, {v}), DType::Float16));
  }
  BATON_ASSERT_OK(sum.run());
  EXPECT_EQ(half_to_float(sum.output().values<uint16_t>()[0]), 2050.0f);
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(ElementwiseErrors, AttributesAreChecked) {
  const HostTensor x(DType::Float32, {3});
  expect_error(OpTester("LeakyRelu").input(x).attr("alpha", std::nan("")).infer(),
               Error::InvalidArgument, "LeakyRelu", "'alpha'");
  expect_error(OpTester("HardSigmoid").input(x).attr("beta", INFINITY).infer(),
               Error::InvalidArgument, "HardSigmoid", "'beta'");
  expect_error(OpTester("Celu").input(x).attr("alpha", 0.0).infer(), Error::InvalidArgument, "Celu",
               "'alpha' is 0");
  expect_error(OpTester("IsInf").input(x).attr("detect_negative", 2).infer(),
               Error::InvalidArgument, "IsInf", "'detect_negative' is 2");
  expect_error(OpTester("Mod").input(x).input(x).infer(), Error::InvalidArgument, "Mod",
               "fmod = 1");
  expect_error(OpTester("Mod")
                   .input(HostTensor(DType::Int32, {3}))
                   .input(HostTensor(DType::Int32, {3}))
                   .attr("fmod", 3)
                   .infer(),
               Error::InvalidArgument, "Mod", "'fmod' is 3");
  expect_error(OpTester("Cast").input(x).attr("to", 8).infer(), Error::NotSupported, "Cast",
               "8 (STRING)");
  expect_error(OpTester("Cast").input(x).attr("to", 99).infer(), Error::InvalidArgument, "Cast",
               "'to' is 99");
  expect_error(OpTester("Cast").input(x).attr("to", 1).attr("saturate", 2).infer(),
               Error::InvalidArgument, "Cast", "'saturate' is 2");
}

TEST(ElementwiseErrors, ShapesAndTypesAreChecked) {
  const HostTensor f3(DType::Float32, {3});
  const HostTensor f4(DType::Float32, {4});
  expect_error(OpTester("Less").input(f3).input(f4).infer(), Error::InvalidArgument, "Less");
  expect_error(OpTester("PRelu").input(f3).input(HostTensor(DType::Float32, {2, 3})).infer(),
               Error::InvalidArgument, "PRelu", "does not broadcast to input 0's shape [3]");
  expect_error(OpTester("Where").input(HostTensor(DType::Bool, {3})).input(f3).input(f4).infer(),
               Error::InvalidArgument, "Where");
  expect_error(OpTester("Where").input(f3).input(f3).input(f3).infer(), Error::InvalidArgument,
               "Where", "float32");
  expect_error(OpTester("Clip").input(f3).input(HostTensor(DType::Float32, {2})).infer(),
               Error::InvalidArgument, "Clip", "('min') has shape [2]");
  expect_error(OpTester("Max").input(f3).input(f3).input(f4).infer(), Error::InvalidArgument,
               "Max");
  expect_error(OpTester("And").input(f3).input(f3).infer(), Error::InvalidArgument, "And",
               "float32");
  expect_error(OpTester("Sin").input(HostTensor(DType::Int32, {3})).infer(), Error::InvalidArgument,
               "Sin", "int32");
  expect_error(OpTester("Mean").input(HostTensor(DType::Int32, {3})).infer(),
               Error::InvalidArgument, "Mean", "int32");
  // Zero elements beside a huge dimension do not overflow (a dimension whose bytes would overflow
  // is refused for every op: EmptyShapes and RobustnessTest).
  OpTester z("Sum");
  z.input(HostTensor(DType::Float32, {0, 1}))
      .input(shape_only(DType::Float32, {0, int64_t{1} << 40}));
  BATON_ASSERT_OK(z.infer());
  EXPECT_EQ(z.metas()[0].sizes, (std::vector<int64_t>{0, int64_t{1} << 40}));
}

TEST(ElementwiseDefinitions, SinceVersions) {
  const std::pair<const char*, int> since[] = {
      {"Not", 1},
      {"Softplus", 1},
      {"Softsign", 1},
      {"Elu", 6},
      {"Selu", 6},
      {"HardSigmoid", 6},
      {"LeakyRelu", 6},
      {"Sin", 7},
      {"And", 7},
      {"Equal", 7},
      {"Less", 7},
      {"Where", 9},
      {"IsNaN", 9},
      {"PRelu", 9},
      {"Shrink", 9},
      {"Acosh", 9},
      {"IsInf", 10},
      {"Mod", 10},
      {"ThresholdedRelu", 10},
      {"Round", 11},
      {"Clip", 11},
      {"Celu", 12},
      {"LessOrEqual", 12},
      {"HardSwish", 14},
      {"BitShift", 11},
      {"Max", 8},
      {"Sum", 8},
  };
  for (const auto& [op, version] : since) {
    const ops::OpDef* def = ops::op_registry().earliest(op, "");
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->since_version, version) << op;
  }
}

// A bool tensor's bytes come from files, callers and arenas: any nonzero byte is true, and no
// kernel reads one as a C++ bool (UBSan's invalid-bool load, found by fuzz_onnx and
// fuzz_program). Results are 0 or 1.
TEST(BoolBytes, AnyNonzeroByteIsTrueAndResultsAreZeroOrOne) {
  auto bools = [](std::vector<uint8_t> bytes) {
    HostTensor t(DType::Bool, {static_cast<int64_t>(bytes.size())});
    std::memcpy(t.data<uint8_t>(), bytes.data(), bytes.size());
    return t;
  };
  const std::vector<uint8_t> a = {0, 2, 255, 1}, b = {7, 0, 128, 1};
  auto check = [](OpTester& t, std::vector<uint8_t> want) {
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().values<uint8_t>(), want);
  };
  OpTester and_op("And");
  and_op.input(bools(a)).input(bools(b));
  check(and_op, {0, 0, 1, 1});
  OpTester xor_op("Xor");
  xor_op.input(bools(a)).input(bools(b));
  check(xor_op, {1, 1, 0, 0});
  OpTester not_op("Not");
  not_op.input(bools(a));
  check(not_op, {1, 0, 0, 0});
  OpTester cast("Cast");
  cast.input(bools(a)).attr("to", int64_t{static_cast<int>(DType::Int32)});
  BATON_ASSERT_OK(cast.run());
  EXPECT_EQ(cast.output().values<int32_t>(), (std::vector<int32_t>{0, 1, 1, 1}));
  OpTester where("Where");
  where.input(bools(a))
      .input(make_tensor<float>({4}, {1, 2, 3, 4}))
      .input(make_tensor<float>({4}, {-1, -2, -3, -4}));
  BATON_ASSERT_OK(where.run());
  EXPECT_EQ(where.output().values<float>(), (std::vector<float>{-1, 2, 3, 4}));
}

}  // namespace
}  // namespace baton::testing
