// TopK on the GPU (opsets 10 and 11): baton_topk (device/along_axis.cuh), one thread per input
// element ranking it within its line, so the values and their int64 indices come out sorted as the
// CPU kernel sorts them; long lines with a small K (sampling's top-k of a vocabulary) a block per
// line picking the K in order (baton_topk_block). K is a compile-time constant (the shape-input
// rule); the sizes are kernel arguments. Numeric dtypes an engine stores.
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

constexpr DTypeSet kTopKTypes =
    kFloatEngineTypes |
    DTypeSet{DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64};

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (node.outputs.size() != 2 || node.outputs[0] < 0 || node.outputs[1] < 0) return false;
  const DType t = graph.values[node.inputs[0]].dtype;
  return kTopKTypes.contains(t) && engine_tensors(graph, node);
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], values = n.outputs[0], indices = n.outputs[1];
  const std::vector<int64_t>& s = ctx.value(in).sizes;
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  const int64_t len = s[axis], inner = ops::product(s, axis + 1, s.size());
  const int64_t k = ctx.value(values).sizes[axis];
  const int64_t total = ops::product(s);
  const bool largest = n.def->attr_index("largest") < 0 || n.attr_int("largest") != 0;
  // Long lines with a small K (sampling from a vocabulary) take a block per line and K rounds;
  // decided on the largest sizes, so a dynamic engine chooses the same at every size.
  constexpr int64_t kBlockLineMin = 512, kBlockMaxK = 1024;
  const int64_t upper_len = ctx.upper_sizes_of(in)[axis];
  if (upper_len >= kBlockLineMin && k <= kBlockMaxK && k * 8 <= upper_len) {
    LaunchShape launch;
    launch.block = upper_len >= 8192 ? 1024 : 256;
    launch.grid = static_cast<uint32_t>(std::max<int64_t>(1, total / std::max<int64_t>(len, 1)));
    const std::string name = ctx.kernel_name("topk_block");
    KernelArgs args = ctx.kernel_args();
    const std::string len_arg = args.value(len), inner_arg = args.value(inner),
                      k_arg = args.value(k);
    std::string code = fmt::format(
        "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
        "{}* __restrict__ v, long long* __restrict__ i{}) {{\n"
        "  baton_topk_block<{}>(x, v, i, {}, {}, {});\n}}\n",
        launch.block, name, device_type_name(ctx.dtype_of(in)),
        device_type_name(ctx.dtype_of(values)), args.parameter(), largest ? "true" : "false",
        len_arg, inner_arg, k_arg);
    ctx.add_kernel(name, std::move(code), launch, {in, values, indices}, args);
    return Status();
  }
  const std::string name = ctx.kernel_name("topk");
  KernelArgs args = ctx.kernel_args();
  const std::string total_arg = args.value(total), len_arg = args.value(len),
                    inner_arg = args.value(inner), k_arg = args.value(k);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}* __restrict__ v, long long* __restrict__ i{}) {{\n"
      "  baton_topk<{}>(x, v, i, {}, {}, {}, {});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(in)), device_type_name(ctx.dtype_of(values)),
      args.parameter(), largest ? "true" : "false", total_arg, len_arg, inner_arg, k_arg);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(total), {in, values, indices}, args);
  return Status();
}

}  // namespace

const OpLowering kTopKLowering{
    .op = "TopK", .supports = &supports, .lower = &lower, .types = kTopKTypes};

}  // namespace baton::cuda
