// Vectorizable float32 exp, sigmoid and tanh for the CPU kernels (issue 41): branch-free, so that
// a loop over them compiles to SIMD code (vector_math.cpp builds the loops for AVX-512, AVX2 and
// the baseline, chosen at load by the CPU), where std::exp and std::tanh are one library call per
// element. Each is written in float, and vector_math.cpp is compiled with -ffp-contract=off (no
// fused multiply-adds where AVX-512 and AVX2 have them), so every variant gives the same bits on
// every x86-64 CPU.
//
// exp: Cody and Waite's range reduction, x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so
// that n * ln2_hi is exact), Cephes's degree-6 polynomial for e^r, and 2^n applied as two powers
// of two so that results down to the subnormals keep their exponent. sigmoid: e / (1 + e) or
// 1 / (1 + e) with e = exp(-|x|), as the scalar form (ops/elementwise.h) does, so that neither
// overflows. tanh: Cephes's odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, with
// x's sign. Measured error against double precision (vector_math_test.cpp, every float from one
// in 61 of all bit patterns, special values exactly): exp 0.97 ulp, sigmoid 2.7, tanh 1.3
// (docs/operators.md).
#pragma once

#include <cstdint>

namespace baton::kernels::cpu::vmath {

// The largest float whose e^x is finite, and the one below which e^x rounds to zero.
inline constexpr float kExpMax = 88.72283172607421875f;
inline constexpr float kExpMin = -103.972084045410156f;

inline float exp(float x) {
  const bool nan = x != x;
  float xc = x > kExpMax ? kExpMax : x;
  xc = xc < kExpMin ? kExpMin : xc;
  xc = nan ? 0.0f : xc;
  // n = round(x / ln2), by the 1.5 * 2^23 trick (exact in round-to-nearest for |v| < 2^22).
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // 2^n as 2^n1 * 2^n2, each a normal float for n in [-150, 128].
  const auto ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  y = y * __builtin_bit_cast(float, (n1 + 127) << 23);
  y = y * __builtin_bit_cast(float, (n2 + 127) << 23);
  y = x > kExpMax ? __builtin_huge_valf() : y;
  return nan ? x : y;
}

inline float sigmoid(float x) {
  const float e = vmath::exp(x < 0.0f ? x : -x);  // e^-|x|, NaN stays NaN
  const float s = 1.0f / (1.0f + e);
  return x < 0.0f ? e * s : s;
}

inline float tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  // (-0 stays -0: p * z * x + x would give +0 there.)
  const float small = x == 0.0f ? x : p * z * x + x;
  const float t = 1.0f - 2.0f / (vmath::exp(2.0f * ax) + 1.0f);
  const float large = x < 0.0f ? -t : t;
  return ax < 0.625f ? small : large;  // NaN: large, which is NaN
}

// y[i] = f(x[i]) for i < n (x and y may be the same array).
void exp_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);

}  // namespace baton::kernels::cpu::vmath
