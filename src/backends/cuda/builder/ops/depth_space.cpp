// DepthToSpace and SpaceToDepth on the GPU, any stored dtype: one strided copy each (codegen.h's
// generate_typed). The output [N, C', H', W'] is walked as six dimensions that each advance one
// input dimension or one block offset, so the input is read through strides built from its own
// (as stored: a channels-last convolution output, ESPCN's, is read without a copy).
//   DepthToSpace, output [N, C/b², H·b, W·b] as [N, C', H, b, W, b] (c', h, i, w, j):
//     DCR reads channel (i·b + j)·C' + c', CRD reads channel c'·b² + i·b + j.
//   SpaceToDepth, output [N, C·b², H/b, W/b] as [N, b, b, C, H/b, W/b] (i, j, c, h, w):
//     reads input (c, h·b + i, w·b + j).
#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  return engine_tensors(graph, node) && graph.values[node.inputs[0]].sizes.size() == 4;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int src = operand_of(ctx, n.inputs[0]), out = n.outputs[0];
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const std::vector<int64_t> s = ctx.strides_of(src);  // N, C, H, W
  const int64_t b = n.attr_int("blocksize");
  TypedKernel k;
  k.out = ctx.dtype_of(out);
  k.expression = "{0}";
  std::vector<int64_t> strides;
  if (n.op_type == "DepthToSpace") {
    const int64_t c = x[1] / (b * b);
    k.sizes = {x[0], c, x[2], b, x[3], b};
    if (n.attr_string("mode") == "DCR") {
      strides = {s[0], s[1], s[2], b * c * s[1], s[3], c * s[1]};
    } else {
      strides = {s[0], b * b * s[1], s[2], b * s[1], s[3], s[1]};
    }
  } else {
    k.sizes = {x[0], b, b, x[1], x[2] / b, x[3] / b};
    strides = {s[0], s[2], s[3], s[1], b * s[2], b * s[3]};
  }
  k.inputs.push_back({ctx.dtype_of(src), std::move(strides), 0});
  add_typed_kernel(ctx, n.op_type == "DepthToSpace" ? "depth_to_space" : "space_to_depth",
                   std::move(k), {src, out});
  return Status();
}

}  // namespace

const OpLowering kDepthToSpaceLowering{.op = "DepthToSpace",
                                       .supports = &supports,
                                       .lower = &lower,
                                       .layout_aware = true,
                                       .strided = true,
                                       .types = kEngineTypes};
const OpLowering kSpaceToDepthLowering{.op = "SpaceToDepth",
                                       .supports = &supports,
                                       .lower = &lower,
                                       .layout_aware = true,
                                       .strided = true,
                                       .types = kEngineTypes};

}  // namespace baton::cuda
