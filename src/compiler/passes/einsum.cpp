// einsum: an Einsum of two operands that is one batched matrix product (every label of each
// operand distinct, none summed within one operand alone, no size-1 broadcasting) -> Transpose
// each operand to [batch, free, summed] / [batch, summed, free] order, Reshape to 3-D, MatMul,
// Reshape to the batch and free labels, Transpose to the output's order. Transposes that would
// keep the order are left out. For GPU compiles only: the GPU runs MatMul on cuBLASLt and the
// Transposes as views, while it has no Einsum lowering; the CPU's Einsum kernel computes the
// same contraction directly. Static shapes only (the Reshapes' sizes are constants).
#include "ops/einsum.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {
namespace {

// The positions of `labels` among `dims` (each label once in dims).
std::vector<int64_t> positions(const std::vector<int>& dims, const std::vector<int>& labels) {
  std::vector<int64_t> out;
  for (int l : labels) {
    out.push_back(std::find(dims.begin(), dims.end(), l) - dims.begin());
  }
  return out;
}

bool identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

std::vector<uint8_t> int64_bytes(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(int64_t));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

int64_t product_of(const ops::EinsumPlan& p, const std::vector<int>& labels) {
  int64_t n = 1;
  for (int l : labels) n *= p.label_sizes[static_cast<size_t>(l)];
  return n;
}

}  // namespace

Result<size_t> rewrite_einsum_as_matmul(Graph& graph) {
  const size_t original = graph.nodes.size();
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  for (size_t n = 0; n < original; ++n) {
    const IrNode& node = graph.nodes[n];
    if (node.dead || !node.domain.empty() || node.op_type != "Einsum") continue;
    if (node.inputs.size() != 2 || node.outputs.size() != 1) continue;
    const int a = node.inputs[0], b = node.inputs[1], y = node.outputs[0];
    const DType t = graph.values[y].dtype;
    if (t != DType::Float32 && t != DType::Float16 && t != DType::BFloat16) continue;
    if (is_dynamic(graph.values[a]) || is_dynamic(graph.values[b]) || is_dynamic(graph.values[y])) {
      continue;
    }
    // Nothing to multiply (an empty operand) stays an Einsum: its CPU kernel writes the zeros.
    bool empty = false;
    for (int v : {a, b, y}) {
      for (int64_t d : graph.values[v].sizes) empty = empty || d == 0;
    }
    if (empty) continue;
    const std::vector<int64_t> sa = graph.values[a].sizes, sb = graph.values[b].sizes;
    const std::span<const int64_t> shapes[] = {sa, sb};
    auto planned = ops::plan_einsum(node.attr_string("equation"), shapes, node.describe());
    if (!planned.ok()) continue;
    const ops::EinsumPlan& plan = *planned;
    const ops::EinsumContraction c = ops::plan_contraction(plan, shapes);
    // One product, each operand's every dimension a label of its own that the product uses.
    if (c.pairs.size() != 1) continue;
    bool plain = c.result_labels.size() == plan.output_labels.size();
    for (size_t i = 0; i < 2 && plain; ++i) {
      const auto& r = c.reduces[i];
      plain = r.kept == r.labels && r.labels.size() == plan.input_labels[i].size();
    }
    if (!plain) continue;
    const ops::EinsumContraction::Pair& p = c.pairs[0];
    std::vector<int> a_order = p.batch, b_order = p.batch, mid = p.batch;
    a_order.insert(a_order.end(), p.left.begin(), p.left.end());
    a_order.insert(a_order.end(), p.summed.begin(), p.summed.end());
    b_order.insert(b_order.end(), p.summed.begin(), p.summed.end());
    b_order.insert(b_order.end(), p.right.begin(), p.right.end());
    mid.insert(mid.end(), p.left.begin(), p.left.end());
    mid.insert(mid.end(), p.right.begin(), p.right.end());
    if (a_order.size() != sa.size() || b_order.size() != sb.size()) continue;
    const std::vector<int64_t> perm_a = positions(plan.input_labels[0], a_order);
    const std::vector<int64_t> perm_b = positions(plan.input_labels[1], b_order);
    const std::vector<int64_t> perm_y = positions(mid, plan.output_labels);
    const int64_t batch = product_of(plan, p.batch), left = product_of(plan, p.left),
                  summed = product_of(plan, p.summed), right = product_of(plan, p.right);
    std::vector<int64_t> mid_sizes;
    for (int l : mid) mid_sizes.push_back(plan.label_sizes[static_cast<size_t>(l)]);
    const int nodes[] = {static_cast<int>(n)};
    if (!claim(graph, taken, nodes)) continue;
    // Copies: add_value, add_constant and add_node grow graph.values and graph.nodes.
    const std::string name = node.name;
    const std::string base = graph.values[y].name;
    int step = 0;
    auto fresh = [&](const char* what) {
      return add_value(graph, fmt::format("{}/einsum_{}{}", base, what, step++));
    };
    auto transpose = [&](int v, const std::vector<int64_t>& perm, int out) -> Result<int> {
      if (out < 0) out = fresh("t");
      BATON_TRY(add_node(graph, NewNode{name + fmt::format("/transpose{}", step),
                                        "Transpose",
                                        "",
                                        13,
                                        {v},
                                        {out},
                                        {{"perm", ops::AttrValue::of_ints(perm)}}}));
      return out;
    };
    auto reshape = [&](int v, const std::vector<int64_t>& sizes, int out) -> Result<int> {
      const int shape =
          add_constant(graph, fmt::format("{}/einsum_shape{}", base, step), DType::Int64,
                       {static_cast<int64_t>(sizes.size())}, int64_bytes(sizes));
      if (out < 0) out = fresh("r");
      BATON_TRY(add_node(
          graph,
          NewNode{
              name + fmt::format("/reshape{}", step), "Reshape", "", 13, {v, shape}, {out}, {}}));
      return out;
    };
    int ta = a, tb = b;
    if (!identity(perm_a)) {
      BATON_ASSIGN_OR_RETURN(ta, transpose(a, perm_a, -1));
    }
    if (!identity(perm_b)) {
      BATON_ASSIGN_OR_RETURN(tb, transpose(b, perm_b, -1));
    }
    BATON_ASSIGN_OR_RETURN(const int ra, reshape(ta, {batch, left, summed}, -1));
    BATON_ASSIGN_OR_RETURN(const int rb, reshape(tb, {batch, summed, right}, -1));
    const int product = fresh("m");
    BATON_TRY(
        add_node(graph, NewNode{name + "/matmul", "MatMul", "", 13, {ra, rb}, {product}, {}}));
    if (identity(perm_y)) {
      BATON_TRY(reshape(product, mid_sizes, y).status());
    } else {
      BATON_ASSIGN_OR_RETURN(const int unflat, reshape(product, mid_sizes, -1));
      BATON_TRY(transpose(unflat, perm_y, y).status());
    }
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
