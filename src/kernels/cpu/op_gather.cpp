// ONNX Gather (opset 13): output[outer, idx, inner] = data[outer, indices[idx], inner] along the
// canonical axis. Any dtype (blocks of bytes); int32 or int64 indices, negative ones counting from
// the end. Every index is checked before anything is read.
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/indices.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

// data seen as [outer, n, inner] and the output as [outer, count, inner]; `block` is one inner
// row's bytes.
struct GatherShape {
  int64_t outer = 0, n = 0, count = 0;
  size_t block = 0;
};

// At the values' current sizes: any dimension of data or indices may change (an embedding's ids
// [batch, sequence]; the rows a sequence gathers from).
GatherShape gather_shape(const TensorView& data, const TensorView& indices, const TensorView& out,
                         size_t axis) {
  GatherShape s;
  s.n = data.sizes[axis];
  s.count = indices.numel();
  if (out.numel() != 0) {
    // A non-empty output bounds every product here (an empty one could have dimensions whose
    // product passes int64).
    s.outer = product(data.sizes, 0, axis);
    s.block = static_cast<size_t>(product(data.sizes, axis + 1, data.sizes.size())) *
              dtype_size(data.dtype);
  }
  return s;
}

template <typename Index>
class GatherKernel final : public runtime::Kernel {
 public:
  GatherKernel(const runtime::Value* data, const runtime::Value* indices, runtime::Value* out,
               size_t axis, std::string what)
      : data_(data), indices_(indices), out_(out), axis_(axis), what_(std::move(what)) {
    follow();
  }

  // Dynamic shapes: run() recomputes the counts when the sizes changed (PlannedSizes).
  Status resize() override {
    follow();
    return Status::ok_status();
  }
  bool follows_sizes() const override { return true; }

  Status run() override {
    follow();
    BATON_TRY(check_indices<Index>(indices_->tensor, std::span<const int64_t>(&s_.n, 1), what_));
    const Index* idx = indices_->tensor.data_as<const Index>();
    if (s_.block == 0) return Status::ok_status();
    const char* src = static_cast<const char*>(data_->tensor.data);
    char* dst = static_cast<char*>(out_->tensor.data);
    for (int64_t o = 0; o < s_.outer; ++o) {
      const char* slab = src + static_cast<size_t>(o * s_.n) * s_.block;
      for (int64_t k = 0; k < s_.count; ++k) {
        std::memcpy(dst, slab + static_cast<size_t>(normalize_index(idx[k], s_.n)) * s_.block,
                    s_.block);
        dst += s_.block;
      }
    }
    return Status::ok_status();
  }

 private:
  void follow() {
    if (planned_.changed({data_->tensor.sizes, indices_->tensor.sizes, out_->tensor.sizes})) {
      s_ = gather_shape(data_->tensor, indices_->tensor, out_->tensor, axis_);
    }
  }

  const runtime::Value* data_;
  const runtime::Value* indices_;
  runtime::Value* out_;
  size_t axis_;
  PlannedSizes<3> planned_;  // the sizes s_ was computed for
  GatherShape s_;
  std::string what_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  if (call.input(1).dtype == DType::Int32) {
    return std::unique_ptr<runtime::Kernel>(std::make_unique<GatherKernel<int32_t>>(
        call.inputs[0], call.inputs[1], call.outputs[0], axis, call.describe()));
  }
  return std::unique_ptr<runtime::Kernel>(std::make_unique<GatherKernel<int64_t>>(
      call.inputs[0], call.inputs[1], call.outputs[0], axis, call.describe()));
}

}  // namespace

void register_gather(runtime::KernelRegistry& registry) {
  registry.add({"Gather", "", {}, &create});
}

}  // namespace baton::kernels::cpu
