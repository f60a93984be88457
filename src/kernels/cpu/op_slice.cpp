// ONNX Slice (opset 13): a strided copy (strided_copy.h) of the part ops/slice.h describes; starts,
// ends, axes and steps are program constants, read once at create. Any dtype. At resize() any
// dimension may change: the slice is clamped to the new sizes again.
#include <algorithm>
#include <array>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided_copy.h"
#include "ops/slice.h"

namespace baton::kernels::cpu {
namespace {

std::vector<int64_t> values(const TensorView& t) {
  return ops::int_values_of(t.dtype, t.data, t.numel());
}

// What the constants ask of one dimension, kept from create: at resize() the dimension's size
// changes and the start and the element count are clamped again, as ops::slice_dims does.
struct SliceRule {
  bool sliced = false;  // named by the axes (else kept whole)
  int64_t start = 0, end = 0, step = 1;
};

class SliceKernel final : public StridedCopyKernel {
 public:
  SliceKernel(const runtime::Value* in, runtime::Value* out,
              const std::array<SliceRule, kMaxRank>& rules)
      : StridedCopyKernel(in, out), rules_(rules) {}

 protected:
  Status view(StridedView& v) const override {
    const std::span<const int64_t> in = in_->tensor.sizes;
    const std::span<const int64_t> out = out_->tensor.sizes;
    std::array<ops::SliceDim, kMaxRank> dims{};
    for (size_t d = 0; d < in.size(); ++d) {
      dims[d] = clamp(rules_[d], in[d]);
      // The output's size decides how many elements are taken: in a dynamic program a Slice
      // whose end is computed from the sizes (position ids up to the sequence length) gets its
      // end as the largest value (compiler/shape_values.h), and the runtime's output size is the
      // call's. Taking fewer than the clamped slice never reads outside it.
      if (out[d] > dims[d].size) {
        return Status(Error::Internal, "Slice: an output size is larger than the slice keeps");
      }
    }
    v.rank = in.size();
    v.base = 0;
    std::array<int64_t, kMaxRank> in_strides;  // row_major_strides fills the first rank
    row_major_strides(in, in_strides.data());
    const bool empty = out_->tensor.numel() == 0;
    for (size_t d = 0; d < in.size(); ++d) {
      v.sizes[d] = out[d];
      v.strides[d] = 0;
      // Every start is inside a non-empty input; a dimension that keeps two or more elements has
      // a step shorter than itself, so its stride stays inside the input too.
      if (empty) continue;
      v.base += dims[d].start * in_strides[d];
      if (out[d] > 1) v.strides[d] = dims[d].step * in_strides[d];
    }
    return Status::ok_status();
  }

 private:
  // ops::slice_dims for one dimension of size `dim`, without its vectors.
  static ops::SliceDim clamp(const SliceRule& r, int64_t dim) {
    if (!r.sliced) return {0, 1, dim};
    int64_t start = r.start, end = r.end, size = 0;
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (r.step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) size = (end - start - 1) / r.step + 1;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      const uint64_t magnitude = static_cast<uint64_t>(-(r.step + 1)) + 1;
      if (start > end) {
        size = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / magnitude) + 1;
      }
    } else {
      start = 0;
    }
    return {start, r.step, size};
  }

  std::array<SliceRule, kMaxRank> rules_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& data = call.input(0);
  const std::vector<int64_t> starts = values(call.input(1)), ends = values(call.input(2));
  std::vector<int64_t> axes, steps;
  if (call.has_input(3)) axes = values(call.input(3));
  if (call.has_input(4)) steps = values(call.input(4));
  // The checks (lengths, axes in range and distinct, no zero step) with their messages.
  BATON_TRY(ops::slice_dims(data.sizes, starts, ends, call.has_input(3) ? &axes : nullptr,
                            call.has_input(4) ? &steps : nullptr, call.describe()));
  const auto rank = static_cast<int64_t>(data.sizes.size());
  std::array<SliceRule, kMaxRank> rules{};
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = call.has_input(3) ? axes[i] : static_cast<int64_t>(i);
    if (a < 0) a += rank;
    rules[static_cast<size_t>(a)] = {true, starts[i], ends[i], call.has_input(4) ? steps[i] : 1};
  }
  return create_strided_copy<SliceKernel>(call, rules);
}

}  // namespace

void register_slice(runtime::KernelRegistry& registry) { registry.add({"Slice", "", {}, &create}); }

}  // namespace baton::kernels::cpu
