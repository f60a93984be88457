// pow-square: Pow(x, 2) with a constant scalar exponent 2 and a float x -> Mul(x, x). The exporters
// write RMSNorm's and T5's variance as Pow(x, 2); the CPU kernel computes a Pow through double
// precision std::pow for every element, and the GPU's through powf, where x * x is one multiply.
// The result is the same to the bit: the CPU's Pow squares the value exactly in double (a float's
// 24-bit significand squared fits in 53 bits) and rounds once to the stored type, which is what
// the multiply does (IEEE 754), NaN, infinities and signed zeros included. Only that exponent:
// x^0.5 as a square root differs at -0 and -inf, and x^3 as two multiplies rounds twice.
#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

Result<size_t> rewrite_pow_square(Graph& graph) {
  const size_t original = graph.nodes.size();
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  for (size_t n = 0; n < original; ++n) {
    const IrNode& node = graph.nodes[n];
    if (node.dead || !node.domain.empty() || node.op_type != "Pow") continue;
    if (node.inputs.size() != 2 || node.outputs.size() != 1) continue;
    const int x = node.inputs[0], y = node.outputs[0];
    const DType t = graph.values[x].dtype;
    // float64 stays a Pow: its std::pow is not promised to be correctly rounded.
    if (t != DType::Float32 && t != DType::Float16 && t != DType::BFloat16) continue;
    const std::optional<double> exponent = scalar_constant(graph, node.inputs[1]);
    if (!exponent || *exponent != 2.0) continue;
    if (graph.values[y].dtype != t || !same_shape(graph.values[x], graph.values[y])) continue;
    NewNode mul{node.name + "/square", "Mul", "", 0, {x, x}, {y}, {}};
    const int nodes[] = {static_cast<int>(n)};
    if (!claim(graph, taken, nodes)) continue;
    BATON_TRY(add_node(graph, std::move(mul)));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
