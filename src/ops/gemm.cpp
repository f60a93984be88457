// ONNX Gemm (opset 13): Y = alpha * op(A) * op(B) + beta * C, op = transpose when transA /
// transB; C (optional) broadcasts unidirectionally to [M, N].
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto a = ctx.sizes(0), b = ctx.sizes(1);
  BATON_CHECK_OR_RETURN(a.size() == 2 && b.size() == 2, InvalidArgument,
                        "{}: A and B must be 2-D, got A {} and B {}", ctx.what(),
                        shape_to_string(a), shape_to_string(b));
  for (const char* flag : {"transA", "transB"}) {
    const int64_t v = ctx.attr_int(flag);
    BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument, "{}: attribute '{}' is {}; use 0 or 1",
                          ctx.what(), flag, v);
  }
  const bool ta = ctx.attr_int("transA") != 0, tb = ctx.attr_int("transB") != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  BATON_CHECK_OR_RETURN(k == kb, InvalidArgument,
                        "{}: inner dimensions differ: op(A) is [{}, {}] and op(B) is [{}, {}] "
                        "(transA={}, transB={})",
                        ctx.what(), m, k, kb, n, ta ? 1 : 0, tb ? 1 : 0);
  const std::vector<int64_t> y = {m, n};
  if (ctx.has_input(2)) {
    BATON_CHECK_OR_RETURN(broadcasts_to(ctx.sizes(2), y), InvalidArgument,
                          "{}: C of shape {} does not broadcast to the result's [{}, {}]",
                          ctx.what(), shape_to_string(ctx.sizes(2)), m, n);
  }
  ctx.output(0).sizes = y;
  return Status();
}

}  // namespace

void register_gemm(OpRegistry& registry) {
  OpDef def;
  def.name = "Gemm";
  def.since_version = 13;
  def.inputs = {{"A", "T"}, {"B", "T"}, {"C", "T", Arity::Optional}};
  def.outputs = {{"Y", "T"}};
  def.attrs = {attr_float("alpha", 1.0), attr_float("beta", 1.0), attr_int("transA", 0),
               attr_int("transB", 0)};
  def.types = {{"T", kFloatTypes | kIndexTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
