// ONNX ScatterND (opset 13; `reduction` from 16 with none/add/mul, max/min from 18): the output is
// `data` with the slices that `indices` names replaced by (or combined with) `updates`. Indices
// may be negative; duplicates apply in order.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

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
  if (ctx.def().attr_index("reduction") >= 0) {
    const std::string& reduction = ctx.attr_string("reduction");
    const bool max_min = ctx.def().since_version >= 18;
    const bool known = reduction == "none" || reduction == "add" || reduction == "mul" ||
                       (max_min && (reduction == "max" || reduction == "min"));
    BATON_CHECK_OR_RETURN(known, InvalidArgument,
                          "{}: attribute 'reduction' is '{}'; {} takes 'none', 'add', 'mul'{}",
                          ctx.what(), reduction, ctx.def().versioned_name(),
                          max_min ? ", 'max', 'min'" : " ('max' and 'min' from opset 18)");
  }
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
}

}  // namespace baton::ops
