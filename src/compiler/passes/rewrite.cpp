#include "compiler/passes/rewrite.h"

#include <algorithm>
#include <queue>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/passes.h"
#include "compiler/shape_infer.h"
#include "kernels/cpu/dispatch.h"
#include "ops/shape.h"

namespace baton::compiler {

Uses::Uses(const Graph& graph) : consumers_(graph.values.size()), output_(graph.values.size(), 0) {
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const IrNode& node = graph.nodes[n];
    if (node.dead) continue;
    for (int v : node.inputs) {
      if (v >= 0) consumers_[v].push_back(static_cast<int>(n));
    }
  }
  for (int v : graph.outputs) output_[v] = 1;
}

bool Uses::only_read_by(int value, std::span<const int> nodes) const {
  if (is_output(value)) return false;
  return std::all_of(consumers_[value].begin(), consumers_[value].end(), [&](int c) {
    return std::find(nodes.begin(), nodes.end(), c) != nodes.end();
  });
}

int producer_of(const Graph& graph, int value, std::string_view op_type) {
  if (value < 0) return -1;
  const int p = graph.values[value].producer;
  if (p < 0) return -1;
  const IrNode& node = graph.nodes[p];
  return !node.dead && node.domain.empty() && node.op_type == op_type ? p : -1;
}

std::optional<std::vector<double>> constant_as_doubles(const Graph& graph, int value) {
  if (value < 0 || !graph.values[value].constant) return std::nullopt;
  const IrValue& v = graph.values[value];
  const auto numel = static_cast<size_t>(ops::product(v.sizes));
  std::vector<double> out(numel);
  const bool known = kernels::cpu::dispatch<DTypeSet{
      DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8, DType::Int16,
      DType::Int32, DType::Int64, DType::UInt8}
                                                .bits()>(v.dtype, [&]<typename S>() {
    const S* data = reinterpret_cast<const S*>(v.constant->data());
    for (size_t i = 0; i < numel; ++i) {
      out[i] = static_cast<double>(kernels::cpu::load(data[i]));
    }
  });
  if (!known) return std::nullopt;
  return out;
}

bool inference_batch_norm(const IrNode& bn) {
  if (bn.dead || !bn.domain.empty() || bn.op_type != "BatchNormalization") return false;
  for (size_t o = 1; o < bn.outputs.size(); ++o) {
    if (bn.outputs[o] >= 0) return false;
  }
  if (bn.def == nullptr || bn.inputs.size() != 5) return false;
  if (bn.def->attr_index("spatial") >= 0 && bn.attr_int("spatial") != 1) return false;
  if (bn.def->attr_index("is_test") >= 0 && bn.attr_int("is_test") == 0) return false;
  if (bn.def->attr_index("training_mode") >= 0 && bn.attr_int("training_mode") != 0) return false;
  return true;
}

std::optional<double> scalar_constant(const Graph& graph, int value) {
  if (value < 0 || !graph.values[value].constant) return std::nullopt;
  if (ops::product(graph.values[value].sizes) != 1) return std::nullopt;
  auto v = constant_as_doubles(graph, value);
  if (!v) return std::nullopt;
  return (*v)[0];
}

int row_bias(Graph& graph, int b, int64_t n) {
  const IrValue& v = graph.values[b];
  if (v.sizes.empty() || v.sizes.back() != n || ops::product(v.sizes) != n) return -1;
  if (v.sizes.size() == 1) return b;
  if (!v.constant) return -1;
  return add_constant(graph, v.name + "/bias", v.dtype, {n}, *v.constant);
}

NewNode copy_of(const IrNode& node) {
  NewNode n{node.name, node.op_type, node.domain, node.opset, node.inputs, node.outputs, {}};
  for (size_t a = 0; a < node.attrs.size(); ++a) {
    if (!node.attrs[a].none) n.attrs.emplace_back(node.def->attrs[a].name, node.attrs[a]);
  }
  return n;
}

std::optional<ops::Activation> activation_of(const IrNode& node) {
  if (node.dead || !node.domain.empty() || node.inputs.size() != 1 || node.outputs.size() != 1 ||
      !ops::is_activation(node.op_type) || node.op_type == "GeluTanh") {
    return std::nullopt;
  }
  if (node.op_type == "Gelu") {
    ops::Activation act;
    act.op = node.attr_string("approximate") == "tanh" ? "GeluTanh" : "Gelu";
    return act;
  }
  std::vector<double> params;
  for (const ops::ElementwiseAttr& a : ops::find_elementwise(node.op_type)->attributes()) {
    params.push_back(node.attr_float(a.name));
  }
  Result<ops::Activation> act = ops::make_activation(node.op_type, params, node.describe());
  if (!act.ok()) return std::nullopt;
  return std::move(act).value();
}

