// ConvTranspose on the GPU (2-D; 1-D arrives as 2-D through the conv-1d pass): one generated
// kernel, one thread per output element (n, k, oh, ow), gathering the input pixels whose
// scattered windows cover it. Output row oh receives input row ih through filter row r when
// oh = ih * stride - pad_top + r * dilation, so for each r the kernel takes
// ih = (oh + pad_top - r * dilation) / stride where that divides exactly and lands inside the
// input; likewise along the width. Each output channel k of group g sums the group's C / groups
// input channels with the filters W[c, k - g * (K / groups), r, q] (W is [C, K / groups, KH, KW]),
// plus the bias. The input is read through its strides as stored (a channels-last convolution
// output, a UNet decoder's); the output is stored channels-last inside the engine (the walk is
// then N, H, W, K, so neighbouring threads read the same input pixels) and row-major when it is a
// binding. The sizes are kernel arguments: a dynamic engine runs it at every size.
//
// cuDNN's graph API would run this as a data-gradient convolution; a generated kernel is what
// the decoders seen so far (UNet's 2x2 stride-2 upsampling) need, with no per-layer plan to
// check at load.
#include <fmt/format.h>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"

namespace baton::cuda {
namespace {

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!float_tensors_only(graph, node) || node.inputs.size() < 2) return false;
  if (graph.values[node.inputs[0]].sizes.size() != 4) return false;
  if (!graph.values[node.inputs[1]].constant) return false;
  return node.inputs.size() < 3 || node.inputs[2] < 0 || graph.values[node.inputs[2]].constant;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int x = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& xs = ctx.value(x).sizes;
  const std::vector<int64_t>& ws = ctx.value(n.inputs[1]).sizes;  // [C, K / groups, KH, KW]
  const std::vector<int64_t>& ys = ctx.value(out).sizes;
  const int64_t groups = n.attr_int("group");
  const int64_t c = xs[1], h = xs[2], w_in = xs[3];
  const int64_t k = ys[1], oh = ys[2], ow = ys[3];
  const int64_t cg = c / groups, kg = k / groups, kh = ws[2], kw = ws[3];
  // Canonical form (ops/conv.cpp): explicit pads (begin..., end...), strides and dilations.
  const std::vector<int64_t> strides = n.attr_ints("strides");
  const std::vector<int64_t> dilations = n.attr_ints("dilations");
  const std::vector<int64_t> pads = n.attr_ints("pads");
  const int w = ctx.weight(n.inputs[1], DType::Float32);
  const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  const int bias = has_bias ? ctx.weight(n.inputs[2], DType::Float32) : -1;
  const bool nhwc = !ctx.is_binding(out) && ctx.set_channels_last(out);
  const int64_t count = ys[0] * k * oh * ow;
  const std::vector<int64_t> st = ctx.strides_of(x);
  KernelArgs args = ctx.kernel_args();
  // Output coordinates of element i in storage order.
  std::string coordinates;
  if (nhwc) {
    coordinates = fmt::format(
        "    const long long p = {}, k = i - p * {};\n"
        "    const long long q = {}, ow = p - q * {};\n"
        "    const long long n = {}, oh = q - n * {};\n",
        args.quotient("i", k, count), args.value(k), args.quotient("p", ow, count), args.value(ow),
        args.quotient("q", oh, count), args.value(oh));
  } else {
    coordinates = fmt::format(
        "    const long long p = {}, ow = i - p * {};\n"
        "    const long long q = {}, oh = p - q * {};\n"
        "    const long long n = {}, k = q - n * {};\n",
        args.quotient("i", ow, count), args.value(ow), args.quotient("p", oh, count),
        args.value(oh), args.quotient("q", k, count), args.value(k));
  }
  const std::string in_h = args.value(h), in_w = args.value(w_in);
  const std::string read = fmt::format("x[n * {} + c * {} + ih * {} + iw * {}]", args.value(st[0]),
                                       args.value(st[1]), args.value(st[2]), args.value(st[3]));
  const std::string total = args.value(count);
  const std::string name = ctx.kernel_name("conv_transpose");
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ x, "
      "const float* __restrict__ w, {3}{4}* __restrict__ y{5}) {{\n"
      "  baton_for_each({6}, [&](long long i) {{\n"
      "{7}"
      "    const long long g = k / {8}LL, kl = k - g * {8}LL, first = g * {9}LL;\n"
      "    float v = {10};\n"
      "    for (int r = 0; r < {11}; ++r) {{\n"
      "      const long long th = oh + {12}LL - r * {13}LL;\n"
      "      if (th < 0 || th % {14}LL != 0) continue;\n"
      "      const long long ih = th / {14}LL;\n"
      "      if (ih >= {15}) continue;\n"
      "      for (int q2 = 0; q2 < {16}; ++q2) {{\n"
      "        const long long tw = ow + {17}LL - q2 * {18}LL;\n"
      "        if (tw < 0 || tw % {19}LL != 0) continue;\n"
      "        const long long iw = tw / {19}LL;\n"
      "        if (iw >= {20}) continue;\n"
      "        for (int ci = 0; ci < {9}; ++ci) {{\n"
      "          const long long c = first + ci;\n"
      "          v += to_f({21}) * w[((c * {8}LL + kl) * {11} + r) * {16} + q2];\n"
      "        }}\n"
      "      }}\n"
      "    }}\n"
      "    st(&y[i], v);\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(x)),
      has_bias ? "const float* __restrict__ b, " : "", device_type_name(ctx.dtype_of(out)),
      args.parameter(), total, coordinates, kg, cg, has_bias ? "b[k]" : "0.0f", kh, pads[0],
      dilations[0], strides[0], in_h, kw, pads[1], dilations[1], strides[1], in_w, read);
  std::vector<int> operands = {x, w};
  if (has_bias) operands.push_back(bias);
  operands.push_back(out);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands), args);
  return Status();
}

}  // namespace

const OpLowering kConvTransposeLowering{"ConvTranspose",      &supports, &lower, 0, "",
                                        /*layout_aware=*/true};

}  // namespace baton::cuda
