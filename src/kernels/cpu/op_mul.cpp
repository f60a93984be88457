// ONNX Mul (opset 13+): elementwise, multidirectional broadcasting; float32, int32, int64.
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct MulOp {
  static constexpr std::string_view kName = "Mul";
  template <typename T>
  T operator()(T a, T b) const {
    using W = WrappingType<T>;  // integer overflow wraps instead of being undefined
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  }
};

}  // namespace

void register_mul(runtime::OpRegistry& registry) { registry.add(arithmetic_schema<MulOp>()); }

}  // namespace baton::kernels::cpu
