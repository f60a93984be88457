// ConvTranspose on the GPU (2-D; 1-D arrives as 2-D through the conv-1d pass). Output row oh
// receives input row ih through filter row r when oh = ih * stride - pad_top + r * dilation, so
// for each r an output takes ih = (oh + pad_top - r * dilation) / stride where that divides
// exactly and lands inside the input; likewise along the width. Output channel k of group g sums
// the group's C / groups input channels with the filters W[c, k - g * (K / groups), r, q]
// (W is [C, K / groups, KH, KW]), plus the bias. Two paths:
// - groups == 1 (UNet decoders, 1-D upsampling): a GEMM and a gather. Every input pixel's C
//   channels times W, reordered [C, KH * KW * K], give that pixel's contribution to each filter
//   tap and output channel: G[N * H * W, KH * KW * K] = X W, one cuBLASLt GEMM reading the input
//   channels-last as [N * H * W, C]. One generated kernel then gives each output element the sum
//   of the G entries that land on it (at most ceil(KH / stride) * ceil(KW / stride) of them; one
//   when the kernel does not exceed the stride, UNet's 2x2 stride 2) plus the bias. The channel
//   sum, the expensive part, runs on tensor cores: a UNet's 16x16x1024 -> 32x32x512 upsampling
//   took 0.50 ms on an H200 in the per-element kernel below (1 GMAC on CUDA cores), of a
//   2.39 ms model.
// - grouped: one generated kernel, one thread per output element, summing its group's input
//   channels over the taps that reach it.
// Either way the input is read through its strides as stored (a channels-last convolution
// output); the output is stored channels-last inside the engine (the walk is then N, H, W, K) and
// row-major when it is a binding. The sizes are kernel arguments: a dynamic engine runs it at
// every size.
//
// cuDNN's graph API would run this as a data-gradient convolution, with a plan to check per layer
// at load; the GEMM is the library step Baton already tunes and replays at every size.
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"

namespace baton::cuda {
namespace {

// The kernel lines giving output element i's coordinates n, k, oh and ow, walking the output in
// the order it is stored (N, H, W, K channels-last; N, K, H, W row-major).
std::string output_coordinates(KernelArgs& args, bool nhwc, int64_t k, int64_t oh, int64_t ow,
                               int64_t count) {
  if (nhwc) {
    return fmt::format(
        "    const long long p = {}, k = i - p * {};\n"
        "    const long long q = {}, ow = p - q * {};\n"
        "    const long long n = {}, oh = q - n * {};\n",
        args.quotient("i", k, count), args.value(k), args.quotient("p", ow, count), args.value(ow),
        args.quotient("q", oh, count), args.value(oh));
  }
  return fmt::format(
      "    const long long p = {}, ow = i - p * {};\n"
      "    const long long q = {}, oh = p - q * {};\n"
      "    const long long n = {}, k = q - n * {};\n",
      args.quotient("i", ow, count), args.value(ow), args.quotient("p", oh, count), args.value(oh),
      args.quotient("q", k, count), args.value(k));
}

// The loops over the filter taps (r, q2) that reach output (oh, ow), each giving the input pixel
// (ih, iw) it reads (in_h and in_w: the input's height and width in the kernel); the caller's
// body goes inside, then kCloseTaps.
std::string open_taps(const compiler::IrNode& n, int64_t kh, int64_t kw, const std::string& in_h,
                      const std::string& in_w) {
  // Canonical form (ops/conv.cpp): explicit pads (begin..., end...), strides and dilations.
  const std::vector<int64_t> strides = n.attr_ints("strides");
  const std::vector<int64_t> dilations = n.attr_ints("dilations");
  const std::vector<int64_t> pads = n.attr_ints("pads");
  return fmt::format(
      "    for (int r = 0; r < {0}; ++r) {{\n"
      "      const long long th = oh + {1}LL - r * {2}LL;\n"
      "      if (th < 0 || th % {3}LL != 0) continue;\n"
      "      const long long ih = th / {3}LL;\n"
      "      if (ih >= {4}) continue;\n"
      "      for (int q2 = 0; q2 < {5}; ++q2) {{\n"
      "        const long long tw = ow + {6}LL - q2 * {7}LL;\n"
      "        if (tw < 0 || tw % {8}LL != 0) continue;\n"
      "        const long long iw = tw / {8}LL;\n"
      "        if (iw >= {9}) continue;\n",
      kh, pads[0], dilations[0], strides[0], in_h, kw, pads[1], dilations[1], strides[1], in_w);
}
constexpr const char* kCloseTaps = "      }\n    }\n";

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!float_tensors_only(graph, node) || node.inputs.size() < 2) return false;
  if (graph.values[node.inputs[0]].sizes.size() != 4) return false;
  if (!graph.values[node.inputs[1]].constant) return false;
  return node.inputs.size() < 3 || node.inputs[2] < 0 || graph.values[node.inputs[2]].constant;
}

