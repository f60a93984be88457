// ONNX Unsqueeze (opset 13+): copies `data` with size-1 dimensions inserted at the constant int64
// `axes`, which index the output (range [-r, r - 1] with r = output rank). Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Unsqueeze";

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  const TensorView& x = call.inputs[0]->tensor;
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> axes,
                         read_int64_constant(call, 1, "axes", what));
  const int out_rank = x.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    BATON_ASSIGN_OR_RETURN(const int d, normalize_axis(a, out_rank, what, "axes entry"));
    BATON_CHECK_OR_RETURN(!inserted[d], InvalidArgument,
                          "{}: axes {} name output dimension {} twice", what, shape_to_string(axes),
                          d);
    inserted[d] = true;
  }
  outputs[0].dtype = x.dtype;
  outputs[0].sizes.assign(out_rank, 1);
  size_t next = 0;
  for (int d = 0; d < out_rank; ++d) {
    if (!inserted[d]) outputs[0].sizes[d] = x.sizes[next++];
  }
  return Status::ok_status();
}

}  // namespace

void register_unsqueeze(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 2;
  schema.max_inputs = 2;
  schema.infer = &infer;
  schema.create = &create_contiguous_copy;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
