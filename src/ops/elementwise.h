// The elementwise operators: one row each, consumed by everything that implements them.
//
//  - src/ops/elementwise.cpp makes each row's definition (inputs, types, attributes with their
//    defaults and checks, broadcasting inference);
//  - src/kernels/cpu/op_elementwise.cpp makes each row's CPU kernel from its CPU expression;
//  - the CUDA engine's fused-kernel generator (src/backends/cuda/builder/ops/elementwise.cpp)
//    reads each row's device expression;
//  - the conformance test generates its cases from the rows.
// So a new unary or binary operator is one line here.
//
// Unary rows:  X(Name, since_version, types, out, attributes, CPU expression of x,
//                device expression of {x})
// Binary rows: X(Name, since_version, types of A, types of B (kSameAsA: A's constraint T), out,
//                attributes, CPU expression of a and b, device expression of {a} and {b})
//
// since_version is the first opset of the row's current semantics; the types are the newest
// version's, which Baton takes from since_version on (older versions only allowed fewer). Opset 6
// only dropped the `consumed_inputs` attribute of the opset-1 unary ops, and opset 7 gave the
// arithmetic ops multidirectional broadcasting (before it, a `broadcast` attribute): the rows start
// there.
// out:  Same      the output has A's dtype and the (multidirectionally) broadcast shape;
//       Bool      the output is bool, of the broadcast shape (comparisons, IsNaN);
//       ShapeOfA  A's dtype and shape: B must broadcast to A (unidirectional, PRelu's slope).
// attributes: () or up to two (kind, name, default) triples, e.g. (Float, alpha, 0.01). Kinds:
//       Float     an ONNX FLOAT attribute, finite;
//       NonZero   an ONNX FLOAT attribute, finite and not 0 (a divisor);
//       Flag      an ONNX INT attribute, 0 or 1.
//   The CPU expression reads each attribute as a local of its name: Float and NonZero in the
//   compute type (double for integer tensors), Flag as bool. The device expression names it as
//   {name}; the generator bakes the node's value in as a float literal.
// The CPU expression is evaluated in the compute type C: float for float32, float16 and
// bfloat16, double for float64, the type itself for integers and bool. Binary expressions may set
// `error` (integer division by zero). The device expression is CUDA C; an empty one ("") makes
// the row CPU-only (the CUDA engine leaves its nodes to the CPU). Rows of float results join the
// fused kernels, which compute in float; rows that read or write bool (the comparisons, IsNaN,
// Not, And, Or, Xor: typed_on_device) get typed kernels that read each input in its own stored
// type (integers compare exactly) and store bool.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "ops/op_def.h"

