// ONNX Identity (opset 13): the input, unchanged.
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  ctx.set_output_like(0, 0);
  return Status();
}

}  // namespace

void register_identity(OpRegistry& registry) {
  OpDef def;
  def.name = "Identity";
  def.since_version = 13;
  def.inputs = {{"input", "T"}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", kAllTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
