// Pad on the GPU, any stored dtype and every mode (constant, edge, reflect, wrap; negative pads
// crop): one thread per output element through baton_pad (device/pad.cuh). The pads and axes are
// compile-time constants (the shape-input rule); what each dimension keeps and outputs follows
// the sizes, so those are kernel arguments and a dynamic engine pads at every size. The fill value
// is Pad-2's `value` attribute baked in, 0 when constant_value is absent, or constant_value read
// from memory (a graph input or a constant, in the data's dtype) when the kernel runs.
#include "ops/pad.h"

#include <fmt/format.h>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool has_input(const compiler::IrNode& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] >= 0;
}

Result<std::vector<ops::PadDim>> pad_dims_of(const compiler::Graph& g, const compiler::IrNode& n) {
  std::vector<int64_t> pads;
  std::optional<std::vector<int64_t>> axes;
  if (n.def->since_version < 11) {
    pads = n.attr_ints("pads");
  } else {
    pads = constant_ints(g, n.inputs[1]);
    if (has_input(n, 3)) axes = constant_ints(g, n.inputs[3]);
  }
  return ops::pad_dims(g.values[n.inputs[0]].sizes, pads, axes, n.attr_string("mode"),
                       n.describe());
}

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  return engine_tensors(graph, node) && pad_dims_of(graph, node).ok();
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int src = operand_of(ctx, n.inputs[0]), out = n.outputs[0];
  BATON_ASSIGN_OR_RETURN(const std::vector<ops::PadDim> dims, pad_dims_of(ctx.graph(), n));
  const std::string& mode_name = n.attr_string("mode");
  const int mode = mode_name == "edge"      ? 1
                   : mode_name == "reflect" ? 2
                   : mode_name == "wrap"    ? 3
                                            : 0;
  std::vector<int64_t> out_sizes, kept, lead, crop;
  for (const ops::PadDim& p : dims) {
    out_sizes.push_back(p.out);
    kept.push_back(p.kept);
    lead.push_back(std::max<int64_t>(p.begin, 0));
    crop.push_back(p.crop_begin);
  }
  // The fill: a pointer to constant_value, or a literal.
  std::vector<int> operands = {src};
  std::string value_param, fill;
  if (n.def->since_version < 11) {
    fill = float_literal(static_cast<float>(n.attr_float("value")));
  } else if (has_input(n, 2)) {
    const int v = operand_of(ctx, n.inputs[2]);
    operands.push_back(v);
    value_param = fmt::format("const {}* __restrict__ v, ", device_type_name(ctx.dtype_of(v)));
    fill = "ld(v[0])";
  } else {
    fill = "0";
  }
  operands.push_back(out);
  const int64_t count = ops::product(out_sizes);
  const std::string name = ctx.kernel_name("pad");
  KernelArgs args = ctx.kernel_args();
  const std::string arrays = args.array("out", out_sizes) + args.array("xs", ctx.strides_of(src)) +
                             args.array("kept", kept);
  const std::string count_arg = args.value(count);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ x, "
      "{3}{4}* __restrict__ y{5}) {{\n{6}"
      "  constexpr long long lead[{7}] = {8};\n"
      "  constexpr long long crop[{7}] = {9};\n"
      "  baton_pad<{7}, {10}>(x, y, {11}, out, xs, kept, lead, crop, [&]() {{ return {12}; }});\n"
      "}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(src)), value_param,
      device_type_name(ctx.dtype_of(out)), args.parameter(), arrays, dims.size(), int_list(lead),
      int_list(crop), mode, count_arg, fill);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands), args);
  return Status();
}

}  // namespace

const OpLowering kPadLowering{
    .op = "Pad", .supports = &supports, .lower = &lower, .types = kEngineTypes};

}  // namespace baton::cuda
