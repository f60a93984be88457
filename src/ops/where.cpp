// ONNX Where (opset 9; 16 added bfloat16, which Baton takes from 9 on): X where the condition is
// true, Y elsewhere, all three broadcast (multidirectionally) to one shape.
#include "baton/core/check.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> xy,
                         broadcast_shape(ctx.sizes(1), ctx.sizes(2), ctx.what()));
  BATON_ASSIGN_OR_RETURN(ctx.output(0).sizes, broadcast_shape(ctx.sizes(0), xy, ctx.what()));
  return Status();
}

}  // namespace

void register_where(OpRegistry& registry) {
  OpDef def;
  def.name = "Where";
  def.since_version = 9;
  def.inputs = {{"condition", "B"}, {"X", "T"}, {"Y", "T"}};
  def.outputs = {{"output", "T"}};
  def.types = {{"B", kBoolTypes}, {"T", kAllTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
