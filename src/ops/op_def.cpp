#include "ops/op_def.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::ops {

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int:
      return "INT";
    case AttrKind::Float:
      return "FLOAT";
    case AttrKind::String:
      return "STRING";
    case AttrKind::Ints:
      return "INTS";
    case AttrKind::Floats:
      return "FLOATS";
    case AttrKind::Tensor:
      return "TENSOR";
  }
  return "?";
}

AttrValue AttrValue::of_int(int64_t v) {
  AttrValue a;
  a.kind = AttrKind::Int;
  a.i = v;
  return a;
}
AttrValue AttrValue::of_float(double v) {
  AttrValue a;
  a.kind = AttrKind::Float;
  a.f = v;
  return a;
}
AttrValue AttrValue::of_string(std::string v) {
  AttrValue a;
  a.kind = AttrKind::String;
  a.s = std::move(v);
  return a;
}
AttrValue AttrValue::of_ints(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = AttrKind::Ints;
  a.ints = std::move(v);
  return a;
}
AttrValue AttrValue::of_floats(std::vector<double> v) {
  AttrValue a;
  a.kind = AttrKind::Floats;
  a.floats = std::move(v);
  return a;
}
AttrValue AttrValue::of_tensor(TensorValue v) {
  AttrValue a;
  a.kind = AttrKind::Tensor;
  a.tensor = std::move(v);
  return a;
}
AttrValue AttrValue::absent(AttrKind kind) {
  AttrValue a;
  a.kind = kind;
  a.none = true;
  return a;
}

bool AttrValue::operator==(const AttrValue& o) const {
  if (kind != o.kind || none != o.none) return false;
  if (none) return true;
  switch (kind) {
    case AttrKind::Int:
      return i == o.i;
    case AttrKind::Float:
      // Bit equality: NaN defaults compare equal to themselves.
      return std::memcmp(&f, &o.f, sizeof f) == 0;
    case AttrKind::String:
      return s == o.s;
    case AttrKind::Ints:
      return ints == o.ints;
    case AttrKind::Floats:
      // An empty list's data() may be null, which memcmp must not be given even for 0 bytes.
      return floats.size() == o.floats.size() &&
             (floats.empty() ||
              std::memcmp(floats.data(), o.floats.data(), floats.size() * sizeof(double)) == 0);
    case AttrKind::Tensor: {
      if (tensor.dtype != o.tensor.dtype || tensor.sizes != o.tensor.sizes) return false;
      if (!tensor.data || !o.tensor.data) return tensor.data == o.tensor.data;
      return *tensor.data == *o.tensor.data;
    }
  }
  return false;
}

std::string AttrValue::to_string() const {
  if (none) return "none";
  switch (kind) {
    case AttrKind::Int:
      return fmt::format("{}", i);
    case AttrKind::Float:
      return fmt::format("{}", f);
    case AttrKind::String:
      return fmt::format("'{}'", s);
    case AttrKind::Ints:
      return fmt::format("[{}]", fmt::join(ints, ", "));
    case AttrKind::Floats:
      return fmt::format("[{}]", fmt::join(floats, ", "));
    case AttrKind::Tensor:
      return fmt::format("{} tensor {}", dtype_name(tensor.dtype), shape_to_string(tensor.sizes));
  }
  return "?";
}

AttrDef attr_int(std::string_view name, int64_t default_value) {
  return AttrDef{name, AttrKind::Int, AttrDef::Presence::Default, AttrValue::of_int(default_value)};
}
AttrDef attr_float(std::string_view name, double default_value) {
  return AttrDef{name, AttrKind::Float, AttrDef::Presence::Default,
                 AttrValue::of_float(default_value)};
}
AttrDef attr_string(std::string_view name, std::string_view default_value) {
  return AttrDef{name, AttrKind::String, AttrDef::Presence::Default,
                 AttrValue::of_string(std::string(default_value))};
}
AttrDef attr_ints(std::string_view name, std::vector<int64_t> default_value) {
  return AttrDef{name, AttrKind::Ints, AttrDef::Presence::Default,
                 AttrValue::of_ints(std::move(default_value))};
}
AttrDef attr_floats(std::string_view name, std::vector<double> default_value) {
  return AttrDef{name, AttrKind::Floats, AttrDef::Presence::Default,
                 AttrValue::of_floats(std::move(default_value))};
}
AttrDef attr_required(std::string_view name, AttrKind kind) {
  return AttrDef{name, kind, AttrDef::Presence::Required, AttrValue::absent(kind)};
}
AttrDef attr_optional(std::string_view name, AttrKind kind) {
  return AttrDef{name, kind, AttrDef::Presence::Optional, AttrValue::absent(kind)};
}

