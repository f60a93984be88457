// ONNX ConstantOfShape (opset 9 and 20): every element of the output is the one element of the
// canonical `value` attribute. Any dtype (the element's bytes repeated).
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

template <typename Word>
class FillKernel final : public runtime::Kernel {
 public:
  FillKernel(runtime::Value* out, Word value) : out_(out), value_(value) {}

  Status run() override {
    Word* y = out_->tensor.data_as<Word>();
    const int64_t n = out_->tensor.numel();
    for (int64_t i = 0; i < n; ++i) y[i] = value_;
    return Status::ok_status();
  }

  // run() fills the output's current element count.
  Status resize() override { return Status::ok_status(); }

 private:
  runtime::Value* out_;
  Word value_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& value =
      call.attr("value").tensor;  // canonical: one element of the output's dtype
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch_word(dtype_size(value.dtype), [&]<typename Word>() {
    Word v;
    std::memcpy(&v, value.data, sizeof v);
    kernel = std::make_unique<FillKernel<Word>>(call.outputs[0], v);
  });
  if (!kernel) return no_kernel_for(call, value.dtype);
  return kernel;
}

}  // namespace

void register_constant_of_shape(runtime::KernelRegistry& registry) {
  registry.add({"ConstantOfShape", "", {}, &create});
}

}  // namespace baton::kernels::cpu
