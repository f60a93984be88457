// BatchNormalization (inference), InstanceNormalization and GroupNormalization on the GPU
// (ops/normalization.cpp has their semantics).
//
// BatchNormalization is one typed kernel (codegen.h's generate_typed) over X's elements, the
// per-channel parameters read with stride 0 along every dimension but the channel one. With
// constant statistics (every exported model) the builder folds them first, in double, into one
// multiplier and one offset per channel kept in float32, so the kernel is y = x * s + t; with
// statistics that are graph inputs it computes (x - mean) * scale / sqrt(var + epsilon) + B per
// element. X is read through its strides as stored, so a channels-last convolution output (a
// DenseNet block's Concat) is read without a copy. A BatchNormalization right after a Conv never
// gets here: the compiler folds it into the convolution's weights.
//
// InstanceNormalization and GroupNormalization normalize rows of X (device/group_norm.cuh), a
// warp or a block per (n, group), with scale and bias per channel or, for
// GroupNormalization-18, per group.
#include <fmt/format.h>

#include <cmath>

#include "backends/cuda/builder/ops/registry.h"
#include "backends/cuda/builder/ops/row_launch.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// Only Y: the training outputs are refused by the definition, and an optional output a model
// names anyway keeps the node on the CPU.
bool single_output(const compiler::IrNode& node) {
  for (size_t o = 1; o < node.outputs.size(); ++o) {
    if (node.outputs[o] >= 0) return false;
  }
  return !node.outputs.empty() && node.outputs[0] >= 0;
}

bool supports_batch_norm(const compiler::Graph& graph, const compiler::IrNode& node) {
  return single_output(node) && node.inputs.size() == 5 && float_tensors_only(graph, node);
}

// Opsets before 9 with spatial = 0 give every position of X's dimensions from 1 on its own
// statistics (shaped like X without N); otherwise they are per channel (dimension 1; a 1-D X has
// one channel).
bool per_channel(const compiler::IrNode& n) {
  return n.def->attr_index("spatial") < 0 || n.attr_int("spatial") == 1;
}

// The strides, along Y's `rank` dimensions, of a parameter stored with `strides`.
std::vector<int64_t> parameter_strides(const compiler::IrNode& n, const compiler::IrValue& p,
                                       const std::vector<int64_t>& strides, size_t rank) {
  if (!per_channel(n)) return broadcast_strides(p.sizes, strides, rank);  // X's shape without N
  std::vector<int64_t> out(rank, 0);
  if (rank >= 2 && p.sizes[0] > 1) out[1] = strides[0];
  return out;
}

Status lower_batch_norm(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  TypedKernel k;
  k.sizes = ctx.value(out).sizes;
  k.out = ctx.dtype_of(out);
  const TypedOperand x = typed_operand(ctx, n.inputs[0], k.sizes);
  k.inputs.push_back(x.input);
  std::vector<int> operands = {x.operand};
  const double epsilon = n.attr_float("epsilon");
  bool folded = true;
  for (size_t i = 1; i < 5; ++i) folded = folded && ctx.is_constant(n.inputs[i]);
  if (folded) {
    const compiler::IrValue& p = ctx.value(n.inputs[1]);
    const std::vector<float> scale = ctx.constant_floats(n.inputs[1]),
                             bias = ctx.constant_floats(n.inputs[2]),
                             mean = ctx.constant_floats(n.inputs[3]),
                             var = ctx.constant_floats(n.inputs[4]);
    std::vector<float> mul(scale.size()), add(scale.size());
    for (size_t c = 0; c < scale.size(); ++c) {
      const double s = static_cast<double>(scale[c]) / std::sqrt(double{var[c]} + epsilon);
      mul[c] = static_cast<float>(s);
      add[c] = static_cast<float>(double{bias[c]} - double{mean[c]} * s);
    }
    for (const std::vector<float>* values : {&mul, &add}) {
      const int w = ctx.add_weights(*values, DType::Float32, p.sizes);
      k.inputs.push_back(
          {DType::Float32, parameter_strides(n, p, ctx.strides_of(w), k.sizes.size())});
      operands.push_back(w);
    }
    k.expression = "({0} * {1} + {2})";
  } else {
    for (size_t i = 1; i < 5; ++i) {
      const int w = operand_of(ctx, n.inputs[i]);
      k.inputs.push_back({ctx.dtype_of(w), parameter_strides(n, ctx.value(n.inputs[i]),
                                                             ctx.strides_of(w), k.sizes.size())});
      operands.push_back(w);
    }
    k.expression = fmt::format("(({{0}} - {{3}}) * ({{1}} / sqrtf({{4}} + {})) + {{2}})",
                               float_literal(static_cast<float>(epsilon)));
  }
  operands.push_back(out);
  add_typed_kernel(ctx, "batch_norm", std::move(k), std::move(operands));
  return Status();
}

bool supports_group_norm(const compiler::Graph& graph, const compiler::IrNode& node) {
  return single_output(node) && node.inputs.size() == 3 && float_tensors_only(graph, node) &&
         graph.values[node.inputs[0]].sizes.size() >= 2;
}

Status lower_group_norm(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const bool instance = n.op_type == "InstanceNormalization";
  const std::vector<int64_t>& x = ctx.value(in).sizes;
  const int64_t channels = x[1];
  const int64_t groups = instance ? channels : n.attr_int("num_groups");
  const bool per_group = !instance && n.def->since_version < 21;
  const int64_t per_group_channels = channels / groups;  // the definition checks divisibility
  const int64_t spatial = ops::product(x, 2, x.size());
  const int64_t rows = x[0] * groups;
  const std::vector<int64_t>& upper = ctx.upper_sizes_of(in);
  const RowLaunch r =
      row_launch(rows, per_group_channels * spatial, ctx.dynamic() ? upper[0] * groups : 0);
  const int scale = operand_of(ctx, n.inputs[1]), bias = operand_of(ctx, n.inputs[2]);
  const std::string name = ctx.kernel_name(instance ? "instance_norm" : "group_norm");
  KernelArgs args = ctx.kernel_args();
  const std::string rows_arg = args.value(rows), spatial_arg = args.value(spatial);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ x, "
      "const {3}* __restrict__ scale, const {4}* __restrict__ bias, {5}* __restrict__ y{6}) {{\n"
      "  baton_group_norm<{7}, {8}>(x, scale, bias, y, {9}, {10}LL, {11}LL, {12}, {13});\n}}\n",
      r.launch.block, name, device_type_name(ctx.dtype_of(in)),
      device_type_name(ctx.dtype_of(scale)), device_type_name(ctx.dtype_of(bias)),
      device_type_name(ctx.dtype_of(out)), args.parameter(), r.warp ? "true" : "false",
      per_group ? "true" : "false", rows_arg, groups, per_group_channels, spatial_arg,
      float_literal(static_cast<float>(n.attr_float("epsilon"))));
  ctx.add_kernel(name, std::move(code), r.launch, {in, scale, bias, out}, args);
  return Status();
}

}  // namespace

const OpLowering kBatchNormLowering{
    "BatchNormalization",  &supports_batch_norm, &lower_batch_norm, 0, "",
    /*layout_aware=*/true, /*strided=*/true};
const OpLowering kInstanceNormLowering{"InstanceNormalization", &supports_group_norm,
                                       &lower_group_norm};
const OpLowering kGroupNormLowering{"GroupNormalization", &supports_group_norm, &lower_group_norm};

}  // namespace baton::cuda