// ---- OpDef -------------------------------------------------------------------------------------

int OpDef::attr_index(std::string_view attr) const {
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (attrs[i].name == attr) return static_cast<int>(i);
  }
  return -1;
}

const TypeConstraint* OpDef::constraint(std::string_view type) const {
  for (const TypeConstraint& c : types) {
    if (c.name == type) return &c;
  }
  return nullptr;
}

size_t OpDef::min_inputs() const {
  size_t n = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].arity == Arity::Single) n = i + 1;
    if (inputs[i].arity == Arity::Variadic) n = std::max(n, i + 1);
  }
  return n;
}

size_t OpDef::max_inputs() const {
  if (!inputs.empty() && inputs.back().arity == Arity::Variadic) return SIZE_MAX;
  return inputs.size();
}

size_t OpDef::min_outputs() const {
  size_t n = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].arity != Arity::Optional) n = i + 1;
  }
  return n;
}

size_t OpDef::max_outputs() const {
  if (!outputs.empty() && outputs.back().arity == Arity::Variadic) return SIZE_MAX;
  return outputs.size();
}

const InputDef& OpDef::input_slot(size_t i) const { return inputs[std::min(i, inputs.size() - 1)]; }

const OutputDef& OpDef::output_slot(size_t i) const {
  return outputs[std::min(i, outputs.size() - 1)];
}

std::string OpDef::versioned_name() const {
  return fmt::format("{}{}{}-{}", domain, domain.empty() ? "" : ".", name, since_version);
}

// ---- InferContext ------------------------------------------------------------------------------

std::string InferContext::what() const {
  if (node_name_.empty()) return std::string(def_.name);
  return fmt::format("{} (node '{}')", def_.name, node_name_);
}

void InferContext::set_output_like(size_t i, size_t j) {
  outputs_[i].dtype = inputs_[j].dtype;
  outputs_[i].sizes.assign(inputs_[j].sizes.begin(), inputs_[j].sizes.end());
}

const AttrValue& InferContext::attr(std::string_view name) const {
  const int index = def_.attr_index(name);
  if (index < 0) {
    static const AttrValue kMissing = AttrValue::absent(AttrKind::Int);
    const_cast<InferContext*>(this)->internal_ =
        Status(Error::Internal,
               fmt::format("{}: inference asked for attribute '{}', which {} does not define",
                           what(), name, def_.versioned_name()));
    return kMissing;
  }
  return attrs_[static_cast<size_t>(index)];
}

void InferContext::set_attr(std::string_view name, AttrValue value) {
  const int index = def_.attr_index(name);
  if (index < 0) {
    internal_ = Status(Error::Internal, fmt::format("{}: no attribute '{}' to set", what(), name));
    return;
  }
  attrs_[static_cast<size_t>(index)] = std::move(value);
}

Result<int> InferContext::canonical_axis(std::string_view name, int rank) {
  const int64_t axis = attr_int(name);
  BATON_CHECK_OR_RETURN(axis >= -rank && axis < rank, InvalidArgument,
                        "{}: attribute '{}' is {}, out of range [{}, {}] for a rank-{} input",
                        what(), name, axis, -rank, rank - 1, rank);
  const int normalized = static_cast<int>(axis < 0 ? axis + rank : axis);
  set_attr(name, AttrValue::of_int(normalized));
  return normalized;
}

