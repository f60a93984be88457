// ONNX Gelu (opset 20). approximate = "none": 0.5 x (1 + erf(x / sqrt 2)); "tanh":
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
#include <cmath>

#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// Both forms are rewritten so that nothing cancels for negative x, where 1 + erf(.) and
// 1 + tanh(.) would lose every digit: 1 + erf(z) = erfc(-z), and 1 + tanh(u) = 2 / (1 + exp(-2u)).
struct GeluErfFn {
  template <typename C>
  static C apply(C x, const ops::ElementwiseArgs& /*no attributes*/) {
    constexpr C kInvSqrt2 = C(0.70710678118654752440);
    return C(0.5) * x * std::erfc(-x * kInvSqrt2);
  }
};

struct GeluTanhFn {
  template <typename C>
  static C apply(C x, const ops::ElementwiseArgs& /*no attributes*/) {
    constexpr C kSqrt2OverPi = C(0.79788456080286535588);
    const C u = kSqrt2OverPi * (x + C(0.044715) * x * x * x);
    return x / (C(1) + std::exp(C(-2) * u));
  }
};

}  // namespace

// float32's erf form runs vectorized (vector_math.h's gelu: the same erfc rewrite).
BATON_ARRAY_FORM(GeluErfFn, vmath::gelu_f32)

namespace {

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  if (call.attr_string("approximate") == "tanh") {
    return create_unary<GeluTanhFn, ops::kFloatTypes.bits()>(call);
  }
  return create_unary<GeluErfFn, ops::kFloatTypes.bits()>(call);
}

}  // namespace

void register_gelu(runtime::KernelRegistry& registry) { registry.add({"Gelu", "", {}, &create}); }

}  // namespace baton::kernels::cpu
