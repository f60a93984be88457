// ONNX BatchNormalization (inference), InstanceNormalization and GroupNormalization.
//
// BatchNormalization: Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel (dimension 1 of
// X; a 1-D X of size N has one channel from opset 9 on), with the running statistics given as
// inputs. Baton runs inference only: opsets 1 and 6 need is_test = 1, opsets 14 and 15 need
// training_mode = 0, and the training outputs (mean, var, saved_mean, saved_var; running_mean,
// running_var) are refused. Before opset 9, spatial = 0 gives every position of X's dimensions
// from 1 on its own statistics (scale, B, mean and var shaped like X without N). Versions: 1
// (consumed_inputs), 6, 7 (no is_test), 9 (no spatial), 14 (training_mode; mean and var of type
// U), 15 (scale and B of type T1, mean and var of T2).
//
// InstanceNormalization (opsets 1 and 6) normalizes each (n, c) plane of X [N, C, D1, ...] over
// its spatial positions, then scales and shifts per channel. GroupNormalization splits the C
// channels into num_groups groups and normalizes each (n, group) over its channels and spatial
// positions; opset 18 scales and shifts per group (scale and bias [num_groups]), opset 21 per
// channel ([C], with stash_type). Statistics are computed in double by the kernels.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/attr_checks.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

// Input `i` must have exactly the shape `expected` (`meaning` says why, for the message).
Status check_param_shape(InferContext& ctx, size_t i, std::span<const int64_t> expected,
                         std::string_view meaning) {
  const auto s = ctx.sizes(i);
  BATON_CHECK_OR_RETURN(std::equal(s.begin(), s.end(), expected.begin(), expected.end()),
                        InvalidArgument,
                        "{}: input {} ('{}') has shape {}; it must be {} ({}) for X {}", ctx.what(),
                        i, ctx.def().input_slot(i).name, shape_to_string(s),
                        shape_to_string(expected), meaning, shape_to_string(ctx.sizes(0)));
  return Status();
}

Status infer_batch_norm(InferContext& ctx) {
  const OpDef& def = ctx.def();
  const int version = def.since_version;
  BATON_TRY(check_epsilon(ctx));
  if (def.attr_index("is_test") >= 0) {
    const int64_t is_test = ctx.attr_int("is_test");
    BATON_CHECK_OR_RETURN(is_test != 0, NotSupported,
                          "{}: attribute 'is_test' is 0 (training mode: statistics of the "
                          "batch); Baton runs BatchNormalization for inference only (is_test 1)",
                          ctx.what());
  }
  if (def.attr_index("training_mode") >= 0) {
    BATON_TRY(check_flag(ctx, "training_mode"));
    BATON_CHECK_OR_RETURN(ctx.attr_int("training_mode") == 0, NotSupported,
                          "{}: attribute 'training_mode' is 1; Baton runs BatchNormalization for "
                          "inference only (training_mode 0)",
                          ctx.what());
    BATON_CHECK_OR_RETURN(ctx.num_outputs() == 1, InvalidArgument,
                          "{} has {} outputs; with training_mode 0 it has only Y (running_mean "
                          "and running_var exist in training mode)",
                          ctx.what(), ctx.num_outputs());
  } else {
    BATON_CHECK_OR_RETURN(ctx.num_outputs() == 1, NotSupported,
                          "{} has {} outputs; mean, var, saved_mean and saved_var are outputs of "
                          "training, and Baton runs BatchNormalization for inference only (Y)",
                          ctx.what(), ctx.num_outputs());
  }
  bool spatial = true;
  if (def.attr_index("spatial") >= 0) {
    BATON_TRY(check_flag(ctx, "spatial"));
    spatial = ctx.attr_int("spatial") == 1;
  }
  const auto x = ctx.sizes(0);
  const int min_rank = version >= 9 ? 1 : 2;
  BATON_CHECK_OR_RETURN(ctx.rank(0) >= min_rank, InvalidArgument,
                        "{}: X has shape {}; it must have rank {} or more ([N, C, ...])",
                        ctx.what(), shape_to_string(x), min_rank);
  // A 1-D X holds N samples of one channel.
  const std::vector<int64_t> channels = {x.size() == 1 ? 1 : x[1]};
  const std::span<const int64_t> expected =
      spatial ? std::span<const int64_t>(channels) : x.subspan(1);
  const std::string_view meaning = spatial ? "one value per channel" : "spatial 0: X without N";
  for (size_t i = 1; i < 5; ++i) BATON_TRY(check_param_shape(ctx, i, expected, meaning));
  ctx.set_output_like(0, 0);
  return Status();
}

