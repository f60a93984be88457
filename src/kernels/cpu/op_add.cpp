// ONNX Add (opset 13+): elementwise, multidirectional broadcasting; float32, int32, int64.
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct AddOp {
  static constexpr std::string_view kName = "Add";
  template <typename T>
  T operator()(T a, T b) const {
    using W = WrappingType<T>;  // integer overflow wraps instead of being undefined
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  }
};

}  // namespace

void register_add(runtime::OpRegistry& registry) { registry.add(arithmetic_schema<AddOp>()); }

}  // namespace baton::kernels::cpu
