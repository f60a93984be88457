// Resize (opsets 10 to 19) and Upsample (7, 9) on the GPU: every mode (nearest, linear, cubic)
// and coordinate transformation, with the taps the CPU kernel uses (ops::resize_taps: the same
// double-precision coordinates, nearest rounding and cubic weights), so the GPU picks the same
// input elements. Each resized dimension's taps are tables in the engine's weights (the input
// index, exact in float32 below 2^24, and the weight, both float32); a dimension that is not
// resized reads its own index. One thread per output element sums, over every combination of
// its dimensions' taps, the product of their weights times the input element, in float (nearest:
// a copy, any dtype). tf_crop_and_resize writes extrapolation_value where an index is outside
// (its table index -1). A channels-last input is read in place and its output written
// channels-last.
//
// Static shapes only: the tables hold one entry per output index, so a Resize with a dynamic
// dimension stays on the CPU (named as a fallback).
#include "ops/resize.h"

#include <fmt/format.h>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool present(const compiler::IrNode& n, int slot) {
  return slot >= 0 && static_cast<size_t>(slot) < n.inputs.size() && n.inputs[slot] >= 0;
}

std::vector<double> constant_doubles(const compiler::Graph& g, int v) {
  const compiler::IrValue& iv = g.values[v];
  return ops::float_values_of(iv.dtype, iv.constant->data(), *checked_numel(iv.sizes));
}

