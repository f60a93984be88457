// One definition per operator: its ONNX semantics, written once.
//
// An OpDef says what an operator's inputs, outputs and attributes are (with their defaults and
// type constraints, ONNX's T, T1, ...) and how its outputs' dtypes and shapes follow from its
// inputs (`infer`). The same inference also puts the attributes in canonical form (normalized
// axes, filled-in permutations), so what the compiler stores on the IR node and writes into the
// program file is the bound, defaulted, canonical set, and no backend ever reads a raw ONNX
// attribute or restates a default.
//
// Who uses it: the ONNX importer binds every node's attributes through its definition; shape
// inference and every later pass run `infer`; the runtime runs the same `infer` when it loads a
// kernel call from a program file (so a corrupt file cannot make a kernel write out of bounds,
// and a call whose attributes are not canonical is refused).
//
// Depends on core only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton::ops {

// Named type sets of ONNX's constraints (DTypeSet is in core/dtype.h).
inline constexpr DTypeSet kFloatTypes{DType::Float32, DType::Float16, DType::BFloat16,
                                      DType::Float64};
inline constexpr DTypeSet kSignedIntTypes{DType::Int8, DType::Int16, DType::Int32, DType::Int64};
inline constexpr DTypeSet kUnsignedIntTypes{DType::UInt8};
inline constexpr DTypeSet kIntTypes = kSignedIntTypes | kUnsignedIntTypes;
inline constexpr DTypeSet kNumericTypes = kFloatTypes | kIntTypes;
inline constexpr DTypeSet kSignedNumericTypes = kFloatTypes | kSignedIntTypes;
inline constexpr DTypeSet kBoolTypes{DType::Bool};
inline constexpr DTypeSet kAllTypes = kNumericTypes | kBoolTypes;
inline constexpr DTypeSet kIndexTypes{DType::Int32, DType::Int64};

enum class AttrKind : uint8_t { Int, Float, String, Ints, Floats, Tensor };
// ONNX's spelling: "INT", "FLOAT", "STRING", "INTS", "FLOATS", "TENSOR".
std::string_view attr_kind_name(AttrKind kind);

// A constant tensor held by an attribute (Constant's `value`, ConstantOfShape's `value`).
struct TensorValue {
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::shared_ptr<const std::vector<uint8_t>> data;  // row-major, little-endian
};

// A bound attribute: a value of its definition's kind, or `none` for an optional attribute left
// absent (one without a default, whose absence means something to the op).
struct AttrValue {
  AttrKind kind = AttrKind::Int;
  bool none = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  TensorValue tensor;

  static AttrValue of_int(int64_t v);
  static AttrValue of_float(double v);
  static AttrValue of_string(std::string v);
  static AttrValue of_ints(std::vector<int64_t> v);
  static AttrValue of_floats(std::vector<double> v);
  static AttrValue of_tensor(TensorValue v);
  static AttrValue absent(AttrKind kind);

  // Same kind, presence and value (tensors: same dtype, sizes and bytes).
  bool operator==(const AttrValue& other) const;
  // "3", "[0, 2, 1]", "'tanh'", "none", "float32 tensor [2]".
  std::string to_string() const;
};

struct AttrDef {
  enum class Presence : uint8_t { Required, Default, Optional };
  std::string_view name;
  AttrKind kind = AttrKind::Int;
  Presence presence = Presence::Default;
  AttrValue default_value;  // Presence::Default only
};

// Attribute definitions, in the order the definition lists them (the bound order).
AttrDef attr_int(std::string_view name, int64_t default_value);
AttrDef attr_float(std::string_view name, double default_value);
AttrDef attr_string(std::string_view name, std::string_view default_value);
AttrDef attr_ints(std::string_view name, std::vector<int64_t> default_value);
AttrDef attr_floats(std::string_view name, std::vector<double> default_value);
AttrDef attr_required(std::string_view name, AttrKind kind);
AttrDef attr_optional(std::string_view name, AttrKind kind);

struct TypeConstraint {
  std::string_view name;  // "T", "T1", "Tind"
  DTypeSet types;
};

// How many values one input or output slot of a definition stands for: exactly one, one or none
// (an absent optional input is an empty name in ONNX), or any number (only the last slot).
enum class Arity : uint8_t { Single, Optional, Variadic };

struct InputDef {
  std::string_view name;
  std::string_view type;  // a TypeConstraint's name
  Arity arity = Arity::Single;
  // Static shapes: the input's values decide output shapes, so it must be known at compile time
  // (Reshape's shape, Squeeze's axes).
  bool shape_input = false;
};

struct OutputDef {
  std::string_view name;
  std::string_view type;
  Arity arity = Arity::Single;
};

// What inference sees of one input: dtype and sizes, plus the data when the value is known at
// compile time (constants; always null at run time except for program constants).
struct InputInfo {
  bool present = true;
  DType dtype = DType::Float32;
  std::span<const int64_t> sizes;
  const void* data = nullptr;
  // `data` is shape arithmetic over dynamic sizes at one assignment of the symbols (compiler/
  // shape_infer.h), not a constant: an op whose output size follows the values (NonZero) must
  // not size it from them.
  bool data_from_sizes = false;
};

struct OutputInfo {
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  // An axis whose size depends on the input's values, not its shape (NonZero's count), when they
  // are not known at compile time: sizes[axis] is then its upper bound, and the kernel gives the
  // size when it runs (docs/dynamic_shapes.md, data-dependent sizes). -1: every size is exact.
  int data_dependent_axis = -1;
};

class InferContext;
using InferFn = Status (*)(InferContext& ctx);

