// ONNX Pad: opset 2 (pads and value as attributes, float types), 11 (pads and constant_value as
// inputs, numeric types; 13 added bfloat16 and bool, which Baton takes from 11 on), 18 (an axes
// input: pads name only those axes), 19 (mode wrap). Modes: constant (constant_value, default
// 0), reflect (mirrored without repeating the edge), edge (the edge repeated), wrap (as if the
// data were a torus). Negative pads crop, before the rest pads (as ONNX Runtime does). pads and
// axes decide the output shape and must be known at compile time; constant_value is read at
// every run.
#include "ops/pad.h"

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/reduce.h"
#include "ops/register.h"

namespace baton::ops {

Result<std::vector<PadDim>> pad_dims(std::span<const int64_t> sizes, std::span<const int64_t> pads,
                                     const std::optional<std::vector<int64_t>>& axes,
                                     std::string_view mode, std::string_view what) {
  const int rank = static_cast<int>(sizes.size());
  std::vector<int> dims;
  if (axes) {
    BATON_ASSIGN_OR_RETURN(dims, normalize_axes(*axes, rank, what, "axes"));
  } else {
    for (int d = 0; d < rank; ++d) dims.push_back(d);
  }
  const size_t n = dims.size();
  BATON_CHECK_OR_RETURN(pads.size() == 2 * n, InvalidArgument,
                        "{}: 'pads' has {} values; it needs {} (a begin and an end for each of {} "
                        "axes)",
                        what, pads.size(), 2 * n, n);
  std::vector<PadDim> out(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) out[d] = {0, 0, 0, sizes[d], sizes[d]};
  for (size_t i = 0; i < n; ++i) {
    const auto d = static_cast<size_t>(dims[i]);
    PadDim& p = out[d];
    p.begin = pads[i];
    p.end = pads[n + i];
    // Crops: each at most the dimension (checked before negating), together not past it. Pads:
    // the output size must fit.
    BATON_CHECK_OR_RETURN(p.begin >= -sizes[d] && p.end >= -sizes[d], InvalidArgument,
                          "{}: pads {} and {} on axis {} crop more than its {} elements", what,
                          p.begin, p.end, d, sizes[d]);
    const int64_t crop_end = p.end < 0 ? -p.end : 0;
    p.crop_begin = p.begin < 0 ? -p.begin : 0;
    BATON_CHECK_OR_RETURN(crop_end <= sizes[d] - p.crop_begin, InvalidArgument,
                          "{}: pads {} and {} on axis {} crop more than its {} elements", what,
                          p.begin, p.end, d, sizes[d]);
    p.kept = sizes[d] - p.crop_begin - crop_end;
    int64_t grown = 0;
    BATON_CHECK_OR_RETURN(!__builtin_add_overflow(p.kept, std::max<int64_t>(p.begin, 0), &grown) &&
                              !__builtin_add_overflow(grown, std::max<int64_t>(p.end, 0), &p.out),
                          InvalidArgument,
                          "{}: pads {} and {} on axis {} (size {}) overflow the output size", what,
                          p.begin, p.end, d, sizes[d]);
    BATON_CHECK_OR_RETURN(mode == "constant" || p.kept > 0 || p.out == 0, InvalidArgument,
                          "{}: mode '{}' pads axis {} from its elements, but it keeps none (size "
                          "{}, pads {} and {})",
                          what, mode, d, sizes[d], p.begin, p.end);
  }
  return out;
}

namespace {

Status infer(InferContext& ctx) {
  const OpDef& def = ctx.def();
  const std::string& mode = ctx.attr_string("mode");
  const bool wrap = def.since_version >= 19;
  BATON_CHECK_OR_RETURN(
      mode == "constant" || mode == "reflect" || mode == "edge" || (wrap && mode == "wrap"),
      InvalidArgument, "{}: attribute 'mode' is '{}'; Pad-{} takes 'constant', 'reflect', 'edge'{}",
      ctx.what(), mode, def.since_version, wrap ? " or 'wrap'" : "");
  std::vector<int64_t> pads;
  std::optional<std::vector<int64_t>> axes;
  if (def.since_version < 11) {
    pads = ctx.attr_ints("pads");
  } else {
    BATON_ASSIGN_OR_RETURN(pads, ctx.int_values(1));
    if (ctx.has_input(2)) {
      const auto s = ctx.sizes(2);
      BATON_CHECK_OR_RETURN(s.size() <= 1 && checked_numel(s) == 1, InvalidArgument,
                            "{}: input 'constant_value' has shape {}; it must be one value",
                            ctx.what(), shape_to_string(s));
    }
    if (ctx.has_input(3)) {
      BATON_ASSIGN_OR_RETURN(axes, ctx.int_values(3));
    }
  }
  BATON_ASSIGN_OR_RETURN(const std::vector<PadDim> dims,
                         pad_dims(ctx.sizes(0), pads, axes, mode, ctx.what()));
  std::vector<int64_t> y;
  for (const PadDim& p : dims) y.push_back(p.out);
  ctx.output(0).sizes = std::move(y);
  return Status();
}

}  // namespace

void register_pad(OpRegistry& registry) {
  OpDef v2;
  v2.name = "Pad";
  v2.since_version = 2;
  v2.inputs = {{"data", "T"}};
  v2.outputs = {{"output", "T"}};
  v2.attrs = {attr_string("mode", "constant"), attr_required("pads", AttrKind::Ints),
              attr_float("value", 0.0)};
  v2.types = {{"T", kFloatTypes}};
  v2.infer = &infer;
  registry.add(std::move(v2));

  for (int since : {11, 18, 19}) {
    OpDef def;
    def.name = "Pad";
    def.since_version = since;
    def.inputs = {{"data", "T"},
                  {"pads", "tensor(int64)", Arity::Single, true},
                  {"constant_value", "T", Arity::Optional}};
    if (since >= 18) def.inputs.push_back({"axes", "Tind", Arity::Optional, true});
    def.outputs = {{"output", "T"}};
    def.attrs = {attr_string("mode", "constant")};
    def.types = {{"T", kAllTypes}, {"tensor(int64)", {DType::Int64}}};
    if (since >= 18) def.types.push_back({"Tind", kIndexTypes});
    def.infer = &infer;
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
