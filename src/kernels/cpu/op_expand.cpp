// ONNX Expand (opset 13): the input broadcast to the output's shape, a strided copy
// (strided_copy.h) with stride 0 along the broadcast dimensions. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

// Dimensions aligned right; a missing or size-1 input dimension repeats. The output's sizes are the
// runtime's at resize() (the `shape` input holds the largest), so every dimension may change.
class ExpandKernel final : public StridedCopyKernel {
 public:
  using StridedCopyKernel::StridedCopyKernel;

 protected:
  Status view(StridedView& v) const override {
    const std::span<const int64_t> in = in_->tensor.sizes;
    const std::span<const int64_t> out = out_->tensor.sizes;
    std::array<int64_t, kMaxRank> in_strides;  // row_major_strides fills the first rank
    row_major_strides(in, in_strides.data());
    const size_t lead = out.size() - in.size();
    v.rank = out.size();
    for (size_t d = 0; d < out.size(); ++d) {
      v.sizes[d] = out[d];
      v.strides[d] = 0;
    }
    for (size_t j = 0; j < in.size(); ++j) v.strides[lead + j] = in[j] == 1 ? 0 : in_strides[j];
    return Status::ok_status();
  }
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  return create_strided_copy<ExpandKernel>(call);
}

}  // namespace

void register_expand(runtime::KernelRegistry& registry) {
  registry.add({"Expand", "", {}, &create});
}

}  // namespace baton::kernels::cpu
