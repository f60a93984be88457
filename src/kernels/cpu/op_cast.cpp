// ONNX Cast and CastLike: elementwise conversion between any two of Baton's dtypes.
//
// What each conversion does (ONNX leaves out-of-range float -> integer implementation-defined):
//  - to bool: x != 0 (NaN is true); from bool: 0 or 1;
//  - float -> integer: truncation toward zero, saturated to the integer's range, NaN -> 0;
//  - integer -> integer: two's complement wrap-around (numpy's astype, C++20's conversion);
//  - to float16 / bfloat16: rounded once to nearest even from the exact source value (a float64
//    or integer source is rounded to float32 with round-to-odd first, so the two roundings give
//    the correctly rounded result); to float32 / float64: the C++ conversion (nearest even).
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/elementwise.h"

namespace baton::kernels::cpu {
namespace {

template <typename S>
constexpr bool kIsFloat16 = std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>;

// d rounded to float with round-to-odd: exact values stay, the others get the truncated value
// with its last bit set, so that a later rounding to fewer bits is correct.
float round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof(bits));
  return f;
}

template <typename SO, typename SI>
SO convert(SI v) {
  if constexpr (std::is_same_v<SI, BoolByte>) {
    return convert<SO>(static_cast<uint8_t>(static_cast<bool>(v)));  // 0 or 1
  } else if constexpr (std::is_same_v<SO, BoolByte>) {
    return SO(load(v) != compute_t<SI>(0));
  } else if constexpr (kIsFloat16<SO>) {
    if constexpr (std::is_same_v<SI, float> || kIsFloat16<SI>) {
      return SO(static_cast<float>(v));
    } else {
      return SO(round_to_odd(static_cast<double>(v)));
    }
  } else if constexpr (std::is_integral_v<SO> && !std::is_integral_v<SI>) {
    return ops::scalar::narrow<SO>(load(v));  // from float, float16, bfloat16 or float64
  } else {
    return static_cast<SO>(load(v));
  }
}

template <typename SI, typename SO>
class CastKernel final : public runtime::Kernel {
 public:
  CastKernel(const runtime::Value* in, runtime::Value* out) : in_(in), out_(out) {}

  Status run() override {
    const SI* x = in_->tensor.data_as<const SI>();
    SO* y = out_->tensor.data_as<SO>();
    const int64_t numel = in_->tensor.numel();  // dynamic shapes: the current count
    if constexpr (std::is_same_v<SI, SO>) {
      if (numel != 0) std::memcpy(y, x, static_cast<size_t>(numel) * sizeof(SI));
    } else {
      for (int64_t i = 0; i < numel; ++i) y[i] = convert<SO>(x[i]);
    }
    return Status::ok_status();
  }

  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  constexpr uint32_t kAll = ops::kAllTypes.bits();
  const runtime::Value* in = call.inputs[0];
  runtime::Value* out = call.outputs[0];
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<kAll>(in->tensor.dtype, [&]<typename SI>() {
    dispatch<kAll>(out->tensor.dtype,
                   [&]<typename SO>() { kernel = std::make_unique<CastKernel<SI, SO>>(in, out); });
  });
  if (!kernel) return no_kernel_for(call, out->tensor.dtype);
  return kernel;
}

}  // namespace

void register_cast(runtime::KernelRegistry& registry) {
  registry.add({"Cast", "", {}, &create});
  registry.add({"CastLike", "", {}, &create});
}

}  // namespace baton::kernels::cpu
