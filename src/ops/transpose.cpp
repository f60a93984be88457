// ONNX Transpose (opset 13): output dimension i is input dimension perm[i]; without perm, the
// dimensions reversed. Canonical form: perm always present.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  const int rank = static_cast<int>(x.size());
  std::vector<int64_t> perm;
  if (ctx.attr_none("perm")) {
    for (int d = rank; d-- > 0;) perm.push_back(d);
  } else {
    perm = ctx.attr_ints("perm");
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = static_cast<int>(perm.size()) == rank;
  for (int d = 0; is_permutation && d < rank; ++d) is_permutation = sorted[d] == d;
  BATON_CHECK_OR_RETURN(is_permutation, InvalidArgument,
                        "{}: perm {} is not a permutation of the {} dimensions of {}", ctx.what(),
                        shape_to_string(perm), rank, shape_to_string(x));
  std::vector<int64_t> y(rank);
  for (int d = 0; d < rank; ++d) y[d] = x[perm[d]];
  ctx.output(0).sizes = std::move(y);
  ctx.set_attr("perm", AttrValue::of_ints(std::move(perm)));
  return Status();
}

}  // namespace

void register_transpose(OpRegistry& registry) {
  OpDef def;
  def.name = "Transpose";
  def.since_version = 13;
  def.inputs = {{"data", "T"}};
  def.outputs = {{"transposed", "T"}};
  def.attrs = {attr_optional("perm", AttrKind::Ints)};
  def.types = {{"T", kAllTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
