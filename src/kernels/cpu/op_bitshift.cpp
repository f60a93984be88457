// ONNX BitShift (opset 11): the broadcasting binary kernel over a shift. A shift by the type's
// width or more gives 0 (C++ leaves it undefined).
#include <limits>

#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

template <bool kLeft>
struct ShiftFn {
  template <typename C, typename E>
  static C apply(C x, E bits, const ops::ElementwiseArgs& /*no attributes*/, bool& /*error*/) {
    if (bits >= static_cast<E>(std::numeric_limits<C>::digits)) return 0;
    return static_cast<C>(kLeft ? x << bits : x >> bits);
  }
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  constexpr uint32_t kTypes = ops::kUnsignedIntTypes.bits();
  if (call.attr_string("direction") == "LEFT") return create_binary<ShiftFn<true>, kTypes, 0>(call);
  return create_binary<ShiftFn<false>, kTypes, 0>(call);
}

}  // namespace

void register_bitshift(runtime::KernelRegistry& registry) {
  registry.add({"BitShift", "", {}, &create});
}

}  // namespace baton::kernels::cpu
