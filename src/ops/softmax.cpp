// ONNX Softmax, LogSoftmax and Hardmax, each in two forms:
//  - opset 13 on: along one axis (default -1), the other dimensions independent;
//  - opsets 1 and 11: the input seen as 2-D, [product of dims before axis, product of the rest]
//    (default axis 1), and normalized along the second dimension, i.e. over every dimension from
//    `axis` on at once. Opset 11 only documented negative axes, which Baton takes in both.
// Canonical form: axis in [0, rank). The kernel (kernels/cpu/op_softmax.cpp) tells the forms apart
// by the definition's since_version.
#include "baton/core/check.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  BATON_TRY(ctx.canonical_axis("axis", ctx.rank(0)));
  ctx.set_output_like(0, 0);
  return Status();
}

void add(OpRegistry& registry, std::string_view name, int since, int64_t default_axis) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.inputs = {{"input", "T"}};
  def.outputs = {{"output", "T"}};
  def.attrs = {attr_int("axis", default_axis)};
  // Opsets 1 and 11 list float16, float and double; Baton takes bfloat16 in every version.
  def.types = {{"T", kFloatTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace

void register_softmax(OpRegistry& registry) {
  for (std::string_view name : {"Softmax", "LogSoftmax", "Hardmax"}) {
    add(registry, name, 1, 1);
    add(registry, name, 11, 1);
    add(registry, name, 13, -1);
  }
}

}  // namespace baton::ops
