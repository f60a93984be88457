// ONNX Softmax (opset 13): along one axis (default -1). Canonical form: axis in [0, rank).
#include "baton/core/check.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  BATON_TRY(ctx.canonical_axis("axis", ctx.rank(0)));
  ctx.set_output_like(0, 0);
  return Status();
}

}  // namespace

void register_softmax(OpRegistry& registry) {
  OpDef def;
  def.name = "Softmax";
  def.since_version = 13;
  def.inputs = {{"input", "T"}};
  def.outputs = {{"output", "T"}};
  def.attrs = {attr_int("axis", -1)};
  def.types = {{"T", kFloatTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
