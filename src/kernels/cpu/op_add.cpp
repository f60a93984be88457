// ONNX Add (opset 13+): elementwise, multidirectional broadcasting; float32, int32, int64.
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Add";

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    using W = WrappingType<T>;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  }
};

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  return infer_broadcast_binary(kName, call, outputs, /*same_dtype=*/true);
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  return create_broadcast_binary(call, same_dtype_binary_loop<AddOp>(call.inputs[0]->tensor.dtype));
}

}  // namespace

void register_add(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 2;
  schema.max_inputs = 2;
  schema.dtypes = {DType::Float32, DType::Int32, DType::Int64};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
