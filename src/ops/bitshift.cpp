// ONNX BitShift (opset 11): X shifted by Y bits, `direction` "LEFT" or "RIGHT", broadcast
// multidirectionally. ONNX allows uint8 to uint64; Baton has uint8.
#include "baton/core/check.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const std::string& direction = ctx.attr_string("direction");
  BATON_CHECK_OR_RETURN(direction == "LEFT" || direction == "RIGHT", InvalidArgument,
                        "{}: attribute 'direction' is '{}'; ONNX allows 'LEFT' or 'RIGHT'",
                        ctx.what(), direction);
  BATON_ASSIGN_OR_RETURN(ctx.output(0).sizes,
                         broadcast_shape(ctx.sizes(0), ctx.sizes(1), ctx.what()));
  return Status();
}

}  // namespace

void register_bitshift(OpRegistry& registry) {
  OpDef def;
  def.name = "BitShift";
  def.since_version = 11;
  def.inputs = {{"X", "T"}, {"Y", "T"}};
  def.outputs = {{"Z", "T"}};
  def.attrs = {attr_required("direction", AttrKind::String)};
  def.types = {{"T", kUnsignedIntTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
