// ONNX's reductions, one table (reduce.h) for all ten: ReduceSum, ReduceMean, ReduceProd,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceMax and ReduceMin.
//
// Two forms, each its own definition:
// - opset 1: `axes` is an attribute (absent or empty: reduce every dimension). ONNX's versions 11
//   (negative axes), 12 (int8 and uint8 for ReduceMax/ReduceMin) and 13 (bfloat16) only widened
//   what is accepted, and Baton takes all of it from opset 1 on. Canonical form: axes
//   normalized into [0, rank) and sorted.
// - opset 18 (ReduceSum: 13): `axes` is an optional int64 input, which must be known at compile
//   time, and `noop_with_empty_axes` says what no axes mean: every dimension (0) or none (1; each
//   element is then reduced alone, so ReduceSumSquare squares it). ReduceMax and ReduceMin take
//   bool from opset 20.
// Axes may be negative and may not repeat. A reduction over no elements (a reduced dimension of
// size 0) gives the reduction's identity: 0, 1 for ReduceProd, the lowest (highest) value for
// ReduceMax (ReduceMin), -inf for ReduceLogSum and ReduceLogSumExp, NaN for ReduceMean.
//
// Also ArgMax and ArgMin (opset 1; 12 added select_last_index): the int64 index of the largest
// (smallest) element along one axis, the first one unless select_last_index.
#include "ops/reduce.h"

#include <algorithm>
#include <array>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {

namespace {

constexpr DTypeSet kSumTypes = kFloatTypes | DTypeSet{DType::Int32, DType::Int64};
constexpr DTypeSet kMaxTypes =
    kFloatTypes | DTypeSet{DType::Int8, DType::Int32, DType::Int64, DType::UInt8};

constexpr std::array<ReduceRow, 10> kRows = {{
    {"ReduceSum", Reduction::Sum, kSumTypes, 13, 0},
    {"ReduceMean", Reduction::Mean, kSumTypes, 18, 0},
    {"ReduceProd", Reduction::Prod, kSumTypes, 18, 0},
    {"ReduceSumSquare", Reduction::SumSquare, kSumTypes, 18, 0},
    {"ReduceL1", Reduction::L1, kSumTypes, 18, 0},
    {"ReduceL2", Reduction::L2, kSumTypes, 18, 0},
    {"ReduceLogSum", Reduction::LogSum, kSumTypes, 18, 0},
    {"ReduceLogSumExp", Reduction::LogSumExp, kSumTypes, 18, 0},
    {"ReduceMax", Reduction::Max, kMaxTypes, 18, 20},
    {"ReduceMin", Reduction::Min, kMaxTypes, 18, 20},
}};

Status check_flag(InferContext& ctx, std::string_view name) {
  const int64_t v = ctx.attr_int(name);
  BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument,
                        "{}: attribute '{}' is {}; it must be 0 or 1", ctx.what(), name, v);
  return Status();
}

Status infer_attribute_axes(InferContext& ctx) {
  BATON_TRY(check_flag(ctx, "keepdims"));
  const auto x = ctx.sizes(0);
  std::optional<std::vector<int64_t>> axes;
  if (!ctx.attr_none("axes")) axes = ctx.attr_ints("axes");
  BATON_ASSIGN_OR_RETURN(
      const std::vector<bool> reduced,
      reduced_dims(axes, ctx.rank(0), /*noop_with_empty_axes=*/false, ctx.what()));
  if (axes && !axes->empty()) {
    std::vector<int64_t> canonical;
    for (size_t d = 0; d < reduced.size(); ++d) {
      if (reduced[d]) canonical.push_back(static_cast<int64_t>(d));
    }
    ctx.set_attr("axes", AttrValue::of_ints(std::move(canonical)));
  }
  ctx.output(0).sizes = reduced_shape(x, reduced, ctx.attr_int("keepdims") != 0);
  return Status();
}

Status infer_input_axes(InferContext& ctx) {
  BATON_TRY(check_flag(ctx, "keepdims"));
  BATON_TRY(check_flag(ctx, "noop_with_empty_axes"));
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(1)) {
    BATON_ASSIGN_OR_RETURN(axes, ctx.int_values(1));
  }
  BATON_ASSIGN_OR_RETURN(
      const std::vector<bool> reduced,
      reduced_dims(axes, ctx.rank(0), ctx.attr_int("noop_with_empty_axes") != 0, ctx.what()));
  ctx.output(0).sizes = reduced_shape(ctx.sizes(0), reduced, ctx.attr_int("keepdims") != 0);
  return Status();
}

