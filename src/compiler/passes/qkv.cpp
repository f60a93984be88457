// qkv: Linears that read the same X with constant weights (and all or none with constant biases)
// -> one Linear whose W and B are theirs concatenated along N, with one output per original
// (`splits`). Attention's Q, K and V projections become one GEMM that reads X once (on the GPU,
// one cuBLASLt call whose outputs are strided views).
#include <algorithm>
#include <map>
#include <tuple>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {
namespace {

bool fusable(const Graph& graph, const IrNode& n) {
  if (n.dead || n.op_type != "Linear" || n.domain != "baton" || n.outputs.size() != 1) return false;
  // W [K, N] only: the projections' weights are concatenated along N.
  if (n.attr_int("transW") != 0 || !n.attr_string("activation").empty()) return false;
  if (!graph.values[n.inputs[1]].constant) return false;
  return n.inputs.size() < 3 || n.inputs[2] < 0 || graph.values[n.inputs[2]].constant != nullptr;
}

bool has_bias(const IrNode& n) { return n.inputs.size() > 2 && n.inputs[2] >= 0; }

}  // namespace

Result<size_t> fuse_shared_input_linears(Graph& graph) {
  // Candidates by (X, dtype, K, bias or not), in graph order.
  std::map<std::tuple<int, DType, int64_t, bool>, std::vector<int>> groups;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const IrNode& n = graph.nodes[i];
    if (!fusable(graph, n)) continue;
    const IrValue& w = graph.values[n.inputs[1]];
    groups[{n.inputs[0], w.dtype, w.sizes[0], has_bias(n)}].push_back(static_cast<int>(i));
  }
  size_t rewritten = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const auto& [x, dtype, k, biased] = key;
    const size_t elem = dtype_size(dtype);
    int64_t total = 0;
    std::vector<int64_t> splits;
    std::vector<int> outputs;
    for (int m : members) {
      splits.push_back(graph.values[graph.nodes[m].inputs[1]].sizes[1]);
      total += splits.back();
      outputs.push_back(graph.nodes[m].outputs[0]);
    }
    // W rows are the originals' rows side by side; B is their biases one after another.
    std::vector<uint8_t> w(static_cast<size_t>(k * total) * elem), b;
    int64_t column = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      const std::vector<uint8_t>& wi = *graph.values[graph.nodes[members[i]].inputs[1]].constant;
      const auto row = static_cast<size_t>(splits[i]) * elem;
      for (int64_t r = 0; r < k; ++r) {
        std::copy_n(wi.data() + static_cast<size_t>(r) * row, row,
                    w.data() + (static_cast<size_t>(r * total + column)) * elem);
      }
      if (biased) {
        const std::vector<uint8_t>& bi = *graph.values[graph.nodes[members[i]].inputs[2]].constant;
        b.insert(b.end(), bi.begin(), bi.end());
      }
      column += splits[i];
    }
    const std::string name = graph.nodes[members[0]].name + "/fused";
    const int wv = add_constant(graph, name + "/W", dtype, {k, total}, std::move(w));
    const int bv = biased ? add_constant(graph, name + "/B", dtype, {total}, std::move(b)) : -1;
    for (int m : members) graph.nodes[m].dead = true;
    std::vector<int> inputs = {x, wv};
    if (biased) inputs.push_back(bv);
    BATON_TRY(add_node(graph, NewNode{name,
                                      "Linear",
                                      "baton",
                                      1,
                                      std::move(inputs),
                                      std::move(outputs),
                                      {{"splits", ops::AttrValue::of_ints(splits)}}}));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
