// ONNX LayerNormalization (opset 17) and Baton's canonical AddLayerNorm (domain "baton").
//
// LayerNormalization normalizes X over its trailing dimensions [axis, rank): Y = (X - mean) /
// sqrt(var + epsilon) * Scale + B, with Scale and B broadcasting unidirectionally to those
// dimensions; the optional outputs Mean and InvStdDev have X's leading dimensions and 1 for each
// normalized one. Canonical form: axis in [0, rank).
//
// AddLayerNorm(X, R, Scale, B) is LayerNormalization(X + R, Scale, B) over the last `axis`..rank
// dimensions, with the sum itself as an optional second output: the residual connection of a
// transformer block and the normalization after it, written by the optimizer's add-layernorm
// pass (compiler/passes/add_layer_norm.cpp). R has X's shape, or X's trailing dimensions from
// at least the normalized ones on, after leading 1s ([1, seq, hidden] or [hidden] against
// [batch, seq, hidden]): then each row of X adds row `i % rows(R)` of R (a position embedding
// shared by every sequence of the batch). Sum has X's shape.
#include "ops/layer_norm.h"

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/attr_checks.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

// Checks axis, epsilon, stash_type (when the definition has one) and Scale / B (inputs
// `scale_input` and `scale_input + 1`) against X (input 0).
Status check_normalization(InferContext& ctx, size_t scale_input) {
  BATON_ASSIGN_OR_RETURN(const int axis, ctx.canonical_axis("axis", ctx.rank(0)));
  BATON_TRY(check_epsilon(ctx));
  BATON_TRY(check_stash_type(ctx));
  const auto x = ctx.sizes(0);
  const std::span<const int64_t> normalized = x.subspan(static_cast<size_t>(axis));
  for (size_t i = scale_input; i < scale_input + 2; ++i) {
    if (!ctx.has_input(i)) continue;
    BATON_CHECK_OR_RETURN(broadcasts_to(ctx.sizes(i), normalized), InvalidArgument,
                          "{}: input {} ('{}') of shape {} does not broadcast to the normalized "
                          "dimensions {} of X {} (axis {})",
                          ctx.what(), i, ctx.def().input_slot(i).name,
                          shape_to_string(ctx.sizes(i)), shape_to_string(normalized),
                          shape_to_string(x), axis);
  }
  return Status();
}

Status infer_layer_norm(InferContext& ctx) {
  BATON_TRY(check_normalization(ctx, 1));
  ctx.set_output_like(0, 0);
  const auto x = ctx.sizes(0);
  const auto axis = static_cast<size_t>(ctx.attr_int("axis"));
  for (size_t o = 1; o < ctx.num_outputs(); ++o) {
    std::vector<int64_t> stats(x.begin(), x.end());
    for (size_t d = axis; d < stats.size(); ++d) stats[d] = 1;
    // Mean and InvStdDev are float for float inputs (stash_type 1), double for double.
    ctx.output(o).dtype = ctx.input(0).dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    ctx.output(o).sizes = std::move(stats);
  }
  return Status();
}

Status infer_add_layer_norm(InferContext& ctx) {
  BATON_TRY(check_normalization(ctx, 2));
  const auto x = ctx.sizes(0), r = ctx.sizes(1);
  const auto axis = static_cast<size_t>(ctx.attr_int("axis"));
  BATON_CHECK_OR_RETURN(add_layer_norm_residual_fits(x, r, axis), InvalidArgument,
                        "{}: R {} must have X's shape {}, or its trailing dimensions from the "
                        "normalized ones (axis {}) on after leading 1s",
                        ctx.what(), shape_to_string(r), shape_to_string(x), axis);
  for (size_t o = 0; o < ctx.num_outputs(); ++o) ctx.set_output_like(o, 0);
  return Status();
}

}  // namespace

bool add_layer_norm_residual_fits(std::span<const int64_t> x, std::span<const int64_t> r,
                                  size_t axis) {
  size_t lead = 0;
  while (lead < r.size() && r[lead] == 1 && r.size() - lead > x.size() - axis) ++lead;
  const size_t kept = r.size() - lead;
  if (kept > x.size() || kept < x.size() - axis) return false;
  return std::equal(r.begin() + static_cast<std::ptrdiff_t>(lead), r.end(),
                    x.end() - static_cast<std::ptrdiff_t>(kept));
}

void register_layer_norm(OpRegistry& registry) {
  OpDef def;
  def.name = "LayerNormalization";
  def.since_version = 17;
  def.inputs = {{"X", "T"}, {"Scale", "T"}, {"B", "T", Arity::Optional}};
  def.outputs = {{"Y", "T"}, {"Mean", "U", Arity::Optional}, {"InvStdDev", "U", Arity::Optional}};
  def.attrs = {attr_int("axis", -1), attr_float("epsilon", 1e-5), attr_int("stash_type", 1)};
  def.types = {{"T", kFloatTypes}, {"U", DTypeSet{DType::Float32, DType::Float64}}};
  def.infer = &infer_layer_norm;
  registry.add(std::move(def));

  OpDef add;
  add.name = "AddLayerNorm";
  add.domain = "baton";
  add.since_version = 1;
  add.inputs = {{"X", "T"}, {"R", "T"}, {"Scale", "T"}, {"B", "T", Arity::Optional}};
  add.outputs = {{"Y", "T"}, {"Sum", "T", Arity::Optional}};
  add.attrs = {attr_int("axis", -1), attr_float("epsilon", 1e-5)};
  add.types = {{"T", kFloatTypes}};
  add.infer = &infer_add_layer_norm;
  registry.add(std::move(add));
}

}  // namespace baton::ops
