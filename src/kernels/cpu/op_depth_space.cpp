// ONNX DepthToSpace and SpaceToDepth (ops/depth_space.cpp) as strided copies (strided_copy.h):
// the output, seen as six dimensions that split each moved axis into (blocks, block edge), reads
// the input through permuted strides. Any dtype of 1, 2, 4 or 8 bytes.
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"

namespace baton::kernels::cpu {
namespace {

enum class Move { DepthToSpaceDcr, DepthToSpaceCrd, SpaceToDepth };

class DepthSpaceKernel final : public StridedCopyKernel {
 public:
  DepthSpaceKernel(const runtime::Value* in, runtime::Value* out, Move move, int64_t block)
      : StridedCopyKernel(in, out), move_(move), b_(block) {}

 protected:
  Status view(StridedView& v) const override {
    const std::span<const int64_t> x = in_->tensor.sizes;  // [N, C, H, W]
    const int64_t sw = 1, sh = x[3], sc = x[2] * x[3], sn = x[1] * x[2] * x[3];
    const int64_t b = b_;
    v.rank = 6;
    if (move_ == Move::SpaceToDepth) {
      // Output [N, (b1 b + b2) C + c, H / b, W / b] as [N, b1, b2, C, H / b, W / b]: row b1 and
      // column b2 of each block, from input row h' b + b1 and column w' b + b2.
      v.sizes = {x[0], b, b, x[1], x[2] / b, x[3] / b};
      v.strides = {sn, sh, sw, sc, b * sh, b * sw};
      return Status::ok_status();
    }
    // Output [N, C', H b, W b] as [N, C', H, b1, W, b2]: input channel (b1 b + b2) C' + c'
    // (DCR) or c' b^2 + b1 b + b2 (CRD).
    const int64_t cp = x[1] / (b * b);
    const bool dcr = move_ == Move::DepthToSpaceDcr;
    v.sizes = {x[0], cp, x[2], b, x[3], b};
    v.strides = {sn, dcr ? sc : b * b * sc, sh, dcr ? b * cp * sc : b * sc, sw, dcr ? cp * sc : sc};
    return Status::ok_status();
  }

 private:
  Move move_;
  int64_t b_;
};

Result<std::unique_ptr<runtime::Kernel>> create_depth_to_space(const runtime::KernelCall& call) {
  const Move move =
      call.attr_string("mode") == "CRD" ? Move::DepthToSpaceCrd : Move::DepthToSpaceDcr;
  return create_strided_copy<DepthSpaceKernel>(call, move, call.attr_int("blocksize"));
}

Result<std::unique_ptr<runtime::Kernel>> create_space_to_depth(const runtime::KernelCall& call) {
  return create_strided_copy<DepthSpaceKernel>(call, Move::SpaceToDepth,
                                               call.attr_int("blocksize"));
}

}  // namespace

void register_depth_space(runtime::KernelRegistry& registry) {
  registry.add({"DepthToSpace", "", {}, &create_depth_to_space});
  registry.add({"SpaceToDepth", "", {}, &create_space_to_depth});
}

}  // namespace baton::kernels::cpu
