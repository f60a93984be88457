// ONNX Reshape (opset 13+, allowzero from 14): copies `data` into a new shape given by the
// constant int64 `shape` input. A 0 copies the input's dimension at that index (unless allowzero,
// where it means size 0); one -1 is inferred from the element count.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Reshape";
constexpr size_t kAllowZero = 0;

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  const TensorView& data = call.inputs[0]->tensor;
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> shape, read_int64_constant(call, 1, "shape", what));
  const std::vector<int64_t> requested = shape;  // for messages
  const bool allow_zero = call.attrs[kAllowZero]->i != 0;
  BATON_ASSIGN_OR_RETURN(const int64_t numel, checked_product(data.sizes, what));

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
        BATON_CHECK_OR_RETURN(i < data.sizes.size(), InvalidArgument,
                              "{}: shape {} has a 0 at index {} (copy the input dimension), but "
                              "the input {} has rank {}",
                              what, shape_to_string(requested), i, shape_to_string(data.sizes),
                              data.rank());
        shape[i] = data.sizes[i];
      }
    }
  }
  BATON_CHECK_OR_RETURN(!(allow_zero && has_zero && infer_at >= 0), InvalidArgument,
                        "{}: with allowzero=1 the shape {} may not hold both 0 and -1", what,
                        shape_to_string(requested));
  if (infer_at >= 0) {
    shape[infer_at] = 1;
    BATON_ASSIGN_OR_RETURN(const int64_t known, checked_product(shape, what));
    BATON_CHECK_OR_RETURN(known != 0 && numel % known == 0, InvalidArgument,
                          "{}: cannot infer the -1 in shape {}: the input {} has {} elements", what,
                          shape_to_string(requested), shape_to_string(data.sizes), numel);
    shape[infer_at] = numel / known;
  }
  BATON_ASSIGN_OR_RETURN(const int64_t out_numel, checked_product(shape, what));
  BATON_CHECK_OR_RETURN(out_numel == numel, InvalidArgument,
                        "{}: cannot reshape {} ({} elements) to {} (from {}, {} elements)", what,
                        shape_to_string(data.sizes), numel, shape_to_string(shape),
                        shape_to_string(requested), out_numel);
  outputs[0].dtype = data.dtype;
  outputs[0].sizes = std::move(shape);
  return Status::ok_status();
}

}  // namespace

void register_reshape(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 2;
  schema.max_inputs = 2;
  schema.attrs = {int_attr("allowzero", 0)};
  schema.infer = &infer;
  schema.create = &create_contiguous_copy;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
