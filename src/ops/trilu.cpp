// ONNX Trilu (opset 14): the upper (upper=1) or lower triangle of each matrix in the last two
// dimensions, from diagonal k (the optional scalar input, 0 when absent, which may change from run
// to run); the rest is zero.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  BATON_CHECK_OR_RETURN(ctx.rank(0) >= 2, InvalidArgument,
                        "{}: 'input' must have rank >= 2, got {}", ctx.what(),
                        shape_to_string(ctx.sizes(0)));
  const int64_t upper = ctx.attr_int("upper");
  BATON_CHECK_OR_RETURN(upper == 0 || upper == 1, InvalidArgument,
                        "{}: attribute 'upper' is {}; use 0 or 1", ctx.what(), upper);
  if (ctx.has_input(1)) {
    BATON_CHECK_OR_RETURN(*checked_numel(ctx.sizes(1)) == 1 && ctx.rank(1) <= 1, InvalidArgument,
                          "{}: 'k' must be a scalar, got shape {}", ctx.what(),
                          shape_to_string(ctx.sizes(1)));
  }
  ctx.set_output_like(0, 0);
  return Status();
}

}  // namespace

void register_trilu(OpRegistry& registry) {
  OpDef def;
  def.name = "Trilu";
  def.since_version = 14;
  def.inputs = {{"input", "T"}, {"k", "tensor(int64)", Arity::Optional}};
  def.outputs = {{"output", "T"}};
  def.attrs = {attr_int("upper", 1)};
  def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
