// ONNX GatherElements (opset 13): output[i] = data[i with i[axis] replaced by indices[i]]. Any
// dtype (elements moved as words); int32 or int64 indices, negative ones counting from the end.
// Every index is checked before anything is read.
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/indices.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// The output (shaped like indices) walked in order, reading data through its strides with the
// axis's zeroed: each row's base offset, to which indices[i] * axis_stride is added.
template <typename Index, typename Word>
class GatherElementsKernel final : public runtime::Kernel {
 public:
  GatherElementsKernel(const runtime::Value* data, const runtime::Value* indices,
                       runtime::Value* out, size_t axis, std::string what)
      : data_(data), indices_(indices), out_(out), axis_(axis), what_(std::move(what)) {
    follow();
  }

  // Any dimension of data or indices may change: run() plans again when they did (PlannedSizes),
  // so the runtime does not resize it per call.
  Status resize() override {
    follow();
    return Status::ok_status();
  }
  bool follows_sizes() const override { return true; }

  Status run() override {
    follow();
    BATON_TRY(check_indices<Index>(indices_->tensor, std::span<const int64_t>(&n_, 1), what_));
    const Index* idx = indices_->tensor.data_as<const Index>();
    const Word* data = data_->tensor.data_as<const Word>();
    Word* out = out_->tensor.data_as<Word>();
    const int64_t s = plan_.strides[0][plan_.rank - 1];
    for_each_broadcast_row<1>(
        plan_, [&](int64_t out_offset, const std::array<int64_t, 1>& offsets, int64_t len) {
          for (int64_t j = 0; j < len; ++j) {
            const int64_t i = normalize_index(idx[out_offset + j], n_);
            out[out_offset + j] = data[offsets[0] + j * s + i * axis_stride_];
          }
        });
    return Status::ok_status();
  }

 private:
  // The plan for the current sizes, made again only when they changed.
  void follow() {
    if (planned_.changed({data_->tensor.sizes, indices_->tensor.sizes})) plan();
  }

  void plan() {
    const TensorView& data = data_->tensor;
    // Strides saturate only for an empty data tensor, whose output is empty too or whose axis
    // has size 0 (every index then fails its check before any offset is formed).
    std::array<int64_t, kMaxRank> strides{};
    int64_t s = 1;
    for (size_t d = data.sizes.size(); d-- > 0;) {
      strides[d] = s;
      if (__builtin_mul_overflow(s, data.sizes[d], &s)) s = INT64_MAX;
    }
    std::array<std::array<int64_t, kMaxRank>, 1> walk;  // only the first rank entries are read
    for (size_t d = 0; d < data.sizes.size(); ++d) walk[0][d] = d == axis_ ? 0 : strides[d];
    compress_plan_into<1>(plan_, indices_->tensor.sizes, walk);
    n_ = data.sizes[axis_];
    axis_stride_ = strides[axis_];
  }

  const runtime::Value* data_;
  const runtime::Value* indices_;
  runtime::Value* out_;
  size_t axis_;
  BroadcastPlan<1> plan_;
  PlannedSizes<2> planned_;
  int64_t n_ = 0;
  int64_t axis_stride_ = 0;
  std::string what_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& data = call.input(0);
  const TensorView& indices = call.input(1);
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kIndexTypes.bits()>(indices.dtype, [&]<typename Index>() {
    dispatch_word(dtype_size(data.dtype), [&]<typename Word>() {
      kernel = std::make_unique<GatherElementsKernel<Index, Word>>(
          call.inputs[0], call.inputs[1], call.outputs[0], axis, call.describe());
    });
  });
  if (!kernel) return no_kernel_for(call, data.dtype);
  return kernel;
}

}  // namespace

void register_gather_elements(runtime::KernelRegistry& registry) {
  registry.add({"GatherElements", "", {}, &create});
}

}  // namespace baton::kernels::cpu
