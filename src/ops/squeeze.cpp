// ONNX Squeeze and Unsqueeze (opset 13): size-1 dimensions removed or inserted at the axes given
// by a compile-time int64 input. Squeeze without axes (or with empty axes, as ONNX Runtime reads
// them) removes every size-1 dimension.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Result<int> axis_in(int64_t a, int rank, const InferContext& ctx, std::string_view input) {
  BATON_CHECK_OR_RETURN(a >= -rank && a < rank, InvalidArgument,
                        "{}: {} entry {} is out of range [{}, {}]", ctx.what(), input, a, -rank,
                        rank - 1);
  return static_cast<int>(a < 0 ? a + rank : a);
}

Status infer_squeeze(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  const int rank = static_cast<int>(x.size());
  std::vector<bool> drop(rank, false);
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    BATON_ASSIGN_OR_RETURN(axes, ctx.int_values(1));
  }
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) drop[d] = x[d] == 1;
  }
  for (int64_t a : axes) {
    BATON_ASSIGN_OR_RETURN(const int d, axis_in(a, rank, ctx, "axes"));
    BATON_CHECK_OR_RETURN(!drop[d], InvalidArgument, "{}: axes {} name dimension {} twice",
                          ctx.what(), shape_to_string(axes), d);
    BATON_CHECK_OR_RETURN(x[d] == 1, InvalidArgument,
                          "{}: cannot squeeze dimension {} of {}: its size is {}, not 1",
                          ctx.what(), d, shape_to_string(x), x[d]);
    drop[d] = true;
  }
  std::vector<int64_t> y;
  for (int d = 0; d < rank; ++d) {
    if (!drop[d]) y.push_back(x[d]);
  }
  ctx.output(0).sizes = std::move(y);
  return Status();
}

Status infer_unsqueeze(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, ctx.int_values(1));
  const int out_rank = static_cast<int>(x.size() + axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    BATON_ASSIGN_OR_RETURN(const int d, axis_in(a, out_rank, ctx, "axes"));
    BATON_CHECK_OR_RETURN(!inserted[d], InvalidArgument, "{}: axes {} name dimension {} twice",
                          ctx.what(), shape_to_string(axes), d);
    inserted[d] = true;
  }
  std::vector<int64_t> y;
  size_t next = 0;
  for (int d = 0; d < out_rank; ++d) y.push_back(inserted[d] ? 1 : x[next++]);
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_squeeze(OpRegistry& registry) {
  OpDef squeeze;
  squeeze.name = "Squeeze";
  squeeze.since_version = 13;
  squeeze.inputs = {{"data", "T"}, {"axes", "tensor(int64)", Arity::Optional, true}};
  squeeze.outputs = {{"squeezed", "T"}};
  squeeze.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  squeeze.infer = &infer_squeeze;
  registry.add(std::move(squeeze));

  OpDef unsqueeze;
  unsqueeze.name = "Unsqueeze";
  unsqueeze.since_version = 13;
  unsqueeze.inputs = {{"data", "T"}, {"axes", "tensor(int64)", Arity::Single, true}};
  unsqueeze.outputs = {{"expanded", "T"}};
  unsqueeze.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  unsqueeze.infer = &infer_unsqueeze;
  registry.add(std::move(unsqueeze));
}

}  // namespace baton::ops
