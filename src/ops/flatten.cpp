// ONNX Flatten (opset 13): [d0 .. d(axis-1), d(axis) .. d(r-1)] -> [prod before, prod after];
// axis in [-r, r]. Canonical form: axis in [0, r].
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const int rank = ctx.rank(0);
  const int64_t axis = ctx.attr_int("axis");
  BATON_CHECK_OR_RETURN(axis >= -rank && axis <= rank, InvalidArgument,
                        "{}: attribute 'axis' is {}, out of range [{}, {}] for a rank-{} input",
                        ctx.what(), axis, -rank, rank, rank);
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  ctx.set_attr("axis", AttrValue::of_int(static_cast<int64_t>(a)));
  const auto x = ctx.sizes(0);
  ctx.output(0).sizes = {product(x, 0, a), product(x, a, x.size())};
  return Status();
}

}  // namespace

void register_flatten(OpRegistry& registry) {
  OpDef def;
  def.name = "Flatten";
  def.since_version = 13;
  def.inputs = {{"input", "T"}};
  def.outputs = {{"output", "T"}};
  def.attrs = {attr_int("axis", 1)};
  def.types = {{"T", kAllTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
