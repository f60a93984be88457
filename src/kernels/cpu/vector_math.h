// Vectorizable float32 exp, log, sigmoid, tanh, erf and GELU for the CPU kernels (issue 41):
// branch-free, so that a loop over them compiles to SIMD code (vector_math.cpp builds the loops for
// AVX-512, AVX2 and the baseline, chosen at load by the CPU), where std::exp and std::tanh are one
// library call per element. Each is written in float; the polynomials' Horner steps are explicit
// fused multiply-adds (fma below, exactly rounded on every CPU) and vector_math.cpp is compiled
// with -ffp-contract=off (nothing else fused), so every variant gives the same bits on every x86-64
// CPU.
//
// exp: Cody and Waite's range reduction, x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so
// that n * ln2_hi is exact), Cephes's degree-6 polynomial for e^r, and 2^n applied as two powers
// of two so that results down to the subnormals keep their exponent. sigmoid: e / (1 + e) or
// 1 / (1 + e) with e = exp(-|x|), as the scalar form (ops/elementwise.h) does, so that neither
// overflows. tanh: Cephes's odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, with
// x's sign. Measured error against double precision (vector_math_test.cpp, every float from one
// in 61 of all bit patterns, special values exactly): exp 0.96 ulp, sigmoid 2.7, tanh 1.3, erf
// 2.5, GELU 7.5 (docs/operators.md).
#pragma once

#include <cstdint>

#include "ops/activation.h"

