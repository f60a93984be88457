// ONNX Clip (opset 11, bounds as optional inputs; 12 added the integer types and 13 bfloat16,
// which Baton takes from 11 on): min(max(input, min), max). An absent bound does not clip. The
// bounds are one-element tensors (ONNX says scalars; a [1] tensor is taken too) and may be graph
// inputs, read at every run.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const auto s = ctx.sizes(i);
    BATON_CHECK_OR_RETURN(s.size() <= 1 && checked_numel(s) == 1, InvalidArgument,
                          "{}: input {} ('{}') has shape {}; it must be a scalar", ctx.what(), i,
                          i == 1 ? "min" : "max", shape_to_string(s));
  }
  ctx.set_output_like(0, 0);
  return Status();
}

}  // namespace

void register_clip(OpRegistry& registry) {
  OpDef def;
  def.name = "Clip";
  def.since_version = 11;
  def.inputs = {{"input", "T"}, {"min", "T", Arity::Optional}, {"max", "T", Arity::Optional}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", kNumericTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
