// ArgMax, ArgMin and CumSum on the GPU: a thread per line along the axis (device/along_axis.cuh),
// the tensor seen as [outer, n, inner]. The sizes are kernel arguments, so a dynamic engine runs
// them at every size; CumSum's axis is a compile-time constant (the shape-input rule).
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// ArgMax / ArgMin read every numeric dtype an engine stores.
bool supports_arg(const compiler::Graph& graph, const compiler::IrNode& node) {
  return engine_tensors(graph, node) && graph.values[node.inputs[0]].dtype != DType::Bool;
}

// CumSum sums the float types and int32 / int64, as the CPU kernel does.
bool supports_cumsum(const compiler::Graph& graph, const compiler::IrNode& node) {
  return tensors_of(
      graph, node,
      DTypeSet{DType::Float32, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64});
}

size_t cumsum_axis(const compiler::Graph& g, const compiler::IrNode& n) {
  int64_t axis = constant_ints(g, n.inputs[1])[0];
  if (axis < 0) axis += static_cast<int64_t>(g.values[n.inputs[0]].sizes.size());
  return static_cast<size_t>(axis);  // checked by the definition
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& s = ctx.value(in).sizes;
  const bool cumsum = n.op_type == "CumSum";
  // ArgMax/ArgMin's axis is canonical (in [0, rank)).
  const size_t axis =
      cumsum ? cumsum_axis(ctx.graph(), n) : static_cast<size_t>(n.attr_int("axis"));
  const int64_t outer = ops::product(s, 0, axis), len = s[axis],
                inner = ops::product(s, axis + 1, s.size());
  // Long lines (a vocabulary's logits) get a block each, decided on the largest sizes so that a
  // dynamic engine makes the same choice at every size.
  constexpr int64_t kBlockLineMin = 512;
  const bool block_per_line = !cumsum && ctx.upper_sizes_of(in)[axis] >= kBlockLineMin;
  if (block_per_line) {
    const bool last =
        n.def->attr_index("select_last_index") >= 0 && n.attr_int("select_last_index") != 0;
    LaunchShape launch;
    launch.block = 256;
    launch.grid = static_cast<uint32_t>(std::max<int64_t>(1, outer * inner));
    const std::string name = ctx.kernel_name("arg_extreme_block");
    KernelArgs args = ctx.kernel_args();
    const std::string len_arg = args.value(len), inner_arg = args.value(inner);
    std::string code = fmt::format(
        "extern \"C\" __global__ void __launch_bounds__(256) {}(const {}* __restrict__ x, "
        "long long* __restrict__ y{}) {{\n  baton_arg_extreme_block<{}, {}>(x, y, {}, {});\n}}\n",
        name, device_type_name(ctx.dtype_of(in)), args.parameter(),
        n.op_type == "ArgMax" ? "true" : "false", last ? "true" : "false", len_arg, inner_arg);
    ctx.add_kernel(name, std::move(code), launch, {in, out}, args);
    return Status();
  }
  const std::string name = ctx.kernel_name(cumsum ? "cumsum" : "arg_extreme");
  KernelArgs args = ctx.kernel_args();
  const std::string lines_arg = args.value(outer * inner), len_arg = args.value(len),
                    inner_arg = args.value(inner);
  const DType t = ctx.dtype_of(in);
  std::string call;
  if (cumsum) {
    const char* acc = t == DType::Int32   ? "unsigned"
                      : t == DType::Int64 ? "unsigned long long"
                                          : "float";
    call = fmt::format("baton_cumsum<{}, {}, {}>", n.attr_int("exclusive") != 0 ? "true" : "false",
                       n.attr_int("reverse") != 0 ? "true" : "false", acc);
  } else {
    const bool last =
        n.def->attr_index("select_last_index") >= 0 && n.attr_int("select_last_index") != 0;
    call = fmt::format("baton_arg_extreme<{}, {}>", n.op_type == "ArgMax" ? "true" : "false",
                       last ? "true" : "false");
  }
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}* __restrict__ y{}) {{\n  {}(x, y, {}, {}, {});\n}}\n",
      kBlock, name, device_type_name(t), device_type_name(ctx.dtype_of(out)), args.parameter(),
      call, lines_arg, len_arg, inner_arg);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(outer * inner), {in, out}, args);
  return Status();
}

}  // namespace

constexpr DTypeSet kArgTypes = kEngineTypes & DTypeSet::from_bits(~DTypeSet::bit(DType::Bool));
constexpr DTypeSet kSumTypes = kFloatEngineTypes | DTypeSet{DType::Int32, DType::Int64};
const OpLowering kArgMaxLowering{
    .op = "ArgMax", .supports = &supports_arg, .lower = &lower, .types = kArgTypes};
const OpLowering kArgMinLowering{
    .op = "ArgMin", .supports = &supports_arg, .lower = &lower, .types = kArgTypes};
const OpLowering kCumSumLowering{
    .op = "CumSum", .supports = &supports_cumsum, .lower = &lower, .types = kSumTypes};

}  // namespace baton::cuda
