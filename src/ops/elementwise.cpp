// Definitions of the elementwise operators of ops/elementwise.h: one per row.
#include "ops/elementwise.h"

#include <cmath>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

#define BATON_UNARY_ROW(Name, since, types, out, attrs, cpu, device) \
  ElementwiseRow{#Name,                                              \
                 since,                                              \
                 1,                                                  \
                 types,                                              \
                 DTypeSet{},                                         \
                 ElementwiseOut::out,                                \
                 {{BATON_ELEMENTWISE_ATTR_SPECS attrs}},             \
                 BATON_ELEMENTWISE_ATTR_COUNT attrs,                 \
                 device},
#define BATON_BINARY_ROW(Name, since, a_types, b_types, out, attrs, cpu, device) \
  ElementwiseRow{#Name,                                                          \
                 since,                                                          \
                 2,                                                              \
                 a_types,                                                        \
                 b_types,                                                        \
                 ElementwiseOut::out,                                            \
                 {{BATON_ELEMENTWISE_ATTR_SPECS attrs}},                         \
                 BATON_ELEMENTWISE_ATTR_COUNT attrs,                             \
                 device},
constexpr ElementwiseRow kRows[] = {BATON_UNARY_OPS(BATON_UNARY_ROW)
                                        BATON_BINARY_OPS(BATON_BINARY_ROW)};
#undef BATON_UNARY_ROW
#undef BATON_BINARY_ROW

const ElementwiseRow& row_of(const InferContext& ctx) { return *find_elementwise(ctx.def().name); }

Status check_attributes(const ElementwiseRow& row, InferContext& ctx) {
  for (const ElementwiseAttr& a : row.attributes()) {
    if (a.kind == ElementwiseAttrKind::Flag) {
      const int64_t v = ctx.attr_int(a.name);
      BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument,
                            "{}: attribute '{}' is {}; it must be 0 or 1", ctx.what(), a.name, v);
      continue;
    }
    const double v = ctx.attr_float(a.name);
    BATON_CHECK_OR_RETURN(std::isfinite(v), InvalidArgument,
                          "{}: attribute '{}' is {}; it must be a finite number", ctx.what(),
                          a.name, v);
    BATON_CHECK_OR_RETURN(a.kind != ElementwiseAttrKind::NonZero || v != 0.0, InvalidArgument,
                          "{}: attribute '{}' is 0; it divides, so it must not be 0", ctx.what(),
                          a.name);
  }
  // What ONNX states across an attribute and the tensor type, which the row cannot say.
  if (row.name == "Mod") {
    const DType t = ctx.input(0).dtype;
    BATON_CHECK_OR_RETURN(ctx.attr_int("fmod") == 1 || !kFloatTypes.contains(t), InvalidArgument,
                          "{}: attribute 'fmod' is 0 (the sign of the divisor), which ONNX allows "
                          "for integer tensors only; {} tensors need fmod = 1",
                          ctx.what(), dtype_name(t));
  }
  return Status();
}

Status infer_row(InferContext& ctx) {
  const ElementwiseRow& row = row_of(ctx);
  BATON_TRY(check_attributes(row, ctx));
  if (row.arity == 1) {
    ctx.output(0).sizes.assign(ctx.sizes(0).begin(), ctx.sizes(0).end());
    return Status();
  }
  if (row.out == ElementwiseOut::ShapeOfA) {
    BATON_CHECK_OR_RETURN(broadcasts_to(ctx.sizes(1), ctx.sizes(0)), InvalidArgument,
                          "{}: input 1 of shape {} does not broadcast to input 0's shape {} (the "
                          "output keeps input 0's shape)",
                          ctx.what(), shape_to_string(ctx.sizes(1)), shape_to_string(ctx.sizes(0)));
    ctx.output(0).sizes.assign(ctx.sizes(0).begin(), ctx.sizes(0).end());
    return Status();
  }
  BATON_ASSIGN_OR_RETURN(ctx.output(0).sizes,
                         broadcast_shape(ctx.sizes(0), ctx.sizes(1), ctx.what()));
  return Status();
}

}  // namespace

std::span<const ElementwiseRow> elementwise_rows() { return kRows; }

const ElementwiseRow* find_elementwise(std::string_view name) {
  for (const ElementwiseRow& r : kRows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::optional<double> evaluate_elementwise(std::string_view name, double a, double b,
                                           const ElementwiseArgs& args) {
  bool error = false;
  std::optional<double> out;
#define BATON_EVALUATE_UNARY(Name, ...) \
  if (name == #Name) out = static_cast<double>(Name##Fn::apply<double>(a, args));
#define BATON_EVALUATE_BINARY(Name, ...) \
  if (name == #Name) out = static_cast<double>(Name##Fn::apply<double, double>(a, b, args, error));
  BATON_UNARY_OPS(BATON_EVALUATE_UNARY)
  BATON_BINARY_OPS(BATON_EVALUATE_BINARY)
#undef BATON_EVALUATE_UNARY
#undef BATON_EVALUATE_BINARY
  if (error) return std::nullopt;
  return out;
}

void register_elementwise(OpRegistry& registry) {
  for (const ElementwiseRow& row : kRows) {
    OpDef def;
    def.name = row.name;
    def.since_version = row.since_version;
    const std::string_view out_type = row.out == ElementwiseOut::Bool ? "T1" : "T";
    if (row.arity == 1) {
      def.inputs = {{"X", "T"}};
      def.outputs = {{"Y", out_type}};
      def.types = {{"T", row.types}};
    } else {
      const bool same = row.b_types == kSameAsA;
      // ONNX's names: T1 is Pow's exponent type and the comparisons' bool (no row has both).
      def.inputs = {{"A", "T"}, {"B", same ? "T" : "T1"}};
      def.outputs = {{"C", out_type}};
      def.types = {{"T", row.types}};
      if (!same) def.types.push_back({"T1", row.b_types});
    }
    if (row.out == ElementwiseOut::Bool) def.types.push_back({"T1", kBoolTypes});
    for (const ElementwiseAttr& a : row.attributes()) {
      def.attrs.push_back(a.kind == ElementwiseAttrKind::Flag
                              ? attr_int(a.name, static_cast<int64_t>(a.default_value))
                              : attr_float(a.name, a.default_value));
    }
    def.infer = &infer_row;
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
