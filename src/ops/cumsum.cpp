// ONNX CumSum (opsets 11 and 14): the running sum of `x` along `axis` (a scalar or one-element
// int32 / int64 tensor known at compile time: DETR computes it on a constant mask), inclusive by
// default; `exclusive` starts each sum at 0 and leaves out the element itself, `reverse` sums
// from the end.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> axis, ctx.int_values(1));
  BATON_CHECK_OR_RETURN(axis.size() == 1, InvalidArgument,
                        "{}: 'axis' must hold one value, it holds {}", ctx.what(), axis.size());
  const auto rank = static_cast<int64_t>(x.size());
  BATON_CHECK_OR_RETURN(axis[0] >= -rank && axis[0] < rank, InvalidArgument,
                        "{}: 'axis' {} is outside [{}, {}) for 'x' {}", ctx.what(), axis[0], -rank,
                        rank, shape_to_string(x));
  for (const char* flag : {"exclusive", "reverse"}) {
    const int64_t v = ctx.attr_int(flag);
    BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument, "{}: '{}' is 0 or 1, got {}",
                          ctx.what(), flag, v);
  }
  ctx.output(0).sizes.assign(x.begin(), x.end());
  return Status();
}

}  // namespace

void register_cumsum(OpRegistry& registry) {
  OpDef def;
  def.name = "CumSum";
  def.since_version = 11;
  def.inputs = {{"x", "T"}, {"axis", "T2", Arity::Single, true}};
  def.outputs = {{"y", "T"}};
  def.attrs = {attr_int("exclusive", 0), attr_int("reverse", 0)};
  // Opset 14 added float16 and bfloat16; Baton takes them from 11 on.
  def.types = {{"T", DTypeSet{DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                              DType::Int32, DType::Int64}},
               {"T2", kIndexTypes}};
  def.infer = &infer;
  registry.add(def);
  def.since_version = 14;
  registry.add(std::move(def));
}

}  // namespace baton::ops