Status infer_arg(InferContext& ctx) {
  BATON_TRY(check_flag(ctx, "keepdims"));
  if (ctx.def().attr_index("select_last_index") >= 0) {
    BATON_TRY(check_flag(ctx, "select_last_index"));
  }
  BATON_ASSIGN_OR_RETURN(const int axis, ctx.canonical_axis("axis", ctx.rank(0)));
  const auto x = ctx.sizes(0);
  std::vector<bool> reduced(x.size(), false);
  reduced[static_cast<size_t>(axis)] = true;
  std::vector<int64_t> y = reduced_shape(x, reduced, ctx.attr_int("keepdims") != 0);
  const bool empty_output = std::find(y.begin(), y.end(), 0) != y.end();
  BATON_CHECK_OR_RETURN(x[static_cast<size_t>(axis)] != 0 || empty_output, InvalidArgument,
                        "{}: axis {} of the input {} has size 0, so there is no element to pick",
                        ctx.what(), axis, shape_to_string(x));
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

std::span<const ReduceRow> reduce_rows() { return kRows; }

const ReduceRow* find_reduce_row(std::string_view name) {
  for (const ReduceRow& row : kRows) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

Result<std::vector<int>> normalize_axes(std::span<const int64_t> values, int rank,
                                        std::string_view what, std::string_view name) {
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : values) {
    BATON_CHECK_OR_RETURN(a >= -rank && a < rank, InvalidArgument,
                          "{}: '{}' holds {}, out of range [{}, {}] for a rank-{} input", what,
                          name, a, -rank, rank - 1, rank);
    const int d = static_cast<int>(a < 0 ? a + rank : a);
    BATON_CHECK_OR_RETURN(!seen[static_cast<size_t>(d)], InvalidArgument,
                          "{}: '{}' {} names dimension {} twice", what, name,
                          shape_to_string(values), d);
    seen[static_cast<size_t>(d)] = true;
    out.push_back(d);
  }
  return out;
}

Result<std::vector<bool>> reduced_dims(const std::optional<std::vector<int64_t>>& axes, int rank,
                                       bool noop_with_empty_axes, std::string_view what) {
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  if (!axes || axes->empty()) {
    if (!noop_with_empty_axes) reduced.assign(static_cast<size_t>(rank), true);
    return reduced;
  }
  BATON_ASSIGN_OR_RETURN(const std::vector<int> dims, normalize_axes(*axes, rank, what, "axes"));
  for (int d : dims) reduced[static_cast<size_t>(d)] = true;
  return reduced;
}

std::vector<int64_t> reduced_shape(std::span<const int64_t> sizes, const std::vector<bool>& reduced,
                                   bool keepdims) {
  std::vector<int64_t> y;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!reduced[d]) {
      y.push_back(sizes[d]);
    } else if (keepdims) {
      y.push_back(1);
    }
  }
  return y;
}

void register_reduce(OpRegistry& registry) {
  for (const ReduceRow& row : kRows) {
    OpDef attr;
    attr.name = row.name;
    attr.since_version = 1;
    attr.inputs = {{"data", "T"}};
    attr.outputs = {{"reduced", "T"}};
    attr.attrs = {attr_optional("axes", AttrKind::Ints), attr_int("keepdims", 1)};
    attr.types = {{"T", row.types}};
    attr.infer = &infer_attribute_axes;
    registry.add(std::move(attr));

    auto input_axes = [&](int since, DTypeSet types) {
      OpDef def;
      def.name = row.name;
      def.since_version = since;
      def.inputs = {{"data", "T"}, {"axes", "tensor(int64)", Arity::Optional, true}};
      def.outputs = {{"reduced", "T"}};
      def.attrs = {attr_int("keepdims", 1), attr_int("noop_with_empty_axes", 0)};
      def.types = {{"T", types}, {"tensor(int64)", {DType::Int64}}};
      def.infer = &infer_input_axes;
      registry.add(std::move(def));
    };
    input_axes(row.input_axes_since, row.types);
    if (row.bool_since != 0) input_axes(row.bool_since, row.types | kBoolTypes);
  }

  for (std::string_view name : {std::string_view("ArgMax"), std::string_view("ArgMin")}) {
    for (int since : {1, 12}) {
      OpDef def;
      def.name = name;
      def.since_version = since;
      def.inputs = {{"data", "T"}};
      def.outputs = {{"reduced", "tensor(int64)"}};
      def.attrs = {attr_int("axis", 0), attr_int("keepdims", 1)};
      if (since >= 12) def.attrs.push_back(attr_int("select_last_index", 0));
      def.types = {{"T", kNumericTypes}, {"tensor(int64)", {DType::Int64}}};
      def.infer = &infer_arg;
      registry.add(std::move(def));
    }
  }
}

}  // namespace baton::ops