int add_value(Graph& graph, std::string name) {
  IrValue v;
  v.name = std::move(name);
  return graph.add_value(std::move(v));
}

int add_constant(Graph& graph, std::string name, DType dtype, std::vector<int64_t> sizes,
                 std::vector<uint8_t> bytes) {
  IrValue v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.sizes = std::move(sizes);
  v.shape_known = true;
  v.constant = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return graph.add_value(std::move(v));
}

Result<int> add_node(Graph& graph, NewNode spec) {
  IrNode node;
  node.name = std::move(spec.name);
  node.op_type = std::move(spec.op_type);
  node.domain = std::move(spec.domain);
  node.opset = spec.opset != 0 ? spec.opset : node.domain.empty() ? graph.opset : 1;
  node.inputs = std::move(spec.inputs);
  node.outputs = std::move(spec.outputs);
  node.def = ops::op_registry().find(node.op_type, node.domain, node.opset);
  BATON_CHECK_OR_RETURN(node.def != nullptr, Internal,
                        "optimizer: no definition of {} (domain '{}') at opset {} for node '{}'",
                        node.op_type, node.domain, node.opset, node.name);
  std::vector<ops::NamedAttr> named;
  for (auto& [name, value] : spec.attrs) {
    named.push_back(ops::NamedAttr{name, "", std::move(value)});
  }
  BATON_ASSIGN_OR_RETURN(node.attrs, ops::bind_attributes(*node.def, named, node.describe()));
  BATON_ASSIGN_OR_RETURN(NodeShapes shapes, infer_node_shapes(graph, node));
  const int index = static_cast<int>(graph.nodes.size());
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    IrValue& v = graph.values[node.outputs[o]];
    if (v.shape_known) {
      // In a dynamic graph the expressions must agree too: equal upper bounds are not enough.
      BATON_CHECK_OR_RETURN(v.dtype == shapes.outputs[o].dtype &&
                                v.sizes == shapes.outputs[o].sizes && v.dims == shapes.dims[o],
                            Internal, "optimizer: {} would make '{}' {} {}, but it is {} {}",
                            node.describe(), v.name, dtype_name(shapes.outputs[o].dtype),
                            shape_to_string(shapes.outputs[o].sizes), dtype_name(v.dtype),
                            shape_text(graph, v));
    }
    v.producer = index;
  }
  set_output_shapes(graph, node, std::move(shapes));
  graph.nodes.push_back(std::move(node));
  return index;
}

bool claim(Graph& graph, std::vector<uint8_t>& taken, std::span<const int> nodes) {
  if (std::any_of(nodes.begin(), nodes.end(), [&](int n) { return taken[n] != 0; })) return false;
  for (int n : nodes) {
    taken[n] = 1;
    graph.nodes[n].dead = true;
  }
  return true;
}

Status sort_topologically(Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> readers(n);
  for (size_t i = 0; i < n; ++i) {
    const IrNode& node = graph.nodes[i];
    if (node.dead) continue;
    for (int v : node.inputs) {
      if (v < 0) continue;
      const int p = graph.values[v].producer;
      if (p >= 0 && !graph.nodes[p].dead) {
        ++pending[i];
        readers[p].push_back(static_cast<int>(i));
      }
    }
  }
  // Smallest original index first, so an already ordered graph keeps its order.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  size_t live = 0;
  for (size_t i = 0; i < n; ++i) {
    if (graph.nodes[i].dead) continue;
    ++live;
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(live);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int r : readers[i]) {
      if (--pending[r] == 0) ready.push(r);
    }
  }
  BATON_CHECK_OR_RETURN(order.size() == live, Internal,
                        "optimizer: the rewritten graph has a cycle ({} of {} nodes ordered)",
                        order.size(), live);
  std::vector<IrNode> nodes;
  nodes.reserve(order.size());
  for (int i : order) nodes.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(nodes);
  for (IrValue& v : graph.values) {
    if (v.producer >= 0) v.producer = -1;
  }
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int o : graph.nodes[i].outputs) {
      if (o >= 0) graph.values[o].producer = static_cast<int>(i);
    }
  }
  return Status();
}

}  // namespace baton::compiler
