// ONNX Identity (opset 13+): copies its input, any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
void register_identity(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = "Identity";
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.infer = &infer_same_as_input;
  schema.create = &create_contiguous_copy;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
