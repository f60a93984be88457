// matmul-add: MatMul(X, W) followed by Add(., B) -> baton Linear(X, W, B), when W is 2-D, B has
// W's N elements along the last axis only (shape [N] or [1, ..., 1, N]), the Add does not
// broadcast the product, and nothing else reads the product. The biased GEMM is one library call
// on every backend (cuBLASLt's bias epilogue on the GPU).
#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "ops/shape.h"

namespace baton::compiler {

Result<size_t> fuse_matmul_add(Graph& graph) {
  const Uses uses(graph);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t a = 0; a < original; ++a) {
    if (graph.nodes[a].dead || graph.nodes[a].op_type != "Add" || !graph.nodes[a].domain.empty()) {
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      const IrNode& add = graph.nodes[a];
      const int product = add.inputs[side], b = add.inputs[1 - side];
      const int mm = producer_of(graph, product, "MatMul");
      if (mm < 0 || !uses.single_use(product)) continue;
      const int x = graph.nodes[mm].inputs[0], w = graph.nodes[mm].inputs[1];
      const IrValue& wv = graph.values[w];
      if (wv.sizes.size() != 2 || graph.values[x].sizes.empty()) continue;
      // Linear takes float tensors only: an integer MatMul and its Add stay as they are.
      if (!ops::kFloatTypes.contains(wv.dtype)) continue;
      if (!same_shape(graph.values[add.outputs[0]], graph.values[product])) continue;
      if (graph.values[b].dtype != wv.dtype) continue;
      const int bias = row_bias(graph, b, wv.sizes[1]);
      if (bias < 0) continue;
      const int out = graph.nodes[a].outputs[0];
      const std::string name = graph.nodes[mm].name + "/linear";
      graph.nodes[a].dead = true;
      graph.nodes[mm].dead = true;
      BATON_TRY(add_node(graph, NewNode{name, "Linear", "baton", 1, {x, w, bias}, {out}, {}}));
      ++rewritten;
      break;
    }
  }
  return rewritten;
}

}  // namespace baton::compiler