namespace baton::ops {

// B's type constraint is A's (ONNX's single T).
inline constexpr DTypeSet kSameAsA{};

enum class ElementwiseOut : uint8_t { Same, Bool, ShapeOfA };
enum class ElementwiseAttrKind : uint8_t { Float, NonZero, Flag };

// HardSwish is x * HardSigmoid(x) with these fixed alpha and beta (ONNX's definition); the CUDA
// engine hands them to cuDNN when it fuses a HardSwish into a convolution.
inline constexpr double kHardSwishAlpha = 1.0 / 6.0;
inline constexpr double kHardSwishBeta = 0.5;

// SELU's defaults, as ONNX writes them (float32 values).
inline constexpr double kSeluAlpha = 1.67326319217681884765625;
inline constexpr double kSeluGamma = 1.05070102214813232421875;

// clang-format off
#define BATON_UNARY_OPS(X) \
  X(Abs, 6, kNumericTypes, Same, (), scalar::abs(x), "fabsf({x})") \
  X(Acos, 7, kFloatTypes, Same, (), std::acos(x), "acosf({x})") \
  X(Acosh, 9, kFloatTypes, Same, (), std::acosh(x), "acoshf({x})") \
  X(Asin, 7, kFloatTypes, Same, (), std::asin(x), "asinf({x})") \
  X(Asinh, 9, kFloatTypes, Same, (), std::asinh(x), "asinhf({x})") \
  X(Atan, 7, kFloatTypes, Same, (), std::atan(x), "atanf({x})") \
  X(Atanh, 9, kFloatTypes, Same, (), std::atanh(x), "atanhf({x})") \
  X(Ceil, 6, kFloatTypes, Same, (), std::ceil(x), "ceilf({x})") \
  X(Celu, 12, kFloatTypes, Same, (NonZero, alpha, 1.0), scalar::celu(x, alpha), "baton_celu({x}, {alpha})") \
  X(Cos, 7, kFloatTypes, Same, (), std::cos(x), "cosf({x})") \
  X(Cosh, 9, kFloatTypes, Same, (), std::cosh(x), "coshf({x})") \
  X(Elu, 6, kFloatTypes, Same, (Float, alpha, 1.0), scalar::elu(x, alpha), "baton_elu({x}, {alpha})") \
  X(Erf, 9, kFloatTypes, Same, (), std::erf(x), "erff({x})") \
  X(Exp, 6, kFloatTypes, Same, (), std::exp(x), "expf({x})") \
  X(Floor, 6, kFloatTypes, Same, (), std::floor(x), "floorf({x})") \
  X(HardSigmoid, 6, kFloatTypes, Same, (Float, alpha, 0.2, Float, beta, 0.5), scalar::clamp01(alpha * x + beta), "baton_clamp01({alpha} * {x} + {beta})") \
  X(HardSwish, 14, kFloatTypes, Same, (), scalar::hard_swish(x), "baton_hard_swish({x})") \
  X(IsInf, 10, kFloatTypes, Bool, (Flag, detect_negative, 1, Flag, detect_positive, 1), scalar::is_inf(x, detect_negative, detect_positive), "") \
  X(IsNaN, 9, kFloatTypes, Bool, (), std::isnan(x), "({x} != {x})") \
  X(LeakyRelu, 6, kFloatTypes, Same, (Float, alpha, 0.01), x < C(0) ? alpha * x : x, "({x} < 0.0f ? {alpha} * {x} : {x})") \
  X(Log, 6, kFloatTypes, Same, (), std::log(x), "logf({x})") \
  X(Neg, 6, kSignedNumericTypes, Same, (), scalar::neg(x), "(-{x})") \
  X(Not, 1, kBoolTypes, Same, (), !x, "(!{x})") \
  X(Reciprocal, 6, kFloatTypes, Same, (), C(1) / x, "(1.0f / {x})") \
  X(Relu, 6, kSignedNumericTypes, Same, (), scalar::relu(x), "baton_relu({x})") \
  X(Round, 11, kFloatTypes, Same, (), std::nearbyint(x), "rintf({x})") \
  X(Selu, 6, kFloatTypes, Same, (Float, alpha, kSeluAlpha, Float, gamma, kSeluGamma), scalar::selu(x, alpha, gamma), "baton_selu({x}, {alpha}, {gamma})") \
  X(Shrink, 9, kNumericTypes, Same, (Float, bias, 0.0, Float, lambd, 0.5), scalar::shrink(x, bias, lambd), "baton_shrink({x}, {bias}, {lambd})") \
  X(Sigmoid, 6, kFloatTypes, Same, (), scalar::sigmoid(x), "baton_sigmoid({x})") \
  X(Sign, 9, kNumericTypes, Same, (), scalar::sign(x), "baton_sign({x})") \
  X(Sin, 7, kFloatTypes, Same, (), std::sin(x), "sinf({x})") \
  X(Sinh, 9, kFloatTypes, Same, (), std::sinh(x), "sinhf({x})") \
  X(Softplus, 1, kFloatTypes, Same, (), scalar::softplus(x), "baton_softplus({x})") \
  X(Softsign, 1, kFloatTypes, Same, (), x / (C(1) + std::fabs(x)), "({x} / (1.0f + fabsf({x})))") \
  X(Sqrt, 6, kFloatTypes, Same, (), std::sqrt(x), "sqrtf({x})") \
  X(Tan, 7, kFloatTypes, Same, (), std::tan(x), "tanf({x})") \
  X(Tanh, 6, kFloatTypes, Same, (), std::tanh(x), "tanhf({x})") \
  X(ThresholdedRelu, 10, kFloatTypes, Same, (Float, alpha, 1.0), x > alpha ? x : C(0), "({x} > {alpha} ? {x} : 0.0f)")

#define BATON_BINARY_OPS(X) \
  X(Add, 7, kNumericTypes, kSameAsA, Same, (), scalar::add(a, b), "({a} + {b})") \
  X(And, 7, kBoolTypes, kSameAsA, Same, (), a && b, "({a} && {b})") \
  X(Div, 7, kNumericTypes, kSameAsA, Same, (), scalar::div(a, b, error), "({a} / {b})") \
  X(Equal, 7, kAllTypes, kSameAsA, Bool, (), a == b, "({a} == {b})") \
  X(Greater, 7, kNumericTypes, kSameAsA, Bool, (), a > b, "({a} > {b})") \
  X(GreaterOrEqual, 12, kNumericTypes, kSameAsA, Bool, (), a >= b, "({a} >= {b})") \
  X(Less, 7, kNumericTypes, kSameAsA, Bool, (), a < b, "({a} < {b})") \
  X(LessOrEqual, 12, kNumericTypes, kSameAsA, Bool, (), a <= b, "({a} <= {b})") \
  X(Mod, 10, kNumericTypes, kSameAsA, Same, (Flag, fmod, 0), scalar::mod(a, b, fmod, error), "fmodf({a}, {b})") \
  X(Mul, 7, kNumericTypes, kSameAsA, Same, (), scalar::mul(a, b), "({a} * {b})") \
  X(Or, 7, kBoolTypes, kSameAsA, Same, (), a || b, "({a} || {b})") \
  X(Pow, 7, (kFloatTypes | kIndexTypes), kNumericTypes, Same, (), scalar::pow(a, b), "powf({a}, {b})") \
  X(PRelu, 9, (kFloatTypes | kIndexTypes), kSameAsA, ShapeOfA, (), scalar::prelu(a, b), "baton_prelu({a}, {b})") \
  X(Sub, 7, kNumericTypes, kSameAsA, Same, (), scalar::sub(a, b), "({a} - {b})") \
  X(Xor, 7, kBoolTypes, kSameAsA, Same, (), a != b, "({a} != {b})")
// clang-format on

// Helpers the CPU expressions use. Integer arithmetic wraps (two's complement) instead of
// overflowing into undefined behaviour; NaN passes through Relu and Sign as NaN.
namespace scalar {

template <typename C, bool = std::is_integral_v<C>>
struct WrappingOf {
  using type = C;
};
// At least unsigned int: a narrower unsigned type promotes to (signed) int in arithmetic, where
// 48830 * 48830 (int16 -16706 squared, as uint16) overflows.
template <typename C>
struct WrappingOf<C, true> {
  using type = std::common_type_t<std::make_unsigned_t<C>, unsigned int>;
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

// x clamped to [0, 1]; NaN stays NaN.
template <typename C>
C clamp01(C x) {
  return x < C(0) ? C(0) : (x > C(1) ? C(1) : x);
}
template <typename C>
C hard_swish(C x) {
  return x * clamp01(x * C(kHardSwishAlpha) + C(kHardSwishBeta));
}
// slope * x below 0 (integers wrap), x elsewhere; NaN stays NaN.
template <typename C>
C prelu(C x, C slope) {
  return x < C(0) ? mul(x, slope) : x;
}
// log(1 + exp(x)) without overflow for large x.
template <typename C>
C softplus(C x) {
  return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
template <typename C>
C elu(C x, C alpha) {
  return x < C(0) ? alpha * std::expm1(x) : x;
}
template <typename C>
C selu(C x, C alpha, C gamma) {
  return x > C(0) ? gamma * x : gamma * (alpha * std::expm1(x));
}
// max(0, x) + min(0, alpha (exp(x / alpha) - 1)), which is x for x > 0 whatever alpha's sign.
template <typename C>
C celu(C x, C alpha) {
  return x > C(0) ? x : alpha * std::expm1(x / alpha);
}
// x + bias below -lambd, x - bias above lambd, 0 between (in A, the attributes' type).
template <typename C, typename A>
A shrink(C x, A bias, A lambd) {
  const A v = static_cast<A>(x);
  return v < -lambd ? v + bias : (v > lambd ? v - bias : A(0));
}
template <typename C>
bool is_inf(C x, bool negative, bool positive) {
  return std::isinf(x) && (x < C(0) ? negative : positive);
}
// fmod = 1: C's remainder (the sign of the dividend); fmod = 0 (integers only, the definition
// refuses it for floats): the sign of the divisor, as Python's %. A zero integer divisor sets
// `error` like Div; min % -1 is 0 (it traps on x86).
template <typename C>
C mod(C a, C b, bool fmod, bool& error) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) {
      error = true;
      return 0;
    }
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return 0;
      const C r = static_cast<C>(a % b);
      return (!fmod && r != 0 && ((r < 0) != (b < 0))) ? static_cast<C>(r + b) : r;
    } else {
      return static_cast<C>(a % b);
    }
  }
}