Status infer_group_norm(InferContext& ctx) {
  BATON_TRY(check_epsilon(ctx));
  const bool instance = ctx.def().name == "InstanceNormalization";
  const int min_rank = instance ? 3 : 2;
  const auto x = ctx.sizes(0);
  BATON_CHECK_OR_RETURN(ctx.rank(0) >= min_rank, InvalidArgument,
                        "{}: X has shape {}; it must have rank {} or more ([N, C, D1, ...])",
                        ctx.what(), shape_to_string(x), min_rank);
  const int64_t c = x[1];
  int64_t groups = c;
  if (!instance) {
    groups = ctx.attr_int("num_groups");
    BATON_CHECK_OR_RETURN(groups >= 1 && c % groups == 0, InvalidArgument,
                          "{}: attribute 'num_groups' is {}; it must be positive and divide the "
                          "{} channels of X {}",
                          ctx.what(), groups, c, shape_to_string(x));
    BATON_TRY(check_stash_type(ctx));
  }
  // GroupNormalization-18 scales per group; the others per channel.
  const bool per_group = !instance && ctx.def().since_version < 21;
  const std::vector<int64_t> expected = {per_group ? groups : c};
  const std::string_view meaning = per_group ? "one value per group" : "one value per channel";
  for (size_t i = 1; i < 3; ++i) BATON_TRY(check_param_shape(ctx, i, expected, meaning));
  ctx.set_output_like(0, 0);
  return Status();
}

void add_batch_norm(OpRegistry& registry, int since) {
  OpDef def;
  def.name = "BatchNormalization";
  def.since_version = since;
  // The statistics' type constraint: T up to opset 9, U in 14, T2 in 15 (scale and B: T1).
  const std::string_view param = since >= 15 ? "T1" : "T";
  const std::string_view stats = since >= 15 ? "T2" : since >= 14 ? "U" : "T";
  def.inputs = {{"X", "T"}, {"scale", param}, {"B", param}, {"mean", stats}, {"var", stats}};
  if (since >= 14) {
    def.outputs = {{"Y", "T"},
                   {"running_mean", stats, Arity::Optional},
                   {"running_var", stats, Arity::Optional}};
  } else {
    def.outputs = {{"Y", "T"},
                   {"mean", "T", Arity::Optional},
                   {"var", "T", Arity::Optional},
                   {"saved_mean", "T", Arity::Optional},
                   {"saved_var", "T", Arity::Optional}};
  }
  if (since == 1) def.attrs.push_back(attr_required("consumed_inputs", AttrKind::Ints));
  def.attrs.push_back(attr_float("epsilon", 1e-5));
  if (since < 7) def.attrs.push_back(attr_int("is_test", 0));
  def.attrs.push_back(attr_float("momentum", 0.9));
  if (since < 9) def.attrs.push_back(attr_int("spatial", 1));
  if (since >= 14) def.attrs.push_back(attr_int("training_mode", 0));
  // ONNX adds bfloat16 in opset 14; Baton takes it in every version.
  def.types = {{"T", kFloatTypes}};
  if (since >= 14) def.types.push_back({stats, kFloatTypes});
  if (since >= 15) def.types.push_back({param, kFloatTypes});
  def.infer = &infer_batch_norm;
  registry.add(std::move(def));
}

}  // namespace

void register_normalization(OpRegistry& registry) {
  for (int since : {1, 6, 7, 9, 14, 15}) add_batch_norm(registry, since);

  for (int since : {1, 6}) {
    OpDef def;
    def.name = "InstanceNormalization";
    def.since_version = since;
    def.inputs = {{"input", "T"}, {"scale", "T"}, {"B", "T"}};
    def.outputs = {{"output", "T"}};
    if (since == 1) def.attrs.push_back(attr_optional("consumed_inputs", AttrKind::Ints));
    def.attrs.push_back(attr_float("epsilon", 1e-5));
    def.types = {{"T", kFloatTypes}};
    def.infer = &infer_group_norm;
    registry.add(std::move(def));
  }

  for (int since : {18, 21}) {
    OpDef def;
    def.name = "GroupNormalization";
    def.since_version = since;
    def.inputs = {{"X", "T"}, {"scale", "T"}, {"bias", "T"}};
    def.outputs = {{"Y", "T"}};
    def.attrs = {attr_float("epsilon", 1e-5), attr_required("num_groups", AttrKind::Int)};
    if (since >= 21) def.attrs.push_back(attr_int("stash_type", 1));
    def.types = {{"T", kFloatTypes}};
    def.infer = &infer_group_norm;
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
