// ONNX Split (opset 13 and 18): output o is the part of the input from the sum of the earlier
// outputs' sizes along the axis, as long as its own size (the definition worked the sizes out).
// Seen as [outer, dim, inner], each output is a strided copy (strided_copy.h). Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

// At resize() every dimension may change, the axis too: each output's part starts after the
// earlier outputs' current sizes along it.
class SplitKernel final : public runtime::Kernel {
 public:
  SplitKernel(const runtime::Value* in, std::span<runtime::Value* const> outs, size_t axis)
      : in_(in), outs_(outs.begin(), outs.end()), copies_(outs.size()), axis_(axis) {}

  Status run() override {
    for (size_t o = 0; o < outs_.size(); ++o)
      copies_[o].run(in_->tensor.data, outs_[o]->tensor.data);
    return Status::ok_status();
  }

  Status resize() override {
    plan();
    return Status::ok_status();
  }

  void plan() {
    const TensorView& x = in_->tensor;
    const size_t element_size = dtype_size(x.dtype);
    int64_t offset = 0;  // along the axis
    for (size_t o = 0; o < outs_.size(); ++o) {
      const TensorView& out = outs_[o]->tensor;
      if (out.numel() != 0) {
        // Non-empty: every product of the input's dimensions but the axis is bounded by the
        // output's element count.
        const int64_t inner = product(x.sizes, axis_ + 1, x.sizes.size());
        const int64_t view[] = {product(x.sizes, 0, axis_), out.sizes[axis_], inner};
        const int64_t strides[] = {x.sizes[axis_] * inner, inner, 1};
        copies_[o].reset(view, strides, offset * inner, element_size);
      } else {
        copies_[o] = StridedCopy();
      }
      offset += out.sizes[axis_];
    }
  }

 private:
  const runtime::Value* in_;
  std::vector<runtime::Value*> outs_;
  std::vector<StridedCopy> copies_;  // one per output, sized at create
  size_t axis_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  auto kernel = std::make_unique<SplitKernel>(call.inputs[0], call.outputs, axis);
  kernel->plan();
  return std::unique_ptr<runtime::Kernel>(std::move(kernel));
}

}  // namespace

void register_split(runtime::KernelRegistry& registry) { registry.add({"Split", "", {}, &create}); }

}  // namespace baton::kernels::cpu
