// ONNX NonZero (ops/nonzero.cpp): the row-major indices of X's non-zero elements as int64
// [rank, count]. The count is known only here, so the output's memory is planned for every
// element being non-zero ([rank, numel]), and run() first counts, then writes row r of the
// indices at r * count, so that the result is contiguous at its real size; produced_size()
// gives the count to the runtime, which binds the output's data-dependent symbol from it
// (docs/dynamic_shapes.md). X's sizes are read on every call (dynamic inputs). Floats compare
// as numbers (-0 is zero, NaN is not), every other dtype by its bytes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

// Whether the element at `e` (of `dtype`) is not zero.
bool nonzero(DType dtype, const uint8_t* e, size_t width) {
  switch (dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, e, 4);
      return v != 0.0f;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, e, 8);
      return v != 0.0;
    }
    case DType::Float16:
    case DType::BFloat16:
      return (e[0] | (e[1] & 0x7f)) != 0;  // little-endian: the sign is bit 7 of byte 1
    default:
      for (size_t b = 0; b < width; ++b) {
        if (e[b] != 0) return true;
      }
      return false;
  }
}

class NonZeroKernel final : public runtime::Kernel {
 public:
  NonZeroKernel(const runtime::Value* in, runtime::Value* out)
      : in_(in), out_(out), index_(in->tensor.sizes.size()) {}

  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }
  int64_t produced_size() const override { return count_; }

  Status run() override {
    const TensorView& x = in_->tensor;
    const auto* bytes = static_cast<const uint8_t*>(x.data);
    const size_t width = dtype_size(x.dtype);
    const int64_t numel = x.numel();
    const auto rank = static_cast<int64_t>(x.sizes.size());
    // A scalar's one index row holds 0 (ops/nonzero.cpp).
    if (rank == 0 && numel == 1) {
      count_ = nonzero(x.dtype, bytes, width) ? 1 : 0;
      if (count_ == 1) static_cast<int64_t*>(out_->tensor.data)[0] = 0;
      return Status::ok_status();
    }
    int64_t count = 0;
    for (int64_t i = 0; i < numel; ++i) {
      count += nonzero(x.dtype, bytes + static_cast<size_t>(i) * width, width) ? 1 : 0;
    }
    // The output's planned memory holds rank x numel indices; count <= numel.
    auto* y = static_cast<int64_t*>(out_->tensor.data);
    std::fill(index_.begin(), index_.end(), 0);
    int64_t j = 0;
    for (int64_t i = 0; i < numel; ++i) {
      if (nonzero(x.dtype, bytes + static_cast<size_t>(i) * width, width)) {
        for (int64_t r = 0; r < rank; ++r) y[r * count + j] = index_[static_cast<size_t>(r)];
        ++j;
      }
      // The next element's index: the last axis fastest.
      for (int64_t r = rank - 1; r >= 0; --r) {
        const auto ru = static_cast<size_t>(r);
        if (++index_[ru] < x.sizes[ru]) break;
        index_[ru] = 0;
      }
    }
    count_ = count;
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  std::vector<int64_t> index_;  // made at create: run() allocates nothing
  int64_t count_ = 0;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<NonZeroKernel>(call.inputs[0], call.outputs[0]));
}

}  // namespace

void register_nonzero(runtime::KernelRegistry& registry) {
  registry.add({"NonZero", "", {}, &create});
}

}  // namespace baton::kernels::cpu
