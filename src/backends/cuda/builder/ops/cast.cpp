// Cast on the GPU among the dtypes an engine stores (float32, float16, bfloat16, int8, uint8,
// int16, int32, int64, bool), as one typed kernel (codegen.h's generate_typed) in the CPU
// kernel's semantics (src/kernels/cpu/op_cast.cpp): float to integer truncates toward zero,
// saturates and maps NaN to 0; integer to integer wraps; anything to bool is x != 0 (NaN is true);
// bool is 0 or 1. Values are read and written in their stored dtypes (an fp16 engine keeps float
// activations in float16); a Cast to float16 or bfloat16 whose result the engine keeps in float32
// still rounds to the target type. Integer sources convert to float with one rounding (to
// float32, then to the stored type: int64 values beyond 2^24 may round twice).
#include <fmt/format.h>

#include <limits>

#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

bool is_float(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16;
}

// [lo, hi] of an integer dtype.
std::pair<int64_t, int64_t> range_of(DType t) {
  switch (t) {
    case DType::Int8:
      return {std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max()};
    case DType::UInt8:
      return {0, std::numeric_limits<uint8_t>::max()};
    case DType::Int16:
      return {std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()};
    case DType::Int32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

// The expression converting {0} (IR dtype `from`) to IR dtype `to`, stored as `stored`.
std::string conversion(DType from, DType to, DType stored) {
  std::string v = "{0}";
  if (from == DType::Bool) {
    v = "({0} ? 1 : 0)";
  } else if (!is_float(from)) {
    if (to == DType::Bool) return "({0} != 0)";
    if (!is_float(to)) return v;  // wraps in sto
    v = "(float)({0})";
  } else {
    if (to == DType::Bool) return "({0} != 0.0f)";
    if (!is_float(to)) {
      const auto [lo, hi] = range_of(to);
      // The literal -2^63 is not a C++ integer literal: write it as an expression.
      const std::string low = lo == std::numeric_limits<int64_t>::min()
                                  ? "(-9223372036854775807LL - 1)"
                                  : fmt::format("{}LL", lo);
      return fmt::format("baton_f2i({{0}}, {}, {}LL)", low, hi);
    }
  }
  if (to == DType::Float16 && stored != DType::Float16) return "baton_round_f16(" + v + ")";
  if (to == DType::BFloat16 && stored != DType::BFloat16) return "baton_round_bf16(" + v + ")";
  return v;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  TypedKernel k;
  k.sizes = ctx.value(out).sizes;
  k.out = ctx.dtype_of(out);
  TypedOperand t = typed_operand(ctx, in, k.sizes);
  k.inputs.push_back(t.input);
  k.expression = conversion(ctx.value(in).dtype, ctx.value(out).dtype, k.out);
  add_typed_kernel(ctx, "cast", std::move(k), {t.operand, out});
  return Status();
}

}  // namespace

const OpLowering kCastLowering{
    .op = "Cast", .supports = &engine_tensors, .lower = &lower, .types = kEngineTypes};

}  // namespace baton::cuda
