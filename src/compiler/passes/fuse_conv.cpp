// fuse-conv: Conv, then a residual Add, then an activation -> baton FusedConv (ops/conv.cpp),
// Y = act(conv(X, W) + B + Z). Every backend reads the epilogue from the node: cuDNN's fused
// pointwise operations and the generated convolution kernels on the GPU, one pass over each
// output channel while it is in cache on the CPU.
//
// Either part may be missing. The Add's other input Z must have the convolution's shape (no
// broadcast) and not be a constant; the activation is any that ops/activation.h takes (a unary
// elementwise op of a float result, or Gelu), or SiLU written as Sigmoid(v) and Mul(v, Sigmoid(v))
// (EfficientNet's; the activation "Silu"). Each intermediate result must have no other reader.
// Runs after bn-conv, so that the folded BatchNormalization is already part of the Conv.
#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {
namespace {

// SiLU as the exporters write it, s = Sigmoid(v), y = Mul(v, s) (either operand order), with v
// read by those two nodes only and s by the Mul only: the Sigmoid's and the Mul's node indices.
std::optional<std::pair<int, int>> silu_of(const Graph& graph, const Uses& uses, int v) {
  const std::vector<int>& readers = uses.consumers(v);
  if (uses.is_output(v) || readers.size() != 2) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const IrNode& sigmoid = graph.nodes[readers[k]];
    const IrNode& mul = graph.nodes[readers[1 - k]];
    const auto live_onnx = [](const IrNode& n, std::string_view op) {
      return !n.dead && n.domain.empty() && n.op_type == op;
    };
    if (!live_onnx(sigmoid, "Sigmoid") || !live_onnx(mul, "Mul") || mul.inputs.size() != 2) {
      continue;
    }
    const int s = sigmoid.outputs[0];
    const bool pair =
        (mul.inputs[0] == v && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == v);
    if (pair && uses.single_use(s) && same_shape(graph.values[mul.outputs[0]], graph.values[v])) {
      return std::pair{readers[k], readers[1 - k]};
    }
  }
  return std::nullopt;
}

}  // namespace

Result<size_t> fuse_conv_epilogue(Graph& graph) {
  const Uses uses(graph);
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  // Last to first: when both inputs of a residual Add are convolutions (ResNet's downsampling
  // blocks), the one that runs later takes the Add, the other's output being ready by then.
  for (size_t c = graph.nodes.size(); c-- > 0;) {
    const IrNode& conv = graph.nodes[c];
    if (conv.dead || !conv.domain.empty() || conv.op_type != "Conv") continue;
    std::vector<int> nodes = {static_cast<int>(c)};
    int out = conv.outputs[0], residual = -1;
    const auto single_reader = [&](int v) {
      return uses.single_use(v) ? uses.consumers(v)[0] : -1;
    };
    if (const int add = single_reader(out); add >= 0 && graph.nodes[add].op_type == "Add" &&
                                            graph.nodes[add].domain.empty() &&
                                            !graph.nodes[add].dead) {
      const IrNode& an = graph.nodes[add];
      const int other = an.inputs[0] == out ? an.inputs[1] : an.inputs[0];
      if (other != out && !graph.values[other].constant &&
          same_shape(graph.values[other], graph.values[out]) &&
          graph.values[other].dtype == graph.values[out].dtype &&
          same_shape(graph.values[an.outputs[0]], graph.values[out])) {
        residual = other;
        nodes.push_back(add);
        out = an.outputs[0];
      }
    }
    std::optional<ops::Activation> act;
    if (const int reader = single_reader(out); reader >= 0) {
      act = activation_of(graph.nodes[reader]);
      if (act) {
        nodes.push_back(reader);
        out = graph.nodes[reader].outputs[0];
      }
    } else if (const std::optional<std::pair<int, int>> silu = silu_of(graph, uses, out)) {
      act = ops::Activation{.op = "Silu"};
      nodes.push_back(silu->first);
      nodes.push_back(silu->second);
      out = graph.nodes[silu->second].outputs[0];
    }
    if (nodes.size() == 1 || !claim(graph, taken, nodes)) continue;
    NewNode fused = copy_of(conv);
    fused.name = conv.name + "/fused";
    fused.op_type = "FusedConv";
    fused.domain = "baton";
    fused.opset = 1;
    fused.outputs = {out};
    fused.inputs.resize(3, -1);
    fused.inputs.push_back(residual);
    if (act) {
      fused.attrs.emplace_back("activation", ops::AttrValue::of_string(act->op));
      fused.attrs.emplace_back("activation_params", ops::AttrValue::of_floats(act->param_list()));
    }
    BATON_TRY(add_node(graph, std::move(fused)));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
