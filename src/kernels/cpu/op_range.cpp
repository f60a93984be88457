// ONNX Range (opset 11): output[i] = start + i * delta, for the length the definition worked out
// from the (compile-time) inputs. Floats are computed in double and rounded once, as numpy's
// arange does; integers in unsigned arithmetic (every value lies between start and limit, so the
// wrap-around never shows).
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr DTypeSet kRangeTypes{DType::Float32, DType::Float64, DType::Int16, DType::Int32,
                               DType::Int64};

template <typename T>
class RangeKernel final : public runtime::Kernel {
 public:
  RangeKernel(const runtime::Value* start, const runtime::Value* delta, runtime::Value* out)
      : start_(start), delta_(delta), out_(out) {}

  Status run() override {
    T start, delta;
    std::memcpy(&start, start_->tensor.data, sizeof(T));
    std::memcpy(&delta, delta_->tensor.data, sizeof(T));
    T* y = out_->tensor.data_as<T>();
    const int64_t n = out_->tensor.numel();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        y[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * delta);
      } else {
        const uint64_t v =
            static_cast<uint64_t>(static_cast<int64_t>(start)) +
            static_cast<uint64_t>(i) * static_cast<uint64_t>(static_cast<int64_t>(delta));
        y[i] = static_cast<T>(static_cast<int64_t>(v));
      }
    }
    return Status::ok_status();
  }

  // run() fills the output's current element count.
  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

 private:
  const runtime::Value* start_;
  const runtime::Value* delta_;
  runtime::Value* out_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<kRangeTypes.bits()>(call.input(0).dtype, [&]<typename T>() {
    kernel = std::make_unique<RangeKernel<T>>(call.inputs[0], call.inputs[2], call.outputs[0]);
  });
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_range(runtime::KernelRegistry& registry) { registry.add({"Range", "", {}, &create}); }

}  // namespace baton::kernels::cpu
