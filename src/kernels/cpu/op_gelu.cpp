// ONNX Gelu (opset 20+) on float32. approximate = "none": 0.5 x (1 + erf(x / sqrt 2));
// approximate = "tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
#include <cmath>

#include "kernels/cpu/common.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Gelu";
constexpr size_t kApproximate = 0;

// Both forms are rewritten so that nothing cancels for negative x, where 1 + erf(.) and
// 1 + tanh(.) would lose every digit: 1 + erf(z) = erfc(-z), and 1 + tanh(u) = 2 / (1 + exp(-2u)).
struct GeluErfFn {
  float operator()(float x) const {
    constexpr float kInvSqrt2 = 0.70710678118654752440f;
    return 0.5f * x * std::erfc(-x * kInvSqrt2);
  }
};

struct GeluTanhFn {
  float operator()(float x) const {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    return x / (1.0f + std::exp(-2.0f * u));
  }
};

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string_view approximate = call.attrs[kApproximate]->s;
  BATON_CHECK_OR_RETURN(approximate == "none" || approximate == "tanh", InvalidArgument,
                        "{}: attribute approximate is '{}'; ONNX allows 'none' or 'tanh'",
                        describe(kName, call), approximate);
  return infer_same_as_input(call, outputs);
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  if (call.attrs[kApproximate]->s == "tanh") return create_unary<GeluTanhFn>(call);
  return create_unary<GeluErfFn>(call);
}

}  // namespace

void register_gelu(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_opset = 20;
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.attrs = {string_attr("approximate", "none")};
  schema.dtypes = {DType::Float32};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
