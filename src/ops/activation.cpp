#include "ops/activation.h"

#include <cmath>

#include "baton/core/check.h"
#include "ops/op_def.h"

namespace baton::ops {
namespace {

// A row that can be an activation: float results, float attributes only, on every backend.
const ElementwiseRow* activation_row(std::string_view name) {
  const ElementwiseRow* row = find_elementwise(name);
  if (row == nullptr || row->arity != 1 || row->out != ElementwiseOut::Same || !row->on_device() ||
      !row->types.contains(DType::Float32)) {
    return nullptr;
  }
  for (const ElementwiseAttr& a : row->attributes()) {
    if (a.kind == ElementwiseAttrKind::Flag) return nullptr;
  }
  return row;
}

// GELU as the CPU's Gelu kernel computes it (kernels/cpu/op_gelu.cpp: written so that nothing
// cancels for negative x).
template <typename C>
C gelu_erf(C x) {
  return C(0.5) * x * std::erfc(-x * C(0.70710678118654752440));
}
template <typename C>
C gelu_tanh(C x) {
  const C u = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
  return x / (C(1) + std::exp(C(-2) * u));
}

// SiLU as the unfused nodes compute it: the Sigmoid row's value, times x.
template <typename C>
C silu(C x) {
  return x * scalar::sigmoid(x);
}

template <typename C>
void apply(const Activation& act, C* y, int64_t n) {
  if (act.none()) return;
  if (act.op == "Silu") {
    for (int64_t i = 0; i < n; ++i) y[i] = silu(y[i]);
    return;
  }
  if (act.op == "Gelu") {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_erf(y[i]);
    return;
  }
  if (act.op == "GeluTanh") {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(y[i]);
    return;
  }
  // One name comparison per call, then a loop the compiler sees whole.
#define BATON_APPLY_ACTIVATION(Name, ...)                                                        \
  if (act.op == #Name) {                                                                         \
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<C>(Name##Fn::apply<C>(y[i], act.params)); \
    return;                                                                                      \
  }
  BATON_UNARY_OPS(BATON_APPLY_ACTIVATION)
#undef BATON_APPLY_ACTIVATION
}

}  // namespace

bool is_activation(std::string_view name) {
  return name == "Gelu" || name == "GeluTanh" || activation_row(name) != nullptr;
}

Result<Activation> make_activation(std::string_view name, std::span<const double> params,
                                   std::string_view what) {
  Activation act;
  if (name.empty() || name == "Gelu" || name == "GeluTanh" || name == "Silu") {
    BATON_CHECK_OR_RETURN(params.empty(), InvalidArgument,
                          "{}: activation '{}' takes no activation_params, got {}", what, name,
                          params.size());
    act.op = std::string(name);
    return act;
  }
  const ElementwiseRow* row = activation_row(name);
  BATON_CHECK_OR_RETURN(row != nullptr, InvalidArgument,
                        "{}: activation '{}' is not one Baton fuses; use Gelu, GeluTanh, Silu or a "
                        "unary elementwise op of a float result (Relu, HardSigmoid, Tanh, ...)",
                        what, name);
  BATON_CHECK_OR_RETURN(params.empty() || params.size() == row->num_attrs, InvalidArgument,
                        "{}: activation {} takes {} activation_params (its attributes in order), "
                        "got {}",
                        what, name, row->num_attrs, params.size());
  act.op = std::string(name);
  act.num_params = row->num_attrs;
  for (size_t i = 0; i < row->num_attrs; ++i) {
    const double v = params.empty() ? row->attrs[i].default_value : params[i];
    BATON_CHECK_OR_RETURN(std::isfinite(v), InvalidArgument,
                          "{}: activation {}'s {} is {}; it must be finite", what, name,
                          row->attrs[i].name, v);
    BATON_CHECK_OR_RETURN(row->attrs[i].kind != ElementwiseAttrKind::NonZero || v != 0.0,
                          InvalidArgument, "{}: activation {}'s {} must not be 0", what, name,
                          row->attrs[i].name);
    act.params[i] = v;
  }
  return act;
}

Result<Activation> canonical_activation(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(Activation act,
                         make_activation(ctx.attr_string("activation"),
                                         ctx.attr_floats("activation_params"), ctx.what()));
  ctx.set_attr("activation_params", AttrValue::of_floats(act.param_list()));
  return act;
}

void apply_activation(const Activation& act, float* values, int64_t n) { apply(act, values, n); }
void apply_activation(const Activation& act, double* values, int64_t n) { apply(act, values, n); }

double evaluate_activation(const Activation& act, double x) {
  apply(act, &x, 1);
  return x;
}

}  // namespace baton::ops