namespace baton::kernels::cpu::vmath {

// Every function here is inlined into the array loops whatever its size: GCC's -O2 heuristics left
// log and tanh out of line (a call per element), and a loop with a call vectorizes nothing.
#define BATON_VMATH_INLINE [[gnu::always_inline]] inline

// a * b + c rounded once. Exactly rounded wherever it runs (an FMA instruction in the AVX-512 and
// AVX2 clones, whose instruction sets vector_math.cpp asks for with FMA; the C library's fmaf in
// the baseline clone, slower but the same bits), so the polynomials below cost one instruction a
// term and still give every CPU the same bits.
BATON_VMATH_INLINE float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// The largest float whose e^x is finite, and the one below which e^x rounds to zero.
inline constexpr float kExpMax = 88.72283172607421875f;
inline constexpr float kExpMin = -103.972084045410156f;

// The part of e^(h + l) every form below shares: n = round((h + l) / ln2) by the 1.5 * 2^23 trick
// (exact in round-to-nearest for |v| < 2^22), and y = e^r for r = h + l - n ln2, the range
// reduction subtracting n ln2 from each part (exp_sum says why). kLow: l is not known to be 0
// (without it, h alone is reduced, with the same bits as reducing h + 0).
struct Reduced {
  float y, n;
};
template <bool kLow>
BATON_VMATH_INLINE Reduced exp_reduced(float h, float l) {
  const float n = ((kLow ? h + l : h) * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = kLow ? (h - n * 0.693359375f) + (l - n * -2.12194440e-4f)
                       : (h - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = fma(p, r, 1.3981999507e-3f);
  p = fma(p, r, 8.3334519073e-3f);
  p = fma(p, r, 4.1665795894e-2f);
  p = fma(p, r, 1.6666665459e-1f);
  p = fma(p, r, 5.0000001201e-1f);
  return {p * r * r + r + 1.0f, n};
}

// y * 2^n for n in [-150, 128], as 2^n1 * 2^n2, each a normal float: a result that underflows
// to a subnormal is rounded once, by the last multiply.
BATON_VMATH_INLINE float times_pow2(float y, float n) {
  const auto ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  y = y * __builtin_bit_cast(float, (n1 + 127) << 23);
  return y * __builtin_bit_cast(float, (n2 + 127) << 23);
}

// e^(h + l) for a sum whose rounding would cost too much (erfc's -a^2 + Q: a relative error of
// 6e-8 in a sum of 36 is 2e-6 in the result): the range reduction subtracts n ln2 from each part,
// h - n ln2_hi first (exact when h is large: both are within a factor of two), so the sum is
// rounded only once it is small. exp(x) is exp_sum(x, 0), with the same bits as reducing x alone.
BATON_VMATH_INLINE float exp_sum(float h, float l) {
  const float x = h + l;
  const bool nan = x != x;
  const bool over = x > kExpMax, under = x < kExpMin;
  float hc = over ? kExpMax : (under ? kExpMin : h);
  float lc = over || under ? 0.0f : l;
  hc = nan ? 0.0f : hc;
  lc = nan ? 0.0f : lc;
  const Reduced e = exp_reduced<true>(hc, lc);
  float y = times_pow2(e.y, e.n);
  y = over ? __builtin_huge_valf() : y;
  return nan ? x : y;
}

BATON_VMATH_INLINE float exp(float x) { return exp_sum(x, 0.0f); }

// e^(h + l) for a sum the caller keeps within [-87, 88] and never NaN (tanh's 2|x| clamped to 20,
// erfc's -a^2 + Q for a in [0.5, 6]): exp_sum's bits there, without its range checks, and 2^n one
// normal power of two (one multiply where exp_sum takes two).
template <bool kLow>
BATON_VMATH_INLINE float exp_in_range(float h, float l) {
  const Reduced e = exp_reduced<kLow>(h, l);
  return e.y * __builtin_bit_cast(float, (static_cast<int32_t>(e.n) + 127) << 23);
}

// e^h for h <= 0 (or NaN): exp's bits there without its overflow check. (exp_reduced<false>
// gives exp_reduced<true>'s bits when l is 0: the low part's sum is then exact.)
BATON_VMATH_INLINE float exp_nonpositive(float h) {
  const bool nan = h != h;
  float hc = h < kExpMin ? kExpMin : h;
  hc = nan ? 0.0f : hc;
  const Reduced e = exp_reduced<false>(hc, 0.0f);
  const float y = times_pow2(e.y, e.n);
  return nan ? h : y;
}

BATON_VMATH_INLINE float sigmoid(float x) {
  const float e = exp_nonpositive(x < 0.0f ? x : -x);  // e^-|x|, NaN stays NaN
  const float s = 1.0f / (1.0f + e);
  return x < 0.0f ? e * s : s;
}

BATON_VMATH_INLINE float tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = fma(p, z, 2.06390887954e-2f);
  p = fma(p, z, -5.37397155531e-2f);
  p = fma(p, z, 1.33314422036e-1f);
  p = fma(p, z, -3.33332819422e-1f);
  // (-0 stays -0: p * z * x + x would give +0 there.)
  const float small = x == 0.0f ? x : fma(p * z, x, x);
  // Past |x| = 10, 1 - 2 / (e^2|x| + 1) rounds to 1 (it does from 9.01): clamped there, the
  // exponential needs none of exp's range checks. A NaN is clamped too (no NaN reaches the
  // float-to-int conversion) and returned as it is at the end.
  const float ac = ax <= 10.0f ? ax : 10.0f;
  const float t = 1.0f - 2.0f / (exp_in_range<false>(2.0f * ac, 0.0f) + 1.0f);
  const float large = x < 0.0f ? -t : t;
  const float y = ax < 0.625f ? small : large;
  return x != x ? x : y;
}

// v's top 12 significand bits: its square is exact in float.
BATON_VMATH_INLINE float top12(float v) {
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, v) & 0xfffff000u);
}

