// A dense output filled from a strided view of an input: output element (i_0, ..., i_n-1), in
// row-major order over `sizes`, is input element base + sum_d i_d * strides[d]. Transpose
// (permuted strides), Slice (strides times steps, negative for negative steps), Expand (0 along
// broadcast dimensions), Tile (its output seen as [repeat_0, size_0, repeat_1, size_1, ...] with
// stride 0 along each repeat) and Split (one slice per output) are all this copy.
//
// create and resize(): the plan (broadcast.h) drops size-1 dimensions and merges the ones that
// stay contiguous, from the view each op derives from its values' current sizes. run: rows the
// input holds contiguously are copied whole, others element by element as 1-, 2-, 4- or 8-byte
// words; nothing is allocated.
#pragma once

#include <array>
#include <cstring>
#include <memory>
#include <span>
#include <utility>

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
    reset(sizes, strides, base, element_size);
  }

  // Replans in place (resize() calls this on every change of shape: building a new StridedCopy
  // and copying it over, with its 32-entry arrays, cost several times the planning itself).
  void reset(std::span<const int64_t> sizes, std::span<const int64_t> strides, int64_t base,
             size_t element_size) {
    fn_ = nullptr;
    for (int64_t s : sizes) {
      if (s == 0) return;  // nothing to copy
    }
    base_bytes_ = base * static_cast<int64_t>(element_size);
    std::array<std::array<int64_t, kMaxDims>, 1> full;  // only the first sizes.size() are read
    for (size_t d = 0; d < sizes.size(); ++d) full[0][d] = sizes[d] == 1 ? 0 : strides[d];
    compress_plan_into<1, kMaxDims>(plan_, sizes, full);
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

// Row-major element strides of `sizes` into `strides` (common.h's element_strides without a
// vector, for resize()): saturating past a zero dimension, where they address nothing.
inline void row_major_strides(std::span<const int64_t> sizes, int64_t* strides) {
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    if (__builtin_mul_overflow(s, sizes[d], &s)) s = INT64_MAX;
  }
}

// What a StridedCopy reads: the output seen as `sizes` (at most kMaxDims dimensions), filled from
// input element `base` on through `strides`, in fixed arrays so that resize() allocates nothing.
struct StridedView {
  size_t rank = 0;
  // Only the first `rank` entries are meaningful; left unfilled, since resize() builds one on
  // every change of shape.
  std::array<int64_t, StridedCopy::kMaxDims> sizes, strides;
  int64_t base = 0;
};

// One input copied into one output through the view that view() derives from the bound values'
// current sizes: at create, and again at every resize() (dynamic shapes).
class StridedCopyKernel : public runtime::Kernel {
 public:
  StridedCopyKernel(const runtime::Value* in, runtime::Value* out)
      : in_(in), out_(out), element_size_(dtype_size(in->tensor.dtype)) {}

  Status run() override {
    BATON_TRY(follow());
    copy_.run(in_->tensor.data, out_->tensor.data);
    return Status::ok_status();
  }

  // Dynamic shapes: run() replans when its sizes changed (PlannedSizes), so the runtime does not
  // resize it per call; resize() does so now (at load, to check the sizes are ones it takes).
  Status resize() override { return follow(); }
  bool follows_sizes() const override { return true; }

  // The copy for the current sizes, planned again only when they changed; after a failed plan
  // the next call plans again rather than running the old one.
  Status follow() {
    if (!planned_.changed({in_->tensor.sizes, out_->tensor.sizes})) return Status::ok_status();
    StridedView v;
    Status st = view(v);
    if (!st.ok()) {
      planned_.forget();
      return st;
    }
    copy_.reset(std::span<const int64_t>(v.sizes.data(), v.rank),
                std::span<const int64_t>(v.strides.data(), v.rank), v.base, element_size_);
    return Status::ok_status();
  }

 protected:
  // The view at the current sizes; errors only for sizes the op cannot take.
  virtual Status view(StridedView& v) const = 0;

  const runtime::Value* in_;
  runtime::Value* out_;

 private:
  size_t element_size_;
  StridedCopy copy_;
  PlannedSizes<2> planned_;
};

// A StridedCopyKernel `K` (constructed from input 0, output 0 and `args`) of `call`, planned at
// the created sizes.
template <typename K, typename... Args>
Result<std::unique_ptr<runtime::Kernel>> create_strided_copy(const runtime::KernelCall& call,
                                                             Args&&... args) {
  const size_t element_size = dtype_size(call.input(0).dtype);
  BATON_CHECK_OR_RETURN(
      element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8,
      NotSupported, "{}: dtype {} has an element size of {} bytes", call.describe(),
      dtype_name(call.input(0).dtype), element_size);
  auto kernel = std::make_unique<K>(call.inputs[0], call.outputs[0], std::forward<Args>(args)...);
  const Status planned = kernel->follow();
  BATON_CHECK_OR_RETURN(planned.ok(), Internal, "{}: {}", call.describe(), planned.message());
  return std::unique_ptr<runtime::Kernel>(std::move(kernel));
}

}  // namespace baton::kernels::cpu
