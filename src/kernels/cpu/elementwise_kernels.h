// The unary elementwise kernel, shared by the table's rows (op_elementwise.cpp) and Gelu: one
// loop over a functor with `template <typename C> static C apply(C x)`, computing in compute_t.
#pragma once

#include <memory>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"

namespace baton::kernels::cpu {

template <typename S, typename Fn>
class UnaryKernel final : public runtime::Kernel {
 public:
  UnaryKernel(const runtime::Value* in, runtime::Value* out, int64_t numel)
      : in_(in), out_(out), numel_(numel) {}

  Status run() override {
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    for (int64_t i = 0; i < numel_; ++i) {
      y[i] = store<S>(Fn::template apply<compute_t<S>>(load(x[i])));
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  int64_t numel_;
};

template <typename Fn, uint32_t kTypes>
Result<std::unique_ptr<runtime::Kernel>> create_unary(const runtime::KernelCall& call) {
  std::unique_ptr<runtime::Kernel> kernel;
  const runtime::Value* in = call.inputs[0];
  dispatch<kTypes>(in->tensor.dtype, [&]<typename S>() {
    kernel = std::make_unique<UnaryKernel<S, Fn>>(in, call.outputs[0], in->tensor.numel());
  });
  if (!kernel) return no_kernel_for(call, in->tensor.dtype);
  return kernel;
}

}  // namespace baton::kernels::cpu
