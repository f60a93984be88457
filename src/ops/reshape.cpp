// ONNX Reshape (opset 13; allowzero from 14, absent = 0 before): `data` in the shape given by the
// compile-time `shape` input. A 0 copies the input's dimension at that index (with allowzero=1 it
// means size 0); one -1 is inferred from the element count.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const std::string what = ctx.what();
  const auto data = ctx.sizes(0);
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.int_values(1));
  const std::vector<int64_t> requested = shape;  // for messages
  const int64_t allow = ctx.attr_int("allowzero");
  BATON_CHECK_OR_RETURN(allow == 0 || allow == 1, InvalidArgument,
                        "{}: attribute 'allowzero' is {}; use 0 or 1", what, allow);
  const bool allow_zero = allow != 0;
  const int64_t numel = *checked_numel(data);

  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    BATON_CHECK_OR_RETURN(d >= -1, InvalidArgument, "{}: shape {} has a negative size {}", what,
                          shape_to_string(requested), d);
    if (d == -1) {
      BATON_CHECK_OR_RETURN(infer_at < 0, InvalidArgument, "{}: shape {} has more than one -1",
                            what, shape_to_string(requested));
      infer_at = static_cast<int>(i);
    } else if (d == 0) {
      has_zero = true;
      if (!allow_zero) {
        BATON_CHECK_OR_RETURN(i < data.size(), InvalidArgument,
                              "{}: shape {} has a 0 at index {} (copy the input dimension), but "
                              "the input {} has rank {}",
                              what, shape_to_string(requested), i, shape_to_string(data),
                              data.size());
        shape[i] = data[i];
      }
    }
  }
  BATON_CHECK_OR_RETURN(!(allow_zero && has_zero && infer_at >= 0), InvalidArgument,
                        "{}: with allowzero=1 the shape {} may not hold both 0 and -1", what,
                        shape_to_string(requested));
  if (infer_at >= 0) {
    shape[infer_at] = 1;
    const auto known = checked_numel(shape);
    BATON_CHECK_OR_RETURN(known.has_value() && *known != 0 && numel % *known == 0, InvalidArgument,
                          "{}: cannot infer the -1 in shape {}: the input {} has {} elements", what,
                          shape_to_string(requested), shape_to_string(data), numel);
    shape[infer_at] = numel / *known;
  }
  const auto out_numel = checked_numel(shape);
  BATON_CHECK_OR_RETURN(out_numel.has_value() && *out_numel == numel, InvalidArgument,
                        "{}: cannot reshape {} ({} elements) to {} (from {})", what,
                        shape_to_string(data), numel, shape_to_string(shape),
                        shape_to_string(requested));
  ctx.output(0).dtype = ctx.input(0).dtype;
  ctx.output(0).sizes = std::move(shape);
  return Status();
}

}  // namespace

void register_reshape(OpRegistry& registry) {
  OpDef def;
  def.name = "Reshape";
  def.since_version = 13;
  def.inputs = {{"data", "T"}, {"shape", "tensor(int64)", Arity::Single, true}};
  def.outputs = {{"reshaped", "T"}};
  def.attrs = {attr_int("allowzero", 0)};
  def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
