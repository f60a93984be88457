// ONNX TopK (opsets 10 and 11): the `k` largest (or, with largest = 0, smallest) elements of `x`
// along `axis`, and their int64 indices. `k` is a scalar or one-element int64 tensor known at
// compile time (it is the outputs' size along the axis). The results are ordered by value, ties
// by the lower index first, also when `sorted` is 0 (ONNX leaves the order free then). NaN counts
// as larger than every number (as ArgMax's does). Opset 1, whose `k` is an attribute, is not taken.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> k, ctx.int_values(1));
  BATON_CHECK_OR_RETURN(k.size() == 1, InvalidArgument, "{}: 'K' must hold one value, it holds {}",
                        ctx.what(), k.size());
  BATON_ASSIGN_OR_RETURN(const int axis, ctx.canonical_axis("axis", ctx.rank(0)));
  const auto a = static_cast<size_t>(axis);
  BATON_CHECK_OR_RETURN(k[0] >= 0 && k[0] <= x[a], InvalidArgument,
                        "{}: 'K' is {}, but axis {} of 'X' {} has {} elements (K must be 0..{})",
                        ctx.what(), k[0], axis, shape_to_string(x), x[a], x[a]);
  for (const char* flag : {"largest", "sorted"}) {
    if (ctx.def().attr_index(flag) < 0) continue;
    const int64_t v = ctx.attr_int(flag);
    BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument, "{}: '{}' is 0 or 1, got {}",
                          ctx.what(), flag, v);
  }
  std::vector<int64_t> y(x.begin(), x.end());
  y[a] = k[0];
  ctx.output(0).sizes = y;
  ctx.output(1).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_topk(OpRegistry& registry) {
  OpDef def;
  def.name = "TopK";
  def.since_version = 10;
  def.inputs = {{"X", "T"}, {"K", "tensor(int64)", Arity::Single, true}};
  def.outputs = {{"Values", "T"}, {"Indices", "tensor(int64)"}};
  def.attrs = {attr_int("axis", -1)};
  def.types = {{"T", DTypeSet{DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                              DType::Int32, DType::Int64}},
               {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(def);
  def.since_version = 11;
  def.attrs = {attr_int("axis", -1), attr_int("largest", 1), attr_int("sorted", 1)};
  registry.add(std::move(def));
}

}  // namespace baton::ops
