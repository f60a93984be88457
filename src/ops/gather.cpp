// ONNX Gather, GatherElements and GatherND (opset 13). Indices may be negative (counting from the
// end of their dimension). Indices known at compile time are checked here; the kernels check the
// others at run time. Canonical form: axis in [0, rank).
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/attr_checks.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

// Every index of a compile-time `indices` input (int32 or int64) in [-n, n - 1], where n is
// `dims[position % dims.size()]` (one size for Gather and GatherElements, the last dimension's
// sizes for GatherND's tuples).
Status check_constant_indices(const InferContext& ctx, size_t input,
                              std::span<const int64_t> dims) {
  const InputInfo& in = ctx.input(input);
  if (in.data == nullptr || dims.empty()) return Status();
  const int64_t count = *checked_numel(in.sizes);
  const std::vector<int64_t> values = int_values_of(in.dtype, in.data, count);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t n = dims[static_cast<size_t>(k) % dims.size()];
    const int64_t v = values[static_cast<size_t>(k)];
    if (v < -n || v >= n) return index_out_of_range(ctx.what(), "indices", k, v, n);
  }
  return Status();
}

// Gather's and GatherElements' axis into 'data' (of rank >= 1), canonical.
Result<int> data_axis(InferContext& ctx) {
  BATON_CHECK_OR_RETURN(ctx.rank(0) >= 1, InvalidArgument, "{}: 'data' must have rank >= 1, got {}",
                        ctx.what(), shape_to_string(ctx.sizes(0)));
  return ctx.canonical_axis("axis", ctx.rank(0));
}

Status infer_gather(InferContext& ctx) {
  const auto data = ctx.sizes(0);
  const auto indices = ctx.sizes(1);
  BATON_ASSIGN_OR_RETURN(const int axis, data_axis(ctx));
  std::vector<int64_t> y(data.begin(), data.begin() + axis);
  y.insert(y.end(), indices.begin(), indices.end());
  y.insert(y.end(), data.begin() + axis + 1, data.end());
  ctx.output(0).sizes = std::move(y);
  const int64_t n = data[axis];
  return check_constant_indices(ctx, 1, std::span<const int64_t>(&n, 1));
}

Status infer_gather_elements(InferContext& ctx) {
  const auto data = ctx.sizes(0);
  const auto indices = ctx.sizes(1);
  BATON_ASSIGN_OR_RETURN(const int axis, data_axis(ctx));
  BATON_TRY(check_element_indices(ctx, axis));
  ctx.output(0).sizes.assign(indices.begin(), indices.end());
  const int64_t n = data[axis];
  return check_constant_indices(ctx, 1, std::span<const int64_t>(&n, 1));
}

Status infer_gather_nd(InferContext& ctx) {
  const auto data = ctx.sizes(0);
  const auto indices = ctx.sizes(1);
  const int r = ctx.rank(0), q = ctx.rank(1);
  const int64_t b = ctx.attr_int("batch_dims");
  BATON_CHECK_OR_RETURN(r >= 1 && q >= 1, InvalidArgument,
                        "{}: 'data' {} and 'indices' {} must have rank >= 1", ctx.what(),
                        shape_to_string(data), shape_to_string(indices));
  BATON_CHECK_OR_RETURN(b >= 0 && b < std::min(q, r), InvalidArgument,
                        "{}: attribute 'batch_dims' is {}; it must be in [0, {}) for 'data' {} and "
                        "'indices' {}",
                        ctx.what(), b, std::min(q, r), shape_to_string(data),
                        shape_to_string(indices));
  for (int64_t d = 0; d < b; ++d) {
    BATON_CHECK_OR_RETURN(data[d] == indices[d], InvalidArgument,
                          "{}: the {} batch dimensions of 'data' {} and 'indices' {} differ",
                          ctx.what(), b, shape_to_string(data), shape_to_string(indices));
  }
  const int64_t k = indices[q - 1];
  BATON_CHECK_OR_RETURN(k >= 1 && k <= r - b, InvalidArgument,
                        "{}: the last dimension of 'indices' {} is {}; it must be in [1, {}] "
                        "(the rank of 'data' {} less batch_dims {})",
                        ctx.what(), shape_to_string(indices), k, r - b, shape_to_string(data), b);
  std::vector<int64_t> y(indices.begin(), indices.end() - 1);
  y.insert(y.end(), data.begin() + b + k, data.end());
  ctx.output(0).sizes = std::move(y);
  return check_constant_indices(ctx, 1, data.subspan(static_cast<size_t>(b), k));
}

}  // namespace

void register_gather(OpRegistry& registry) {
  OpDef gather;
  gather.name = "Gather";
  gather.since_version = 13;
  gather.inputs = {{"data", "T"}, {"indices", "Tind"}};
  gather.outputs = {{"output", "T"}};
  gather.attrs = {attr_int("axis", 0)};
  gather.types = {{"T", kAllTypes}, {"Tind", kIndexTypes}};
  gather.infer = &infer_gather;
  registry.add(gather);

  OpDef elements = gather;
  elements.name = "GatherElements";
  elements.infer = &infer_gather_elements;
  registry.add(std::move(elements));

  OpDef nd;
  nd.name = "GatherND";
  nd.since_version = 13;
  nd.inputs = {{"data", "T"}, {"indices", "tensor(int64)"}};
  nd.outputs = {{"output", "T"}};
  nd.attrs = {attr_int("batch_dims", 0)};
  nd.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  nd.infer = &infer_gather_nd;
  registry.add(std::move(nd));
}

}  // namespace baton::ops
