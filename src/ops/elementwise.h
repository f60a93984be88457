// The elementwise operators: one row each, consumed by everything that implements them.
//
//  - src/ops/elementwise.cpp makes each row's definition (inputs, types, broadcasting inference);
//  - src/kernels/cpu/op_elementwise.cpp makes each row's CPU kernel from its CPU expression;
//  - the CUDA engine's fused-kernel generator (src/backends/cuda/builder/ops/elementwise.cpp)
//    reads each row's device expression;
//  - the conformance test generates its cases from the rows.
// So a new unary or binary operator is one line here.
//
// Unary rows:  X(Name, since_version, types, CPU expression of x, device expression of {x})
// Binary rows: X(Name, since_version, types of A, types of B (kSameAsA: A's constraint T),
//                CPU expression of a and b, device expression of {a} and {b})
// The CPU expression is evaluated in the compute type C: float for float32, float16 and
// bfloat16, double for float64, the type itself for integers. Binary expressions may set `error`
// (integer division by zero). The device expression is CUDA C on floats.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/op_def.h"

namespace baton::ops {

// B's type constraint is A's (ONNX's single T).
inline constexpr DTypeSet kSameAsA{};

#define BATON_UNARY_OPS(X)                                              \
  X(Abs, 13, kNumericTypes, scalar::abs(x), "fabsf({x})")               \
  X(Ceil, 13, kFloatTypes, std::ceil(x), "ceilf({x})")                  \
  X(Erf, 13, kFloatTypes, std::erf(x), "erff({x})")                     \
  X(Exp, 13, kFloatTypes, std::exp(x), "expf({x})")                     \
  X(Floor, 13, kFloatTypes, std::floor(x), "floorf({x})")               \
  X(Log, 13, kFloatTypes, std::log(x), "logf({x})")                     \
  X(Neg, 13, kSignedNumericTypes, scalar::neg(x), "(-{x})")             \
  X(Reciprocal, 13, kFloatTypes, C(1) / x, "(1.0f / {x})")              \
  X(Relu, 13, kSignedNumericTypes, scalar::relu(x), "baton_relu({x})")  \
  X(Sigmoid, 13, kFloatTypes, scalar::sigmoid(x), "baton_sigmoid({x})") \
  X(Sign, 13, kNumericTypes, scalar::sign(x), "baton_sign({x})")        \
  X(Sqrt, 13, kFloatTypes, std::sqrt(x), "sqrtf({x})")                  \
  X(Tanh, 13, kFloatTypes, std::tanh(x), "tanhf({x})")

#define BATON_BINARY_OPS(X)                                                                   \
  X(Add, 13, kNumericTypes, kSameAsA, scalar::add(a, b), "({a} + {b})")                       \
  X(Div, 13, kNumericTypes, kSameAsA, scalar::div(a, b, error), "({a} / {b})")                \
  X(Mul, 13, kNumericTypes, kSameAsA, scalar::mul(a, b), "({a} * {b})")                       \
  X(Pow, 13, (kFloatTypes | kIndexTypes), kNumericTypes, scalar::pow(a, b), "powf({a}, {b})") \
  X(Sub, 13, kNumericTypes, kSameAsA, scalar::sub(a, b), "({a} - {b})")

// Helpers the CPU expressions use. Integer arithmetic wraps (two's complement) instead of
// overflowing into undefined behaviour; NaN passes through Relu and Sign as NaN.
namespace scalar {

template <typename C, bool = std::is_integral_v<C>>
struct WrappingOf {
  using type = C;
};
template <typename C>
struct WrappingOf<C, true> {
  using type = std::make_unsigned_t<C>;
};
template <typename C>
using Wrapping = typename WrappingOf<C>::type;

template <typename C>
C add(C a, C b) {
  return static_cast<C>(static_cast<Wrapping<C>>(a) + static_cast<Wrapping<C>>(b));
}
template <typename C>
C sub(C a, C b) {
  return static_cast<C>(static_cast<Wrapping<C>>(a) - static_cast<Wrapping<C>>(b));
}
template <typename C>
C mul(C a, C b) {
  return static_cast<C>(static_cast<Wrapping<C>>(a) * static_cast<Wrapping<C>>(b));
}
template <typename C>
C neg(C x) {
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(Wrapping<C>(0) - static_cast<Wrapping<C>>(x));
  } else {
    return -x;
  }
}
// Integer division truncates toward zero (C++ and ONNX); a zero divisor sets `error` (it traps
// on x86) and min / -1 wraps.
template <typename C>
C div(C a, C b, bool& error) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0) {
      error = true;
      return 0;
    }
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return neg(a);
    }
    return static_cast<C>(a / b);
  } else {
    return a / b;
  }
}
template <typename C>
C abs(C x) {
  if constexpr (std::is_unsigned_v<C>) {
    return x;
  } else if constexpr (std::is_integral_v<C>) {
    return x < 0 ? neg(x) : x;
  } else {
    return std::fabs(x);
  }
}
template <typename C>
C relu(C x) {
  return x < C(0) ? C(0) : x;
}
template <typename C>
C sign(C x) {
  if (x > C(0)) return C(1);
  if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) {
    if (x < C(0)) return C(-1);
  }
  return x;  // 0 (with its sign) or NaN
}
template <typename C>
C sigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
  const C e = std::exp(x);
  return e / (C(1) + e);
}
// Float bases go through double, so an integer exponent keeps its parity and a negative base its
// sign; integer bases multiply exactly (wrapping), and a negative exponent gives 0 unless |a| = 1.
template <typename C, typename E>
C pow(C a, E b) {
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else {
    if (b < E(0)) {
      if (a == 1) return 1;
      if (a == -1) return (static_cast<int64_t>(b) % 2 == 0) ? C(1) : C(-1);
      return 0;
    }
    Wrapping<C> result = 1, base = static_cast<Wrapping<C>>(a);
    for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
      if (e & 1) result = static_cast<Wrapping<C>>(result * base);
      base = static_cast<Wrapping<C>>(base * base);
    }
    return static_cast<C>(result);
  }
}

}  // namespace scalar

// One functor per row: Name##Fn::apply<C>(x) or apply<C>(a, b, error).
#define BATON_DEFINE_UNARY_FN(Name, since, types, cpu, device) \
  struct Name##Fn {                                            \
    template <typename C>                                      \
    static C apply(C x) {                                      \
      return static_cast<C>(cpu);                              \
    }                                                          \
  };
#define BATON_DEFINE_BINARY_FN(Name, since, a_types, b_types, cpu, device) \
  struct Name##Fn {                                                        \
    template <typename C, typename E>                                      \
    static C apply(C a, E b, [[maybe_unused]] bool& error) {               \
      return static_cast<C>(cpu);                                          \
    }                                                                      \
  };
BATON_UNARY_OPS(BATON_DEFINE_UNARY_FN)
BATON_BINARY_OPS(BATON_DEFINE_BINARY_FN)
#undef BATON_DEFINE_UNARY_FN
#undef BATON_DEFINE_BINARY_FN

// A row as data, for code that works on names (the CUDA generator, the conformance test).
struct ElementwiseRow {
  std::string_view name;
  int arity;
  DTypeSet types;
  DTypeSet b_types;  // binary rows: kSameAsA or B's own constraint
  std::string_view device;
};

std::span<const ElementwiseRow> elementwise_rows();
// The row of op `name`, or null.
const ElementwiseRow* find_elementwise(std::string_view name);

}  // namespace baton::ops
