// ONNX Tile (opset 13): output dimension d, of size repeats[d] * size[d], seen as two dimensions
// [repeats[d], size[d]] with stride 0 along the first: a strided copy (strided_copy.h) of twice
// the rank. Any dtype.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

// The repeat counts are the output's sizes over the input's, so every dimension may change at
// resize().
class TileKernel final : public StridedCopyKernel {
 public:
  using StridedCopyKernel::StridedCopyKernel;

 protected:
  Status view(StridedView& v) const override {
    const std::span<const int64_t> in = in_->tensor.sizes;
    const std::span<const int64_t> out = out_->tensor.sizes;
    std::array<int64_t, kMaxRank> in_strides;  // row_major_strides fills the first rank
    row_major_strides(in, in_strides.data());
    v.rank = 2 * in.size();
    for (size_t d = 0; d < in.size(); ++d) {
      v.sizes[2 * d] = in[d] == 0 ? 0 : out[d] / in[d];  // the repeat count
      v.strides[2 * d] = 0;
      v.sizes[2 * d + 1] = in[d];
      v.strides[2 * d + 1] = in_strides[d];
    }
    return Status::ok_status();
  }
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  return create_strided_copy<TileKernel>(call);
}

}  // namespace

void register_tile(runtime::KernelRegistry& registry) { registry.add({"Tile", "", {}, &create}); }

}  // namespace baton::kernels::cpu
