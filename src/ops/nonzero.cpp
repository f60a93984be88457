// ONNX NonZero (opsets 9 and 13): the indices of the elements of `X` that are not zero, as an
// int64 [rank(X), count] tensor (column j is the j-th non-zero element's index, in row-major
// order; a scalar X gives [1, count], its index 0, as onnxruntime does). The count depends on X's
// values: when they are known at compile time it is exact (and the node folds), otherwise the
// output's second axis is a data-dependent size, at most X's element count, that the kernel gives
// when it runs (docs/dynamic_shapes.md).
#include "ops/nonzero.h"

#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

// The number of non-zero elements of known data.
int64_t count_known(const InputInfo& x, int64_t numel) {
  const auto* bytes = static_cast<const uint8_t*>(x.data);
  const size_t width = dtype_size(x.dtype);
  int64_t count = 0;
  for (int64_t i = 0; i < numel; ++i) {
    count += element_is_nonzero(x.dtype, bytes + static_cast<size_t>(i) * width, width) ? 1 : 0;
  }
  return count;
}

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  const std::optional<int64_t> count = checked_numel(x);
  BATON_CHECK_OR_RETURN(count.has_value(), InvalidArgument, "{}: 'X' {} has too many elements",
                        ctx.what(), shape_to_string(x));
  const int64_t numel = *count;
  OutputInfo& y = ctx.output(0);
  y.dtype = DType::Int64;
  // A scalar has one index row (index 0), as onnxruntime and NumPy give it.
  const auto rows = std::max<int64_t>(static_cast<int64_t>(x.size()), 1);
  // Exact only over a constant: values computed from dynamic sizes hold one probe's sizes.
  const InputInfo& in = ctx.input(0);
  if ((in.data != nullptr && !in.data_from_sizes) || numel == 0) {
    y.sizes = {rows, numel == 0 ? 0 : count_known(ctx.input(0), numel)};
  } else {
    y.sizes = {rows, numel};
    y.data_dependent_axis = 1;
  }
  return Status();
}

}  // namespace

void register_nonzero(OpRegistry& registry) {
  OpDef def;
  def.name = "NonZero";
  def.since_version = 9;
  def.inputs = {{"X", "T"}};
  def.outputs = {{"Y", "tensor(int64)"}};
  def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(def);
  def.since_version = 13;  // bfloat16, which Baton takes from 9 on
  registry.add(std::move(def));
}

}  // namespace baton::ops
