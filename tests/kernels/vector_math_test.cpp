// The vectorized float32 exp, sigmoid, tanh, erf, GELU and HardSwish (kernels/cpu/vector_math.h)
// against double precision: the error in units in the last place of the float result over every
// float whose bit pattern is a multiple of 61 (70 million values, both signs, every exponent, the
// subnormals), special values exactly, and the array forms (the SIMD clones the CPU picks) equal to
// the scalar definitions bit for bit.
#include "kernels/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/activation.h"
#include "ops/elementwise.h"

namespace baton::kernels::cpu {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// |got - want| in units of the float spacing at want (the subnormal spacing below FLT_MIN).
double ulps(float got, double want) {
  const double a = std::fabs(want);
  const double spacing = a < std::numeric_limits<float>::min()
                             ? std::numeric_limits<float>::denorm_min()
                             : std::ldexp(1.0, std::ilogb(a) - 23);
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

struct Sweep {
  double max_ulps = 0.0;
  float worst = 0.0f;
};

// Every 61st bit pattern at or above `from`; NaNs and results past float's range are checked
// apart.
template <typename F, typename R>
Sweep sweep(F f, R reference, float from = -std::numeric_limits<float>::infinity()) {
  Sweep s;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 61) {
    const float x = from_bits(static_cast<uint32_t>(b));
    if (std::isnan(x) || x < from) continue;
    const double want = reference(static_cast<double>(x));
    const float got = f(x);
    if (std::fabs(want) > std::numeric_limits<float>::max()) {
      EXPECT_TRUE(std::isinf(got)) << "x = " << x;
      continue;
    }
    const double u = ulps(got, want);
    if (u > s.max_ulps) {
      s.max_ulps = u;
      s.worst = x;
    }
  }
  return s;
}

double sigmoid_ref(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

// The bounds are what the sweep measured (2026-11-30), rounded up: a change to the polynomials
// or the reductions that loses accuracy fails here. docs/operators.md quotes them.
TEST(VectorMath, EachFunctionStaysWithinItsMeasuredUlps) {
  const Sweep e =
      sweep([](float x) { return vmath::exp(x); }, [](double x) { return std::exp(x); });
  const Sweep s = sweep([](float x) { return vmath::sigmoid(x); }, sigmoid_ref);
  const Sweep t =
      sweep([](float x) { return vmath::tanh(x); }, [](double x) { return std::tanh(x); });
  const Sweep r =
      sweep([](float x) { return vmath::erf(x); }, [](double x) { return std::erf(x); });
  // GELU's vector form, above the tail (below -8.485 the array form computes the scalar kernel's
  // 0.5 x erfcf(-x / sqrt 2), results of 1e-17 and less).
  const Sweep g =
      sweep([](float x) { return vmath::gelu(x); },
            [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, vmath::kGeluTail);
  // log over the floats at or above +0 (below, NaN).
  const Sweep l =
      sweep([](float x) { return vmath::log(x); }, [](double x) { return std::log(x); }, 0.0f);
  std::printf(
      "max ulps: exp %.3f (x = %.9g), sigmoid %.3f (x = %.9g), tanh %.3f (x = %.9g), erf "
      "%.3f (x = %.9g), gelu %.3f (x = %.9g), log %.3f (x = %.9g)\n",
      e.max_ulps, e.worst, s.max_ulps, s.worst, t.max_ulps, t.worst, r.max_ulps, r.worst,
      g.max_ulps, g.worst, l.max_ulps, l.worst);
  EXPECT_LE(l.max_ulps, 1.0);
  EXPECT_LE(e.max_ulps, 1.0);
  EXPECT_LE(s.max_ulps, 3.0);
  EXPECT_LE(t.max_ulps, 1.5);
  EXPECT_LE(r.max_ulps, 3.0);
  EXPECT_LE(g.max_ulps, 8.0);
}

// sum_f32 adds element i into partial sum i % 32, each in order, then the partial sums in order:
// its bits are that order's, at every length around the blocks of 32 (and not a plain loop's).
TEST(VectorMath, SumAddsThirtyTwoInterleavedChainsInOrder) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(1000);
  for (float& v : x) v = dist(rng);
  for (int64_t n : {0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 1000}) {
    float part[32] = {};
    for (int64_t i = 0; i < n; ++i) part[i % 32] += x[static_cast<size_t>(i)];
    float want = 0.0f;
    for (float p : part) want += p;
    EXPECT_EQ(vmath::sum_f32(x.data(), n), want) << "n " << n;
  }
}

TEST(VectorMath, SpecialValuesAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vmath::exp(0.0f), 1.0f);
  EXPECT_EQ(vmath::exp(-0.0f), 1.0f);
  EXPECT_EQ(vmath::exp(inf), inf);
  EXPECT_EQ(vmath::exp(-inf), 0.0f);
  EXPECT_TRUE(std::isnan(vmath::exp(nan)));
  EXPECT_EQ(vmath::exp(89.0f), inf);
  EXPECT_TRUE(std::isfinite(vmath::exp(vmath::kExpMax)));
  EXPECT_EQ(vmath::exp(-104.0f), 0.0f);
  EXPECT_GT(vmath::exp(-103.0f), 0.0f);  // a subnormal
  EXPECT_EQ(vmath::log(1.0f), 0.0f);
  EXPECT_EQ(vmath::log(0.0f), -inf);
  EXPECT_EQ(vmath::log(-0.0f), -inf);
  EXPECT_EQ(vmath::log(inf), inf);
  EXPECT_TRUE(std::isnan(vmath::log(-1.0f)));
  EXPECT_TRUE(std::isnan(vmath::log(-inf)));
  EXPECT_TRUE(std::isnan(vmath::log(nan)));
  EXPECT_EQ(vmath::log(std::numeric_limits<float>::denorm_min()), std::log(1.4e-45f));
  EXPECT_EQ(vmath::log(std::numeric_limits<float>::max()), std::log(3.40282347e38f));
  EXPECT_EQ(vmath::sigmoid(inf), 1.0f);
  EXPECT_EQ(vmath::sigmoid(-inf), 0.0f);
  EXPECT_EQ(vmath::sigmoid(0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(vmath::sigmoid(nan)));
  EXPECT_GT(vmath::sigmoid(-95.0f), 0.0f);  // e^-95, no overflow on the way
  EXPECT_EQ(vmath::tanh(inf), 1.0f);
  EXPECT_EQ(vmath::tanh(-inf), -1.0f);
  EXPECT_EQ(bits_of(vmath::tanh(-0.0f)), bits_of(-0.0f));
  EXPECT_EQ(vmath::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vmath::tanh(nan)));
  EXPECT_EQ(vmath::erf(inf), 1.0f);
  EXPECT_EQ(vmath::erf(-inf), -1.0f);
  EXPECT_EQ(bits_of(vmath::erf(-0.0f)), bits_of(-0.0f));
  EXPECT_TRUE(std::isnan(vmath::erf(nan)));
  EXPECT_EQ(vmath::gelu(0.0f), 0.0f);
  EXPECT_EQ(vmath::gelu(inf), inf);
  EXPECT_TRUE(std::isnan(vmath::gelu(nan)));
  // Below the tail the array form gives the scalar kernel's value (-inf: NaN, 0.5 x 0).
  const float below[] = {-9.0f, -20.0f, -inf};
  float out[3];
  vmath::gelu_f32(below, out, 3);
  EXPECT_EQ(out[0], 0.5f * -9.0f * std::erfc(9.0f * 0.70710678118654752440f));
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(VectorMath, ArrayFormsGiveTheScalarBits) {
  // Lengths around the vector widths, values across the whole range and the special ones.
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 104729)
    x.push_back(from_bits(static_cast<uint32_t>(b)));
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 88.8f, -104.0f, 0.6249f, 0.625f})
    x.push_back(v);
  std::vector<float> y(x.size());
  struct Fn {
    const char* name;
    void (*array)(const float*, float*, int64_t);
    float (*scalar)(float);
  };
  const Fn fns[] = {
      {"exp", &vmath::exp_f32, [](float v) { return vmath::exp(v); }},
      {"log", &vmath::log_f32, [](float v) { return vmath::log(v); }},
      {"sigmoid", &vmath::sigmoid_f32, [](float v) { return vmath::sigmoid(v); }},
      {"tanh", &vmath::tanh_f32, [](float v) { return vmath::tanh(v); }},
      {"erf", &vmath::erf_f32, [](float v) { return vmath::erf(v); }},
      {"gelu", &vmath::gelu_f32,
       [](float v) {
         return v < vmath::kGeluTail ? 0.5f * v * std::erfc(-v * 0.70710678118654752440f)
                                     : vmath::gelu(v);
       }},
      {"hard_swish", &vmath::hard_swish_f32, [](float v) { return ops::scalar::hard_swish(v); }}};
  for (const Fn& f : fns) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{16}, size_t{17}, x.size()}) {
      f.array(x.data(), y.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        const float want = f.scalar(x[i]);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(y[i])) << f.name << " x = " << x[i];
        } else {
          EXPECT_EQ(bits_of(y[i]), bits_of(want)) << f.name << " x = " << x[i] << " n = " << n;
        }
      }
    }
  }
}

