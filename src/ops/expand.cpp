// ONNX Expand (opset 8; 13 only added bfloat16): `input` broadcast against the compile-time `shape`
// in both directions (numpy rules: a 1 on either side takes the other's size, so the output may be
// larger than `shape`).
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ctx.int_values(1));
  for (int64_t d : shape) {
    BATON_CHECK_OR_RETURN(d >= 0, InvalidArgument, "{}: 'shape' {} holds a negative size",
                          ctx.what(), shape_to_string(shape));
  }
  BATON_ASSIGN_OR_RETURN(ctx.output(0).sizes, broadcast_shape(ctx.sizes(0), shape, ctx.what()));
  return Status();
}

}  // namespace

void register_expand(OpRegistry& registry) {
  OpDef def;
  def.name = "Expand";
  def.since_version = 8;
  def.inputs = {{"input", "T"}, {"shape", "tensor(int64)", Arity::Single, true}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
