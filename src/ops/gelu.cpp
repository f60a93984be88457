// ONNX Gelu (opset 20): approximate = "none" (erf) or "tanh".
#include "baton/core/check.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const std::string& approximate = ctx.attr_string("approximate");
  BATON_CHECK_OR_RETURN(approximate == "none" || approximate == "tanh", InvalidArgument,
                        "{}: attribute 'approximate' is '{}'; ONNX allows 'none' or 'tanh'",
                        ctx.what(), approximate);
  ctx.set_output_like(0, 0);
  return Status();
}

}  // namespace

void register_gelu(OpRegistry& registry) {
  OpDef def;
  def.name = "Gelu";
  def.since_version = 20;
  def.inputs = {{"X", "T"}};
  def.outputs = {{"Y", "T"}};
  def.attrs = {attr_string("approximate", "none")};
  def.types = {{"T", kFloatTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
