// ONNX Range (opset 11): start, start + delta, ... up to (not including) limit. The output's
// length depends on the three scalar inputs, so they must be known at compile time (the node then
// folds into a constant). Float lengths follow ONNX Runtime: (limit - start) in T, divided by
// delta in double, rounded up.
#include <cmath>
#include <cstring>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

constexpr std::string_view kNames[] = {"start", "limit", "delta"};

// The scalar input `i` as int64 (integer T) or double (float T).
struct Scalar {
  int64_t i = 0;
  double f = 0.0;
};

Result<Scalar> scalar(const InferContext& ctx, size_t i) {
  const InputInfo& in = ctx.input(i);
  BATON_CHECK_OR_RETURN(*checked_numel(in.sizes) == 1 && in.sizes.size() <= 1, InvalidArgument,
                        "{}: '{}' must be a scalar, got shape {}", ctx.what(), kNames[i],
                        shape_to_string(in.sizes));
  BATON_CHECK_OR_RETURN(in.data != nullptr, NotSupported,
                        "{}: input '{}' must be a constant (or computed from constants and static "
                        "shapes): the output's length depends on its value, and Baton compiles "
                        "static shapes",
                        ctx.what(), kNames[i]);
  Scalar s;
  switch (in.dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, in.data, 4);
      s.f = v;
      break;
    }
    case DType::Float64:
      std::memcpy(&s.f, in.data, 8);
      break;
    case DType::Int16: {
      int16_t v;
      std::memcpy(&v, in.data, 2);
      s.i = v;
      break;
    }
    default:
      s.i = int_values_of(in.dtype, in.data, 1)[0];
      break;
  }
  return s;
}

Status infer(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(const Scalar start, scalar(ctx, 0));
  BATON_ASSIGN_OR_RETURN(const Scalar limit, scalar(ctx, 1));
  BATON_ASSIGN_OR_RETURN(const Scalar delta, scalar(ctx, 2));
  const DType t = ctx.input(0).dtype;
  int64_t count = 0;
  if (t == DType::Float32 || t == DType::Float64) {
    BATON_CHECK_OR_RETURN(delta.f != 0.0, InvalidArgument, "{}: 'delta' is 0", ctx.what());
    const double span =
        t == DType::Float32
            ? static_cast<double>(static_cast<float>(limit.f) - static_cast<float>(start.f))
            : limit.f - start.f;
    const double n = std::ceil(span / delta.f);
    // 2^62 elements is far past any buffer; the byte-size check would refuse it anyway.
    BATON_CHECK_OR_RETURN(std::isfinite(n) && n < 0x1p62, InvalidArgument,
                          "{}: a range from {} to {} by {} has no finite length", ctx.what(),
                          start.f, limit.f, delta.f);
    count = n > 0 ? static_cast<int64_t>(n) : 0;
  } else {
    BATON_CHECK_OR_RETURN(delta.i != 0, InvalidArgument, "{}: 'delta' is 0", ctx.what());
    // In 128 bits: limit - start and the rounding may pass int64's range.
    const __int128 span = static_cast<__int128>(limit.i) - start.i;
    const __int128 step = delta.i;
    __int128 n = 0;
    if (step > 0 && span > 0) n = (span + step - 1) / step;
    if (step < 0 && span < 0) n = (-span - step - 1) / -step;
    BATON_CHECK_OR_RETURN(n <= INT64_MAX, InvalidArgument,
                          "{}: a range from {} to {} by {} is too long", ctx.what(), start.i,
                          limit.i, delta.i);
    count = static_cast<int64_t>(n);
  }
  ctx.output(0).sizes = {count};
  return Status();
}

}  // namespace

void register_range(OpRegistry& registry) {
  OpDef def;
  def.name = "Range";
  def.since_version = 11;
  def.inputs = {{"start", "T", Arity::Single, true},
                {"limit", "T", Arity::Single, true},
                {"delta", "T", Arity::Single, true}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", {DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64}}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
