// ONNX Tile (opset 13): the input repeated `repeats[d]` times along each dimension d; `repeats`
// must be known at compile time.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> repeats, ctx.int_values(1));
  BATON_CHECK_OR_RETURN(repeats.size() == x.size(), InvalidArgument,
                        "{}: 'repeats' {} needs one entry per dimension of 'input' {}", ctx.what(),
                        shape_to_string(repeats), shape_to_string(x));
  std::vector<int64_t> y(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    BATON_CHECK_OR_RETURN(repeats[d] >= 0, InvalidArgument,
                          "{}: 'repeats' {} holds a negative count", ctx.what(),
                          shape_to_string(repeats));
    const auto tiled = checked_mul(x[d], repeats[d]);
    BATON_CHECK_OR_RETURN(tiled.has_value(), InvalidArgument,
                          "{}: tiling {} by {} overflows dimension {}", ctx.what(),
                          shape_to_string(x), shape_to_string(repeats), d);
    y[d] = *tiled;
  }
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_tile(OpRegistry& registry) {
  OpDef def;
  def.name = "Tile";
  def.since_version = 13;
  def.inputs = {{"input", "T"}, {"repeats", "T1", Arity::Single, true}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", kAllTypes}, {"T1", {DType::Int64}}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
