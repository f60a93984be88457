// Expand, Slice and Split on the GPU, any stored dtype. Expand is a strided copy (codegen.h's
// generate_typed) reading its input with stride 0 along broadcast dimensions. Slice and Split are
// views (Lowering::view): Slice from its first element with each dimension's stride times its
// step (negative steps, which walk backwards, are copied by a kernel); Split's outputs each name
// their part of the axis. The shape inputs (Expand's shape,
// Slice's starts, ends, axes and steps, Split's split) must be compile-time constants.
#include "ops/slice.h"

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// Only the data input: the shape input is a compile-time constant.
Status lower_expand(Lowering& ctx, int index) {
  return lower_broadcast(ctx, index, "expand", "{0}", 1);
}

Result<std::vector<ops::SliceDim>> slice_dims_of(const compiler::Graph& g,
                                                 const compiler::IrNode& n) {
  auto input = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return std::nullopt;
    return constant_ints(g, n.inputs[i]);
  };
  const std::vector<int64_t> starts = *input(1), ends = *input(2);
  const auto axes = input(3), steps = input(4);
  return ops::slice_dims(g.values[n.inputs[0]].sizes, starts, ends, axes ? &*axes : nullptr,
                         steps ? &*steps : nullptr, n.describe());
}

bool supports_slice(const compiler::Graph& graph, const compiler::IrNode& node) {
  return engine_tensors(graph, node) && slice_dims_of(graph, node).ok();
}

Status lower_slice(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  BATON_ASSIGN_OR_RETURN(const std::vector<ops::SliceDim> dims, slice_dims_of(ctx.graph(), n));
  const int src = operand_of(ctx, n.inputs[0]);
  const std::vector<int64_t> strides = ctx.strides_of(src);
  int64_t offset = 0;
  std::vector<int64_t> out_strides;
  bool backwards = false;
  for (size_t d = 0; d < dims.size(); ++d) {
    offset += dims[d].start * strides[d];
    // A dimension of at most one element is never stepped along: its step may be any int64
    // (INT64_MAX for a valid one-element slice), and step * stride would overflow. With two or
    // more elements start + step stays inside the dimension, so |step * stride| is bounded by the
    // tensor's extent.
    const int64_t step = dims[d].size <= 1 ? 1 : dims[d].step;
    out_strides.push_back(step * strides[d]);
    backwards |= step < 0;
  }
  if (!backwards) {
    ctx.view(out, src, std::move(out_strides), offset);
    return Status();
  }
  // Negative steps walk backwards: a kernel copies them.
  TypedKernel k;
  k.sizes = ctx.value(out).sizes;
  k.out = ctx.dtype_of(out);
  k.expression = "{0}";
  k.inputs.push_back({ctx.dtype_of(src), std::move(out_strides), offset});
  add_typed_kernel(ctx, "slice", std::move(k), {src, out});
  return Status();
}

// Each output is a view of its part of the axis.
Status lower_split(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  const int src = operand_of(ctx, n.inputs[0]);
  const std::vector<int64_t> strides = ctx.strides_of(src);
  int64_t start = 0;
  for (int out : n.outputs) {
    ctx.view(out, src, strides, start * strides[axis]);
    start += ctx.value(out).sizes[axis];
  }
  return Status();
}

}  // namespace

const OpLowering kExpandLowering{
    .op = "Expand", .supports = &engine_tensors, .lower = &lower_expand, .types = kEngineTypes};
const OpLowering kSliceLowering{.op = "Slice",
                                .supports = &supports_slice,
                                .lower = &lower_slice,
                                .layout_aware = true,
                                .strided = true,
                                .types = kEngineTypes};
const OpLowering kSplitLowering{.op = "Split",
                                .supports = &engine_tensors,
                                .lower = &lower_split,
                                .layout_aware = true,
                                .strided = true,
                                .types = kEngineTypes};

}  // namespace baton::cuda