// The grouped path (top of the file).
Status lower_grouped(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int x = n.inputs[0], out = n.outputs[0];
  const std::vector<int64_t>& xs = ctx.value(x).sizes;
  const std::vector<int64_t>& ws = ctx.value(n.inputs[1]).sizes;  // [C, K / groups, KH, KW]
  const std::vector<int64_t>& ys = ctx.value(out).sizes;
  const int64_t groups = n.attr_int("group");
  const int64_t c = xs[1], h = xs[2], w_in = xs[3];
  const int64_t k = ys[1], oh = ys[2], ow = ys[3];
  const int64_t cg = c / groups, kg = k / groups, kh = ws[2], kw = ws[3];
  const int w = ctx.weight(n.inputs[1], DType::Float32);
  const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  const int bias = has_bias ? ctx.weight(n.inputs[2], DType::Float32) : -1;
  const bool nhwc = !ctx.is_binding(out) && ctx.set_channels_last(out);
  const int64_t count = ys[0] * k * oh * ow;
  const std::vector<int64_t> st = ctx.strides_of(x);
  KernelArgs args = ctx.kernel_args();
  const std::string coordinates = output_coordinates(args, nhwc, k, oh, ow, count);
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
      "{11}"
      "        for (int ci = 0; ci < {9}; ++ci) {{\n"
      "          const long long c = first + ci;\n"
      "          v += to_f({12}) * w[((c * {8}LL + kl) * {13} + r) * {14} + q2];\n"
      "        }}\n"
      "{15}"
      "    st(&y[i], v);\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(x)),
      has_bias ? "const float* __restrict__ b, " : "", device_type_name(ctx.dtype_of(out)),
      args.parameter(), total, coordinates, kg, cg, has_bias ? "b[k]" : "0.0f",
      open_taps(n, kh, kw, in_h, in_w), read, kh, kw, kCloseTaps);
  std::vector<int> operands = {x, w};
  if (has_bias) operands.push_back(bias);
  operands.push_back(out);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands), args);
  return Status();
}

