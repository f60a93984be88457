// ONNX Shape (opset 13; `start` and `end` from 15) and Size (opset 13): the input's sizes (a
// slice of them) or its element count, as int64. Both depend only on the static shape, so the
// compiler folds them (compiler/passes.cpp). Canonical form of Shape-15: start and end in
// [0, rank] with start <= end, end always present.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer_shape(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  const auto rank = static_cast<int64_t>(x.size());
  int64_t start = 0, end = rank;
  if (ctx.def().attr_index("start") >= 0) {
    // Negative values count from the end; both are clamped into [0, rank].
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    start = clamp(ctx.attr_int("start"));
    end = ctx.attr_none("end") ? rank : clamp(ctx.attr_int("end"));
    end = std::max(end, start);
    ctx.set_attr("start", AttrValue::of_int(start));
    ctx.set_attr("end", AttrValue::of_int(end));
  }
  ctx.output(0).sizes = {end - start};
  return Status();
}

Status infer_size(InferContext& ctx) {
  ctx.output(0).sizes.clear();
  return Status();
}

}  // namespace

void register_shape_size(OpRegistry& registry) {
  OpDef shape;
  shape.name = "Shape";
  shape.since_version = 13;
  shape.inputs = {{"data", "T"}};
  shape.outputs = {{"shape", "T1"}};
  shape.types = {{"T", kAllTypes}, {"T1", {DType::Int64}}};
  shape.infer = &infer_shape;
  registry.add(shape);

  shape.since_version = 15;
  shape.attrs = {attr_optional("end", AttrKind::Int), attr_int("start", 0)};
  registry.add(std::move(shape));

  OpDef size;
  size.name = "Size";
  size.since_version = 13;
  size.inputs = {{"data", "T"}};
  size.outputs = {{"size", "T1"}};
  size.types = {{"T", kAllTypes}, {"T1", {DType::Int64}}};
  size.infer = &infer_size;
  registry.add(std::move(size));
}

}  // namespace baton::ops
