#include "baton/runtime/operator.h"

#include <algorithm>

#include "baton/core/check.h"

namespace baton::runtime {

std::string_view value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::None:
      return "none";
    case ValueKind::Int:
      return "int";
    case ValueKind::Float:
      return "float";
    case ValueKind::String:
      return "string";
    case ValueKind::IntList:
      return "int list";
    case ValueKind::FloatList:
      return "float list";
    case ValueKind::Tensor:
      return "tensor";
  }
  return "invalid";
}

std::string describe_call(const OpSchema& schema, const OpCall& call) {
  if (call.node_name.empty()) return std::string(schema.name);
  return fmt::format("{} (node '{}')", schema.name, call.node_name);
}

Status infer_op(const OpSchema& schema, const OpCall& call, std::span<TensorMeta> outputs) {
  const std::string what = describe_call(schema, call);
  const int n_in = static_cast<int>(call.inputs.size());
  BATON_CHECK_OR_RETURN(
      n_in >= schema.min_inputs && (schema.max_inputs < 0 || n_in <= schema.max_inputs),
      InvalidArgument, "{} takes {}{} inputs, got {}", what, schema.min_inputs,
      schema.max_inputs < 0                    ? " or more"
      : schema.max_inputs == schema.min_inputs ? ""
                                               : fmt::format(" to {}", schema.max_inputs),
      n_in);
  for (int i = 0; i < n_in; ++i) {
    const Value* v = call.inputs[i];
    BATON_CHECK_OR_RETURN(
        v != nullptr && (v->is_tensor() || (v->is_none() && i >= schema.min_inputs)),
        InvalidArgument, "{}: input {} must be a tensor, got {}", what, i,
        v == nullptr ? "nothing" : value_kind_name(v->kind));
  }
  BATON_CHECK_OR_RETURN(call.attrs.size() == schema.attrs.size(), InvalidArgument,
                        "{} takes {} attributes, got {}", what, schema.attrs.size(),
                        call.attrs.size());
  for (size_t a = 0; a < schema.attrs.size(); ++a) {
    const AttrSpec& spec = schema.attrs[a];
    const Value* v = call.attrs[a];
    const bool none_ok = spec.default_none && v != nullptr && v->is_none();
    BATON_CHECK_OR_RETURN(v != nullptr && (v->kind == spec.kind || none_ok), InvalidArgument,
                          "{}: attribute '{}' must be {}, got {}", what, spec.name,
                          value_kind_name(spec.kind),
                          v == nullptr ? "nothing" : value_kind_name(v->kind));
  }
  BATON_CHECK_OR_RETURN(static_cast<int>(call.outputs.size()) == schema.num_outputs &&
                            outputs.size() == call.outputs.size(),
                        InvalidArgument, "{} produces {} outputs, got {}", what, schema.num_outputs,
                        call.outputs.size());
  if (!schema.dtypes.empty() && n_in > 0) {
    const DType dt = call.inputs[0]->tensor.dtype;
    BATON_CHECK_OR_RETURN(
        std::find(schema.dtypes.begin(), schema.dtypes.end(), dt) != schema.dtypes.end(),
        NotSupported, "{}: input dtype {} is not supported by the CPU kernel", what,
        dtype_name(dt));
  }
  return schema.infer(call, outputs);
}

OpRegistry& OpRegistry::global() {
  static OpRegistry registry;
  return registry;
}

void OpRegistry::add(OpSchema schema) {
  for (auto& s : schemas_) {
    if (s->name == schema.name) {
      *s = std::move(schema);
      return;
    }
  }
  schemas_.push_back(std::make_unique<OpSchema>(std::move(schema)));
}

const OpSchema* OpRegistry::find(std::string_view name) const {
  for (const auto& s : schemas_) {
    if (s->name == name) return s.get();
  }
  return nullptr;
}

std::vector<std::string_view> OpRegistry::names() const {
  std::vector<std::string_view> out;
  for (const auto& s : schemas_) out.push_back(s->name);
  return out;
}

}  // namespace baton::runtime
