// ONNX Erf (opset 13+): y = erf(x) elementwise on float32.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct ErfFn {
  float operator()(float x) const { return std::erf(x); }
};

}  // namespace

void register_erf(runtime::OpRegistry& registry) { registry.add(unary_schema<ErfFn>("Erf")); }

}  // namespace baton::kernels::cpu
