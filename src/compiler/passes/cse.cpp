// cse: nodes that compute the same thing once. Two live nodes are the same computation when they
// have the same op (domain, type, opset), equal bound attributes and the same inputs, where two
// constants of the same dtype, shape and bytes count as the same input. The later node is
// dropped and its readers read the earlier node's outputs. The exporters repeat work per layer
// that depends only on the model's inputs: BERT turns the attention mask into an additive bias
// once per layer (`Where(mask, 0, -inf)` with each layer's own copy of the two constants), which
// on the GPU cost two kernels per layer.
//
// Not merged: ops whose result is random (RandomNormal, Bernoulli, ...), and nodes with an output
// that is a graph output (each graph output keeps its own value).
#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {
namespace {

bool random_op(const IrNode& n) {
  static constexpr std::array<std::string_view, 7> kRandom = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Bernoulli",    "Multinomial",   "Dropout"};
  return n.domain.empty() && std::find(kRandom.begin(), kRandom.end(), n.op_type) != kRandom.end();
}

// One id per distinct constant (dtype, sizes, bytes): the first value holding it.
class ConstantIds {
 public:
  explicit ConstantIds(const Graph& graph) : graph_(graph) {}

  int canonical(int v) {
    const IrValue& value = graph_.values[v];
    if (!value.constant) return v;
    const std::vector<uint8_t>& bytes = *value.constant;
    const size_t hash = std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    std::vector<int>& same_hash = by_hash_[hash];
    for (int other : same_hash) {
      const IrValue& o = graph_.values[other];
      if (o.dtype == value.dtype && o.sizes == value.sizes &&
          (o.constant == value.constant || *o.constant == bytes)) {
        return other;
      }
    }
    same_hash.push_back(v);
    return v;
  }

 private:
  const Graph& graph_;
  std::unordered_map<size_t, std::vector<int>> by_hash_;
};

}  // namespace

Result<size_t> eliminate_common_subexpressions(Graph& graph) {
  // Readers after their producers: a merged node's readers are rewritten when they are reached.
  BATON_TRY(sort_topologically(graph));
  const Uses uses(graph);
  ConstantIds constants(graph);
  // replaced[v]: the value that stands for v (v itself unless v's producer was merged).
  std::vector<int> replaced(graph.values.size());
  for (size_t v = 0; v < replaced.size(); ++v) replaced[v] = static_cast<int>(v);
  // Earlier nodes by (op type, domain, canonical inputs); attributes compared on a hit.
  std::map<std::tuple<std::string, std::string, std::vector<int>>, std::vector<int>> seen;
  size_t merged = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    IrNode& n = graph.nodes[i];
    if (n.dead) continue;
    for (int& in : n.inputs) {
      if (in >= 0) in = replaced[in];
    }
    if (random_op(n) || n.outputs.empty()) continue;
    std::vector<int> key_inputs;
    key_inputs.reserve(n.inputs.size());
    for (int in : n.inputs) key_inputs.push_back(in >= 0 ? constants.canonical(in) : -1);
    std::vector<int>& earlier = seen[{n.op_type, n.domain, std::move(key_inputs)}];
    const bool graph_output = std::any_of(n.outputs.begin(), n.outputs.end(),
                                          [&](int o) { return o >= 0 && uses.is_output(o); });
    const IrNode* same = nullptr;
    for (int e : earlier) {
      const IrNode& m = graph.nodes[e];
      if (m.opset == n.opset && m.def == n.def && m.attrs == n.attrs &&
          m.outputs.size() == n.outputs.size()) {
        bool outputs_match = true;
        for (size_t o = 0; o < n.outputs.size(); ++o) {
          // An output the later node has must exist on the earlier one.
          outputs_match &= n.outputs[o] < 0 || m.outputs[o] >= 0;
        }
        if (outputs_match) {
          same = &m;
          break;
        }
      }
    }
    // A data-dependent size (NonZero's count) is a symbol of its own whose source is this node's
    // output, and later sizes name it: merging would leave that symbol without its kernel.
    const bool data_source = std::any_of(n.outputs.begin(), n.outputs.end(), [&](int o) {
      for (size_t s = 0; o >= 0 && s < graph.symbols.num_symbols(); ++s) {
        if (graph.symbols.symbol(s).source == o) return true;
      }
      return false;
    });
    if (same == nullptr || graph_output || data_source) {
      earlier.push_back(static_cast<int>(i));
      continue;
    }
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (n.outputs[o] >= 0) replaced[n.outputs[o]] = same->outputs[o];
    }
    n.dead = true;
    ++merged;
  }
  return merged;
}

}  // namespace baton::compiler
