// ONNX Split (opset 13: sizes from the optional compile-time `split` input, else equal parts;
// opset 18 adds `num_outputs`, whose parts are ceil(dim / num_outputs) long with a shorter last
// one). Canonical form: axis in [0, rank).
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"

namespace baton::ops {
namespace {

Status infer(InferContext& ctx) {
  const auto x = ctx.sizes(0);
  const int rank = ctx.rank(0);
  BATON_CHECK_OR_RETURN(rank >= 1, InvalidArgument, "{}: 'input' must have rank >= 1, got {}",
                        ctx.what(), shape_to_string(x));
  BATON_ASSIGN_OR_RETURN(const int axis, ctx.canonical_axis("axis", rank));
  const int64_t dim = x[axis];
  const auto n = static_cast<int64_t>(ctx.num_outputs());
  const bool has_num_outputs =
      ctx.def().attr_index("num_outputs") >= 0 && !ctx.attr_none("num_outputs");
  std::vector<int64_t> parts;
  if (ctx.has_input(1)) {
    BATON_CHECK_OR_RETURN(!has_num_outputs, InvalidArgument,
                          "{}: give either the 'split' input or the 'num_outputs' attribute, not "
                          "both",
                          ctx.what());
    BATON_ASSIGN_OR_RETURN(parts, ctx.int_values(1));
    BATON_CHECK_OR_RETURN(static_cast<int64_t>(parts.size()) == n, InvalidArgument,
                          "{}: 'split' {} has {} entries for {} outputs", ctx.what(),
                          shape_to_string(parts), parts.size(), n);
    int64_t sum = 0;
    for (int64_t p : parts) {
      BATON_CHECK_OR_RETURN(p >= 0 && !__builtin_add_overflow(sum, p, &sum), InvalidArgument,
                            "{}: 'split' {} holds a negative size", ctx.what(),
                            shape_to_string(parts));
    }
    BATON_CHECK_OR_RETURN(sum == dim, InvalidArgument,
                          "{}: 'split' {} adds up to {}, but dimension {} of {} is {}", ctx.what(),
                          shape_to_string(parts), sum, axis, shape_to_string(x), dim);
  } else if (has_num_outputs) {
    const int64_t count = ctx.attr_int("num_outputs");
    BATON_CHECK_OR_RETURN(count == n, InvalidArgument,
                          "{}: attribute 'num_outputs' is {}, but the node has {} outputs",
                          ctx.what(), count, n);
    const int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0);
    const int64_t last = dim - chunk * (n - 1);
    BATON_CHECK_OR_RETURN(last >= 0, InvalidArgument,
                          "{}: dimension {} of {} ({}) cannot be split into {} parts of {} with a "
                          "shorter last one",
                          ctx.what(), axis, shape_to_string(x), dim, n, chunk);
    parts.assign(static_cast<size_t>(n), chunk);
    parts.back() = last;
  } else {
    BATON_CHECK_OR_RETURN(dim % n == 0, InvalidArgument,
                          "{}: dimension {} of {} ({}) does not split into {} equal parts; give "
                          "the 'split' input{}",
                          ctx.what(), axis, shape_to_string(x), dim, n,
                          ctx.def().since_version >= 18 ? " or 'num_outputs'" : "");
    parts.assign(static_cast<size_t>(n), dim / n);
  }
  for (int64_t o = 0; o < n; ++o) {
    ctx.output(o).dtype = ctx.input(0).dtype;
    ctx.output(o).sizes.assign(x.begin(), x.end());
    ctx.output(o).sizes[axis] = parts[o];
  }
  return Status();
}

}  // namespace

void register_split(OpRegistry& registry) {
  OpDef def;
  def.name = "Split";
  def.since_version = 13;
  def.inputs = {{"input", "T"}, {"split", "tensor(int64)", Arity::Optional, true}};
  def.outputs = {{"outputs", "T", Arity::Variadic}};
  def.attrs = {attr_int("axis", 0)};
  def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
  def.infer = &infer;
  registry.add(def);

  def.since_version = 18;
  def.attrs.push_back(attr_optional("num_outputs", AttrKind::Int));
  registry.add(std::move(def));
}

}  // namespace baton::ops
