// The array forms of vector_math.h's functions, one clone per instruction set (GCC's
// target_clones: AVX-512, AVX2 with FMA, and the x86-64 baseline's SSE2, picked when the library
// loads by what the CPU has). The loop bodies are the same inline functions in every clone, and
// this file is compiled with -ffp-contract=off (src/CMakeLists.txt): the only fused multiply-adds
// are vmath::fma's, exactly rounded everywhere, so the results do not depend on the CPU.
#include "kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>

#include "ops/elementwise.h"

namespace baton::kernels::cpu::vmath {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
// x86-64-v4 is AVX-512 (F, BW, CD, DQ, VL) and x86-64-v3 AVX2 with FMA: both have the fused
// multiply-add that vmath::fma asks for ("avx2" alone would not, and each fma would be a call).
#define BATON_VMATH_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BATON_VMATH_CLONES
#endif

BATON_VMATH_CLONES float sum_f32(const float* x, int64_t n) {
  // kLanes independent chains, each in order, then the chains' sums in order: the same bits
  // whatever the clone's vector width (16, 8 or 4 lanes take two, four or eight steps a block).
  constexpr int64_t kLanes = 32;
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) part[l] += x[i + l];
  }
  for (int64_t l = 0; i + l < n; ++l) part[l] += x[i + l];
  // The partial sums past n are +0.0 and add nothing (s starts at +0.0, so never -0.0).
  float s = 0.0f;
  for (int64_t l = 0; l < std::min(n, kLanes); ++l) s += part[l];
  return s;
}

BATON_VMATH_CLONES void exp_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vmath::exp(x[i]);
}

BATON_VMATH_CLONES void log_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vmath::log(x[i]);
}

BATON_VMATH_CLONES void sigmoid_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vmath::sigmoid(x[i]);
}

BATON_VMATH_CLONES void silu_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * vmath::sigmoid(x[i]);
}

BATON_VMATH_CLONES void tanh_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vmath::tanh(x[i]);
}

BATON_VMATH_CLONES void erf_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vmath::erf(x[i]);
}

BATON_VMATH_CLONES void hard_swish_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ops::scalar::hard_swish(x[i]);
}

// In chunks: the vector loop over a copy of the chunk (x and y may be one array), then the rare
// elements below kGeluTail through the scalar std::erfc, as op_gelu.cpp computes them.
BATON_VMATH_CLONES void gelu_f32(const float* x, float* y, int64_t n) {
  constexpr int64_t kChunk = 256;
  float v[kChunk];
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t m = n - s < kChunk ? n - s : kChunk;
    for (int64_t i = 0; i < m; ++i) v[i] = x[s + i];
    for (int64_t i = 0; i < m; ++i) y[s + i] = vmath::gelu(v[i]);
    for (int64_t i = 0; i < m; ++i) {
      if (v[i] < kGeluTail) y[s + i] = 0.5f * v[i] * std::erfc(-v[i] * 0.70710678118654752440f);
    }
  }
}

// The cheap activations a convolution or Linear ends in, as the elementwise table computes them
// (the same inline functor), in clones: ops::apply_activation's loop is built for the baseline
// CPU and was 16% of ResNet-50's time at one thread.
#define BATON_VMATH_TABLE_ACTIVATION(Name)                                          \
  BATON_VMATH_CLONES void Name##_table_f32(float* y, int64_t n,                     \
                                           const ops::ElementwiseArgs& args) {      \
    for (int64_t i = 0; i < n; ++i) y[i] = ops::Name##Fn::apply<float>(y[i], args); \
  }
BATON_VMATH_TABLE_ACTIVATION(Relu)
BATON_VMATH_TABLE_ACTIVATION(LeakyRelu)
BATON_VMATH_TABLE_ACTIVATION(HardSigmoid)
#undef BATON_VMATH_TABLE_ACTIVATION

void apply_activation(const ops::Activation& act, float* y, int64_t n) {
  if (act.op == "Relu") return Relu_table_f32(y, n, act.params);
  if (act.op == "LeakyRelu") return LeakyRelu_table_f32(y, n, act.params);
  if (act.op == "HardSigmoid") return HardSigmoid_table_f32(y, n, act.params);
  if (act.op == "Gelu") return gelu_f32(y, y, n);
  if (act.op == "HardSwish") return hard_swish_f32(y, y, n);
  if (act.op == "Sigmoid") return sigmoid_f32(y, y, n);
  if (act.op == "Silu") return silu_f32(y, y, n);
  if (act.op == "Tanh") return tanh_f32(y, y, n);
  if (act.op == "Exp") return exp_f32(y, y, n);
  if (act.op == "Erf") return erf_f32(y, y, n);
  ops::apply_activation(act, y, n);
}

void apply_activation(const ops::Activation& act, double* y, int64_t n) {
  ops::apply_activation(act, y, n);
}

}  // namespace baton::kernels::cpu::vmath