struct OpDef {
  std::string_view name;    // ONNX op type
  std::string_view domain;  // "" for ai.onnx; "baton" for Baton's canonical internal ops
  int since_version = 1;    // first opset of these semantics (the registry picks by opset)
  std::vector<InputDef> inputs;
  std::vector<OutputDef> outputs;
  std::vector<AttrDef> attrs;
  std::vector<TypeConstraint> types;
  // Sets output dtypes (where no input decides them) and sizes, checks everything the generic
  // checks do not, and canonicalizes attributes through InferContext::canonical_*.
  InferFn infer = nullptr;

  int attr_index(std::string_view attr) const;  // -1 when the definition has no such attribute
  const TypeConstraint* constraint(std::string_view type) const;
  size_t min_inputs() const;
  size_t max_inputs() const;  // SIZE_MAX for a variadic last input
  size_t min_outputs() const;
  size_t max_outputs() const;  // SIZE_MAX for a variadic last output
  // The definition's slot for input (output) number `i` of a call: the last slot for every value
  // of a variadic one.
  const InputDef& input_slot(size_t i) const;
  const OutputDef& output_slot(size_t i) const;
  // "Softmax-13"
  std::string versioned_name() const;
};

// The view `infer` works through. Attribute accessors take the definition's names; asking for
// a name the definition lacks is a bug in the op (reported as Error::Internal on return).
class InferContext {
 public:
  InferContext(const OpDef& def, std::string_view node_name, std::span<const InputInfo> inputs,
               std::vector<AttrValue>& attrs, std::vector<OutputInfo>& outputs)
      : def_(def), node_name_(node_name), inputs_(inputs), attrs_(attrs), outputs_(outputs) {}

  const OpDef& def() const { return def_; }
  // "Softmax (node 'sm')", for messages.
  std::string what() const;

  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].present; }
  const InputInfo& input(size_t i) const { return inputs_[i]; }
  std::span<const int64_t> sizes(size_t i) const { return inputs_[i].sizes; }
  int rank(size_t i) const { return static_cast<int>(inputs_[i].sizes.size()); }

  size_t num_outputs() const { return outputs_.size(); }
  OutputInfo& output(size_t i) { return outputs_[i]; }
  // Output i gets input j's dtype and sizes.
  void set_output_like(size_t i, size_t j);

  const AttrValue& attr(std::string_view name) const;
  int64_t attr_int(std::string_view name) const { return attr(name).i; }
  double attr_float(std::string_view name) const { return attr(name).f; }
  const std::string& attr_string(std::string_view name) const { return attr(name).s; }
  const std::vector<int64_t>& attr_ints(std::string_view name) const { return attr(name).ints; }
  const std::vector<double>& attr_floats(std::string_view name) const { return attr(name).floats; }
  bool attr_none(std::string_view name) const { return attr(name).none; }
  // Canonicalization: replaces the bound value.
  void set_attr(std::string_view name, AttrValue value);

  // The int attribute `name` as an axis of a rank-`rank` tensor, normalized into [0, rank) and
  // written back in that form.
  Result<int> canonical_axis(std::string_view name, int rank);
  // An int64 (or int32) input's values, which must be known at compile time.
  Result<std::vector<int64_t>> int_values(size_t input) const;

  Status internal_status() const { return internal_; }

 private:
  const OpDef& def_;
  std::string_view node_name_;
  std::span<const InputInfo> inputs_;
  std::vector<AttrValue>& attrs_;
  std::vector<OutputInfo>& outputs_;
  Status internal_;
};

// Checks a call against its definition (input count and presence, attribute count and kinds,
// type constraints: every input of one constraint has one dtype, from the allowed set), runs the
// op's inference, and checks what it produced. On success `outputs` (sized by the caller to the
// node's output count) hold dtypes and sizes, and `attrs` are canonical. Errors name the node and
// the op; a dtype outside a constraint is InvalidArgument.
Status infer(const OpDef& def, std::string_view node_name, std::span<const InputInfo> inputs,
             std::vector<AttrValue>& attrs, std::vector<OutputInfo>& outputs);

// Which dtype each type constraint stands for in a call ("T" -> float16), from its inputs and
// outputs. Constraints the call does not bind are left out.
std::vector<std::pair<std::string_view, DType>> bind_types(const OpDef& def,
                                                           std::span<const DType> inputs,
                                                           std::span<const DType> outputs);

// An attribute as the model spells it, before binding. `value` is empty for kinds Baton's
// definitions never take (graphs, sparse tensors, type protos).
struct NamedAttr {
  std::string name;
  std::string onnx_type;  // "INT", "GRAPH", ... for messages
  std::optional<AttrValue> value;
};

// The node's attributes bound to the definition: in its order, defaults filled in, absent
// optional ones `none`. Unknown attributes, missing required ones and kind mismatches are errors
// naming `what` (the node): NotSupported for an attribute Baton's definition does not know,
// InvalidArgument for the rest.
Result<std::vector<AttrValue>> bind_attributes(const OpDef& def, std::span<const NamedAttr> attrs,
                                               std::string_view what);

// Every operator definition Baton has, by (domain, name, since_version).
class OpRegistry {
 public:
  void add(OpDef def);
  // The definition in force at `opset`: the newest whose since_version <= opset. Null when the op
  // is unknown or newer than `opset`.
  const OpDef* find(std::string_view name, std::string_view domain, int opset) const;
  // The oldest definition of the op, or null (to say "supported from opset N").
  const OpDef* earliest(std::string_view name, std::string_view domain) const;
  std::vector<const OpDef*> all() const;
  // Distinct op names, sorted.
  std::vector<std::string_view> names() const;

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
};

// Baton's definitions, built on first use by register_all_ops (ops/register_all.cpp).
const OpRegistry& op_registry();
void register_all_ops(OpRegistry& registry);

}  // namespace baton::ops
