// A dense output filled from a strided view of an input: output element (i_0, ..., i_n-1), in
// row-major order over `sizes`, is input element base + sum_d i_d * strides[d]. Transpose
// (permuted strides), Slice (strides times steps, negative for negative steps), Expand (0 along
// broadcast dimensions), Tile (its output seen as [repeat_0, size_0, repeat_1, size_1, ...] with
// stride 0 along each repeat) and Split (one slice per output) are all this copy.
//
// create: the plan (broadcast.h) drops size-1 dimensions and merges the ones that stay
// contiguous. run: rows the input holds contiguously are copied whole, others element by element
// as 1-, 2-, 4- or 8-byte words; nothing is allocated.
#pragma once

#include <cstring>
#include <memory>
#include <span>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/dispatch.h"

namespace baton::kernels::cpu {

class StridedCopy {
 public:
  // Tile's view has two dimensions per input dimension.
  static constexpr size_t kMaxDims = 2 * kMaxRank;
  using Plan = BroadcastPlan<1, kMaxDims>;

  StridedCopy() = default;

  // `sizes` (at most kMaxDims) and `strides` in elements; `element_size` is 1, 2, 4 or 8 (every
  // dtype's). Strides along dimensions of size 1 are never used, and an empty output copies
  // nothing, so callers need not compute strides that would overflow there.
  StridedCopy(std::span<const int64_t> sizes, std::span<const int64_t> strides, int64_t base,
              size_t element_size) {
    for (int64_t s : sizes) {
      if (s == 0) return;  // nothing to copy; fn_ stays null
    }
    base_bytes_ = base * static_cast<int64_t>(element_size);
    std::array<std::array<int64_t, kMaxDims>, 1> full{};
    for (size_t d = 0; d < sizes.size(); ++d) full[0][d] = sizes[d] == 1 ? 0 : strides[d];
    plan_ = compress_plan<1, kMaxDims>(sizes, full);
    dispatch_word(element_size, [&]<typename Word>() { fn_ = &copy_words<Word>; });
  }

  void run(const void* in, void* out) const {
    if (fn_ != nullptr) fn_(plan_, static_cast<const char*>(in) + base_bytes_, out);
  }

 private:
  template <typename Word>
  static void copy_words(const Plan& p, const void* in_data, void* out_data) {
    const Word* in = static_cast<const Word*>(in_data);
    Word* out = static_cast<Word*>(out_data);
    const int64_t s = p.strides[0][p.rank - 1];
    for_each_broadcast_row<1, kMaxDims>(
        p, [&](int64_t out_offset, const std::array<int64_t, 1>& offsets, int64_t n) {
          const Word* src = in + offsets[0];
          Word* dst = out + out_offset;
          if (s == 1) {
            std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(Word));
          } else {
            for (int64_t j = 0; j < n; ++j) dst[j] = src[j * s];
          }
        });
  }

  using Fn = void (*)(const Plan&, const void*, void*);
  Plan plan_;
  int64_t base_bytes_ = 0;
  Fn fn_ = nullptr;
};

// One input copied into one output through a StridedCopy.
class StridedCopyKernel final : public runtime::Kernel {
 public:
  StridedCopyKernel(const runtime::Value* in, runtime::Value* out, StridedCopy copy)
      : in_(in), out_(out), copy_(copy) {}

  Status run() override {
    copy_.run(in_->tensor.data, out_->tensor.data);
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  StridedCopy copy_;
};

// The kernel that fills output 0 of `call` (whose sizes are `sizes`, or a view of them with more
// dimensions) from input 0 through `strides` and `base`.
inline Result<std::unique_ptr<runtime::Kernel>> create_strided_copy(
    const runtime::KernelCall& call, std::span<const int64_t> sizes,
    std::span<const int64_t> strides, int64_t base) {
  const size_t element_size = dtype_size(call.input(0).dtype);
  BATON_CHECK_OR_RETURN(
      element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8,
      NotSupported, "{}: dtype {} has an element size of {} bytes", call.describe(),
      dtype_name(call.input(0).dtype), element_size);
  BATON_CHECK_OR_RETURN(sizes.size() <= StridedCopy::kMaxDims && strides.size() == sizes.size(),
                        Internal, "{}: a strided copy of rank {} (strides {})", call.describe(),
                        sizes.size(), strides.size());
  return std::unique_ptr<runtime::Kernel>(std::make_unique<StridedCopyKernel>(
      call.inputs[0], call.outputs[0], StridedCopy(sizes, strides, base, element_size)));
}

}  // namespace baton::kernels::cpu
