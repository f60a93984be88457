// ONNX Pow (opset 13+): X ** Y elementwise with multidirectional broadcasting. X is float32; Y is
// float32, int32 or int64; the output has X's dtype.
#include <cmath>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Pow";

struct PowOp {
  float operator()(float x, float y) const { return std::pow(x, y); }
  // Integer exponents go through double so that a large odd exponent keeps its parity (and the
  // sign of a negative base), which a float exponent would lose.
  float operator()(float x, int32_t y) const {
    return static_cast<float>(std::pow(static_cast<double>(x), static_cast<double>(y)));
  }
  float operator()(float x, int64_t y) const {
    return static_cast<float>(std::pow(static_cast<double>(x), static_cast<double>(y)));
  }
};

BinaryLoopFn select_loop(DType exponent) {
  switch (exponent) {
    case DType::Float32:
      return &binary_loop<float, float, PowOp>;
    case DType::Int32:
      return &binary_loop<float, int32_t, PowOp>;
    case DType::Int64:
      return &binary_loop<float, int64_t, PowOp>;
    default:
      return nullptr;
  }
}

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const DType y = call.inputs[1]->tensor.dtype;
  BATON_CHECK_OR_RETURN(select_loop(y) != nullptr, NotSupported,
                        "{}: exponent dtype {} is not supported by the CPU kernel (float32, int32 "
                        "or int64)",
                        describe(kName, call), dtype_name(y));
  return infer_broadcast_binary(kName, call, outputs, /*same_dtype=*/false);
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  return create_broadcast_binary(call, select_loop(call.inputs[1]->tensor.dtype));
}

}  // namespace

void register_pow(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 2;
  schema.max_inputs = 2;
  schema.dtypes = {DType::Float32};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