Result<std::vector<int64_t>> InferContext::int_values(size_t input) const {
  const InputInfo& in = inputs_[input];
  const std::string_view name = def_.input_slot(input).name;
  BATON_CHECK_OR_RETURN(in.dtype == DType::Int64 || in.dtype == DType::Int32, InvalidArgument,
                        "{}: input '{}' must be int64, got {}", what(), name, dtype_name(in.dtype));
  BATON_CHECK_OR_RETURN(in.sizes.size() <= 1, InvalidArgument,
                        "{}: input '{}' must be 1-D, got shape {}", what(), name,
                        shape_to_string(in.sizes));
  const int64_t n = in.sizes.empty() ? 1 : in.sizes[0];
  // An empty input's values are known (there are none), constant or not; its data pointer may
  // well be null.
  if (n == 0) return std::vector<int64_t>();
  BATON_CHECK_OR_RETURN(in.data != nullptr, NotSupported,
                        "{}: input '{}' must be a constant (or computed from constants and "
                        "sizes by shape arithmetic Baton follows, docs/dynamic_shapes.md): the "
                        "output's shape depends on its values",
                        what(), name);
  return int_values_of(in.dtype, in.data, n);
}

// ---- infer -------------------------------------------------------------------------------------

namespace {

std::string count_text(size_t lo, size_t hi) {
  if (hi == SIZE_MAX) return fmt::format("{} or more", lo);
  if (lo == hi) return fmt::format("{}", lo);
  return fmt::format("{} to {}", lo, hi);
}

// The dtype each constraint is bound to by the present inputs; errors for conflicts and dtypes
// outside a constraint.
Status bind_input_types(const OpDef& def, std::span<const InputInfo> inputs,
                        std::vector<std::pair<std::string_view, size_t>>& bound,
                        const std::string& what) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present) continue;
    const InputDef& slot = def.input_slot(i);
    const TypeConstraint* c = def.constraint(slot.type);
    BATON_CHECK_OR_RETURN(c != nullptr, Internal, "{}: input '{}' has unknown type constraint '{}'",
                          def.versioned_name(), slot.name, slot.type);
    BATON_CHECK_OR_RETURN(c->types.contains(inputs[i].dtype), InvalidArgument,
                          "{}: input {} ('{}') is {}, but {} takes {} for {}", what, i, slot.name,
                          dtype_name(inputs[i].dtype), def.name, c->types.to_string(), c->name);
    auto it =
        std::find_if(bound.begin(), bound.end(), [&](const auto& b) { return b.first == c->name; });
    if (it == bound.end()) {
      bound.emplace_back(c->name, i);
      continue;
    }
    const size_t first = it->second;
    BATON_CHECK_OR_RETURN(
        inputs[first].dtype == inputs[i].dtype, InvalidArgument,
        "{}: input {} ('{}') is {} but input {} ('{}') is {}; both are {} and must match", what, i,
        slot.name, dtype_name(inputs[i].dtype), first, def.input_slot(first).name,
        dtype_name(inputs[first].dtype), c->name);
  }
  return Status();
}

}  // namespace

