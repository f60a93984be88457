// ScatterND and ScatterElements on the GPU (reduction "none"), on data of any stored dtype with
// int32 or int64 indices: the output is the data, then one thread per element of `updates`
// writes it where the indices say.
//
// A decoder's key/value cache is such a scatter (present = ScatterND(past, positions, new keys)).
// When the method keeps it as state (compiler/state.h), the partition's input and output are one
// buffer (Partition::in_place, Lowering::bound_in_place) and the copy of the data is left out: a
// call writes only its new positions, never the whole cache.
//
// Negative indices count from the end. An index out of range, which the CPU kernel reports as an
// error, cannot be reported from a kernel: its update is dropped. Duplicate indices, which ONNX
// leaves undefined for reduction "none", write one of their updates.
#include <fmt/format.h>

#include "backends/cuda/builder/ops/registry.h"
#include "ops/op_def.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!engine_tensors(graph, node) || node.inputs.size() < 3) return false;
  const DType t = graph.values[node.inputs[1]].dtype;
  if (t != DType::Int32 && t != DType::Int64) return false;
  // add / mul / max / min would need atomics per dtype; no export we serve writes them.
  return node.def->attr_index("reduction") < 0 || node.attr_string("reduction") == "none";
}

// The output starts as the data: nothing to do when the method binds the two to one buffer,
// else a copy (or a cast, when the output is stored in another dtype than the data's). Then the
// kernel reads the indices and updates row-major: what both scatters' lowerings begin with.
struct ScatterOperands {
  int out = -1, idx = -1, upd = -1;
};
ScatterOperands start_scatter(Lowering& ctx, const compiler::IrNode& n) {
  ScatterOperands o;
  o.out = n.outputs[0];
  if (!ctx.bound_in_place(n.inputs[0], o.out)) {
    const int src = ctx.row_major(operand_of(ctx, n.inputs[0]));
    if (ctx.dtype_of(src) == ctx.dtype_of(o.out)) {
      ctx.add_copy(src, o.out);
    } else {
      ctx.add_cast(src, o.out, ctx.dtype_of(o.out));
    }
  }
  o.idx = ctx.row_major(operand_of(ctx, n.inputs[1]));
  o.upd = ctx.row_major(operand_of(ctx, n.inputs[2]));
  return o;
}

Status lower_scatter_nd(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const auto [out, idx, upd] = start_scatter(ctx, n);
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const std::vector<int64_t>& ind = ctx.value(n.inputs[1]).sizes;
  const auto k = static_cast<size_t>(ind.back());
  // Each tuple of k indices names a slice of `inner` elements (data's dimensions after k).
  const int64_t inner = ops::product(x, k, x.size());
  std::vector<int64_t> dims(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(k)), strides(k);
  for (size_t a = 0; a < k; ++a) strides[a] = ops::product(x, a + 1, x.size());
  const int64_t total = ops::product(ctx.value(n.inputs[2]).sizes);
  const std::string name = ctx.kernel_name("scatter_nd");
  KernelArgs args = ctx.kernel_args();
  const std::string arrays = args.array("dims", dims) + args.array("strides", strides);
  const std::string total_arg = args.value(total);
  const std::string inner_arg = args.value(inner);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ idx, "
      "const {}* __restrict__ upd, {}* __restrict__ y{}) {{\n{}"
      "  const long long total = {}, inner = {};\n"
      "  baton_for_each(total, [&](long long i) {{\n"
      "    const long long t = i / inner;\n"
      "    long long offset = i - t * inner;\n"
      "    for (int a = 0; a < {}; ++a) {{\n"
      "      long long j = (long long)idx[t * {} + a];\n"
      "      if (j < 0) j += dims[a];\n"
      "      if (j < 0 || j >= dims[a]) return;\n"
      "      offset += j * strides[a];\n"
      "    }}\n"
      "    sto(&y[offset], ld(upd[i]));\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(idx)), device_type_name(ctx.dtype_of(upd)),
      device_type_name(ctx.dtype_of(out)), args.parameter(), arrays, total_arg, inner_arg, k, k);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(total), {idx, upd, out}, args);
  return Status();
}

// ScatterElements: element i of `updates` (at coordinates c of its shape, which is the indices')
// goes to data's coordinates c with the axis coordinate replaced by indices[i].
Status lower_scatter_elements(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const auto [out, idx, upd] = start_scatter(ctx, n);
  const std::vector<int64_t>& x = ctx.value(n.inputs[0]).sizes;
  const std::vector<int64_t>& u = ctx.value(n.inputs[2]).sizes;
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  std::vector<int64_t> strides(x.size(), 1);
  for (size_t d = x.size(); d-- > 1;) strides[d - 1] = strides[d] * x[d];
  const int64_t total = ops::product(u);
  const std::string name = ctx.kernel_name("scatter_elements");
  KernelArgs args = ctx.kernel_args();
  const std::string arrays = args.array("sizes", u) + args.array("strides", strides);
  const std::string total_arg = args.value(total);
  const std::string extent_arg = args.value(x[axis]);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ idx, "
      "const {}* __restrict__ upd, {}* __restrict__ y{}) {{\n{}"
      "  const long long total = {}, extent = {};\n"
      "  baton_for_each(total, [&](long long i) {{\n"
      "    long long rest = i, offset = 0;\n"
      "    for (int d = {} - 1; d >= 0; --d) {{\n"
      "      const long long c = rest % sizes[d];\n"
      "      rest /= sizes[d];\n"
      "      if (d != {}) offset += c * strides[d];\n"
      "    }}\n"
      "    long long j = (long long)idx[i];\n"
      "    if (j < 0) j += extent;\n"
      "    if (j < 0 || j >= extent) return;\n"
      "    sto(&y[offset + j * strides[{}]], ld(upd[i]));\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(idx)), device_type_name(ctx.dtype_of(upd)),
      device_type_name(ctx.dtype_of(out)), args.parameter(), arrays, total_arg, extent_arg,
      u.size(), axis, axis);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(total), {idx, upd, out}, args);
  return Status();
}

}  // namespace

const OpLowering kScatterNDLowering{
    .op = "ScatterND", .supports = &supports, .lower = &lower_scatter_nd, .types = kEngineTypes};
const OpLowering kScatterElementsLowering{.op = "ScatterElements",
                                          .supports = &supports,
                                          .lower = &lower_scatter_elements,
                                          .types = kEngineTypes};

}  // namespace baton::cuda
