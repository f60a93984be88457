// add-layernorm: LayerNormalization(Add(X, R), Scale, B) -> baton AddLayerNorm(X, R, Scale, B),
// when X has the normalized input's shape and R either has it too or is broadcast over its
// leading dimensions (ops/layer_norm.h: GPT-2's position embedding [1, seq, hidden] added to the
// token embeddings [batch, seq, hidden], which a static compile folds into a constant of the full
// shape), and the LayerNormalization has no Mean / InvStdDev outputs. When anything else reads the
// sum (the residual stream of a pre-norm transformer), the fused op produces it too, as its Sum
// output.
#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {
namespace {

// R fits AddLayerNorm broadcast over X's leading dimensions (ops/layer_norm.h) at every size in
// range: after R's leading dimensions of size 1, its dimensions are X's last ones, expression for
// expression, covering at least the normalized ones.
bool residual_broadcasts(Graph& graph, const IrValue& r, const IrValue& x, int64_t axis) {
  const size_t rank = x.sizes.size();
  if (axis < 0 || static_cast<size_t>(axis) > rank) return false;
  const size_t normalized = rank - static_cast<size_t>(axis);
  size_t lead = 0;
  while (lead < r.sizes.size() && r.sizes.size() - lead > normalized &&
         graph.symbols.is_constant(dim_expr(graph, r, lead)) && r.sizes[lead] == 1) {
    ++lead;
  }
  const size_t kept = r.sizes.size() - lead;
  if (kept > rank || kept < normalized) return false;
  for (size_t i = 0; i < kept; ++i) {
    if (dim_expr(graph, r, lead + i) != dim_expr(graph, x, rank - kept + i)) return false;
  }
  return true;
}

}  // namespace

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
    int x = graph.nodes[add].inputs[0], r = graph.nodes[add].inputs[1];
    if (!same_shape(graph.values[x], graph.values[sum])) std::swap(x, r);
    const int64_t axis = ln.attr_int("axis");
    if (!same_shape(graph.values[x], graph.values[sum]) ||
        !(same_shape(graph.values[r], graph.values[sum]) ||
          residual_broadcasts(graph, graph.values[r], graph.values[sum], axis)))
      continue;
    const bool keep_sum = !(uses.single_use(sum));
    std::vector<int> inputs = {x, r, ln.inputs[1]};
    if (ln.inputs.size() > 2 && ln.inputs[2] >= 0) inputs.push_back(ln.inputs[2]);
    std::vector<int> outputs = {ln.outputs[0]};
    if (keep_sum) outputs.push_back(sum);
    const std::string name = ln.name + "/add";
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
