#include "runtime/kernel.h"

#include <algorithm>

#include "baton/core/check.h"
#include "ops/op_def.h"

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

const Value& KernelCall::attr(std::string_view name) const {
  static const Value kNone;
  const int index = def == nullptr ? -1 : def->attr_index(name);
  if (index < 0 || static_cast<size_t>(index) >= attrs.size()) return kNone;
  return *attrs[static_cast<size_t>(index)];
}

std::string KernelCall::describe() const {
  const std::string_view op = def == nullptr ? std::string_view("?") : def->name;
  if (node_name.empty()) return std::string(op);
  return fmt::format("{} (node '{}')", op, node_name);
}

Status KernelCall::reserve_scratch_bytes(ScratchRef& ref, uint64_t count, uint64_t element_bytes,
                                         uint64_t slots, std::string_view what) const {
  BATON_CHECK_OR_RETURN(scratch != nullptr, Internal,
                        "{}: created without a scratch plan (runtime/scratch.h)", describe());
  return scratch->reserve(ref, count, element_bytes, slots, what);
}

void KernelRegistry::add(KernelDef def) {
  for (auto& k : kernels_) {
    if (k->op == def.op && k->domain == def.domain) {
      *k = std::move(def);
      return;
    }
  }
  kernels_.push_back(std::make_unique<KernelDef>(std::move(def)));
}

const KernelDef* KernelRegistry::find(std::string_view op, std::string_view domain) const {
  for (const auto& k : kernels_) {
    if (k->op == op && k->domain == domain) return k.get();
  }
  return nullptr;
}

std::vector<std::string_view> KernelRegistry::names() const {
  std::vector<std::string_view> out;
  for (const auto& k : kernels_) out.push_back(k->op);
  std::sort(out.begin(), out.end());
  return out;
}

KernelRegistry& kernel_registry() {
  static KernelRegistry registry;
  return registry;
}

Value attr_as_value(const ops::AttrValue& a) {
  if (a.none) return Value::none();
  switch (a.kind) {
    case ops::AttrKind::Int:
      return Value::from_int(a.i);
    case ops::AttrKind::Float:
      return Value::from_float(a.f);
    case ops::AttrKind::String:
      return Value::from_string(a.s);
    case ops::AttrKind::Ints:
      return Value::from_ints(a.ints);
    case ops::AttrKind::Floats:
      return Value::from_floats(a.floats);
    case ops::AttrKind::Tensor: {
      TensorView t;
      t.data = a.tensor.data ? const_cast<uint8_t*>(a.tensor.data->data()) : nullptr;
      t.dtype = a.tensor.dtype;
      t.sizes = a.tensor.sizes;
      return Value::from_tensor(t);
    }
  }
  return Value::none();
}

ops::AttrValue value_as_attr(const Value& v, ops::AttrKind kind) {
  switch (v.kind) {
    case ValueKind::Int:
      return ops::AttrValue::of_int(v.i);
    case ValueKind::Float:
      return ops::AttrValue::of_float(v.f);
    case ValueKind::String:
      return ops::AttrValue::of_string(std::string(v.s));
    case ValueKind::IntList:
      return ops::AttrValue::of_ints({v.ints.begin(), v.ints.end()});
    case ValueKind::FloatList:
      return ops::AttrValue::of_floats({v.floats.begin(), v.floats.end()});
    case ValueKind::Tensor: {
      ops::TensorValue t;
      t.dtype = v.tensor.dtype;
      t.sizes.assign(v.tensor.sizes.begin(), v.tensor.sizes.end());
      const auto* p = static_cast<const uint8_t*>(v.tensor.data);
      t.data = std::make_shared<std::vector<uint8_t>>(p, p + (p ? v.tensor.nbytes() : 0));
      return ops::AttrValue::of_tensor(std::move(t));
    }
    case ValueKind::None:
      break;
  }
  return ops::AttrValue::absent(kind);
}

bool kernel_takes(const KernelDef& kernel, const ops::OpDef& def, std::span<const DType> inputs,
                  std::span<const DType> outputs, std::string* why) {
  for (const auto& [type, dtype] : ops::bind_types(def, inputs, outputs)) {
    for (const auto& [constraint, takes] : kernel.types) {
      if (constraint != type || takes.contains(dtype)) continue;
      if (why != nullptr) {
        *why = fmt::format("{} is {} here; Baton's CPU kernel for {} takes {} for {}", type,
                           dtype_name(dtype), def.name, takes.to_string(), type);
      }
      return false;
    }
  }
  return true;
}

}  // namespace baton::runtime
