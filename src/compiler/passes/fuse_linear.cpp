// fuse-linear: a GEMM followed by Relu or Gelu -> baton Linear with that `activation`
// (ops/activation.h), so that every backend reads the fusion from the node instead of looking for
// it: cuBLASLt's ReLU and tanh-GELU epilogues and cuDNN's erf-GELU matmul on the GPU, one pass
// over each row on the CPU.
//
// The GEMM is a Linear of one output (the matmul-add pass's), a MatMul by a 2-D weight, or a Gemm
// that is a Linear (transA 0, alpha 1, C absent or a row of N values with beta 1; transB 1 becomes
// the Linear's transW, the weight kept as it is). The activation reads the GEMM's result directly,
// or through one view op (Reshape, Flatten, Squeeze, Unsqueeze: TorchScript's GPT-2 writes Gemm,
// Reshape, Gelu) that nothing else reads; the activation then moves before the view, which is the
// same values under another shape. Only these activations: they are what the GPU's GEMM epilogues
// take, so fusing another one would only move an elementwise kernel out of the runs it joins today.
#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "format/program_file.h"
#include "ops/shape.h"

namespace baton::compiler {
namespace {

bool gemm_epilogue_activation(const ops::Activation& act) {
  return act.op == "Relu" || act.op == "Gelu" || act.op == "GeluTanh";
}

// The Linear computing GEMM node `g` (without its activation): its inputs {X, W[, B]} (W [K, N],
// or [N, K] with `trans_w`, B [N]), or no inputs when `g` is not one.
struct LinearOf {
  std::vector<int> inputs;
  bool trans_w = false;
};
LinearOf linear_of(Graph& graph, int g) {
  const IrNode& node = graph.nodes[g];
  if (node.outputs.size() != 1) return {};
  if (node.domain == "baton" && node.op_type == "Linear") {
    if (!node.attr_string("activation").empty()) return {};
    return {node.inputs, node.attr_int("transW") != 0};
  }
  // A MatMul or Gemm of float tensors (Linear takes those only; an integer GEMM stays as it is).
  if (!node.domain.empty() || (node.op_type != "MatMul" && node.op_type != "Gemm") ||
      node.inputs.size() < 2 || node.inputs[0] < 0 || node.inputs[1] < 0 ||
      !ops::kFloatTypes.contains(graph.values[node.inputs[0]].dtype)) {
    return {};
  }
  const int x = node.inputs[0], w = node.inputs[1];
  const IrValue& wv = graph.values[w];
  if (node.op_type == "MatMul") {
    if (wv.sizes.size() != 2 || graph.values[x].sizes.empty()) return {};
    return {{x, w}};
  }
  if (node.attr_int("transA") != 0 || node.attr_float("alpha") != 1.0) return {};
  const bool trans_w = node.attr_int("transB") != 0;
  const int64_t n = wv.sizes[trans_w ? 0 : 1];
  if (node.inputs.size() < 3 || node.inputs[2] < 0) return {{x, w}, trans_w};
  // A constant C (the GPU's Linear reads its bias as weights) that is one row of N values.
  const int c = node.inputs[2];
  if (node.attr_float("beta") != 1.0 || !graph.values[c].constant) return {};
  const int bias = row_bias(graph, c, n);
  if (bias < 0) return {};
  return {{x, w, bias}, trans_w};
}

}  // namespace

Result<size_t> fuse_linear_activation(Graph& graph) {
  const Uses uses(graph);
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t a = 0; a < original; ++a) {
    const std::optional<ops::Activation> act = activation_of(graph.nodes[a]);
    if (!act || !gemm_epilogue_activation(*act)) continue;
    // The GEMM's result, and the view between it and the activation (-1: none).
    int product = graph.nodes[a].inputs[0], view = -1;
    if (!uses.single_use(product) || graph.values[product].producer < 0) continue;
    const IrNode& p = graph.nodes[graph.values[product].producer];
    if (format::is_view_op(p.domain, p.op_type)) {
      view = graph.values[product].producer;
      product = p.inputs[0];
      if (!uses.single_use(product) || graph.values[product].producer < 0) continue;
    }
    const int g = graph.values[product].producer;
    if (graph.nodes[g].dead) continue;
    const LinearOf linear_in = linear_of(graph, g);
    if (linear_in.inputs.empty()) continue;
    std::vector<int> nodes = {g, static_cast<int>(a)};
    if (view >= 0) nodes.push_back(view);
    if (!claim(graph, taken, nodes)) continue;
    const int out = graph.nodes[a].outputs[0];
    NewNode linear{graph.nodes[g].name + "/" + act->op, "Linear", "baton", 1, linear_in.inputs,
                   {view >= 0 ? product : out},         {}};
    linear.attrs.emplace_back("transW", ops::AttrValue::of_int(linear_in.trans_w ? 1 : 0));
    linear.attrs.emplace_back("activation", ops::AttrValue::of_string(act->op));
    linear.attrs.emplace_back("activation_params", ops::AttrValue::of_floats(act->param_list()));
    BATON_TRY(add_node(graph, std::move(linear)));
    if (view >= 0) {
      // The view now reads the activated values and writes the activation's output.
      NewNode moved = copy_of(graph.nodes[view]);
      moved.outputs = {out};
      BATON_TRY(add_node(graph, std::move(moved)));
    }
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