// erfc(a) for a in [1, 6]: e^(-a^2 + Q(a - 3.5)), Q of degree 11 fitted by least squares to
// log(erfc(a)) + a^2 (error 1.6e-8). a^2 comes in two parts, sq_hi exact and sq_lo small
// (erfc_tail below splits a), because rounding a^2 would cost erfc a relative 6e-8 a^2 (25 ulp
// at a = 5): e^(-sq_hi + (Q - sq_lo)) through exp_in_range (the sum is within [-40, 0]), one
// exponential.
BATON_VMATH_INLINE float erfc_tail(float a, float sq_hi, float sq_lo) {
  const float t = a - 3.25f;
  float q = 2.4496438252201731e-10f;
  q = fma(q, t, -1.0940549022286916e-09f);
  q = fma(q, t, -2.4617398614983591e-09f);
  q = fma(q, t, 2.1921445401973383e-08f);
  q = fma(q, t, -9.5383179517258075e-08f);
  q = fma(q, t, 7.3862130811706145e-07f);
  q = fma(q, t, -5.2972923684674363e-06f);
  q = fma(q, t, 3.2487950199289032e-05f);
  q = fma(q, t, -0.00018947954404848849f);
  q = fma(q, t, 0.0010827693565402681f);
  q = fma(q, t, -0.0061996330740490537f);
  q = fma(q, t, 0.037518445481966006f);
  q = fma(q, t, -0.28376049599265835f);
  q = fma(q, t, -1.7937493646218792f);
  return exp_in_range<true>(-sq_hi, q - sq_lo);  // callers keep a in [0.5, 6], never NaN
}
// With a^2 = ah^2 + al (a + ah), ah = top12(a).
BATON_VMATH_INLINE float erfc_tail(float a) {
  const float ah = top12(a);
  return erfc_tail(a, ah * ah, (a - ah) * (a + ah));
}

// erf: x P(x^2) below |x| = 1 (P of degree 6 fitted to erf(x) / x, relative error 1.2e-9), 1 -
// erfc(|x|) with x's sign from 1 to 3.92, and ±1 beyond (where 1 - erfc rounds to 1).
// erf(x) = x P(x^2) for |x| < 1.
BATON_VMATH_INLINE float erf_small(float x) {
  const float z = x * x;
  float p = 7.8471385811129668e-05f;
  p = fma(p, z, -8.0081526319190910e-04f);
  p = fma(p, z, 5.1880946122683930e-03f);
  p = fma(p, z, -2.6853688717766361e-02f);
  p = fma(p, z, 1.1283582183844529e-01f);
  p = fma(p, z, -3.7612625560036750e-01f);
  p = fma(p, z, 1.1283791656869218e+00f);
  return x * p;
}

BATON_VMATH_INLINE float erf(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float small = erf_small(x);
  // The tail's argument kept in its fitted range, a NaN too (returned as it is at the end).
  float ac = ax >= 1.0f ? ax : 1.0f;
  ac = ac <= 6.0f ? ac : 6.0f;
  float big = 1.0f - erfc_tail(ac);
  big = ax >= 3.92f ? 1.0f : big;
  big = x < 0.0f ? -big : big;
  const float y = ax < 1.0f ? small : big;
  return x != x ? x : y;
}

// GELU's erf form, 0.5 x erfc(-x / sqrt 2), as the scalar kernel (op_gelu.cpp) writes it so that
// nothing cancels for negative x: 1 - erf(a) below |a| = 0.5 (erf(0.5) = 0.52: one bit lost),
// erfc_tail from there, for x >= -8.485 (erfc's argument up to 6). gelu_f32 computes
// the elements below that (about 1e-17 and smaller, and -inf) with the scalar std::erfc. erfc's
// a^2 = x^2 / 2 is split from x itself, exactly: the rounded a = -x / sqrt 2 would carry its
// rounding into erfc amplified by 2a^2 (70 ulp near the tail), as the scalar kernel's does.
inline constexpr float kGeluTail = -8.48528137423857f;  // -6 sqrt 2
BATON_VMATH_INLINE float gelu(float x) {
  const float a = -x * 0.70710678118654752440f;
  const float aa = a < 0.0f ? -a : a;
  // The tail's argument kept within [0.5, 6], a NaN too (0.5 x c is NaN then anyway).
  float ac = aa >= 0.5f ? aa : 0.5f;
  ac = ac <= 6.0f ? ac : 6.0f;
  // x itself for the split (exact), kept within ±6 sqrt 2 as ac is within 6: an infinite x would
  // give inf - inf.
  float xc = x <= 8.48528137f ? x : 8.48528137f;
  xc = xc < -8.48528137f ? -8.48528137f : xc;
  const float xh = top12(xc);
  const float e = erfc_tail(ac, 0.5f * (xh * xh), 0.5f * ((xc - xh) * (xc + xh)));
  const float tail = a < 0.0f ? 2.0f - e : e;
  const float c = aa < 0.5f ? 1.0f - erf_small(a) : tail;
  return 0.5f * x * c;
}