Status infer(const OpDef& def, std::string_view node_name, std::span<const InputInfo> inputs,
             std::vector<AttrValue>& attrs, std::vector<OutputInfo>& outputs) {
  const std::string what = node_name.empty() ? std::string(def.name)
                                             : fmt::format("{} (node '{}')", def.name, node_name);
  const size_t lo = def.min_inputs(), hi = def.max_inputs();
  BATON_CHECK_OR_RETURN(inputs.size() >= lo && inputs.size() <= hi, InvalidArgument,
                        "{} takes {} inputs, got {}", what, count_text(lo, hi), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputDef& slot = def.input_slot(i);
    BATON_CHECK_OR_RETURN(inputs[i].present || slot.arity == Arity::Optional, InvalidArgument,
                          "{}: input {} ('{}') is required but absent", what, i, slot.name);
    // Definitions multiply sub-ranges of their inputs' sizes (outer and inner sizes, flattened
    // dimensions): a shape whose nonzero sizes overflow, such as an empty [0, 2^40, 2^40], is
    // refused here, before any of them does.
    BATON_CHECK_OR_RETURN(
        !inputs[i].present || inputs[i].sizes.size() <= static_cast<size_t>(kMaxRank), NotSupported,
        "{}: input {} ('{}') has rank {} ({}); Baton supports rank <= {}", what, i, slot.name,
        inputs[i].sizes.size(), shape_to_string(inputs[i].sizes), kMaxRank);
    BATON_CHECK_OR_RETURN(
        !inputs[i].present || checked_nbytes(inputs[i].dtype, inputs[i].sizes).has_value(),
        InvalidArgument,
        "{}: input {} ('{}') is {} {}: a negative size, or the product of its nonzero sizes (or "
        "its size in bytes) overflows 64 bits; check the input shapes",
        what, i, slot.name, dtype_name(inputs[i].dtype), shape_to_string(inputs[i].sizes));
  }
  const size_t olo = def.min_outputs(), ohi = def.max_outputs();
  BATON_CHECK_OR_RETURN(outputs.size() >= olo && outputs.size() <= ohi, InvalidArgument,
                        "{} produces {} outputs, the call has {}", what, count_text(olo, ohi),
                        outputs.size());
  BATON_CHECK_OR_RETURN(attrs.size() == def.attrs.size(), InvalidArgument,
                        "{} has {} attributes in {}, the call binds {}", what, def.attrs.size(),
                        def.versioned_name(), attrs.size());
  for (size_t a = 0; a < attrs.size(); ++a) {
    const AttrDef& ad = def.attrs[a];
    BATON_CHECK_OR_RETURN(attrs[a].kind == ad.kind, InvalidArgument,
                          "{}: attribute '{}' must be {}, got {}", what, ad.name,
                          attr_kind_name(ad.kind), attr_kind_name(attrs[a].kind));
    BATON_CHECK_OR_RETURN(!attrs[a].none || ad.presence == AttrDef::Presence::Optional,
                          InvalidArgument, "{}: attribute '{}' must have a value", what, ad.name);
  }
  std::vector<std::pair<std::string_view, size_t>> bound;
  BATON_TRY(bind_input_types(def, inputs, bound, what));

  // Outputs whose constraint an input (or a one-type constraint) decides get that dtype.
  std::vector<uint8_t> decided(outputs.size(), 0);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const TypeConstraint* c = def.constraint(def.output_slot(o).type);
    BATON_CHECK_OR_RETURN(c != nullptr, Internal, "{}: output {} has no type constraint",
                          def.versioned_name(), o);
    auto it =
        std::find_if(bound.begin(), bound.end(), [&](const auto& b) { return b.first == c->name; });
    if (it != bound.end()) {
      outputs[o].dtype = inputs[it->second].dtype;
      decided[o] = 1;
    } else if (c->types.list().size() == 1) {
      outputs[o].dtype = c->types.list()[0];
      decided[o] = 1;
    }
    outputs[o].sizes.clear();
  }

  InferContext ctx(def, node_name, inputs, attrs, outputs);
  BATON_CHECK_OR_RETURN(def.infer != nullptr, Internal, "{} has no inference",
                        def.versioned_name());
  BATON_TRY(def.infer(ctx));
  BATON_TRY(ctx.internal_status());

  for (size_t o = 0; o < outputs.size(); ++o) {
    const TypeConstraint* c = def.constraint(def.output_slot(o).type);
    BATON_CHECK_OR_RETURN(c->types.contains(outputs[o].dtype), Internal,
                          "{}: inference made output {} {}, outside {} ({})", what, o,
                          dtype_name(outputs[o].dtype), c->name, c->types.to_string());
    for (int64_t s : outputs[o].sizes) {
      BATON_CHECK_OR_RETURN(s >= 0, Internal, "{}: inference made output {} of shape {}", what, o,
                            shape_to_string(outputs[o].sizes));
    }
    BATON_CHECK_OR_RETURN(static_cast<int>(outputs[o].sizes.size()) <= kMaxRank, NotSupported,
                          "{}: output {} would have rank {} ({}); Baton supports rank <= {}", what,
                          o, outputs[o].sizes.size(), shape_to_string(outputs[o].sizes), kMaxRank);
    BATON_CHECK_OR_RETURN(checked_nbytes(outputs[o].dtype, outputs[o].sizes).has_value(),
                          InvalidArgument,
                          "{}: output {} would be {} {}, whose size in bytes overflows; check "
                          "the input shapes",
                          what, o, dtype_name(outputs[o].dtype), shape_to_string(outputs[o].sizes));
  }
  (void)decided;
  return Status();
}

