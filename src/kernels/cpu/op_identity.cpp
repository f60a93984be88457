// ONNX Identity (opset 13+): copies its input, any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const TensorView& x = call.inputs[0]->tensor;
  outputs[0].dtype = x.dtype;
  outputs[0].sizes.assign(x.sizes.begin(), x.sizes.end());
  return Status::ok_status();
}

}  // namespace

void register_identity(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = "Identity";
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.infer = &infer;
  schema.create = &create_contiguous_copy;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
