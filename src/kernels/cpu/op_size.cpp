// ONNX Size (opset 13): the input's element count as an int64 scalar. Reads only the shape, so
// the compiler folds it even when the input is not a constant.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

class SizeKernel final : public runtime::Kernel {
 public:
  SizeKernel(const runtime::Value* in, runtime::Value* out) : in_(in), out_(out) {}

  Status run() override {
    *out_->tensor.data_as<int64_t>() = in_->tensor.numel();
    return Status::ok_status();
  }

  // run() counts the input's elements as they are.
  Status resize() override { return Status::ok_status(); }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<SizeKernel>(call.inputs[0], call.outputs[0]));
}

}  // namespace

void register_size(runtime::KernelRegistry& registry) { registry.add({"Size", "", {}, &create}); }

}  // namespace baton::kernels::cpu
