// attention: the scaled-dot-product attention both torch.onnx exporters write -> baton
// Attention (ops/attention.cpp).
//
// The pattern, from the Softmax outwards (ENVIRONMENT.md):
//   Q' = Q * c1 (or / c1)                      optional, scalar constants, any number
//   Kt' = Kt * c2 (or / c2)                    Kt [..., D, Sk]; or K [..., Sk, D] through a
//                                              Transpose that swaps the last two dimensions
//   S = MatMul(Q', Kt') [* c3 | / c3]
//   S = Add(S, M) | Where(B, S, fill)          optional mask: additive, or boolean select
//   P = Softmax(S, axis = -1)
//   P = Where(IsNaN(P), 0, P)                  optional
//   Y = MatMul(P, V)
// Every intermediate value must be read only inside the pattern, Q, K and V must have one rank
// and the same leading dimensions, and the mask must broadcast to the scores; otherwise the graph
// is left as it is.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "ops/shape.h"

namespace baton::compiler {
namespace {

class AttentionMatcher {
 public:
  AttentionMatcher(Graph& graph, const Uses& uses) : g_(graph), uses_(uses) {}

  struct Match {
    int q = -1, k = -1, v = -1, mask = -1, out = -1;
    bool k_transposed = true;
    double scale = 1.0;
    std::string mask_kind = "none";
    double fill = 0.0;
    bool nan_to_zero = false;
    std::vector<int> nodes;
  };

  bool match(int softmax, Match& m) {
    m = Match{};
    const IrNode& sm = g_.nodes[softmax];
    const int rank = static_cast<int>(g_.values[sm.inputs[0]].sizes.size());
    if (rank < 2 || sm.attr_int("axis") != rank - 1) return false;
    m.nodes.push_back(softmax);

    // The mask.
    int scores = sm.inputs[0];
    if (!uses_.single_use(scores)) return false;
    if (int add = producer_of(g_, scores, "Add"); add >= 0) {
      const IrNode& a = g_.nodes[add];
      const int s = producer_of(g_, a.inputs[0], "MatMul") >= 0 || scaled(a.inputs[0]) ? 0 : 1;
      m.mask = a.inputs[1 - s];
      if (g_.values[m.mask].dtype != g_.values[scores].dtype) return false;
      m.mask_kind = "add";
      m.nodes.push_back(add);
      if (!same_shape(g_.values[a.inputs[s]], g_.values[scores])) return false;  // broadcasts
      scores = a.inputs[s];
    } else if (int where = producer_of(g_, scores, "Where"); where >= 0) {
      const IrNode& w = g_.nodes[where];
      const auto fill = scalar_constant(g_, w.inputs[2]);
      if (!fill || g_.values[w.inputs[0]].dtype != DType::Bool) return false;
      m.mask = w.inputs[0];
      m.mask_kind = "select";
      m.fill = *fill;
      m.nodes.push_back(where);
      if (!same_shape(g_.values[w.inputs[1]], g_.values[scores])) return false;  // broadcasts
      scores = w.inputs[1];
    }
    if (m.mask >= 0 && !uses_.single_use(scores)) return false;

    // Scale after the product, then the product.
    scores = absorb_scale(scores, m);
    const int mm1 = producer_of(g_, scores, "MatMul");
    if (mm1 < 0) return false;
    m.nodes.push_back(mm1);
    m.q = absorb_scale(g_.nodes[mm1].inputs[0], m);
    m.k = absorb_scale(g_.nodes[mm1].inputs[1], m);
    if (m.q < 0 || m.k < 0) return false;
    if (const int t = producer_of(g_, m.k, "Transpose");
        t >= 0 && swaps_last_two(t) && uses_.single_use(m.k)) {
      m.nodes.push_back(t);
      m.k = g_.nodes[t].inputs[0];
      m.k_transposed = false;
    }

    // After the softmax: Where(IsNaN(P), 0, P), then the product with V.
    int p = sm.outputs[0];
    const auto& readers = uses_.consumers(p);
    if (readers.size() == 2 && !uses_.is_output(p)) {
      int isnan = -1, where = -1;
      for (int r : readers) {
        const IrNode& n = g_.nodes[r];
        if (n.op_type == "IsNaN" && n.domain.empty()) isnan = r;
        if (n.op_type == "Where" && n.domain.empty()) where = r;
      }
      if (isnan < 0 || where < 0) return false;
      const IrNode& w = g_.nodes[where];
      const auto zero = scalar_constant(g_, w.inputs[1]);
      if (w.inputs[0] != g_.nodes[isnan].outputs[0] || w.inputs[2] != p || !zero || *zero != 0.0 ||
          !uses_.single_use(w.inputs[0])) {
        return false;
      }
      m.nan_to_zero = true;
      m.nodes.push_back(isnan);
      m.nodes.push_back(where);
      p = w.outputs[0];
    }
    if (!uses_.single_use(p)) return false;
    const int mm2 = uses_.consumers(p)[0];
    const IrNode& pv = g_.nodes[mm2];
    if (pv.dead || pv.op_type != "MatMul" || !pv.domain.empty() || pv.inputs[0] != p) return false;
    m.nodes.push_back(mm2);
    m.v = pv.inputs[1];
    m.out = pv.outputs[0];
    return shapes_fit(m);
  }

