// gelu: GELU written out as elementwise ops -> ONNX Gelu (opset 20 semantics, whatever the
// model's opset; its CPU kernel and GPU lowering exist).
//
// The exporters write 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
// x^3))) in several orders (Div or Mul by 1/sqrt 2, the 0.5 first or last). Instead of listing the
// orders, the pass finds candidate subgraphs structurally and checks them numerically: around each
// Erf or Tanh it takes a root value x and the smallest single-output subgraph of elementwise ops
// on x and scalar constants that contains the Erf (Tanh) and whose intermediate values nothing
// else reads, evaluates it in double on probe points and compares it with GELU. Only an exact
// match (to the precision of the constants' dtype) is rewritten; anything else is left as it is.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "ops/elementwise.h"

namespace baton::compiler {
namespace {

constexpr size_t kMaxChain = 12;  // nodes in a candidate subgraph
constexpr int kMaxRootDepth = 5;  // how far above the Erf (Tanh) the root may be
constexpr double kProbes[] = {-5.0, -3.0, -2.0, -1.5, -1.0, -0.5, -0.25, -0.1, 0.0,
                              0.1,  0.3,  0.7,  1.0,  1.3,  2.0,  3.0,   5.0};

bool is_float(DType t) { return ops::kFloatTypes.contains(t); }

// Elementwise ops the probe evaluates (rows of the elementwise table with a float result and no
// attributes, evaluated through the table: ops::evaluate_elementwise), by arity; 0 for others.
int evaluable_arity(const IrNode& n) {
  if (!n.domain.empty() || n.outputs.size() != 1) return 0;
  const ops::ElementwiseRow* row = ops::find_elementwise(n.op_type);
  if (row == nullptr || row->out == ops::ElementwiseOut::Bool || row->num_attrs != 0 ||
      !row->types.contains(DType::Float32)) {
    return 0;
  }
  return row->arity;
}

double gelu(double x, bool tanh_form) {
  if (tanh_form) {
    return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
}

class GeluMatcher {
 public:
  GeluMatcher(Graph& graph, const Uses& uses) : g_(graph), uses_(uses) {}

  // The nodes of a GELU around `center` (an Erf or Tanh node) and its root, if there is one.
  bool match(int center, int& root, std::vector<int>& nodes, int& out) {
    const bool tanh_form = g_.nodes[center].op_type == "Tanh";
    // Candidate roots, nearest first: the values above the Erf (Tanh) through the non-constant
    // inputs of elementwise producers, up to kMaxRootDepth levels.
    std::vector<int> level = {g_.nodes[center].inputs[0]}, seen;
    for (int depth = 0; depth < kMaxRootDepth && !level.empty(); ++depth) {
      std::vector<int> next;
      for (int value : level) {
        if (value < 0 || std::find(seen.begin(), seen.end(), value) != seen.end()) continue;
        seen.push_back(value);
        if (try_root(value, center, tanh_form, nodes, out)) {
          root = value;
          return true;
        }
        const int p = g_.values[value].producer;
        if (p < 0 || g_.nodes[p].dead || evaluable_arity(g_.nodes[p]) == 0) continue;
        for (int in : g_.nodes[p].inputs) {
          if (!scalar_constant(g_, in)) next.push_back(in);
        }
      }
      level = std::move(next);
    }
    return false;
  }

 private:
  // Grows the closure of elementwise nodes reading only `root`, closure values and scalar
  // constants, then tries each closure node after `center` as the GELU's output.
  bool try_root(int root, int center, bool tanh_form, std::vector<int>& nodes, int& out) {
    if (!is_float(g_.values[root].dtype)) return false;
    std::set<int> values = {root};
    std::vector<int> closure;
    std::set<int> frontier(uses_.consumers(root).begin(), uses_.consumers(root).end());
    while (!frontier.empty() && closure.size() < kMaxChain) {
      const int n = *frontier.begin();  // lowest index first: topological
      frontier.erase(frontier.begin());
      const IrNode& node = g_.nodes[n];
      if (node.dead || evaluable_arity(node) == 0) continue;
      bool reads_closure = false, ok = true;
      for (int in : node.inputs) {
        if (values.count(in)) {
          reads_closure = true;
        } else if (!scalar_constant(g_, in)) {
          ok = false;
        }
      }
      if (!ok || !reads_closure) continue;
      closure.push_back(n);
      values.insert(node.outputs[0]);
      for (int c : uses_.consumers(node.outputs[0])) frontier.insert(c);
    }
    if (std::find(closure.begin(), closure.end(), center) == closure.end()) return false;
    for (int end : closure) {
      if (end < center) continue;
      std::vector<int> sub = ancestors(end, root, closure);
      if (std::find(sub.begin(), sub.end(), center) == sub.end()) continue;
      if (!internal_values_private(sub, end)) continue;
      if (!probe(sub, root, end, tanh_form)) continue;
      nodes = std::move(sub);
      out = g_.nodes[end].outputs[0];
      return true;
    }
    return false;
  }

  // The closure nodes `end` depends on (itself included), in topological order.
  std::vector<int> ancestors(int end, int root, const std::vector<int>& closure) {
    std::set<int> keep = {end};
    for (auto it = closure.rbegin(); it != closure.rend(); ++it) {
      if (!keep.count(*it)) continue;
      for (int in : g_.nodes[*it].inputs) {
        if (in == root || in < 0) continue;
        const int p = g_.values[in].producer;
        if (p >= 0 && std::find(closure.begin(), closure.end(), p) != closure.end()) keep.insert(p);
      }
    }
    return std::vector<int>(keep.begin(), keep.end());
  }

  // Every value the subgraph makes, except its output, is read only inside it.
  bool internal_values_private(const std::vector<int>& sub, int end) {
    for (int n : sub) {
      if (n == end) continue;
      if (!uses_.only_read_by(g_.nodes[n].outputs[0], sub)) return false;
    }
    return true;
  }

  bool probe(const std::vector<int>& sub, int root, int end, bool tanh_form) {
    const DType t = g_.values[root].dtype;
    const double tol = t == DType::Float16 || t == DType::BFloat16 ? 4e-3 : 2e-6;
    for (double x : kProbes) {
      std::map<int, double> at = {{root, x}};
      for (int n : sub) {
        const IrNode& node = g_.nodes[n];
        double args[2] = {0.0, 0.0};
        for (size_t i = 0; i < node.inputs.size() && i < 2; ++i) {
          const int in = node.inputs[i];
          auto it = at.find(in);
          args[i] = it != at.end() ? it->second : *scalar_constant(g_, in);
        }
        const std::optional<double> v = ops::evaluate_elementwise(node.op_type, args[0], args[1]);
        if (!v) return false;
        at[node.outputs[0]] = *v;
      }
      const double got = at[g_.nodes[end].outputs[0]], want = gelu(x, tanh_form);
      if (!(std::fabs(got - want) <= tol * (1.0 + std::fabs(want)))) return false;
    }
    return true;
  }

  Graph& g_;
  const Uses& uses_;
};

}  // namespace

Result<size_t> recognize_gelu(Graph& graph) {
  const Uses uses(graph);
  GeluMatcher matcher(graph, uses);
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t c = 0; c < original; ++c) {
    const IrNode& center = graph.nodes[c];
    if (center.dead || !center.domain.empty() ||
        (center.op_type != "Erf" && center.op_type != "Tanh")) {
      continue;
    }
    int root = -1, out = -1;
    std::vector<int> nodes;
    if (!matcher.match(static_cast<int>(c), root, nodes, out)) continue;
    const bool tanh_form = center.op_type == "Tanh";
    const std::string name = graph.nodes[c].name + "/gelu";
    if (!claim(graph, taken, nodes)) continue;
    BATON_TRY(add_node(
        graph, NewNode{name,
                       "Gelu",
                       "",
                       20,
                       {root},
                       {out},
                       {{"approximate", ops::AttrValue::of_string(tanh_form ? "tanh" : "none")}}}));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
