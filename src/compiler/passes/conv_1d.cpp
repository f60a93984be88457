// conv-1d: a 1-D Conv or ConvTranspose (X [N, C, L], constant W [M, C/group, k] or
// [C, M/group, k]) -> Unsqueeze X to [N, C, 1, L], the same op in 2-D with W as [.., .., 1, k]
// (the same bytes) and the window's attributes given a leading 1 (kernel 1, stride 1, dilation 1,
// no padding and no output padding along the new axis), then Squeeze back.
// The GPU's convolutions are 2-D (cuDNN's NHWC graphs, the depthwise and grouped kernels): this
// is how Whisper's and wav2vec's 1-D convolutions reach them. It runs only for GPU compiles (the
// CPU's convolution takes every rank directly, and a CPU compile keeps the model as written).
// Unsqueeze and Squeeze are opset 13's (axes as an input), whatever the model's opset: both are
// views on every backend.
#include <cstring>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

Result<size_t> rewrite_conv_1d(Graph& graph) {
  const size_t original = graph.nodes.size();
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  for (size_t n = 0; n < original; ++n) {
    const IrNode& conv = graph.nodes[n];
    if (conv.dead || !conv.domain.empty() ||
        (conv.op_type != "Conv" && conv.op_type != "ConvTranspose")) {
      continue;
    }
    if (conv.inputs.size() < 2 || conv.outputs.size() != 1) continue;
    const int x = conv.inputs[0], w = conv.inputs[1], y = conv.outputs[0];
    if (graph.values[x].sizes.size() != 3 || !graph.values[w].constant) continue;
    NewNode node = copy_of(conv);
    // The window along the new leading axis: one element, no stride, no padding. The canonical
    // form (ops/conv.cpp) has every one of these attributes, pads as [begin, end].
    for (auto& [name, value] : node.attrs) {
      if (name == "kernel_shape" || name == "strides" || name == "dilations") {
        value.ints.insert(value.ints.begin(), 1);
      } else if (name == "pads" && value.ints.size() == 2) {
        value.ints = {0, value.ints[0], 0, value.ints[1]};
      } else if (name == "output_padding") {
        value.ints.insert(value.ints.begin(), 0);
      }
    }
    const int nodes[] = {static_cast<int>(n)};
    if (!claim(graph, taken, nodes)) continue;
    // Copies: add_constant, add_value and add_node grow graph.values and graph.nodes.
    const IrValue wv = graph.values[w];
    const std::string conv_name = conv.name;
    const std::string base = graph.values[y].name;
    const int axes = add_constant(graph, base + "/axes_2d", DType::Int64, {1},
                                  std::vector<uint8_t>{2, 0, 0, 0, 0, 0, 0, 0});
    const int w2 = add_constant(graph, base + "/W_2d", wv.dtype,
                                {wv.sizes[0], wv.sizes[1], 1, wv.sizes[2]}, *wv.constant);
    const int x2 = add_value(graph, base + "/input_2d");
    const int y2 = add_value(graph, base + "/output_2d");
    BATON_TRY(
        add_node(graph, NewNode{conv_name + "/to_2d", "Unsqueeze", "", 13, {x, axes}, {x2}, {}}));
    node.inputs[0] = x2;
    node.inputs[1] = w2;
    node.outputs = {y2};
    BATON_TRY(add_node(graph, std::move(node)));
    BATON_TRY(
        add_node(graph, NewNode{conv_name + "/to_1d", "Squeeze", "", 13, {y2, axes}, {y}, {}}));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
