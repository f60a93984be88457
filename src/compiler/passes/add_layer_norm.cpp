// add-layernorm: LayerNormalization(Add(X, R), Scale, B) -> baton AddLayerNorm(X, R, Scale, B),
// when X and R have the normalized input's shape (no broadcasting) and the LayerNormalization
// has no Mean / InvStdDev outputs. When anything else reads the sum (the residual stream of a
// pre-norm transformer), the fused op produces it too, as its Sum output.
#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

Result<size_t> fuse_add_layer_norm(Graph& graph) {
  const Uses uses(graph);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t l = 0; l < original; ++l) {
    const IrNode& ln = graph.nodes[l];
    if (ln.dead || ln.op_type != "LayerNormalization" || !ln.domain.empty() ||
        ln.outputs.size() != 1) {
      continue;
    }
    const int sum = ln.inputs[0];
    const int add = producer_of(graph, sum, "Add");
    if (add < 0) continue;
    const int x = graph.nodes[add].inputs[0], r = graph.nodes[add].inputs[1];
    if (!same_shape(graph.values[x], graph.values[sum]) ||
        !same_shape(graph.values[r], graph.values[sum]))
      continue;
    const bool keep_sum = !(uses.single_use(sum));
    std::vector<int> inputs = {x, r, ln.inputs[1]};
    if (ln.inputs.size() > 2 && ln.inputs[2] >= 0) inputs.push_back(ln.inputs[2]);
    std::vector<int> outputs = {ln.outputs[0]};
    if (keep_sum) outputs.push_back(sum);
    const std::string name = ln.name + "/add";
    const int64_t axis = ln.attr_int("axis");
    const double epsilon = ln.attr_float("epsilon");
    graph.nodes[l].dead = true;
    graph.nodes[add].dead = true;
    BATON_TRY(add_node(graph, NewNode{name,
                                      "AddLayerNorm",
                                      "baton",
                                      1,
                                      std::move(inputs),
                                      std::move(outputs),
                                      {{"axis", ops::AttrValue::of_int(axis)},
                                       {"epsilon", ops::AttrValue::of_float(epsilon)}}}));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
