// ONNX ArgMax and ArgMin (opsets 1 and 12): the int64 index of the largest (smallest) element
// along one axis; the first such index, or the last with select_last_index. NaN counts as larger
// (smaller) than every number, as in numpy, so the first (last) NaN wins. Numeric types.
#include <cmath>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// The tensor is seen as [outer, n, inner] with the axis in the middle; n >= 1 whenever there is
// an output element (the definition refuses an empty axis otherwise).
template <typename S, bool kMax>
class ArgKernel final : public runtime::Kernel {
  using C = compute_t<S>;

 public:
  ArgKernel(const runtime::Value* in, runtime::Value* out, size_t axis, bool last)
      : in_(in), out_(out), axis_(axis), last_(last) {
    plan();
  }

  // Every dimension may change, the axis too.
  Status resize() override {
    plan();
    return Status::ok_status();
  }

  Status run() override {
    const S* x = in_->tensor.data_as<const S>();
    auto* y = out_->tensor.data_as<int64_t>();
    for (int64_t o = 0; o < outer_; ++o) {
      for (int64_t i = 0; i < inner_; ++i) {
        const S* col = x + o * n_ * inner_ + i;
        C best = load(col[0]);
        int64_t index = 0;
        for (int64_t j = 1; j < n_; ++j) {
          const C v = load(col[j * inner_]);
          const bool v_nan = v != v, best_nan = best != best;  // never true for integers
          const bool beats = kMax ? v > best : v < best;
          if ((beats && !best_nan) || (v_nan && !best_nan) ||
              (last_ && (v == best || (v_nan && best_nan)))) {
            best = v;
            index = j;
          }
        }
        y[o * inner_ + i] = index;
      }
    }
    return Status::ok_status();
  }

 private:
  void plan() {
    const std::span<const int64_t> sizes = in_->tensor.sizes;
    // No output elements: nothing to do, and the outer and inner sizes of an empty input need
    // not fit (seen as [0, 0, 0]).
    const bool empty = out_->tensor.numel() == 0;
    outer_ = empty ? 0 : product(sizes, 0, axis_);
    n_ = empty ? 0 : sizes[axis_];
    inner_ = empty ? 0 : product(sizes, axis_ + 1, sizes.size());
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  size_t axis_;
  int64_t outer_ = 0, n_ = 0, inner_ = 0;
  bool last_;
};

template <bool kMax>
Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const runtime::Value* in = call.inputs[0];
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  const bool last =
      call.def->attr_index("select_last_index") >= 0 && call.attr_int("select_last_index") != 0;
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<(ops::kFloatTypes | ops::kIntTypes).bits()>(in->tensor.dtype, [&]<typename S>() {
    kernel = std::make_unique<ArgKernel<S, kMax>>(in, call.outputs[0], axis, last);
  });
  if (!kernel) return no_kernel_for(call, in->tensor.dtype);
  return kernel;
}

}  // namespace

void register_argmax(runtime::KernelRegistry& registry) {
  registry.add({"ArgMax", "", {}, &create<true>});
  registry.add({"ArgMin", "", {}, &create<false>});
}

}  // namespace baton::kernels::cpu
