// Gather, GatherElements and GatherND on the GPU (device/typed.cuh: baton_gather, baton_gather_nd),
// on data of any stored dtype with int32 or int64 indices, constant (weights) or computed at run
// time, one thread per output element. Negative indices count from the end. An index out of range,
// which the CPU kernel reports as an error, cannot be reported from a kernel: its elements read 0.
// A Gather of one constant index in range (torch's unbind and select: qkv[0]) is a view of that
// slice instead (Lowering::view), no kernel.
#include <fmt/format.h>

#include <optional>

#include "backends/cuda/builder/ops/registry.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!engine_tensors(graph, node)) return false;
  const DType t = graph.values[node.inputs[1]].dtype;
  return t == DType::Int32 || t == DType::Int64;
}

bool supports_nd(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!supports(graph, node)) return false;
  const std::vector<int64_t>& idx = graph.values[node.inputs[1]].sizes;
  return !idx.empty() && idx.back() >= 1;
}

// The one constant index of `n` in [0, size of the axis), if it has one.
std::optional<int64_t> single_index(const Lowering& ctx, const compiler::IrNode& n, int64_t size) {
  const int idx = n.inputs[1];
  if (!ctx.is_constant(idx) || ops::product(ctx.value(idx).sizes) != 1) return std::nullopt;
  const compiler::IrValue& iv = ctx.value(idx);
  int64_t i = ops::int_values_of(iv.dtype, iv.constant->data(), 1)[0];
  if (i < 0) i += size;
  if (i < 0 || i >= size) return std::nullopt;
  return i;
}

Status lower_gather(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const std::vector<int64_t>& sizes = ctx.value(n.inputs[0]).sizes;
  const auto along = static_cast<size_t>(n.attr_int("axis"));
  if (const std::optional<int64_t> i = single_index(ctx, n, sizes[along])) {
    // Output dimensions: data's before the axis, the index's (all 1), data's after it.
    const int src = operand_of(ctx, n.inputs[0]);
    const std::vector<int64_t> st = ctx.strides_of(src);
    std::vector<int64_t> strides(st.begin(), st.begin() + static_cast<std::ptrdiff_t>(along));
    strides.resize(strides.size() + ctx.value(n.inputs[1]).sizes.size(), 0);
    strides.insert(strides.end(), st.begin() + static_cast<std::ptrdiff_t>(along) + 1, st.end());
    ctx.view(n.outputs[0], src, std::move(strides), *i * st[along]);
    return Status();
  }
  const int data = ctx.row_major(operand_of(ctx, n.inputs[0]));
  const int idx = ctx.row_major(operand_of(ctx, n.inputs[1]));
  const int out = n.outputs[0];
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  const int64_t count = ops::product(ctx.value(n.inputs[1]).sizes);
  const int64_t inner = ops::product(x, axis + 1, x.size());
  const int64_t total = ops::product(ctx.value(out).sizes);
  const std::string name = ctx.kernel_name("gather");
  KernelArgs args = ctx.kernel_args();
  const bool fast = args.magic_division(total);
  const std::vector<int64_t> magics = division_magics({count, inner}, fast);
  const std::string values = fmt::format("{}, {}, {}, {}, {}, {}", args.value(total),
                                         args.value(count), args.value(x[axis]), args.value(inner),
                                         args.value(magics[0]), args.value(magics[1]));
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "const {}* __restrict__ idx, {}* __restrict__ y{}) {{\n"
      "  baton_gather<{}>(x, idx, y, {});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(data)), device_type_name(ctx.dtype_of(idx)),
      device_type_name(ctx.dtype_of(out)), args.parameter(), fast ? "true" : "false", values);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(total), {data, idx, out}, args);
  return Status();
}