// A row's result converted to its output's compute type R: floats to integers truncate and
// saturate (NaN gives 0) instead of being undefined out of range.
template <typename R, typename V>
R narrow(V v) {
  if constexpr (std::is_integral_v<R> && !std::is_same_v<R, bool> && std::is_floating_point_v<V>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<V>(std::numeric_limits<R>::min())) return std::numeric_limits<R>::min();
    if (v >= static_cast<V>(std::numeric_limits<R>::max())) return std::numeric_limits<R>::max();
    return static_cast<R>(v);
  } else {
    return static_cast<R>(v);
  }
}

// The type Float and NonZero attributes have in an expression computing in C.
template <typename C>
using AttrFloat = std::conditional_t<std::is_floating_point_v<C>, C, double>;

template <ElementwiseAttrKind kKind, typename C>
auto attr_as(double v) {
  if constexpr (kKind == ElementwiseAttrKind::Flag) {
    return v != 0.0;
  } else {
    return static_cast<AttrFloat<C>>(v);
  }
}

}  // namespace scalar

// The most attributes a row has, and a call's attribute values in the row's order (flags as 0
// or 1), read once when a kernel is created.
inline constexpr size_t kMaxElementwiseAttrs = 2;
using ElementwiseArgs = std::array<double, kMaxElementwiseAttrs>;

