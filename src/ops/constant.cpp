// ONNX Constant (opset 13): exactly one of value (a tensor), value_float(s), value_int(s).
// value_string(s) and sparse_value are not supported (Baton has no string or sparse tensors).
// The earlier versions (1, 9: `value` only; 11: sparse_value; 12: the value_* attributes) are
// subsets of 13, so this definition stands for them too: Baton takes it from opset 1 on.
#include "ops/constant.h"

#include <cstring>

#include "baton/core/check.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

constexpr std::string_view kValueAttrs[] = {"value",     "value_float", "value_floats",
                                            "value_int", "value_ints",  "value_string"};

TensorValue make(DType dtype, std::vector<int64_t> sizes, const void* data, size_t bytes) {
  auto buffer = std::make_shared<std::vector<uint8_t>>(bytes);
  if (bytes != 0) std::memcpy(buffer->data(), data, bytes);
  return TensorValue{dtype, std::move(sizes), std::move(buffer)};
}

Status infer(InferContext& ctx) {
  std::string_view given;
  int count = 0;
  for (std::string_view name : kValueAttrs) {
    if (!ctx.attr_none(name)) {
      given = name;
      ++count;
    }
  }
  BATON_CHECK_OR_RETURN(count == 1, InvalidArgument,
                        "{} must have exactly one value attribute (value, value_float(s), "
                        "value_int(s)), has {}",
                        ctx.what(), count);
  BATON_CHECK_OR_RETURN(given != "value_string", NotSupported,
                        "{}: string constants are not supported (Baton has no string tensors)",
                        ctx.what());
  std::vector<AttrValue> attrs;
  for (const AttrDef& d : ctx.def().attrs) attrs.push_back(ctx.attr(d.name));
  const TensorValue v = constant_value(attrs, ctx.def());
  ctx.output(0).dtype = v.dtype;
  ctx.output(0).sizes = v.sizes;
  return Status();
}

}  // namespace

TensorValue constant_value(std::span<const AttrValue> attrs, const OpDef& def) {
  auto at = [&](std::string_view name) -> const AttrValue& {
    return attrs[static_cast<size_t>(def.attr_index(name))];
  };
  if (!at("value").none) return at("value").tensor;
  if (!at("value_float").none) {
    const float f = static_cast<float>(at("value_float").f);
    return make(DType::Float32, {}, &f, 4);
  }
  if (!at("value_floats").none) {
    std::vector<float> fs(at("value_floats").floats.begin(), at("value_floats").floats.end());
    return make(DType::Float32, {static_cast<int64_t>(fs.size())}, fs.data(), 4 * fs.size());
  }
  if (!at("value_int").none) {
    const int64_t i = at("value_int").i;
    return make(DType::Int64, {}, &i, 8);
  }
  const std::vector<int64_t>& is = at("value_ints").ints;
  return make(DType::Int64, {static_cast<int64_t>(is.size())}, is.data(), 8 * is.size());
}

void register_constant(OpRegistry& registry) {
  OpDef def;
  def.name = "Constant";
  def.since_version = 1;
  def.outputs = {{"output", "T"}};
  def.attrs = {attr_optional("value", AttrKind::Tensor),
               attr_optional("value_float", AttrKind::Float),
               attr_optional("value_floats", AttrKind::Floats),
               attr_optional("value_int", AttrKind::Int),
               attr_optional("value_ints", AttrKind::Ints),
               attr_optional("value_string", AttrKind::String)};
  def.types = {{"T", kAllTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
