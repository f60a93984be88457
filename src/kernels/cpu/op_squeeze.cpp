// ONNX Squeeze (opset 13+): copies `data` without the size-1 dimensions listed in the constant
// int64 `axes` input, or without all of them when `axes` is absent (or empty, as ONNX Runtime
// reads it). Any dtype.
#include <algorithm>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Squeeze";

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  const TensorView& x = call.inputs[0]->tensor;
  const int rank = x.rank();
  std::vector<bool> drop(rank, false);
  std::vector<int64_t> axes;
  if (call.inputs.size() > 1 && call.inputs[1]->is_tensor()) {
    BATON_ASSIGN_OR_RETURN(axes, read_int64_constant(call, 1, "axes", what));
  }
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) drop[d] = x.sizes[d] == 1;
  }
  for (int64_t a : axes) {
    BATON_ASSIGN_OR_RETURN(const int d, normalize_axis(a, rank, what, "axes entry"));
    BATON_CHECK_OR_RETURN(!drop[d], InvalidArgument, "{}: axes {} name dimension {} twice", what,
                          shape_to_string(axes), d);
    BATON_CHECK_OR_RETURN(x.sizes[d] == 1, InvalidArgument,
                          "{}: cannot squeeze dimension {} of {}: its size is {}, not 1", what, d,
                          shape_to_string(x.sizes), x.sizes[d]);
    drop[d] = true;
  }
  outputs[0].dtype = x.dtype;
  outputs[0].sizes.clear();
  for (int d = 0; d < rank; ++d) {
    if (!drop[d]) outputs[0].sizes.push_back(x.sizes[d]);
  }
  return Status::ok_status();
}

}  // namespace

void register_squeeze(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 1;
  schema.max_inputs = 2;
  schema.infer = &infer;
  schema.create = &create_contiguous_copy;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
