// ONNX Slice (opset 13): starts, ends, axes and steps are inputs, which must be known at compile
// time (the output shape depends on them). Negative steps walk backwards; out-of-range starts and
// ends are clamped.
#include "ops/slice.h"

#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {

Result<std::vector<SliceDim>> slice_dims(std::span<const int64_t> sizes,
                                         std::span<const int64_t> starts,
                                         std::span<const int64_t> ends,
                                         const std::vector<int64_t>* axes,
                                         const std::vector<int64_t>* steps, std::string_view what) {
  const int rank = static_cast<int>(sizes.size());
  const size_t n = starts.size();
  BATON_CHECK_OR_RETURN(ends.size() == n, InvalidArgument,
                        "{}: 'starts' has {} entries but 'ends' has {}", what, n, ends.size());
  BATON_CHECK_OR_RETURN(axes == nullptr || axes->size() == n, InvalidArgument,
                        "{}: 'starts' has {} entries but 'axes' has {}", what, n, axes->size());
  BATON_CHECK_OR_RETURN(steps == nullptr || steps->size() == n, InvalidArgument,
                        "{}: 'starts' has {} entries but 'steps' has {}", what, n, steps->size());
  BATON_CHECK_OR_RETURN(axes != nullptr || static_cast<int>(n) <= rank, InvalidArgument,
                        "{}: {} starts without 'axes' for a rank-{} input", what, n, rank);
  std::vector<SliceDim> dims(sizes.size());
  for (int d = 0; d < rank; ++d) dims[d] = {0, 1, sizes[d]};
  std::vector<bool> seen(sizes.size(), false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = axes == nullptr ? static_cast<int64_t>(i) : (*axes)[i];
    BATON_CHECK_OR_RETURN(a >= -rank && a < rank, InvalidArgument,
                          "{}: 'axes' entry {} is out of range [{}, {}] for a rank-{} input", what,
                          a, -rank, rank - 1, rank);
    const auto d = static_cast<size_t>(a < 0 ? a + rank : a);
    BATON_CHECK_OR_RETURN(!seen[d], InvalidArgument, "{}: 'axes' names dimension {} twice", what,
                          d);
    seen[d] = true;
    const int64_t step = steps == nullptr ? 1 : (*steps)[i];
    BATON_CHECK_OR_RETURN(step != 0, InvalidArgument, "{}: 'steps' entry {} (axis {}) is 0", what,
                          i, d);
    const int64_t dim = sizes[d];
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t size = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) size = (end - start - 1) / step + 1;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // |step| without negating INT64_MIN.
      const uint64_t magnitude = static_cast<uint64_t>(-(step + 1)) + 1;
      if (start > end)
        size = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / magnitude) + 1;
    } else {
      start = 0;
    }
    dims[d] = {start, step, size};
  }
  return dims;
}

namespace {

Status infer(InferContext& ctx) {
  const auto data = ctx.sizes(0);
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> starts, ctx.int_values(1));
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> ends, ctx.int_values(2));
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) {
    BATON_ASSIGN_OR_RETURN(axes, ctx.int_values(3));
  }
  if (ctx.has_input(4)) {
    BATON_ASSIGN_OR_RETURN(steps, ctx.int_values(4));
  }
  BATON_ASSIGN_OR_RETURN(const std::vector<SliceDim> dims,
                         slice_dims(data, starts, ends, ctx.has_input(3) ? &axes : nullptr,
                                    ctx.has_input(4) ? &steps : nullptr, ctx.what()));
  std::vector<int64_t> y;
  for (const SliceDim& d : dims) y.push_back(d.size);
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_slice(OpRegistry& registry) {
  OpDef def;
  def.name = "Slice";
  def.since_version = 13;
  def.inputs = {{"data", "T"},
                {"starts", "Tind", Arity::Single, true},
                {"ends", "Tind", Arity::Single, true},
                {"axes", "Tind", Arity::Optional, true},
                {"steps", "Tind", Arity::Optional, true}};
  def.outputs = {{"output", "T"}};
  def.types = {{"T", kAllTypes}, {"Tind", kIndexTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
