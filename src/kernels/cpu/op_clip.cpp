// ONNX Clip (opset 11+): y = min(max(x, lo), hi), computed as two comparisons so that NaN passes
// through and lo > hi gives hi everywhere (as ONNX specifies). The bounds are read at every run.
#include <limits>
#include <memory>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

template <typename S>
class ClipKernel final : public runtime::Kernel {
 public:
  using C = compute_t<S>;

  explicit ClipKernel(const runtime::KernelCall& call)
      : in_(call.inputs[0]),
        lo_(call.has_input(1) ? call.inputs[1] : nullptr),
        hi_(call.has_input(2) ? call.inputs[2] : nullptr),
        out_(call.outputs[0]),
        numel_(in_->tensor.numel()) {}

  Status resize() override {
    numel_ = in_->tensor.numel();
    return Status::ok_status();
  }

  Status run() override {
    const C lo = lo_ != nullptr ? load(*lo_->tensor.data_as<const S>()) : lowest();
    const C hi = hi_ != nullptr ? load(*hi_->tensor.data_as<const S>()) : highest();
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    for (int64_t i = 0; i < numel_; ++i) {
      C v = load(x[i]);
      v = v < lo ? lo : v;
      y[i] = store<S>(v > hi ? hi : v);
    }
    return Status::ok_status();
  }

 private:
  static C lowest() {
    if constexpr (std::numeric_limits<C>::has_infinity) return -std::numeric_limits<C>::infinity();
    return std::numeric_limits<C>::lowest();
  }
  static C highest() {
    if constexpr (std::numeric_limits<C>::has_infinity) return std::numeric_limits<C>::infinity();
    return std::numeric_limits<C>::max();
  }

  const runtime::Value* in_;
  const runtime::Value* lo_;
  const runtime::Value* hi_;
  runtime::Value* out_;
  int64_t numel_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kNumericTypes.bits()>(
      call.input(0).dtype, [&]<typename S>() { kernel = std::make_unique<ClipKernel<S>>(call); });
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_clip(runtime::KernelRegistry& registry) { registry.add({"Clip", "", {}, &create}); }

}  // namespace baton::kernels::cpu
