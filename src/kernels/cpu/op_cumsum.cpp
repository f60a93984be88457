// ONNX CumSum (ops/cumsum.cpp): the tensor seen as [outer, n, inner] around the axis; each of the
// outer x inner lines is summed in order (or from its end), in the dtype's compute type (float for
// float16 and bfloat16; integers wrap as the CPU's two's complement does). The axis, a compile-time
// constant, is read at create; the sizes at every resize.
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/shape.h"

namespace baton::kernels::cpu {
namespace {

constexpr uint32_t kTypes = DTypeSet{DType::Float32,  DType::Float64, DType::Float16,
                                     DType::BFloat16, DType::Int32,   DType::Int64}
                                .bits();

class CumSumKernel final : public runtime::Kernel {
 public:
  CumSumKernel(const runtime::Value* in, runtime::Value* out, size_t axis, bool exclusive,
               bool reverse)
      : in_(in), out_(out), axis_(axis), exclusive_(exclusive), reverse_(reverse) {
    plan();
  }

  Status resize() override {
    plan();
    return Status::ok_status();
  }

  Status run() override {
    dispatch<kTypes>(in_->tensor.dtype, [&]<typename S>() {
      const S* x = static_cast<const S*>(in_->tensor.data);
      S* y = static_cast<S*>(out_->tensor.data);
      for (int64_t o = 0; o < outer_; ++o) {
        for (int64_t i = 0; i < inner_; ++i) {
          const int64_t base = o * n_ * inner_ + i;
          compute_t<S> sum{};
          for (int64_t k = 0; k < n_; ++k) {
            const int64_t at = base + (reverse_ ? n_ - 1 - k : k) * inner_;
            const compute_t<S> v = load(x[at]);
            if (exclusive_) {
              y[at] = store<S>(sum);
              sum += v;
            } else {
              sum += v;
              y[at] = store<S>(sum);
            }
          }
        }
      }
    });
    return Status::ok_status();
  }

 private:
  void plan() {
    const AxisLines l = lines_along(in_->tensor.sizes, axis_);
    outer_ = l.outer;
    n_ = l.n;
    inner_ = l.inner;
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  size_t axis_;
  bool exclusive_, reverse_;
  int64_t outer_ = 0, n_ = 0, inner_ = 0;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& a = call.input(1);
  const int64_t rank = static_cast<int64_t>(call.input(0).sizes.size());
  int64_t axis = ops::int_values_of(a.dtype, a.data, 1)[0];
  if (axis < 0) axis += rank;
  BATON_CHECK_OR_RETURN(axis >= 0 && axis < rank, InvalidArgument, "{}: axis {} is out of range",
                        call.describe(), axis);
  BATON_CHECK_OR_RETURN(dispatch<kTypes>(call.input(0).dtype, []<typename S>() {}), NotSupported,
                        "{}: dtype {} is not summed here", call.describe(),
                        dtype_name(call.input(0).dtype));
  return std::unique_ptr<runtime::Kernel>(std::make_unique<CumSumKernel>(
      call.inputs[0], call.outputs[0], static_cast<size_t>(axis), call.attr_int("exclusive") != 0,
      call.attr_int("reverse") != 0));
}

}  // namespace

void register_cumsum(runtime::KernelRegistry& registry) {
  registry.add({"CumSum", "", {}, &create});
}

}  // namespace baton::kernels::cpu