// The GEMM path (groups == 1; top of the file). False, before any step is added, when the input
// stored channels-last is not evenly pitched rows of C channels, which the GEMM needs (a copy
// channels_last_copy makes always is).
Result<bool> lower_gemm(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  const std::vector<int64_t>& xs = ctx.value(n.inputs[0]).sizes;
  const std::vector<int64_t>& ys = ctx.value(out).sizes;
  const int64_t c = xs[1], h = xs[2], w_in = xs[3];
  const int64_t k = ys[1], oh = ys[2], ow = ys[3];
  const std::vector<int64_t>& ws = ctx.value(n.inputs[1]).sizes;  // [C, K, KH, KW]
  const int64_t kh = ws[2], kw = ws[3], taps = kh * kw * k;
  const DType operand = ctx.operand_dtype();
  BATON_ASSIGN_OR_RETURN(const int x, ctx.channels_last_copy(n.inputs[0], operand, c));
  // X as the GEMM's [N * H * W, C] operand: pixels one pitch apart, channels contiguous.
  const std::vector<int64_t> st = ctx.strides_of(x);
  const int64_t pitch = st[3];
  if (st[1] != 1 || pitch < c || st[2] != w_in * pitch || st[0] != h * st[2]) return false;

  // W [C, K, KH, KW] -> W' [C, KH, KW, K]: G's columns are (tap, output channel).
  const std::vector<float> wf = ctx.constant_floats(n.inputs[1]);
  std::vector<float> wr(wf.size());
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t ki = 0; ki < k; ++ki)
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t q = 0; q < kw; ++q)
          wr[((ci * kh + r) * kw + q) * k + ki] = wf[((ci * k + ki) * kh + r) * kw + q];
  const int w = ctx.add_weights(wr, operand, {c, taps});
  const int64_t rows = xs[0] * h * w_in;
  const int g = ctx.new_scratch(operand, {rows, taps});
  // G[rows, taps] = X[rows, C] W'[C, taps].
  GemmStep gs = batched_gemm(ctx, operand, 1, rows, taps, c, /*w_transposed=*/false, 1.0f);
  gs.ldb = pitch;
  ctx.add_gemm(gs, {w, x, -1, g, -1});

  const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  const int bias = has_bias ? ctx.weight(n.inputs[2], DType::Float32) : -1;
  const bool nhwc = !ctx.is_binding(out) && ctx.set_channels_last(out);
  const int64_t count = ys[0] * k * oh * ow;
  KernelArgs args = ctx.kernel_args();
  const std::string coordinates = output_coordinates(args, nhwc, k, oh, ow, count);
  const std::string in_h = args.value(h), in_w = args.value(w_in);
  const std::string total = args.value(count);
  const std::string name = ctx.kernel_name("col2im");
  // Channels-last, W neighbouring output channels share their pixel and taps and lie next to each
  // other in G and in the output: one 16-byte load per tap and one store per W channels, where K
  // is a multiple of W (the channel count is the same at every size of a dynamic engine) and the
  // pointers are aligned (checked when the kernel runs; the one-element loop stays the fallback).
  // One element per thread read and wrote 2 bytes at a time: UNet's largest col2im (8 x 256 x
  // 256 x 64 in fp16) ran at 1.5 TB/s.
  const size_t widest = std::max(dtype_size(operand), dtype_size(ctx.dtype_of(out)));
  const int64_t vec = static_cast<int64_t>(16 / widest);
  const bool vectorized = nhwc && k % vec == 0;
  const std::string taps_open = open_taps(n, kh, kw, in_h, in_w);
  const std::string element = fmt::format(
      "((n * {} + ih) * {} + iw) * {}LL + (r * {} + q2) * {}LL + k", in_h, in_w, taps, kw, k);
  std::string vector_loop;
  if (vectorized) {
    vector_loop = fmt::format(
        "  if (baton_vec_aligned<{0}>(g) && baton_vec_aligned<{0}>(y)) {{\n"
        "    baton_for_each({1} / {0}, [&](long long j) {{\n"
        "    const long long i = j * {0};\n"
        "{2}"
        "    float v[{0}];\n"
        "#pragma unroll\n"
        "    for (int e = 0; e < {0}; ++e) v[e] = {3};\n"
        "{4}"
        "        float tap[{0}];\n"
        "        baton_vec_load<{0}>(g + {5}, tap);\n"
        "#pragma unroll\n"
        "        for (int e = 0; e < {0}; ++e) v[e] += tap[e];\n"
        "{6}"
        "    baton_vec_store<{0}>(y + i, v);\n"
        "    }});\n"
        "    return;\n"
        "  }}\n",
        vec, total, coordinates, has_bias ? "b[k + e]" : "0.0f", taps_open, element, kCloseTaps);
  }
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ g, "
      "{3}{4}* __restrict__ y{5}) {{\n"
      "{6}"
      "  baton_for_each({7}, [&](long long i) {{\n"
      "{8}"
      "    float v = {9};\n"
      "{10}"
      "        v += to_f(g[{11}]);\n"
      "{12}"
      "    st(&y[i], v);\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(operand), has_bias ? "const float* __restrict__ b, " : "",
      device_type_name(ctx.dtype_of(out)), args.parameter(), vector_loop, total, coordinates,
      has_bias ? "b[k]" : "0.0f", taps_open, element, kCloseTaps);
  std::vector<int> operands = {g};
  if (has_bias) operands.push_back(bias);
  operands.push_back(out);
  // Enough threads for the vector loop; the fallback strides over the rest.
  const LaunchShape launch = vectorized ? vector_launch(count, vec) : grid_stride_launch(count);
  ctx.add_kernel(name, std::move(code), launch, std::move(operands), args);
  return true;
}

Status lower(Lowering& ctx, int index) {
  if (ctx.node(index).attr_int("group") == 1) {
    BATON_ASSIGN_OR_RETURN(const bool done, lower_gemm(ctx, index));
    if (done) return Status();
  }
  return lower_grouped(ctx, index);
}

}  // namespace

const OpLowering kConvTransposeLowering{"ConvTranspose",      &supports, &lower, 0, "",
                                        /*layout_aware=*/true};

}  // namespace baton::cuda