struct ElementwiseAttr {
  ElementwiseAttrKind kind = ElementwiseAttrKind::Float;
  std::string_view name;
  double default_value = 0.0;
};

// Expanding a row's attribute list `(kind, name, default, ...)`: BATON_ELEMENTWISE_ATTR_LOCALS
// declares the expression's locals from `args` (as statements; the last one's `;` is the
// caller's), BATON_ELEMENTWISE_ATTR_SPECS gives the ElementwiseAttr initializers,
// BATON_ELEMENTWISE_ATTR_COUNT their number.
// clang-format off
#define BATON_ELEMENTWISE_ATTR_LOCALS(...) __VA_OPT__(BATON_ELEMENTWISE_ATTR_LOCAL0(__VA_ARGS__))
#define BATON_ELEMENTWISE_ATTR_LOCAL0(kind, name, value, ...) \
  [[maybe_unused]] const auto name = scalar::attr_as<ElementwiseAttrKind::kind, C>(args[0]) \
  __VA_OPT__(; BATON_ELEMENTWISE_ATTR_LOCAL1(__VA_ARGS__))
#define BATON_ELEMENTWISE_ATTR_LOCAL1(kind, name, value) \
  [[maybe_unused]] const auto name = scalar::attr_as<ElementwiseAttrKind::kind, C>(args[1])
