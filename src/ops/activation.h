// The activation a fusion pass folds into the op before it: the `activation` and
// `activation_params` attributes of Baton's Linear and FusedConv (compiler/passes/fuse_linear.cpp,
// compiler/passes/fuse_conv.cpp). Y = act(op(X) + B + Z): the op's result, its bias, a residual
// where the op has one, then the activation.
//
// `activation` names what the node that was folded computed: a unary row of the elementwise table
// (src/ops/elementwise.h) of a float result whose attributes are floats (Relu, HardSigmoid,
// LeakyRelu, Tanh, ...), "Gelu" (ONNX's exact form), "GeluTanh" (its tanh approximation) or
// "Silu" (x * Sigmoid(x), which exporters write as a Sigmoid and a Mul reading the same x, and
// which fuse-conv folds as one activation: EfficientNet's); "" is none. `activation_params` are the
// row's attributes in its order (HardSigmoid: alpha, beta), canonically all of them (defaults
// filled in). Every backend reads the same table: the CPU kernels through apply_activation, the
// CUDA engine through the row's device expression (Gelu, GeluTanh and Silu, which have no row of
// their own, through expressions of their own: builder/ops/elementwise.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"
#include "ops/elementwise.h"

namespace baton::ops {

struct Activation {
  std::string op;            // "" none
  ElementwiseArgs params{};  // the row's attributes, in its order
  size_t num_params = 0;

  bool none() const { return op.empty(); }
  bool gelu() const { return op == "Gelu" || op == "GeluTanh"; }
  // The attribute values as written back into a node (num_params of them).
  std::vector<double> param_list() const { return {params.begin(), params.begin() + num_params}; }
};

// Whether a node of op `name` can be an activation by itself (see the top of the file; "Silu" is
// two nodes, not an op).
bool is_activation(std::string_view name);

// The activation of `name` with `params` (all of the row's attributes, or none for its
// defaults). InvalidArgument for another name or a wrong count, naming `what` (the node).
Result<Activation> make_activation(std::string_view name, std::span<const double> params,
                                   std::string_view what);

class InferContext;
// The node's `activation` and `activation_params` checked, with the params written back in
// canonical form (all of the row's attributes).
Result<Activation> canonical_activation(InferContext& ctx);

// Applies the activation to `n` values in place (none: nothing).
void apply_activation(const Activation& act, float* values, int64_t n);
void apply_activation(const Activation& act, double* values, int64_t n);

// The activation on one double: what compile-time code and tests compare with.
double evaluate_activation(const Activation& act, double x);

}  // namespace baton::ops
