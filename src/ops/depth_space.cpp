// ONNX DepthToSpace (opsets 11 and 13) and SpaceToDepth (opsets 1 and 13): blocks of `blocksize` x
// `blocksize` pixels moved between the channel dimension and the spatial ones of an NCHW tensor
// (ESPCN's pixel shuffle). DepthToSpace: [N, C, H, W] -> [N, C / b^2, H b, W b], the channels read
// in DCR order (depth, then column, then row: the default) or CRD order; SpaceToDepth: [N, C, H, W]
// -> [N, C b^2, H / b, W / b], the inverse of DCR. Canonical form: `mode` is always present.
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

Result<int64_t> blocksize_of(InferContext& ctx) {
  BATON_CHECK_OR_RETURN(ctx.rank(0) == 4, InvalidArgument, "{}: 'input' must be 4-D NCHW, got {}",
                        ctx.what(), shape_to_string(ctx.sizes(0)));
  const int64_t b = ctx.attr_int("blocksize");
  BATON_CHECK_OR_RETURN(b >= 1 && b <= (int64_t{1} << 20), InvalidArgument,
                        "{}: 'blocksize' must be a positive block edge, got {}", ctx.what(), b);
  return b;
}

Status infer_depth_to_space(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(const int64_t b, blocksize_of(ctx));
  const auto x = ctx.sizes(0);
  const std::string& mode = ctx.attr_string("mode");
  BATON_CHECK_OR_RETURN(mode == "DCR" || mode == "CRD", InvalidArgument,
                        "{}: 'mode' is DCR or CRD, got '{}'", ctx.what(), mode);
  BATON_CHECK_OR_RETURN(x[1] % (b * b) == 0, InvalidArgument,
                        "{}: the channels of 'input' {} do not divide into blocks of {} x {}",
                        ctx.what(), shape_to_string(x), b, b);
  const auto h = checked_mul(x[2], b), w = checked_mul(x[3], b);
  BATON_CHECK_OR_RETURN(h.has_value() && w.has_value(), InvalidArgument,
                        "{}: 'input' {} times the block edge {} overflows", ctx.what(),
                        shape_to_string(x), b);
  ctx.output(0).sizes = {x[0], x[1] / (b * b), *h, *w};
  return Status();
}

Status infer_space_to_depth(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(const int64_t b, blocksize_of(ctx));
  const auto x = ctx.sizes(0);
  BATON_CHECK_OR_RETURN(x[2] % b == 0 && x[3] % b == 0, InvalidArgument,
                        "{}: the height and width of 'input' {} do not divide into blocks of {}",
                        ctx.what(), shape_to_string(x), b);
  const auto c = checked_mul(x[1], b * b);
  BATON_CHECK_OR_RETURN(c.has_value(), InvalidArgument, "{}: 'input' {} times {} overflows",
                        ctx.what(), shape_to_string(x), b * b);
  ctx.output(0).sizes = {x[0], *c, x[2] / b, x[3] / b};
  return Status();
}

}  // namespace

void register_depth_space(OpRegistry& registry) {
  // Opset 11 added `mode`; 13 only widened the types, which Baton takes from 11 on.
  OpDef d2s;
  d2s.name = "DepthToSpace";
  d2s.since_version = 11;
  d2s.inputs = {{"input", "T"}};
  d2s.outputs = {{"output", "T"}};
  d2s.attrs = {attr_required("blocksize", AttrKind::Int), attr_string("mode", "DCR")};
  d2s.types = {{"T", kAllTypes}};
  d2s.infer = &infer_depth_to_space;
  registry.add(d2s);
  d2s.since_version = 13;
  registry.add(std::move(d2s));

  OpDef s2d;
  s2d.name = "SpaceToDepth";
  s2d.since_version = 1;
  s2d.inputs = {{"input", "T"}};
  s2d.outputs = {{"output", "T"}};
  s2d.attrs = {attr_required("blocksize", AttrKind::Int)};
  s2d.types = {{"T", kAllTypes}};
  s2d.infer = &infer_space_to_depth;
  registry.add(s2d);
  s2d.since_version = 13;
  registry.add(std::move(s2d));
}

}  // namespace baton::ops
