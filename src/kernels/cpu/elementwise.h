// Unary float32 elementwise ops (Sqrt, Erf, Relu, Tanh, Sigmoid, Gelu): one kernel template over a
// functor, one infer (same dtype and shape), one schema builder.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "baton/core/check.h"
#include "baton/runtime/operator.h"
#include "kernels/cpu/common.h"

namespace baton::kernels::cpu {

// Fn: default-constructible, float operator()(float) const.
template <typename Fn>
class UnaryKernel final : public runtime::Kernel {
 public:
  UnaryKernel(const runtime::Value* in, runtime::Value* out, int64_t numel)
      : in_(in), out_(out), numel_(numel) {}

  Status run() override {
    const float* x = in_->tensor.data_as<const float>();
    float* y = out_->tensor.data_as<float>();
    const Fn fn;
    for (int64_t i = 0; i < numel_; ++i) y[i] = fn(x[i]);
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  int64_t numel_;
};

template <typename Fn>
Result<std::unique_ptr<runtime::Kernel>> create_unary(const runtime::OpCall& call) {
  const runtime::Value* in = call.inputs[0];
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<UnaryKernel<Fn>>(in, call.outputs[0], in->tensor.numel()));
}

// Schema of an attribute-free float32 unary op.
template <typename Fn>
runtime::OpSchema unary_schema(std::string_view name) {
  runtime::OpSchema schema;
  schema.name = name;
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.dtypes = {DType::Float32};
  schema.infer = &infer_same_as_input;
  schema.create = &create_unary<Fn>;
  return schema;
}

}  // namespace baton::kernels::cpu
