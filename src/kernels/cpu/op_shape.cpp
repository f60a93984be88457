// ONNX Shape (opset 13; start/end from 15, canonical in ops/shape_size.cpp): the input's sizes
// [start, end) as int64. Reads only the shape, never the data, so the compiler folds it even when
// the input is not a constant.
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

class ShapeKernel final : public runtime::Kernel {
 public:
  ShapeKernel(const runtime::Value* in, runtime::Value* out, size_t start)
      : in_(in), out_(out), start_(start) {}

  Status run() override {
    const size_t n = static_cast<size_t>(out_->tensor.numel());
    if (n != 0) {
      std::memcpy(out_->tensor.data, in_->tensor.sizes.data() + start_, n * sizeof(int64_t));
    }
    return Status::ok_status();
  }

  // run() reads the input's sizes as they are; the output's rank never changes.
  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  size_t start_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  // Shape-13 has no start; Shape-15's is canonical: in [0, rank].
  const bool sliced = call.def->attr_index("start") >= 0;
  const auto start = static_cast<size_t>(sliced ? call.attr_int("start") : 0);
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<ShapeKernel>(call.inputs[0], call.outputs[0], start));
}

}  // namespace

void register_shape(runtime::KernelRegistry& registry) { registry.add({"Shape", "", {}, &create}); }

}  // namespace baton::kernels::cpu
