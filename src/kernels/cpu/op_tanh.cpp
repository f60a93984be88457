// ONNX Tanh (opset 13+): y = tanh(x) elementwise on float32.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct TanhFn {
  float operator()(float x) const { return std::tanh(x); }
};

}  // namespace

void register_tanh(runtime::OpRegistry& registry) { registry.add(unary_schema<TanhFn>("Tanh")); }

}  // namespace baton::kernels::cpu