// The node's geometry, from its attributes and constant inputs (as the CPU kernel's create).
Result<std::vector<ops::ResizeAxis>> geometry_of(const compiler::Graph& g,
                                                 const compiler::IrNode& n,
                                                 const ops::ResizeSampling& s) {
  ops::ResizeArgs args;
  args.upsample = n.def->name == "Upsample";
  if (n.def->attr_index("coordinate_transformation_mode") >= 0) {
    args.crop_and_resize = s.coord == ops::ResizeCoord::TfCropAndResize;
    if (n.def->attr_index("keep_aspect_ratio_policy") >= 0) {
      args.keep_aspect_ratio_policy = n.attr_string("keep_aspect_ratio_policy");
    }
    if (n.def->attr_index("axes") >= 0 && !n.attr("axes").none) args.axes = n.attr_ints("axes");
  }
  const ops::ResizeSlots slots = ops::resize_slots(*n.def);
  if (slots.scales < 0) {
    args.scales = n.attr_floats("scales");
  } else if (present(n, slots.scales)) {
    args.scales = constant_doubles(g, n.inputs[slots.scales]);
  }
  if (present(n, slots.sizes)) {
    args.sizes = constant_ints(g, n.inputs[slots.sizes]);
  }
  if (args.crop_and_resize && present(n, slots.roi)) {
    args.roi = constant_doubles(g, n.inputs[slots.roi]);
  }
  return ops::resize_geometry(g.values[n.inputs[0]].sizes, args, n.describe());
}

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!engine_tensors(graph, node)) return false;
  const compiler::IrValue& x = graph.values[node.inputs[0]];
  const compiler::IrValue& y = graph.values[node.outputs[0]];
  if (compiler::is_dynamic(x) || compiler::is_dynamic(y)) return false;
  const ops::ResizeSampling s = ops::resize_sampling(*node.def, node);
  const bool floating =
      x.dtype == DType::Float32 || x.dtype == DType::Float16 || x.dtype == DType::BFloat16;
  // Integers: nearest only (the definition refuses the rest), and no extrapolation value to
  // narrow into them.
  if (!floating && s.coord == ops::ResizeCoord::TfCropAndResize) return false;
  for (int64_t d : x.sizes) {
    if (d >= (int64_t{1} << 24)) return false;  // table indices exact in float32
  }
  return geometry_of(graph, node, s).ok();
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  const ops::ResizeSampling s = ops::resize_sampling(*n.def, n);
  BATON_ASSIGN_OR_RETURN(const std::vector<ops::ResizeAxis> geometry,
                         geometry_of(ctx.graph(), n, s));
  const std::vector<int64_t> xs = ctx.strides_of(in);
  const size_t rank = geometry.size();
  // Each dimension: the identity (not resized), or a table of k taps per output index.
  std::vector<int> tables;  // operand per dimension, -1 for the identity
  std::vector<int> taps(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    ops::ResizeTaps t = ops::resize_taps(geometry[d], s);
    bool identity = t.k == 1 && geometry[d].in == geometry[d].out && t.outside.empty();
    for (int64_t i = 0; identity && i < geometry[d].out; ++i) identity = t.index[i] == i;
    if (identity) {
      tables.push_back(-1);
      continue;
    }
    taps[d] = t.k;
    // [index..., weight...], each out * k entries; -1 marks an extrapolated output index.
    std::vector<float> table;
    const size_t entries = t.index.size();
    for (size_t e = 0; e < entries; ++e) {
      const bool outside = !t.outside.empty() && t.outside[e / t.k];
      table.push_back(outside ? -1.0f : static_cast<float>(t.index[e]));
    }
    for (double w : t.weights) table.push_back(static_cast<float>(w));
    tables.push_back(ctx.add_weights(table, DType::Float32, {2, static_cast<int64_t>(entries)}));
  }
  const std::vector<int64_t>& y = ctx.value(out).sizes;
  const int64_t count = ops::product(y);
  const bool floating = ctx.dtype_of(out) == DType::Float32 ||
                        ctx.dtype_of(out) == DType::Float16 || ctx.dtype_of(out) == DType::BFloat16;
  const double extrapolation =
      n.def->attr_index("extrapolation_value") >= 0 ? n.attr_float("extrapolation_value") : 0.0;
  // The generated body: coordinates, then per table dimension its taps' offsets and weights,
  // then the sum over the combinations of the multi-tap dimensions.
  // The output's memory order: channels-last follows a channels-last input (a UNet's bilinear
  // upsampling between convolutions, which otherwise cost a conversion to row-major before and
  // one back after), so the element at memory position i has its coordinates taken in that order.
  std::vector<size_t> order(rank);
  for (size_t d = 0; d < rank; ++d) order[d] = d;
  if (ctx.channels_last(in) && ctx.set_channels_last(out)) order = {0, 2, 3, 1};
  std::string params, body;
  std::vector<int> operands = {in};
  body += "    long long rest = i;\n";
  for (size_t p = rank; p-- > 0;) {
    const size_t d = order[p];
    body += fmt::format("    const long long c{0} = rest % {1}LL;\n    rest /= {1}LL;\n", d, y[d]);
  }
  std::string base = "0", weight = "1.0f", loops, close;
  for (size_t d = 0; d < rank; ++d) {
    if (tables[d] < 0) {
      base += fmt::format(" + c{} * {}LL", d, xs[d]);
      continue;
    }
    params += fmt::format("const float* __restrict__ t{}, ", d);
    operands.push_back(tables[d]);
    const int64_t entries = y[d] * taps[d];
    if (taps[d] == 1) {
      body += fmt::format(
          "    const float i{0} = t{0}[c{0}];\n"
          "    if (i{0} < 0.0f) {{ sto(&y[i], {1}); return; }}\n",
          d, float_literal(static_cast<float>(extrapolation)));
      base += fmt::format(" + (long long)i{} * {}LL", d, xs[d]);
      continue;
    }
    body += fmt::format("    if (t{0}[c{0} * {1}] < 0.0f) {{ sto(&y[i], {2}); return; }}\n", d,
                        taps[d], float_literal(static_cast<float>(extrapolation)));
    loops += fmt::format(
        "    for (int k{0} = 0; k{0} < {1}; ++k{0}) {{\n"
        "      const long long o{0} = (long long)t{0}[c{0} * {1} + k{0}] * {2}LL;\n"
        "      const float w{0} = t{0}[{3} + c{0} * {1} + k{0}];\n",
        d, taps[d], xs[d], entries);
    close += "    }\n";
    weight += fmt::format(" * w{}", d);
    base += fmt::format(" + o{}", d);
  }
  operands.push_back(out);
  if (loops.empty()) {
    body += fmt::format("    sto(&y[i], ld(x[{}]));\n", base);
  } else {
    BATON_CHECK_OR_RETURN(floating, Internal, "{}: interpolation of a non-float tensor",
                          n.describe());
    body += "    float sum = 0.0f;\n" + loops +
            fmt::format("      sum += {} * ld(x[{}]);\n", weight, base) + close +
            "    sto(&y[i], sum);\n";
  }
  const std::string name = ctx.kernel_name("resize");
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}{}* __restrict__ y) {{\n  baton_for_each({}LL, [&](long long i) {{\n{}  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(in)), params, device_type_name(ctx.dtype_of(out)),
      count, body);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands),
                 KernelArgs(/*in_code=*/true));
  return Status();
}

}  // namespace

// Nearest takes every dtype; linear and cubic the float types (the definition says so).
// Layout-aware: the input is read through its strides, whatever its layout.
const OpLowering kResizeLowering{.op = "Resize",
                                 .supports = &supports,
                                 .lower = &lower,
                                 .layout_aware = true,
                                 .types = kEngineTypes};
const OpLowering kUpsampleLowering{.op = "Upsample",
                                   .supports = &supports,
                                   .lower = &lower,
                                   .layout_aware = true,
                                   .types = kEngineTypes};

}  // namespace baton::cuda