// Natural log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23 first), log(x) =
// e ln2 + log(1 + f) for f = m - 1, Cephes's degree-8 polynomial for log(1 + f) - f + f^2 / 2,
// ln2 split in two as in exp. Error 0.78 ulp over vector_math_test.cpp's sweep (0.82 over every 7th
// positive float). Special values as std::log:
// +-0 -> -inf, +inf -> +inf, a NaN stays that NaN, below zero the x86 default NaN (what glibc's
// logf returns there).
BATON_VMATH_INLINE float log(float x) {
  // (Both sides of each choice computed first: GCC if-converts, and so vectorizes, the loop only
  // that way.)
  const bool subnormal = x < 1.17549435e-38f;
  const float xs = subnormal ? x * 8388608.0f : x;  // 2^23
  const uint32_t b = __builtin_bit_cast(uint32_t, xs);
  const float scaled = subnormal ? 23.0f : 0.0f;
  float e = static_cast<float>(static_cast<int32_t>(b >> 23) - 126) - scaled;
  float m = __builtin_bit_cast(float, (b & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  const float f_low = m + m - 1.0f, f_high = m - 1.0f, e_low = e - 1.0f;  // f exact either way
  e = low ? e_low : e;
  m = low ? f_low : f_high;
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = fma(p, m, -1.1514610310e-1f);
  p = fma(p, m, 1.1676998740e-1f);
  p = fma(p, m, -1.2420140846e-1f);
  p = fma(p, m, 1.4249322787e-1f);
  p = fma(p, m, -1.6668057665e-1f);
  p = fma(p, m, 2.0000714765e-1f);
  p = fma(p, m, -2.4999993993e-1f);
  p = fma(p, m, 3.3333331174e-1f);
  float y = p * m * z;
  y = fma(e, -2.12194440e-4f, y);
  y = fma(z, -0.5f, y);
  float r = fma(e, 0.693359375f, m + y);
  r = x == __builtin_huge_valf() ? x : r;
  r = x == 0.0f ? -__builtin_huge_valf() : r;
  r = x < 0.0f ? __builtin_bit_cast(float, 0xffc00000u) : r;
  return x != x ? x : r;
}

// The sum of x[0, n), in 32 interleaved partial sums (element i in sum i % 32, each in order)
// added in order at the end: vectorized where one chain of adds would wait on each add's latency
// (a ReduceMean over an image's positions ran at 6 GB/s so). Not the bits of a plain loop, but a
// plain loop's from 0 for n < 32 (each partial sum then holds one element).
float sum_f32(const float* x, int64_t n);

// y[i] = f(x[i]) for i < n (x and y may be the same array).
void exp_f32(const float* x, float* y, int64_t n);
void log_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void erf_f32(const float* x, float* y, int64_t n);
void gelu_f32(const float* x, float* y, int64_t n);
// HardSwish, ops/elementwise.h's scalar form (x * clamp01(x / 6 + 1/2)) in every clone: the same
// bits as the scalar loop, which the baseline build compiles for SSE2 only.
void hard_swish_f32(const float* x, float* y, int64_t n);
// SiLU, x * sigmoid(x) with the sigmoid above: the same bits as a Sigmoid kernel's output
// multiplied by x (what the unfused Sigmoid and Mul compute).
void silu_f32(const float* x, float* y, int64_t n);

// A fused activation (ops/activation.h: a Linear's or a convolution's epilogue) over y in place:
// the array forms above for Gelu, Sigmoid, Silu, Tanh, Exp and Erf, cloned loops of the elementwise
// table's own functors for Relu, LeakyRelu and HardSigmoid (the same bits), and
// ops::apply_activation's scalar loop for the rest (and for double). BERT's FFN GELU over 64 x 1024
// values took 0.75 ms through the scalar std::erfc on this project's 2-core VM, as long as the GEMM
// before it.
void apply_activation(const ops::Activation& act, float* y, int64_t n);
void apply_activation(const ops::Activation& act, double* y, int64_t n);

}  // namespace baton::kernels::cpu::vmath
