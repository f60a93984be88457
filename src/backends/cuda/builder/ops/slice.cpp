// Expand, Slice and Split on the GPU: strided copies of any stored dtype (codegen.h's
// generate_typed). Expand reads its input with stride 0 along broadcast dimensions; Slice reads
// from its first element with each dimension's stride times its step (negative steps walk
// backwards); Split copies each output's part of the axis. The shape inputs (Expand's shape,
// Slice's starts, ends, axes and steps, Split's split) must be compile-time constants.
#include "ops/slice.h"

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

std::vector<int64_t> constant_ints(const compiler::Graph& g, int v) {
  const compiler::IrValue& iv = g.values[v];
  return ops::int_values_of(iv.dtype, iv.constant->data(), *checked_numel(iv.sizes));
}

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
  TypedKernel k;
  k.sizes = ctx.value(out).sizes;
  k.out = ctx.dtype_of(out);
  k.expression = "{0}";
  const int src = operand_of(ctx, n.inputs[0]);
  const std::vector<int64_t> strides = ctx.strides_of(src);
  TypedInput in;
  in.dtype = ctx.dtype_of(src);
  for (size_t d = 0; d < dims.size(); ++d) {
    in.offset += dims[d].start * strides[d];
    in.strides.push_back(dims[d].step * strides[d]);
  }
  k.inputs.push_back(in);
  add_typed_kernel(ctx, "slice", std::move(k), {src, out});
  return Status();
}

Status lower_split(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const auto axis = static_cast<size_t>(n.attr_int("axis"));  // canonical: in [0, rank)
  const int src = operand_of(ctx, n.inputs[0]);
  const std::vector<int64_t> strides = ctx.strides_of(src);
  int64_t start = 0;
  for (int out : n.outputs) {
    const std::vector<int64_t>& sizes = ctx.value(out).sizes;
    {
      TypedKernel k;
      k.sizes = sizes;
      k.out = ctx.dtype_of(out);
      k.expression = "{0}";
      TypedInput in;
      in.dtype = ctx.dtype_of(src);
      in.strides = strides;
      in.offset = start * strides[axis];
      k.inputs.push_back(in);
      add_typed_kernel(ctx, "split", std::move(k), {src, out});
    }
    start += sizes[axis];
  }
  return Status();
}

}  // namespace

const OpLowering kExpandLowering{"Expand", &engine_tensors, &lower_expand};
const OpLowering kSliceLowering{"Slice", &supports_slice, &lower_slice};
const OpLowering kSplitLowering{"Split", &engine_tensors, &lower_split};

}  // namespace baton::cuda
