#include "compiler/passes.h"

#include <algorithm>

#include "baton/core/check.h"

namespace baton::compiler {
namespace {

std::string_view expected_onnx_kind(runtime::ValueKind kind) {
  switch (kind) {
    case runtime::ValueKind::Int:
      return "INT";
    case runtime::ValueKind::Float:
      return "FLOAT";
    case runtime::ValueKind::String:
      return "STRING";
    case runtime::ValueKind::IntList:
      return "INTS";
    case runtime::ValueKind::FloatList:
      return "FLOATS";
    default:
      return "?";
  }
}

runtime::Value tensor_value(const IrValue& v) {
  TensorView view;
  view.data = v.constant ? const_cast<uint8_t*>(v.constant->data()) : nullptr;
  view.dtype = v.dtype;
  view.sizes = v.sizes;
  view.device = Device::cpu();
  return runtime::Value::from_tensor(view);
}

}  // namespace

Status check_supported(const Graph& graph, const runtime::OpRegistry& registry) {
  std::vector<std::string> problems;
  for (const IrNode& node : graph.nodes) {
    if (node.dead) continue;
    const std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
    const runtime::OpSchema* schema = node.domain.empty() ? registry.find(node.op_type) : nullptr;
    if (schema == nullptr) {
      problems.push_back(
          fmt::format("node '{}': op '{}' (domain '{}', opset {}) has no Baton "
                      "kernel",
                      node.name, node.op_type, domain, node.opset));
    } else if (node.opset < schema->min_opset) {
      problems.push_back(
          fmt::format("node '{}': op '{}' (domain '{}') is supported from opset {}, "
                      "the model uses opset {}",
                      node.name, node.op_type, domain, schema->min_opset, node.opset));
    }
  }
  if (problems.empty()) return Status();
  std::string message = fmt::format("'{}' uses {} unsupported node{}:", graph.source,
                                    problems.size(), problems.size() == 1 ? "" : "s");
  const size_t shown = std::min<size_t>(problems.size(), 20);
  for (size_t i = 0; i < shown; ++i) message += "\n  " + problems[i];
  if (shown < problems.size())
    message += fmt::format("\n  ... and {} more", problems.size() - shown);
  std::vector<std::string_view> names = registry.names();
  std::sort(names.begin(), names.end());
  message += "\nSupported ops:";
  for (std::string_view n : names) message += fmt::format(" {}", n);
  return BATON_ERROR(NotSupported, "{}", message);
}

Result<std::vector<runtime::Value>> bind_attributes(const IrNode& node,
                                                    const runtime::OpSchema& schema) {
  for (const IrAttribute& a : node.attributes) {
    const bool known = std::any_of(schema.attrs.begin(), schema.attrs.end(),
                                   [&](const runtime::AttrSpec& s) { return s.name == a.name; });
    BATON_CHECK_OR_RETURN(known, NotSupported,
                          "{}: attribute '{}' is not supported by Baton's {} (supported:{})",
                          node.describe(), a.name, schema.name, [&] {
                            std::string s;
                            for (const auto& spec : schema.attrs)
                              s += fmt::format(" {}", spec.name);
                            return s.empty() ? std::string(" none") : s;
                          }());
  }
  std::vector<runtime::Value> out;
  out.reserve(schema.attrs.size());
  for (const runtime::AttrSpec& spec : schema.attrs) {
    const IrAttribute* a = node.attribute(std::string(spec.name));
    if (a == nullptr) {
      BATON_CHECK_OR_RETURN(!spec.required, InvalidArgument,
                            "{} is missing its required attribute '{}'", node.describe(),
                            spec.name);
      if (spec.default_none) {
        out.push_back(runtime::Value::none());
        continue;
      }
      switch (spec.kind) {
        case runtime::ValueKind::Int:
          out.push_back(runtime::Value::from_int(spec.default_int));
          break;
        case runtime::ValueKind::Float:
          out.push_back(runtime::Value::from_float(spec.default_float));
          break;
        case runtime::ValueKind::String:
          out.push_back(runtime::Value::from_string(spec.default_string));
          break;
        case runtime::ValueKind::IntList:
          out.push_back(runtime::Value::from_ints({}));
          break;
        case runtime::ValueKind::FloatList:
          out.push_back(runtime::Value::from_floats({}));
          break;
        default:
          return BATON_ERROR(Internal,
                             "{}: schema attribute '{}' has a kind attributes cannot have",
                             schema.name, spec.name);
      }
      continue;
    }
    runtime::Value v;
    switch (spec.kind) {
      case runtime::ValueKind::Int:
        if (a->kind == IrAttribute::Kind::Int) v = runtime::Value::from_int(a->i);
        break;
      case runtime::ValueKind::Float:
        if (a->kind == IrAttribute::Kind::Float) v = runtime::Value::from_float(a->f);
        break;
      case runtime::ValueKind::String:
        if (a->kind == IrAttribute::Kind::String) v = runtime::Value::from_string(a->s);
        break;
      case runtime::ValueKind::IntList:
        if (a->kind == IrAttribute::Kind::Ints) v = runtime::Value::from_ints(a->ints);
        break;
      case runtime::ValueKind::FloatList:
        if (a->kind == IrAttribute::Kind::Floats) v = runtime::Value::from_floats(a->floats);
        break;
      default:
        break;
    }
    BATON_CHECK_OR_RETURN(v.kind == spec.kind, InvalidArgument,
                          "{}: attribute '{}' has ONNX type {}, expected {}", node.describe(),
                          spec.name, a->onnx_type, expected_onnx_kind(spec.kind));
    out.push_back(v);
  }
  return out;
}

Result<size_t> infer_and_fold(Graph& graph, const runtime::OpRegistry& registry) {
  size_t folded = 0;
  for (IrNode& node : graph.nodes) {
    if (node.dead) continue;
    const runtime::OpSchema* schema = registry.find(node.op_type);
    BATON_CHECK_OR_RETURN(schema != nullptr, Internal, "{} has no schema after the support check",
                          node.describe());
    std::vector<runtime::Value> inputs;
    bool all_constant = true;
    for (int id : node.inputs) {
      if (id < 0) {
        inputs.push_back(runtime::Value::none());
        continue;
      }
      const IrValue& v = graph.values[id];
      BATON_CHECK_OR_RETURN(v.shape_known, Internal, "{}: input '{}' has no shape yet",
                            node.describe(), v.name);
      inputs.push_back(tensor_value(v));
      all_constant = all_constant && v.constant != nullptr;
    }
    BATON_ASSIGN_OR_RETURN(std::vector<runtime::Value> attrs, bind_attributes(node, *schema));
    BATON_CHECK_OR_RETURN(
        std::all_of(node.outputs.begin(), node.outputs.end(), [](int o) { return o >= 0; }),
        NotSupported, "{}: optional outputs left unnamed are not supported", node.describe());
    std::vector<runtime::Value> outputs(node.outputs.size(), runtime::Value::from_tensor({}));
    std::vector<runtime::Value*> in_ptrs, attr_ptrs, out_ptrs;
    for (auto& v : inputs) in_ptrs.push_back(&v);
    for (auto& v : attrs) attr_ptrs.push_back(&v);
    for (auto& v : outputs) out_ptrs.push_back(&v);
    runtime::OpCall call{in_ptrs, attr_ptrs, out_ptrs, node.name};
    std::vector<runtime::TensorMeta> metas(node.outputs.size());
    BATON_TRY(runtime::infer_op(*schema, call, metas));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      IrValue& out = graph.values[node.outputs[o]];
      out.dtype = metas[o].dtype;
      out.sizes = metas[o].sizes;
      out.shape_known = true;
      BATON_CHECK_OR_RETURN(checked_nbytes(out.dtype, out.sizes).has_value(), InvalidArgument,
                            "{}: output {} would be {} {}, whose size in bytes overflows; check "
                            "the input shapes",
                            node.describe(), o, dtype_name(out.dtype), shape_to_string(out.sizes));
    }
    if (!all_constant || node.inputs.empty()) continue;

    // Every input is known: run the CPU kernel now and keep the result as a constant.
    std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      IrValue& out = graph.values[node.outputs[o]];
      auto bytes = checked_nbytes(out.dtype, out.sizes);
      BATON_CHECK_OR_RETURN(bytes.has_value(), InvalidArgument, "{}: output {} is too large",
                            node.describe(), shape_to_string(out.sizes));
      buffers.push_back(std::make_shared<std::vector<uint8_t>>(*bytes));
      outputs[o].tensor = TensorView{buffers.back()->data(), out.dtype, out.sizes, Device::cpu()};
    }
    BATON_ASSIGN_OR_RETURN(auto kernel, schema->create(call));
    BATON_TRY(kernel->run());
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      IrValue& out = graph.values[node.outputs[o]];
      out.constant = std::move(buffers[o]);
      out.producer = -1;
    }
    node.dead = true;
    ++folded;
  }
  return folded;
}

size_t eliminate_dead_nodes(Graph& graph) {
  std::vector<uint8_t> used(graph.values.size(), 0);
  for (int o : graph.outputs) used[o] = 1;
  size_t removed = 0;
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    IrNode& node = graph.nodes[n];
    if (node.dead) continue;
    const bool live = std::any_of(node.outputs.begin(), node.outputs.end(),
                                  [&](int o) { return o >= 0 && used[o]; });
    if (!live) {
      node.dead = true;
      ++removed;
      continue;
    }
    for (int i : node.inputs) {
      if (i >= 0) used[i] = 1;
    }
  }
  return removed;
}

}  // namespace baton::compiler
