// ONNX Cast (opset 6; 19 added `saturate`) and CastLike (opset 15; 19 added `saturate`): the
// input converted elementwise to the dtype `to` names (Cast) or to the dtype of `target_type`
// (CastLike). `saturate` only concerns float8 types, which Baton does not have: any 0 / 1 value is
// accepted and changes nothing. The conversions themselves are the CPU kernel's
// (src/kernels/cpu/op_cast.cpp).
#include <fmt/format.h>

#include "baton/core/check.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

// ONNX's TensorProto.DataType names, for codes Baton has no dtype for.
std::string_view onnx_type_name(int64_t code) {
  static constexpr std::string_view kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",     "FLOAT4E2M1"};
  return code >= 0 && code < static_cast<int64_t>(std::size(kNames)) ? kNames[code] : "";
}

Status check_saturate(InferContext& ctx) {
  if (ctx.def().attr_index("saturate") < 0) return Status();
  const int64_t saturate = ctx.attr_int("saturate");
  BATON_CHECK_OR_RETURN(saturate == 0 || saturate == 1, InvalidArgument,
                        "{}: attribute 'saturate' is {}; it must be 0 or 1", ctx.what(), saturate);
  return Status();
}

Status infer_cast(InferContext& ctx) {
  BATON_TRY(check_saturate(ctx));
  const int64_t to = ctx.attr_int("to");
  const std::string_view onnx_name = onnx_type_name(to);
  BATON_CHECK_OR_RETURN(to > 0 && !onnx_name.empty(), InvalidArgument,
                        "{}: attribute 'to' is {}, which is no ONNX tensor type", ctx.what(), to);
  BATON_CHECK_OR_RETURN(is_valid_dtype(static_cast<int>(to)), NotSupported,
                        "{}: attribute 'to' is {} ({}); Baton's tensors are {}", ctx.what(), to,
                        onnx_name, kAllTypes.to_string());
  ctx.set_output_like(0, 0);
  ctx.output(0).dtype = static_cast<DType>(to);
  return Status();
}

Status infer_cast_like(InferContext& ctx) {
  BATON_TRY(check_saturate(ctx));
  const DType to = ctx.input(1).dtype;
  ctx.set_output_like(0, 0);
  ctx.output(0).dtype = to;
  return Status();
}

}  // namespace

void register_cast(OpRegistry& registry) {
  for (int since : {6, 19}) {
    OpDef def;
    def.name = "Cast";
    def.since_version = since;
    def.inputs = {{"input", "T1"}};
    def.outputs = {{"output", "T2"}};
    def.attrs = {attr_required("to", AttrKind::Int)};
    if (since >= 19) def.attrs.push_back(attr_int("saturate", 1));
    def.types = {{"T1", kAllTypes}, {"T2", kAllTypes}};
    def.infer = &infer_cast;
    registry.add(std::move(def));
  }
  for (int since : {15, 19}) {
    OpDef def;
    def.name = "CastLike";
    def.since_version = since;
    def.inputs = {{"input", "T1"}, {"target_type", "T2"}};
    def.outputs = {{"output", "T2"}};
    if (since >= 19) def.attrs = {attr_int("saturate", 1)};
    def.types = {{"T1", kAllTypes}, {"T2", kAllTypes}};
    def.infer = &infer_cast_like;
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
