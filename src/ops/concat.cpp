// ONNX Concat (opset 13): the inputs joined along `axis`; every other dimension must agree.
// Canonical form: axis in [0, rank).
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto first = ctx.sizes(0);
  const int rank = static_cast<int>(first.size());
  BATON_CHECK_OR_RETURN(rank >= 1, InvalidArgument, "{}: inputs must have rank >= 1, got {}",
                        ctx.what(), shape_to_string(first));
  BATON_ASSIGN_OR_RETURN(const int axis, ctx.canonical_axis("axis", rank));
  std::vector<int64_t> y(first.begin(), first.end());
  y[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const auto s = ctx.sizes(i);
    bool ok = static_cast<int>(s.size()) == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || s[d] == first[d];
    BATON_CHECK_OR_RETURN(ok, InvalidArgument,
                          "{}: input {} has shape {} but input 0 has {}; they may differ only "
                          "along axis {}",
                          ctx.what(), i, shape_to_string(s), shape_to_string(first), axis);
    BATON_CHECK_OR_RETURN(!__builtin_add_overflow(y[axis], s[axis], &y[axis]), InvalidArgument,
                          "{}: the inputs' sizes along axis {} add up to more than int64 holds "
                          "(input {} is {})",
                          ctx.what(), axis, i, shape_to_string(s));
  }
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_concat(OpRegistry& registry) {
  OpDef def;
  def.name = "Concat";
  def.since_version = 13;
  def.inputs = {{"inputs", "T", Arity::Variadic}};
  def.outputs = {{"concat_result", "T"}};
  def.attrs = {attr_required("axis", AttrKind::Int)};
  def.types = {{"T", kAllTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