#define BATON_ELEMENTWISE_ATTR_SPECS(...) __VA_OPT__(BATON_ELEMENTWISE_ATTR_SPEC0(__VA_ARGS__))
#define BATON_ELEMENTWISE_ATTR_SPEC0(kind, name, value, ...) \
  ElementwiseAttr{ElementwiseAttrKind::kind, #name, value}, __VA_OPT__(BATON_ELEMENTWISE_ATTR_SPEC1(__VA_ARGS__))
#define BATON_ELEMENTWISE_ATTR_SPEC1(kind, name, value) ElementwiseAttr{ElementwiseAttrKind::kind, #name, value},
#define BATON_ELEMENTWISE_ATTR_COUNT(...) (0 __VA_OPT__(+BATON_ELEMENTWISE_ATTR_COUNT0(__VA_ARGS__)))
#define BATON_ELEMENTWISE_ATTR_COUNT0(kind, name, value, ...) 1 __VA_OPT__(+1)
// clang-format on

// The compute type of a row's result: bool for ElementwiseOut::Bool, else the input's C.
template <ElementwiseOut kOut, typename C>
using ResultOf = std::conditional_t<kOut == ElementwiseOut::Bool, bool, C>;

// One functor per row: Name##Fn::apply<C>(x, args) or apply<C, E>(a, b, args, error), returning
// the result in ResultOf<out, C>.
#define BATON_DEFINE_UNARY_FN(Name, since, types, out, attrs, cpu, device) \
  struct Name##Fn {                                                        \
    template <typename C>                                                  \
    static auto apply(C x, [[maybe_unused]] const ElementwiseArgs& args) { \
      using R = ResultOf<ElementwiseOut::out, C>;                          \
      BATON_ELEMENTWISE_ATTR_LOCALS attrs;                                 \
      return scalar::narrow<R>(cpu);                                       \
    }                                                                      \
  };
#define BATON_DEFINE_BINARY_FN(Name, since, a_types, b_types, out, attrs, cpu, device) \
  struct Name##Fn {                                                                    \
    template <typename C, typename E>                                                  \
    static auto apply(C a, E b, [[maybe_unused]] const ElementwiseArgs& args,          \
                      [[maybe_unused]] bool& error) {                                  \
      using R = ResultOf<ElementwiseOut::out, C>;                                      \
      BATON_ELEMENTWISE_ATTR_LOCALS attrs;                                             \
      return scalar::narrow<R>(cpu);                                                   \
    }                                                                                  \
  };
BATON_UNARY_OPS(BATON_DEFINE_UNARY_FN)
BATON_BINARY_OPS(BATON_DEFINE_BINARY_FN)
#undef BATON_DEFINE_UNARY_FN
#undef BATON_DEFINE_BINARY_FN

// A row as data, for code that works on names (the definitions, the kernels' attribute
// binding, the CUDA generator, the conformance test).
struct ElementwiseRow {
  std::string_view name;
  int since_version = 1;
  int arity = 1;
  DTypeSet types;
  DTypeSet b_types;  // binary rows: kSameAsA or B's own constraint
  ElementwiseOut out = ElementwiseOut::Same;
  std::array<ElementwiseAttr, kMaxElementwiseAttrs> attrs{};
  size_t num_attrs = 0;
  std::string_view device;  // empty: CPU only

  std::span<const ElementwiseAttr> attributes() const { return {attrs.data(), num_attrs}; }
  bool on_device() const { return !device.empty(); }
  // Runs on the device as a typed kernel of its own (bool in or out), not in a fused float kernel.
  bool typed_on_device() const {
    return on_device() && (out == ElementwiseOut::Bool || types == kBoolTypes);
  }
};

std::span<const ElementwiseRow> elementwise_rows();
// The row of op `name`, or null.
const ElementwiseRow* find_elementwise(std::string_view name);
// Row `name`'s CPU expression on doubles (`b` is ignored by unary rows; `args` are the row's
// attribute values, in its order): what compile-time analyses (the GELU pass's probes) evaluate,
// so that they compute exactly what the kernels do. Null for an op without a row, or a value the
// row refuses (its `error`).
std::optional<double> evaluate_elementwise(std::string_view name, double a, double b = 0.0,
                                           const ElementwiseArgs& args = {});

}  // namespace baton::ops