// The fused activations a convolution or Linear applies (vmath::apply_activation, cloned loops
// for Relu, LeakyRelu and HardSigmoid) give ops::apply_activation's bits: the same values,
// NaN, -0 and the infinities included, with default and other parameters.
TEST(VectorMath, FusedActivationsGiveTheTablesBits) {
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 1000003)
    x.push_back(from_bits(static_cast<uint32_t>(b)));
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 2.5f, -2.5f, 3.0f, -3.0f})
    x.push_back(v);
  struct Case {
    const char* op;
    std::vector<double> params;
  };
  const Case cases[] = {{"Relu", {}},
                        {"LeakyRelu", {}},
                        {"LeakyRelu", {0.3}},
                        {"HardSigmoid", {}},
                        {"HardSigmoid", {0.25, -0.1}}};
  for (const Case& c : cases) {
    auto act = ops::make_activation(c.op, c.params, "test");
    ASSERT_TRUE(act.ok()) << act.status().to_string();
    for (size_t n : {size_t{1}, size_t{15}, size_t{33}, x.size()}) {
      std::vector<float> got(x.begin(), x.begin() + static_cast<int64_t>(n)), want = got;
      vmath::apply_activation(*act, got.data(), static_cast<int64_t>(n));
      ops::apply_activation(*act, want.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << c.op << " x = " << x[i];
        } else {
          ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << c.op << " x = " << x[i] << " n = " << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace baton::kernels::cpu