 private:
  bool scaled(int value) const {
    return producer_of(g_, value, "Mul") >= 0 || producer_of(g_, value, "Div") >= 0;
  }

  // Walks up through Mul / Div by scalar constants whose outputs only the pattern reads,
  // folding them into m.scale; returns the value above them.
  int absorb_scale(int value, Match& m) {
    while (value >= 0) {
      const int mul = producer_of(g_, value, "Mul");
      const int div = producer_of(g_, value, "Div");
      const int n = mul >= 0 ? mul : div;
      if (n < 0 || !uses_.single_use(value)) break;
      const IrNode& node = g_.nodes[n];
      int other = -1;
      std::optional<double> c;
      if (auto c1 = scalar_constant(g_, node.inputs[1])) {
        c = c1;
        other = node.inputs[0];
      } else if (auto c0 = scalar_constant(g_, node.inputs[0]); c0 && mul >= 0) {
        c = c0;
        other = node.inputs[1];
      }
      if (!c || *c == 0.0) break;
      // The scalar must not broadcast the value to a larger shape.
      if (!same_shape(g_.values[other], g_.values[value])) break;
      m.scale = mul >= 0 ? m.scale * *c : m.scale / *c;
      m.nodes.push_back(n);
      value = other;
    }
    return value;
  }

  bool swaps_last_two(int transpose) const {
    const auto& perm = g_.nodes[transpose].attr_ints("perm");
    const size_t r = perm.size();
    if (r < 2) return false;
    for (size_t i = 0; i + 2 < r; ++i) {
      if (perm[i] != static_cast<int64_t>(i)) return false;
    }
    return perm[r - 2] == static_cast<int64_t>(r - 1) && perm[r - 1] == static_cast<int64_t>(r - 2);
  }

  bool shapes_fit(const Match& m) const {
    const auto& q = g_.values[m.q].sizes;
    const auto& k = g_.values[m.k].sizes;
    const auto& v = g_.values[m.v].sizes;
    if (q.size() < 2 || k.size() != q.size() || v.size() != q.size()) return false;
    if (!std::equal(q.begin(), q.end() - 2, k.begin()) ||
        !std::equal(q.begin(), q.end() - 2, v.begin())) {
      return false;
    }
    // Dynamic: the batch dimensions must be the same expressions, not only the same maxima.
    const IrValue &qv = g_.values[m.q], &kv = g_.values[m.k], &vv = g_.values[m.v];
    for (size_t d = 0; d + 2 < q.size(); ++d) {
      if (dim_expr(g_, qv, d) != dim_expr(g_, kv, d) || dim_expr(g_, qv, d) != dim_expr(g_, vv, d))
        return false;
    }
    const DType t = g_.values[m.q].dtype;
    if (g_.values[m.k].dtype != t || g_.values[m.v].dtype != t) return false;
    if (!std::isfinite(m.scale)) return false;
    if (m.mask >= 0) {
      std::vector<int64_t> scores(q.begin(), q.end());
      scores.back() = m.k_transposed ? k.back() : k[k.size() - 2];
      if (!ops::broadcasts_to(g_.values[m.mask].sizes, scores)) return false;
    }
    // Every value the pattern makes, but its output, is read only inside it.
    for (int n : m.nodes) {
      for (int o : g_.nodes[n].outputs) {
        if (o != m.out && !uses_.only_read_by(o, m.nodes)) return false;
      }
    }
    return true;
  }

  Graph& g_;
  const Uses& uses_;
};

}  // namespace

Result<size_t> recognize_attention(Graph& graph) {
  const Uses uses(graph);
  AttentionMatcher matcher(graph, uses);
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t s = 0; s < original; ++s) {
    const IrNode& sm = graph.nodes[s];
    if (sm.dead || sm.op_type != "Softmax" || !sm.domain.empty()) continue;
    AttentionMatcher::Match m;
    if (!matcher.match(static_cast<int>(s), m)) continue;
    const std::string name = graph.nodes[s].name + "/attention";
    if (!claim(graph, taken, m.nodes)) continue;
    std::vector<int> inputs = {m.q, m.k, m.v};
    if (m.mask >= 0) inputs.push_back(m.mask);
    BATON_TRY(add_node(
        graph,
        NewNode{name,
                "Attention",
                "baton",
                1,
                std::move(inputs),
                {m.out},
                {{"scale", ops::AttrValue::of_float(m.scale)},
                 {"k_transposed", ops::AttrValue::of_int(m.k_transposed ? 1 : 0)},
                 {"mask_kind", ops::AttrValue::of_string(m.mask_kind)},
                 {"mask_fill",
                  ops::AttrValue::of_float(
                      m.mask_kind == "select" ? m.fill : -std::numeric_limits<double>::infinity())},
                 {"nan_to_zero", ops::AttrValue::of_int(m.nan_to_zero ? 1 : 0)}}}));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
