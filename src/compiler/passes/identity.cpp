// identity: nodes that copy their input unchanged -> Identity, or Reshape where only the shape
// changes; every backend runs both as views of the input (the GPU engine launches nothing for
// them). What the exporters write in BERT's and GPT-2's attention-mask chains: a Cast to the dtype
// the value already has, an Expand to the shape it already has, and a Gather of every index of an
// axis in order (constant indices 0, 1, ..., n - 1, of any shape: the result is the input's
// elements in their order, reshaped), each a kernel of its own before.
#include <cstring>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "ops/op_def.h"

namespace baton::compiler {
namespace {

// Gather(data, indices) with constant indices 0..n-1 (in any shape) along an axis of size n: the
// output is data's elements in their order.
bool gathers_everything(const Graph& graph, const IrNode& node) {
  if (node.inputs.size() != 2) return false;
  const IrValue& data = graph.values[node.inputs[0]];
  const IrValue& indices = graph.values[node.inputs[1]];
  if (data.sizes.empty()) return false;
  const int64_t rank = static_cast<int64_t>(data.sizes.size());
  int64_t axis = node.attr_int("axis");
  if (axis < 0) axis += rank;
  int64_t count = 1;
  for (int64_t d : indices.sizes) count *= d;
  if (axis < 0 || axis >= rank || data.sizes[axis] != count) return false;
  // A dynamic axis has `count` elements at its largest only.
  if (is_dynamic(data) && !graph.symbols.is_constant(data.dims[axis])) return false;
  const std::optional<std::vector<double>> values = constant_as_doubles(graph, node.inputs[1]);
  if (!values || static_cast<int64_t>(values->size()) != count) return false;
  const double n = static_cast<double>(count);
  for (size_t i = 0; i < values->size(); ++i) {
    const double v = (*values)[i] < 0 ? (*values)[i] + n : (*values)[i];
    if (v != static_cast<double>(i)) return false;
  }
  return true;
}

enum class Copy { None, Same, Reshaped };

// Whether `node` copies its input's elements in their order: unchanged (Same), or under another
// shape (Reshaped: a Gather of every index, whose indices' shape replaces the axis).
Copy copies_its_input(const Graph& graph, const IrNode& node) {
  if (!node.domain.empty() || node.inputs.empty() || node.outputs.size() != 1) return Copy::None;
  const int in = node.inputs[0], out = node.outputs[0];
  if (in < 0 || out < 0) return Copy::None;
  const IrValue& x = graph.values[in];
  const IrValue& y = graph.values[out];
  if (x.dtype != y.dtype) return Copy::None;
  if ((node.op_type == "Cast" || node.op_type == "Expand") && same_shape(x, y)) return Copy::Same;
  if (node.op_type == "Gather" && gathers_everything(graph, node))
    return same_shape(x, y) ? Copy::Same : is_dynamic(y) ? Copy::None : Copy::Reshaped;
  return Copy::None;
}

}  // namespace

Result<size_t> replace_copies_with_identity(Graph& graph) {
  // Baton defines Identity and Reshape from opset 13: an older model keeps its copies.
  if (ops::op_registry().find("Identity", "", graph.opset) == nullptr ||
      ops::op_registry().find("Reshape", "", graph.opset) == nullptr)
    return size_t{0};
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (graph.nodes[i].dead) continue;
    const Copy copy = copies_its_input(graph, graph.nodes[i]);
    if (copy == Copy::None) continue;
    const IrNode& node = graph.nodes[i];
    const int in = node.inputs[0], out = node.outputs[0];
    NewNode view{node.name + "/identity", "Identity", "", 0, {in}, {out}, {}};
    if (copy == Copy::Reshaped) {
      const std::vector<int64_t>& sizes = graph.values[out].sizes;
      std::vector<uint8_t> bytes(sizes.size() * sizeof(int64_t));
      std::memcpy(bytes.data(), sizes.data(), bytes.size());
      const int shape = add_constant(graph, node.name + "/shape", DType::Int64,
                                     {static_cast<int64_t>(sizes.size())}, std::move(bytes));
      view = NewNode{node.name + "/reshape", "Reshape", "", 0, {in, shape}, {out}, {}};
    }
    graph.nodes[i].dead = true;
    BATON_TRY(add_node(graph, std::move(view)));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
