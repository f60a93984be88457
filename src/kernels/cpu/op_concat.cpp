// ONNX Concat (opset 13+): joins its inputs along `axis`; all inputs have one dtype (any) and one
// rank, and equal sizes except along the axis.
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

// Seen as [outer, axis, inner], the output is, for each outer index, every input's [axis, inner]
// block in turn: one memcpy per input per outer index.
class ConcatKernel final : public runtime::Kernel {
 public:
  struct Part {
    const runtime::Value* value;
    size_t block_bytes;
  };

  ConcatKernel(std::vector<Part> parts, runtime::Value* out, int64_t outer, size_t axis)
      : parts_(std::move(parts)), out_(out), outer_(outer), axis_(axis) {}

  // Dynamic shapes: any size may change; the parts are recomputed in place.
  Status resize() override {
    const TensorView& first = parts_[0].value->tensor;
    outer_ = out_->tensor.numel() == 0 ? 0 : product(first.sizes, 0, axis_);
    const size_t inner_bytes =
        static_cast<size_t>(product(first.sizes, axis_ + 1, first.sizes.size())) *
        dtype_size(first.dtype);
    for (Part& part : parts_) {
      part.block_bytes = static_cast<size_t>(part.value->tensor.sizes[axis_]) * inner_bytes;
    }
    return Status::ok_status();
  }

  Status run() override {
    char* dst = static_cast<char*>(out_->tensor.data);
    for (int64_t o = 0; o < outer_; ++o) {
      for (const Part& part : parts_) {
        if (part.block_bytes == 0) continue;
        const char* src = static_cast<const char*>(part.value->tensor.data);
        std::memcpy(dst, src + static_cast<size_t>(o) * part.block_bytes, part.block_bytes);
        dst += part.block_bytes;
      }
    }
    return Status::ok_status();
  }

 private:
  std::vector<Part> parts_;
  runtime::Value* out_;
  int64_t outer_;
  size_t axis_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& first = call.inputs[0]->tensor;
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  // An empty output copies nothing: its outer size alone may be 2^40 (a [2^20, 2^20, 0] joined
  // along its last axis), which would be that many iterations of copying zero bytes.
  const int64_t outer = call.outputs[0]->tensor.numel() == 0 ? 0 : product(first.sizes, 0, axis);
  const size_t inner_bytes =
      static_cast<size_t>(product(first.sizes, axis + 1, first.sizes.size())) *
      dtype_size(first.dtype);
  std::vector<ConcatKernel::Part> parts;
  for (const runtime::Value* v : call.inputs) {
    const size_t block = static_cast<size_t>(v->tensor.sizes[axis]) * inner_bytes;
    parts.push_back({v, block});
  }
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<ConcatKernel>(std::move(parts), call.outputs[0], outer, axis));
}

}  // namespace

void register_concat(runtime::KernelRegistry& registry) {
  registry.add({"Concat", "", {}, &create});
}

}  // namespace baton::kernels::cpu
