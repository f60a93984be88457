// ONNX ConstantOfShape (opset 9; bfloat16 values from 20): a tensor of the compile-time shape
// `input`, every element the one-element `value` tensor (float32 0 when absent). Canonical form:
// value always present.
#include <cstring>
#include <memory>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.int_values(0));
  for (int64_t d : shape) {
    BATON_CHECK_OR_RETURN(d >= 0, InvalidArgument, "{}: 'input' {} holds a negative size",
                          ctx.what(), shape_to_string(shape));
  }
  if (ctx.attr_none("value")) {
    const float zero = 0.0f;
    auto bytes = std::make_shared<std::vector<uint8_t>>(sizeof zero);
    std::memcpy(bytes->data(), &zero, sizeof zero);
    ctx.set_attr("value", AttrValue::of_tensor(TensorValue{DType::Float32, {1}, std::move(bytes)}));
  }
  const TensorValue& value = ctx.attr("value").tensor;
  const TypeConstraint* t2 = ctx.def().constraint("T2");
  BATON_CHECK_OR_RETURN(t2->types.contains(value.dtype), InvalidArgument,
                        "{}: attribute 'value' is a {} tensor; {} takes {}", ctx.what(),
                        dtype_name(value.dtype), ctx.def().versioned_name(), t2->types.to_string());
  const auto n = checked_numel(value.sizes);
  BATON_CHECK_OR_RETURN(n.has_value() && *n == 1 && value.data != nullptr &&
                            value.data->size() == dtype_size(value.dtype),
                        InvalidArgument,
                        "{}: attribute 'value' must hold exactly one element, got a {} tensor {}",
                        ctx.what(), dtype_name(value.dtype), shape_to_string(value.sizes));
  ctx.output(0).dtype = value.dtype;
  ctx.output(0).sizes = std::move(shape);
  return Status();
}

}  // namespace

void register_constant_of_shape(OpRegistry& registry) {
  OpDef def;
  def.name = "ConstantOfShape";
  def.since_version = 9;
  def.inputs = {{"input", "T1", Arity::Single, true}};
  def.outputs = {{"output", "T2"}};
  def.attrs = {attr_optional("value", AttrKind::Tensor)};
  const DTypeSet v9 = DTypeSet::from_bits(kAllTypes.bits() & ~DTypeSet::bit(DType::BFloat16));
  def.types = {{"T1", {DType::Int64}}, {"T2", v9}};
  def.infer = &infer;
  registry.add(def);

  def.since_version = 20;
  def.types = {{"T1", {DType::Int64}}, {"T2", kAllTypes}};
  registry.add(std::move(def));
}

}  // namespace baton::ops
