// Baton's canonical Linear (domain "baton"): Y = X W + B over X's last dimension, for X of any
// rank >= 1, W [K, N] (or [N, K] with transW 1: a Gemm's PyTorch-layout weight, taken as it is)
// and B [N] (optional). Written by the optimizer's matmul-add pass (MatMul
// followed by a bias Add) and qkv pass (Linears that share X, with W and B concatenated along N);
// with `splits` the result's columns are cut into one output per entry: output i is [...,
// splits[i]]. Canonical form: `splits` empty for a single output.
//
// `activation` and `activation_params` (ops/activation.h) apply an activation after the bias, as
// the fuse-linear pass folds a following Relu or Gelu in: Y = act(X W + B). A Linear with split
// outputs has none.
#include <numeric>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/activation.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0), w = ctx.sizes(1);
  const int64_t trans_w = ctx.attr_int("transW");
  BATON_CHECK_OR_RETURN(trans_w == 0 || trans_w == 1, InvalidArgument,
                        "{}: attribute 'transW' is {}; it is 0 or 1", ctx.what(), trans_w);
  BATON_CHECK_OR_RETURN(!x.empty() && w.size() == 2 && x.back() == w[trans_w], InvalidArgument,
                        "{}: X {} and W {} do not multiply: W must be {} with K X's last "
                        "dimension",
                        ctx.what(), shape_to_string(x), shape_to_string(w),
                        trans_w ? "[N, K] (transW 1)" : "[K, N]");
  const int64_t n = w[1 - trans_w];
  BATON_CHECK_OR_RETURN(trans_w == 0 || ctx.attr_ints("splits").empty(), InvalidArgument,
                        "{}: a Linear with transW 1 has no splits", ctx.what());
  if (ctx.has_input(2)) {
    const auto b = ctx.sizes(2);
    BATON_CHECK_OR_RETURN(b.size() == 1 && b[0] == n, InvalidArgument,
                          "{}: B must be [{}] (W's N), got {}", ctx.what(), n, shape_to_string(b));
  }
  std::vector<int64_t> splits = ctx.attr_ints("splits");
  if (splits.size() == 1 && splits[0] == n) splits.clear();
  if (splits.empty()) {
    BATON_CHECK_OR_RETURN(ctx.num_outputs() == 1, InvalidArgument,
                          "{}: {} outputs without 'splits'", ctx.what(), ctx.num_outputs());
    splits = {n};
  } else {
    BATON_CHECK_OR_RETURN(splits.size() == ctx.num_outputs(), InvalidArgument,
                          "{}: attribute 'splits' has {} entries for {} outputs", ctx.what(),
                          splits.size(), ctx.num_outputs());
    int64_t total = 0;
    for (int64_t s : splits) {
      BATON_CHECK_OR_RETURN(s >= 0 && s <= n - total, InvalidArgument,
                            "{}: attribute 'splits' {} does not sum to W's N = {}", ctx.what(),
                            AttrValue::of_ints(ctx.attr_ints("splits")).to_string(), n);
      total += s;
    }
    BATON_CHECK_OR_RETURN(total == n, InvalidArgument,
                          "{}: attribute 'splits' {} does not sum to W's N = {}", ctx.what(),
                          AttrValue::of_ints(ctx.attr_ints("splits")).to_string(), n);
  }
  for (size_t o = 0; o < ctx.num_outputs(); ++o) {
    std::vector<int64_t> y(x.begin(), x.end());
    y.back() = splits[o];
    ctx.output(o).sizes = std::move(y);
  }
  if (ctx.num_outputs() == 1) ctx.set_attr("splits", AttrValue::of_ints({}));
  BATON_ASSIGN_OR_RETURN(const Activation act, canonical_activation(ctx));
  BATON_CHECK_OR_RETURN(act.none() || ctx.num_outputs() == 1, InvalidArgument,
                        "{}: a Linear with split outputs has no activation (got {})", ctx.what(),
                        act.op);
  return Status();
}

}  // namespace

void register_linear(OpRegistry& registry) {
  OpDef def;
  def.name = "Linear";
  def.domain = "baton";
  def.since_version = 1;
  def.inputs = {{"X", "T"}, {"W", "T"}, {"B", "T", Arity::Optional}};
  def.outputs = {{"Y", "T", Arity::Variadic}};
  def.attrs = {attr_ints("splits", {}), attr_int("transW", 0), attr_string("activation", ""),
               attr_floats("activation_params", {})};
  def.types = {{"T", kFloatTypes}};
  def.infer = &infer;
  registry.add(std::move(def));
}

}  // namespace baton::ops
