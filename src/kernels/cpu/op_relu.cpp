// ONNX Relu (opset 13+): y = max(0, x) elementwise on float32.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct ReluFn {
  // NaN stays NaN.
  float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};

}  // namespace

void register_relu(runtime::OpRegistry& registry) { registry.add(unary_schema<ReluFn>("Relu")); }

}  // namespace baton::kernels::cpu
