// ONNX Transpose (opset 13): output dimension i is input dimension perm[i] (the canonical perm is
// always present). Any dtype: a strided copy (strided_copy.h) through the permuted strides.
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

// Output dimension i is input dimension perm[i]: the input's stride along it. Every dimension may
// change at resize().
class TransposeKernel final : public StridedCopyKernel {
 public:
  TransposeKernel(const runtime::Value* in, runtime::Value* out, std::span<const int64_t> perm)
      : StridedCopyKernel(in, out), rank_(perm.size()) {
    std::copy(perm.begin(), perm.end(), perm_.begin());
  }

 protected:
  Status view(StridedView& v) const override {
    std::array<int64_t, kMaxRank> strides;  // row_major_strides fills the first rank
    row_major_strides(in_->tensor.sizes, strides.data());
    const std::span<const int64_t> out = out_->tensor.sizes;
    v.rank = rank_;
    for (size_t i = 0; i < rank_; ++i) {
      v.sizes[i] = out[i];
      v.strides[i] = strides[static_cast<size_t>(perm_[i])];
    }
    return Status::ok_status();
  }

 private:
  size_t rank_;
  std::array<int64_t, kMaxRank> perm_{};
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  // Canonical: always present, a permutation of [0, rank).
  return create_strided_copy<TransposeKernel>(call, call.attr_ints("perm"));
}

}  // namespace

void register_transpose(runtime::KernelRegistry& registry) {
  registry.add({"Transpose", "", {}, &create});
}

}  // namespace baton::kernels::cpu
