// Baton's canonical Attention (domain "baton"): scaled dot-product attention, written by the
// optimizer's attention pass from the pattern both torch.onnx exporters write
// (compiler/passes/attention.cpp):
//
//   S = scale * Q K^T          Q [..., Sq, D]; K [..., Sk, D] (k_transposed 0) or [..., D, Sk] (1)
//   mask_kind "add":    S += Mask          (Mask of Q's dtype)
//   mask_kind "select": S = Mask ? S : mask_fill   (Mask bool)
//   P = softmax(S) over the last axis; nan_to_zero 1: NaN in P (a row with every score -inf)
//       becomes 0, as the exporters' Where(IsNaN(P), 0, P) does
//   Y = P V                    V [..., Sk, Dv]; Y [..., Sq, Dv]
//
// Q, K and V have the same leading (batch, head) dimensions; Mask broadcasts unidirectionally to
// [..., Sq, Sk]. Canonical form: mask_kind "none" exactly when there is no Mask input.
#include <cmath>
#include <limits>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto q = ctx.sizes(0), k = ctx.sizes(1), v = ctx.sizes(2);
  BATON_CHECK_OR_RETURN(q.size() >= 2 && k.size() == q.size() && v.size() == q.size(),
                        InvalidArgument, "{}: Q {}, K {} and V {} must have one rank of at least 2",
                        ctx.what(), shape_to_string(q), shape_to_string(k), shape_to_string(v));
  const size_t r = q.size();
  const bool batch_equal = std::equal(q.begin(), q.end() - 2, k.begin()) &&
                           std::equal(q.begin(), q.end() - 2, v.begin());
  BATON_CHECK_OR_RETURN(batch_equal, InvalidArgument,
                        "{}: Q {}, K {} and V {} must have the same leading dimensions", ctx.what(),
                        shape_to_string(q), shape_to_string(k), shape_to_string(v));
  const int64_t kt = ctx.attr_int("k_transposed");
  BATON_CHECK_OR_RETURN(kt == 0 || kt == 1, InvalidArgument,
                        "{}: attribute 'k_transposed' is {}; use 0 or 1", ctx.what(), kt);
  const int64_t d = q[r - 1];
  const int64_t kd = kt ? k[r - 2] : k[r - 1], sk = kt ? k[r - 1] : k[r - 2];
  BATON_CHECK_OR_RETURN(kd == d && v[r - 2] == sk, InvalidArgument,
                        "{}: Q {} (head size {}), K {} (k_transposed {}) and V {} do not agree on "
                        "the head size and the key length",
                        ctx.what(), shape_to_string(q), d, shape_to_string(k), kt,
                        shape_to_string(v));
  const double scale = ctx.attr_float("scale");
  BATON_CHECK_OR_RETURN(std::isfinite(scale), InvalidArgument,
                        "{}: attribute 'scale' is {}; it must be finite", ctx.what(), scale);
  const int64_t nan_to_zero = ctx.attr_int("nan_to_zero");
  BATON_CHECK_OR_RETURN(nan_to_zero == 0 || nan_to_zero == 1, InvalidArgument,
                        "{}: attribute 'nan_to_zero' is {}; use 0 or 1", ctx.what(), nan_to_zero);
  const std::string& kind = ctx.attr_string("mask_kind");
  if (ctx.has_input(3)) {
    BATON_CHECK_OR_RETURN(kind == "add" || kind == "select", InvalidArgument,
                          "{}: attribute 'mask_kind' is '{}' with a Mask input; use 'add' or "
                          "'select'",
                          ctx.what(), kind);
    const DType want = kind == "add" ? ctx.input(0).dtype : DType::Bool;
    BATON_CHECK_OR_RETURN(ctx.input(3).dtype == want, InvalidArgument,
                          "{}: a '{}' Mask must be {}, got {}", ctx.what(), kind, dtype_name(want),
                          dtype_name(ctx.input(3).dtype));
    std::vector<int64_t> scores(q.begin(), q.end());
    scores.back() = sk;
    BATON_CHECK_OR_RETURN(broadcasts_to(ctx.sizes(3), scores), InvalidArgument,
                          "{}: Mask {} does not broadcast to the scores {}", ctx.what(),
                          shape_to_string(ctx.sizes(3)), shape_to_string(scores));
  } else {
    BATON_CHECK_OR_RETURN(kind == "none", InvalidArgument,
                          "{}: attribute 'mask_kind' is '{}' but there is no Mask input",
                          ctx.what(), kind);
  }
  std::vector<int64_t> y(q.begin(), q.end());
  y.back() = v[r - 1];
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_attention(OpRegistry& registry) {
  OpDef def;
  def.name = "Attention";
  def.domain = "baton";
  def.since_version = 1;
  def.inputs = {{"Q", "T"}, {"K", "T"}, {"V", "T"}, {"Mask", "M", Arity::Optional}};
  def.outputs = {{"Y", "T"}};
  def.attrs = {attr_required("scale", AttrKind::Float), attr_int("k_transposed", 0),
               attr_string("mask_kind", "none"),
               attr_float("mask_fill", -std::numeric_limits<double>::infinity()),
               attr_int("nan_to_zero", 0)};
  def.types = {{"T", kFloatTypes}, {"M", kFloatTypes | DTypeSet{DType::Bool}}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
