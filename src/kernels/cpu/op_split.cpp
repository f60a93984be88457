// ONNX Split (opset 13 and 18): output o is the part of the input from the sum of the earlier
// outputs' sizes along the axis, as long as its own size (the definition worked the sizes out).
// Seen as [outer, dim, inner], each output is a strided copy (strided_copy.h). Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

class SplitKernel final : public runtime::Kernel {
 public:
  SplitKernel(const runtime::Value* in, std::vector<runtime::Value*> outs,
              std::vector<StridedCopy> copies)
      : in_(in), outs_(std::move(outs)), copies_(std::move(copies)) {}

  Status run() override {
    for (size_t o = 0; o < outs_.size(); ++o)
      copies_[o].run(in_->tensor.data, outs_[o]->tensor.data);
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  std::vector<runtime::Value*> outs_;
  std::vector<StridedCopy> copies_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  const size_t element_size = dtype_size(x.dtype);
  std::vector<runtime::Value*> outs;
  std::vector<StridedCopy> copies;
  int64_t offset = 0;  // along the axis
  for (runtime::Value* out : call.outputs) {
    const std::span<const int64_t> sizes = out->tensor.sizes;
    if (out->tensor.numel() != 0) {
      // Non-empty: every product of the input's dimensions but the axis is bounded by the
      // output's element count.
      const int64_t inner = product(x.sizes, axis + 1, x.sizes.size());
      const int64_t view[] = {product(x.sizes, 0, axis), sizes[axis], inner};
      const int64_t strides[] = {x.sizes[axis] * inner, inner, 1};
      copies.emplace_back(view, strides, offset * inner, element_size);
    } else {
      copies.emplace_back();
    }
    outs.push_back(out);
    offset += sizes[axis];
  }
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<SplitKernel>(call.inputs[0], std::move(outs), std::move(copies)));
}

}  // namespace

void register_split(runtime::KernelRegistry& registry) { registry.add({"Split", "", {}, &create}); }

}  // namespace baton::kernels::cpu