std::vector<std::pair<std::string_view, DType>> bind_types(const OpDef& def,
                                                           std::span<const DType> inputs,
                                                           std::span<const DType> outputs) {
  std::vector<std::pair<std::string_view, DType>> out;
  auto bind = [&](std::string_view type, DType dt) {
    for (const auto& b : out) {
      if (b.first == type) return;
    }
    out.emplace_back(type, dt);
  };
  for (size_t i = 0; i < inputs.size() && !def.inputs.empty(); ++i)
    bind(def.input_slot(i).type, inputs[i]);
  for (size_t o = 0; o < outputs.size() && !def.outputs.empty(); ++o)
    bind(def.output_slot(o).type, outputs[o]);
  return out;
}

// ---- binding -----------------------------------------------------------------------------------

Result<std::vector<AttrValue>> bind_attributes(const OpDef& def, std::span<const NamedAttr> attrs,
                                               std::string_view what) {
  for (size_t k = 0; k < attrs.size(); ++k) {
    const NamedAttr& a = attrs[k];
    if (def.attr_index(a.name) < 0) {
      std::string known;
      for (const AttrDef& d : def.attrs) known += fmt::format(" {}", d.name);
      return BATON_ERROR(NotSupported,
                         "{}: attribute '{}' is not supported by Baton's {} (its attributes:{})",
                         what, a.name, def.versioned_name(), known.empty() ? " none" : known);
    }
    for (size_t j = 0; j < k; ++j) {
      BATON_CHECK_OR_RETURN(attrs[j].name != a.name, InvalidArgument,
                            "{}: attribute '{}' is given twice", what, a.name);
    }
  }
  std::vector<AttrValue> out;
  out.reserve(def.attrs.size());
  for (const AttrDef& d : def.attrs) {
    const NamedAttr* given = nullptr;
    for (const NamedAttr& a : attrs) {
      if (a.name == d.name) given = &a;
    }
    if (given == nullptr) {
      BATON_CHECK_OR_RETURN(d.presence != AttrDef::Presence::Required, InvalidArgument,
                            "{} is missing its required attribute '{}' ({})", what, d.name,
                            attr_kind_name(d.kind));
      out.push_back(d.presence == AttrDef::Presence::Default ? d.default_value
                                                             : AttrValue::absent(d.kind));
      continue;
    }
    BATON_CHECK_OR_RETURN(given->value.has_value() && given->value->kind == d.kind, InvalidArgument,
                          "{}: attribute '{}' has ONNX type {}, expected {}", what, d.name,
                          given->onnx_type, attr_kind_name(d.kind));
    out.push_back(*given->value);
  }
  return out;
}

// ---- registry ----------------------------------------------------------------------------------

void OpRegistry::add(OpDef def) {
  for (auto& d : defs_) {
    if (d->name == def.name && d->domain == def.domain && d->since_version == def.since_version) {
      *d = std::move(def);
      return;
    }
  }
  defs_.push_back(std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::find(std::string_view name, std::string_view domain, int opset) const {
  const OpDef* best = nullptr;
  for (const auto& d : defs_) {
    if (d->name != name || d->domain != domain || d->since_version > opset) continue;
    if (best == nullptr || d->since_version > best->since_version) best = d.get();
  }
  return best;
}

const OpDef* OpRegistry::earliest(std::string_view name, std::string_view domain) const {
  const OpDef* best = nullptr;
  for (const auto& d : defs_) {
    if (d->name != name || d->domain != domain) continue;
    if (best == nullptr || d->since_version < best->since_version) best = d.get();
  }
  return best;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& d : defs_) out.push_back(d.get());
  return out;
}

std::vector<std::string_view> OpRegistry::names() const {
  std::vector<std::string_view> out;
  for (const auto& d : defs_) {
    if (std::find(out.begin(), out.end(), d->name) == out.end()) out.push_back(d->name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

const OpRegistry& op_registry() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    register_all_ops(*r);
    return r;
  }();
  return *registry;
}

}  // namespace baton::ops
