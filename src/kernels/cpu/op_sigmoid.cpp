// ONNX Sigmoid (opset 13+): y = 1 / (1 + exp(-x)) elementwise on float32.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct SigmoidFn {
  // exp of a non-positive number only: no overflow to inf/inf for large |x|.
  float operator()(float x) const {
    if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
    const float e = std::exp(x);
    return e / (1.0f + e);
  }
};

}  // namespace

void register_sigmoid(runtime::OpRegistry& registry) {
  registry.add(unary_schema<SigmoidFn>("Sigmoid"));
}

}  // namespace baton::kernels::cpu