Status lower_gather_nd(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int data = operand_of(ctx, n.inputs[0]);
  const int idx = operand_of(ctx, n.inputs[1]);
  const int out = n.outputs[0];
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const std::vector<int64_t>& ind = ctx.value(n.inputs[1]).sizes;
  const auto b = static_cast<size_t>(n.attr_int("batch_dims"));
  const auto k = static_cast<size_t>(ind.back());
  // Per batch: tuples of k indices into data's dimensions [b, b + k), each naming a slice of the
  // dimensions after them.
  const int64_t tuples = ops::product(ind, b, ind.size() - 1);
  const int64_t batch_elems = ops::product(x, b, x.size());
  const int64_t inner = ops::product(x, b + k, x.size());
  std::vector<int64_t> dims(x.begin() + b, x.begin() + b + k), strides(k);
  for (size_t a = 0; a < k; ++a) strides[a] = ops::product(x, b + a + 1, x.size());
  const int64_t total = ops::product(ctx.value(out).sizes);
  const std::string name = ctx.kernel_name("gather_nd");
  KernelArgs args = ctx.kernel_args();
  const bool fast = args.magic_division(total);
  const std::vector<int64_t> magics = division_magics({tuples, inner}, fast);
  const std::string arrays = args.array("dims", dims) + args.array("strides", strides);
  const std::string values = fmt::format(
      "{}, {}, {}, {}, dims, strides, {}, {}", args.value(total), args.value(tuples),
      args.value(batch_elems), args.value(inner), args.value(magics[0]), args.value(magics[1]));
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "const {}* __restrict__ idx, {}* __restrict__ y{}) {{\n{}"
      "  baton_gather_nd<{}, {}>(x, idx, y, {});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(data)), device_type_name(ctx.dtype_of(idx)),
      device_type_name(ctx.dtype_of(out)), args.parameter(), arrays, k, fast ? "true" : "false",
      values);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(total), {data, idx, out}, args);
  return Status();
}

// GatherElements: output element i (at coordinates c of the indices' shape) is data at c with
// the axis coordinate replaced by indices[i]. Sizes and strides are arguments; the coordinates
// are found by division, which is cheap enough for what exports use it on (position ids, a
// token-type buffer: a few thousand elements).
Status lower_gather_elements(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int data = ctx.row_major(operand_of(ctx, n.inputs[0]));
  const int idx = ctx.row_major(operand_of(ctx, n.inputs[1]));
  const int out = n.outputs[0];
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const std::vector<int64_t>& y = ctx.value(out).sizes;
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  std::vector<int64_t> strides(x.size(), 1);
  for (size_t d = x.size(); d-- > 1;) strides[d - 1] = strides[d] * x[d];
  const int64_t total = ops::product(y);
  const std::string name = ctx.kernel_name("gather_elements");
  KernelArgs args = ctx.kernel_args();
  const std::string arrays = args.array("sizes", y) + args.array("strides", strides);
  const std::string total_arg = args.value(total);  // one statement each: they are numbered
  const std::string extent_arg = args.value(x[axis]);
  const std::string values =
      fmt::format("  const long long total = {}, extent = {};\n", total_arg, extent_arg);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "const {}* __restrict__ idx, {}* __restrict__ y{}) {{\n{}{}"
      "  baton_for_each(total, [&](long long i) {{\n"
      "    long long rest = i, offset = 0;\n"
      "    for (int d = {} - 1; d >= 0; --d) {{\n"
      "      const long long c = rest % sizes[d];\n"
      "      rest /= sizes[d];\n"
      "      if (d != {}) offset += c * strides[d];\n"
      "    }}\n"
      "    long long j = (long long)idx[i];\n"
      "    if (j < 0) j += extent;\n"
      // An index out of range cannot be reported from a kernel: its element reads 0, as Gather's.
      "    if (j < 0 || j >= extent) {{ y[i] = {{}}; return; }}\n"
      "    y[i] = x[offset + j * strides[{}]];\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(data)), device_type_name(ctx.dtype_of(idx)),
      device_type_name(ctx.dtype_of(out)), args.parameter(), arrays, values, y.size(), axis, axis);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(total), {data, idx, out}, args);
  return Status();
}

}  // namespace

const OpLowering kGatherElementsLowering{.op = "GatherElements",
                                         .supports = &supports,
                                         .lower = &lower_gather_elements,
                                         .types = kEngineTypes};
const OpLowering kGatherLowering{.op = "Gather",
                                 .supports = &supports,
                                 .lower = &lower_gather,
                                 .layout_aware = true,
                                 .strided = true,
                                 .types = kEngineTypes};
const OpLowering kGatherNDLowering{
    .op = "GatherND", .supports = &supports_nd, .lower = &lower_gather_nd, .types = kEngineTypes};

}  // namespace baton::cuda
