// ONNX NonZero (ops/nonzero.cpp): the row-major indices of X's non-zero elements as int64
// [rank, count]. The count is known only here, so the output's memory is planned for every
// element being non-zero ([rank, numel]), and run() first counts, then writes row r of the
// indices at r * count, so that the result is contiguous at its real size; produced_size()
// gives the count to the runtime, which binds the output's data-dependent symbol from it
// (docs/dynamic_shapes.md). X's sizes are read on every call (dynamic inputs). Which elements
// count: ops::element_is_nonzero, shared with the compile-time count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "ops/nonzero.h"

namespace baton::kernels::cpu {
namespace {

using ops::element_is_nonzero;

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
      count_ = element_is_nonzero(x.dtype, bytes, width) ? 1 : 0;
      if (count_ == 1) static_cast<int64_t*>(out_->tensor.data)[0] = 0;
      return Status::ok_status();
    }
    int64_t count = 0;
    for (int64_t i = 0; i < numel; ++i) {
      count += element_is_nonzero(x.dtype, bytes + static_cast<size_t>(i) * width, width) ? 1 : 0;
    }
    // The output's planned memory holds rank x numel indices; count <= numel.
    auto* y = static_cast<int64_t*>(out_->tensor.data);
    std::fill(index_.begin(), index_.end(), 0);
    int64_t j = 0;
    for (int64_t i = 0; i < numel; ++i) {
      if (element_is_nonzero(x.dtype, bytes + static_cast<size_t>(i) * width, width)) {
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
