// ONNX Div (opset 13+): elementwise, multidirectional broadcasting; float32, int32, int64.
// Integer division truncates toward zero, as C++ and ONNX's integer Div do.
#include <limits>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct DivOp {
  static constexpr std::string_view kName = "Div";
  // Integer division by zero is undefined in C++ (it traps on x86); the loop writes 0, finishes
  // and the kernel reports the error instead.
  bool divided_by_zero = false;

  template <typename T>
  T operator()(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        divided_by_zero = true;
        return 0;
      }
      // min / -1 overflows (and traps); wrap like the other integer ops.
      if (b == -1) return static_cast<T>(WrappingType<T>(0) - static_cast<WrappingType<T>>(a));
      return a / b;
    } else {
      return a / b;
    }
  }
  bool ok() const { return !divided_by_zero; }
};

}  // namespace

void register_div(runtime::OpRegistry& registry) { registry.add(arithmetic_schema<DivOp>()); }

}  // namespace baton::kernels::cpu
