// ONNX Sqrt (opset 13+): y = sqrt(x) elementwise on float32.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct SqrtFn {
  float operator()(float x) const { return std::sqrt(x); }
};

}  // namespace

void register_sqrt(runtime::OpRegistry& registry) { registry.add(unary_schema<SqrtFn>("Sqrt")); }

}  // namespace baton::kernels::cpu
