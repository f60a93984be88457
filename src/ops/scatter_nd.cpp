// ONNX ScatterND and ScatterElements (opset 13; `reduction` from 16 with none/add/mul, max/min
// from 18): the output is `data` with the slices (ScatterND) or elements (ScatterElements) that
// `indices` names replaced by (or combined with) `updates`. Indices may be negative; duplicates
// apply in order.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/attr_checks.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

// The reduction attribute (opset 16 on) names one the op's version takes.
Status check_reduction(InferContext& ctx) {
  if (ctx.def().attr_index("reduction") < 0) return Status();
  const std::string& reduction = ctx.attr_string("reduction");
  const bool max_min = ctx.def().since_version >= 18;
  const bool known = reduction == "none" || reduction == "add" || reduction == "mul" ||
                     (max_min && (reduction == "max" || reduction == "min"));
  BATON_CHECK_OR_RETURN(known, InvalidArgument,
                        "{}: attribute 'reduction' is '{}'; {} takes 'none', 'add', 'mul'{}",
                        ctx.what(), reduction, ctx.def().versioned_name(),
                        max_min ? ", 'max', 'min'" : " ('max' and 'min' from opset 18)");
  return Status();
}

Status infer(InferContext& ctx) {
  const auto data = ctx.sizes(0);
  const auto indices = ctx.sizes(1);
  const auto updates = ctx.sizes(2);
  const int r = ctx.rank(0), q = ctx.rank(1);
  BATON_CHECK_OR_RETURN(r >= 1 && q >= 1, InvalidArgument,
                        "{}: 'data' {} and 'indices' {} must have rank >= 1", ctx.what(),
                        shape_to_string(data), shape_to_string(indices));
  const int64_t k = indices[q - 1];
  BATON_CHECK_OR_RETURN(k >= 1 && k <= r, InvalidArgument,
                        "{}: the last dimension of 'indices' {} is {}; it must be in [1, {}] (the "
                        "rank of 'data' {})",
                        ctx.what(), shape_to_string(indices), k, r, shape_to_string(data));
  std::vector<int64_t> expected(indices.begin(), indices.end() - 1);
  expected.insert(expected.end(), data.begin() + k, data.end());
  BATON_CHECK_OR_RETURN(
      std::equal(expected.begin(), expected.end(), updates.begin(), updates.end()), InvalidArgument,
      "{}: 'updates' is {}, but 'indices' {} into 'data' {} need {}", ctx.what(),
      shape_to_string(updates), shape_to_string(indices), shape_to_string(data),
      shape_to_string(expected));
  BATON_TRY(check_reduction(ctx));
  ctx.set_output_like(0, 0);
  return Status();
}

// ScatterElements: output = data, then for each position i of indices, output[i with i[axis]
// replaced by indices[i]] = updates[i] (or combined with it). indices and updates have data's
// rank and one shape, no larger than data's along every dimension but the axis.
Status infer_elements(InferContext& ctx) {
  const auto data = ctx.sizes(0);
  const auto indices = ctx.sizes(1);
  const auto updates = ctx.sizes(2);
  const int rank = ctx.rank(0);
  BATON_CHECK_OR_RETURN(rank >= 1, InvalidArgument, "{}: 'data' must have rank >= 1, got {}",
                        ctx.what(), shape_to_string(data));
  BATON_ASSIGN_OR_RETURN(const int axis, ctx.canonical_axis("axis", rank));
  BATON_CHECK_OR_RETURN(std::equal(indices.begin(), indices.end(), updates.begin(), updates.end()),
                        InvalidArgument, "{}: 'updates' {} must have the shape of 'indices' {}",
                        ctx.what(), shape_to_string(updates), shape_to_string(indices));
  BATON_TRY(check_element_indices(ctx, axis));
  BATON_TRY(check_reduction(ctx));
  ctx.set_output_like(0, 0);
  return Status();
}

}  // namespace

void register_scatter_nd(OpRegistry& registry) {
  OpDef def;
  def.name = "ScatterND";
  def.since_version = 13;
  def.inputs = {{"data", "T"}, {"indices", "tensor(int64)"}, {"updates", "T"}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(def);

  def.since_version = 16;
  def.attrs = {attr_string("reduction", "none")};
  registry.add(def);

  def.since_version = 18;
  registry.add(std::move(def));

  OpDef elements;
  elements.name = "ScatterElements";
  elements.since_version = 13;
  elements.inputs = {{"data", "T"}, {"indices", "Tind"}, {"updates", "T"}};
  elements.outputs = {{"output", "T"}};
  elements.attrs = {attr_int("axis", 0)};
  elements.types = {{"T", kAllTypes}, {"Tind", kIndexTypes}};
  elements.infer = &infer_elements;
  registry.add(elements);

  elements.since_version = 16;
  elements.attrs = {attr_int("axis", 0), attr_string("reduction", "none")};
  registry.add(elements);

  elements.since_version = 18;
  registry.add(std::move(elements));
}

}  // namespace baton::ops
