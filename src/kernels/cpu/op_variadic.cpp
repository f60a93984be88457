// ONNX Max, Min, Mean and Sum (opset 8+): one or more inputs broadcast to one shape and folded
// left to right in the compute type (float16 and bfloat16 accumulate in float in a scratch buffer
// sized at create, so they round once). Max and Min propagate NaN, as numpy's maximum / minimum.
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

struct MaxFn {
  template <typename C>
  static C apply(C a, C b) {
    if constexpr (std::is_floating_point_v<C>) {
      return (std::isnan(a) || a > b) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};
struct MinFn {
  template <typename C>
  static C apply(C a, C b) {
    if constexpr (std::is_floating_point_v<C>) {
      return (std::isnan(a) || a < b) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};
struct SumFn {  // float types only
  template <typename C>
  static C apply(C a, C b) {
    return a + b;
  }
};

template <typename S, typename Fn, bool kMean>
class VariadicKernel final : public runtime::Kernel {
 public:
  using C = compute_t<S>;
  // Storage that is its own compute type accumulates in the output itself.
  static constexpr bool kInPlace = std::is_same_v<S, C>;

  explicit VariadicKernel(const runtime::KernelCall& call)
      : inputs_(call.inputs.begin(), call.inputs.end()),
        out_(call.outputs[0]),
        numel_(call.output(0).numel()) {
    for (const runtime::Value* v : inputs_) {
      plans_.push_back(make_broadcast_plan<1>(call.output(0).sizes, {v->tensor.sizes}));
    }
  }

  // Dynamic shapes: plans and counts follow the sizes (the accumulator was reserved at the
  // largest).
  Status resize() override {
    numel_ = out_->tensor.numel();
    for (size_t k = 0; k < inputs_.size(); ++k) {
      make_broadcast_plan_into<1>(plans_[k], out_->tensor.sizes, {inputs_[k]->tensor.sizes});
    }
    return Status::ok_status();
  }

  // Other storage types accumulate in scratch of the compute type.
  Status reserve(const runtime::KernelCall& call) {
    if (kInPlace) return Status::ok_status();
    return call.reserve_scratch<C>(scratch_, static_cast<uint64_t>(numel_), "accumulator");
  }

  Status run() override {
    S* out = out_->tensor.data_as<S>();
    C* acc = nullptr;
    if constexpr (kInPlace) {
      acc = out;
    } else {
      acc = scratch_.data<C>();
    }
    for (size_t k = 0; k < inputs_.size(); ++k) {
      const S* x = inputs_[k]->tensor.data_as<const S>();
      const BroadcastPlan<1>& plan = plans_[k];
      const int64_t stride = plan.strides[0][plan.rank - 1];
      for_each_broadcast_row<1>(plan, [&](int64_t o, const std::array<int64_t, 1>& in, int64_t n) {
        const S* row = x + in[0];
        C* a = acc + o;
        if (k == 0) {
          for (int64_t i = 0; i < n; ++i) a[i] = load(row[i * stride]);
        } else {
          for (int64_t i = 0; i < n; ++i) a[i] = Fn::apply(a[i], load(row[i * stride]));
        }
      });
    }
    if constexpr (kMean) {
      const C count = static_cast<C>(inputs_.size());
      for (int64_t i = 0; i < numel_; ++i) acc[i] /= count;
    }
    if constexpr (!kInPlace) {
      for (int64_t i = 0; i < numel_; ++i) out[i] = store<S>(acc[i]);
    }
    return Status::ok_status();
  }

 private:
  std::vector<const runtime::Value*> inputs_;
  runtime::Value* out_;
  int64_t numel_;
  std::vector<BroadcastPlan<1>> plans_;
  runtime::ScratchRef scratch_;
};

template <typename Fn, bool kMean, uint32_t kTypes>
Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<kTypes>(call.input(0).dtype, [&]<typename S>() {
    kernel = with_scratch(std::make_unique<VariadicKernel<S, Fn, kMean>>(call), call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_variadic(runtime::KernelRegistry& registry) {
  registry.add({"Max", "", {}, &create<MaxFn, false, ops::kNumericTypes.bits()>});
  registry.add({"Min", "", {}, &create<MinFn, false, ops::kNumericTypes.bits()>});
  registry.add({"Mean", "", {}, &create<SumFn, true, ops::kFloatTypes.bits()>});
  registry.add({"Sum", "", {}, &create<SumFn, false, ops::kFloatTypes.bits()>});
}

}  // namespace baton::kernels::cpu
