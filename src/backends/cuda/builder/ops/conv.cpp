// Conv on the GPU, channels-last (DESIGN.md §7). Outputs are stored N, H, W, C inside the engine
// (Lowering::set_channels_last); inputs in another layout are converted once, at the partition's
// boundary. Two paths:
// Baton's FusedConv (the fuse-conv pass's Conv with a residual Z and an activation, ops/conv.cpp)
// lowers the same way: each path applies what it can of the epilogue in its own step, and one
// elementwise kernel after it (Lowering::add_epilogue) does the rest.
// - groups == 1: a cuDNN graph (ConvStep) with the bias, the residual, and a Relu, HardSwish or
//   HardSigmoid activation fused as pointwise operations. Input channels are zero-padded to a
//   multiple of 8 (the 3-channel stems of ResNet and ViT), which cuDNN's tensor-core engines need,
//   with the filters padded to match.
// - grouped (groups > 1: depthwise, where groups == C == K, and RegNet's or ResNeXt's groups of
//   several channels): a generated kernel, one thread per output element summing its group's
//   input channels over the window, reading along C (coalesced in NHWC), with the bias, the
//   residual and the activation applied before the store. cuDNN's graph API is not used for them
//   (Baton's cuDNN path builds ungrouped graphs only).
// - patches (groups == 1, kernel == stride > 1, no padding, no dilation: ViT's 16x16 patch
//   embedding, ConvNeXt's and Swin's 4x4 stems): the windows tile the input without overlap, so
//   the convolution is a GEMM of the patches [N*OH*OW, C*KH*KW] (gathered by one generated
//   kernel, no bigger than the input) against the filters [K, C*KH*KW] as they are, with the bias
//   in cuBLASLt's epilogue; its [N*OH*OW, K] result is the output stored channels-last. cuDNN 9.19
//   runs ViT-B/16's patch convolution as an implicit-GEMM kernel without shared memory (its
//   3 channels padded to 8): 68 us of ViT's 0.54 ms on an H100, where the GEMM
//   is one of ViT's 768x768 GEMMs. The build option conv_patches=cudnn keeps such convolutions
//   on cuDNN (to compare the two).
// - rows (groups == 1, a 1x1 kernel over a 1x1 input, at most 8 images: squeeze-excite's two
//   fully connected layers at batch 1): y = x W^T + b is a product of at most 8 rows with the
//   filters, one generated kernel (device/gemv.cuh) with the bias, the residual and the
//   activation applied before the store. cuDNN 9.19 ran MobileNetV3's as
//   tensor-core convolutions of 4 to 12 us each on an H200, for at most 0.5 MB of filters. The
//   build option conv_rows=cudnn keeps them on cuDNN (to compare).
// 1-D convolutions arrive as 2-D ones over a height of 1 (the conv-1d pass). 3-D ones (rank-5
// X, any groups) run as one generated kernel in row-major N, C, D, H, W, one thread per output
// element (lower_volume): correct for every attribute, but a direct convolution on CUDA cores,
// not tuned (docs/support.md says so; cuDNN's 3-D graphs or an implicit GEMM are the next step).
#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "ops/activation.h"
#include "ops/elementwise.h"

namespace baton::cuda {
namespace {

struct Shape {
  int64_t n, c, h, w, k, oh, ow, kh, kw;
  int64_t sh, sw, dh, dw, pt, pl, pb, pr, groups;
};

Shape shape_of(const compiler::Graph& g, const compiler::IrNode& node) {
  const auto& x = g.values[node.inputs[0]].sizes;
  const auto& w = g.values[node.inputs[1]].sizes;
  const auto& y = g.values[node.outputs[0]].sizes;
  const auto& strides = node.attr_ints("strides");
  const auto& dilations = node.attr_ints("dilations");
  const auto& pads = node.attr_ints("pads");  // canonical: begin..., end...
  return {x[0],         x[1],    x[2],    x[3],       w[0],       y[2],
          y[3],         w[2],    w[3],    strides[0], strides[1], dilations[0],
          dilations[1], pads[0], pads[1], pads[2],    pads[3],    node.attr_int("group")};
}

// A 3-D convolution's sizes (X [N, C, D, H, W], W [K, C / groups, KD, KH, KW]): spatial axes
// depth, height, width in that order.
struct Volume {
  int64_t n, c, k, groups;
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
};

Volume volume_of(const compiler::Graph& g, const compiler::IrNode& node) {
  const auto& x = g.values[node.inputs[0]].sizes;
  const auto& w = g.values[node.inputs[1]].sizes;
  const auto& y = g.values[node.outputs[0]].sizes;
  const auto& strides = node.attr_ints("strides");
  const auto& dilations = node.attr_ints("dilations");
  const auto& pads = node.attr_ints("pads");  // canonical: begin..., end...
  Volume v{x[0], x[1], w[0], node.attr_int("group"), {}, {}, {}, {}, {}, {}};
  for (size_t a = 0; a < 3; ++a) {
    v.in[a] = x[2 + a];
    v.out[a] = y[2 + a];
    v.kernel[a] = w[2 + a];
    v.stride[a] = strides[a];
    v.dilation[a] = dilations[a];
    v.pad[a] = pads[a];  // the end pads only shape the output, which inference computed
  }
  return v;
}

bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  // float_tensors_only covers FusedConv's residual (same dtype, any layout).
  if (!float_tensors_only(graph, node) || node.inputs.size() < 2) return false;
  const size_t rank = graph.values[node.inputs[0]].sizes.size();
  if (rank != 4 && rank != 5) return false;
  if (!graph.values[node.inputs[1]].constant) return false;
  if (node.inputs.size() > 2 && node.inputs[2] >= 0 && !graph.values[node.inputs[2]].constant)
    return false;
  if (rank == 5) {
    const Volume v = volume_of(graph, node);
    return v.groups >= 1 && v.c % v.groups == 0 && v.k % v.groups == 0;
  }
  const Shape s = shape_of(graph, node);
  return s.groups >= 1 && s.c % s.groups == 0 && s.k % s.groups == 0;
}

bool has_bias(const compiler::IrNode& n) { return n.inputs.size() > 2 && n.inputs[2] >= 0; }

// A FusedConv's epilogue (the fuse-conv pass decided it): its residual Z (-1: none) and
// activation. A plain Conv has neither.
struct Epilogue {
  int residual = -1;
  ops::Activation act;
};
Result<Epilogue> epilogue_of(const compiler::IrNode& n) {
  Epilogue e;
  if (n.domain != "baton") return e;
  if (n.inputs.size() > 3) e.residual = n.inputs[3];
  BATON_ASSIGN_OR_RETURN(
      e.act, ops::make_activation(n.attr_string("activation"), n.attr_floats("activation_params"),
                                  n.describe()));
  return e;
}

// A channels-last scratch for a step's result that an epilogue kernel finishes.
int epilogue_input(Lowering& ctx, int out, DType* dtype) {
  *dtype = ctx.activation_dtype();
  const int y = ctx.new_scratch(*dtype, ctx.value(out).sizes);
  ctx.set_channels_last(y);
  return y;
}

// `activation`'s device expression of `v` (the kernels' accumulator).
std::string applied_to_v(const ops::Activation& act) {
  std::string e = activation_expression(act);
  for (size_t at = e.find("{x}"); at != std::string::npos; at = e.find("{x}", at + 3))
    e.replace(at, 3, "(v)");
  return e;
}

// After a step wrote `y`: with `kernel` (`y` is epilogue_input's scratch), the epilogue kernel
// adds the residual and applies the activation into `out`; else `y` is `out` or result_slot's
// scratch for it.
void finish_epilogue(Lowering& ctx, int y, const Epilogue& e, bool kernel, int out) {
  if (kernel) {
    ctx.add_epilogue(y, e.residual, activation_expression(e.act), out);
  } else if (y != out) {
    ctx.alias(out, y);
  }
}

// Non-overlapping windows that cover the input from its first element (the patches path above).
bool is_patches(const Shape& s) {
  return s.groups == 1 && s.kh == s.sh && s.kw == s.sw && s.kh * s.kw > 1 && s.dh == 1 &&
         s.dw == 1 && s.pt == 0 && s.pl == 0 && s.pb == 0 && s.pr == 0;
}

// A 1x1 convolution of a 1x1 input, a few images: the rows path (top of the file).
constexpr int64_t kGemvRows = 8;
bool is_rows(const Shape& s) {
  return s.groups == 1 && s.h == 1 && s.w == 1 && s.kh == 1 && s.kw == 1 && s.pt == 0 &&
         s.pl == 0 && s.pb == 0 && s.pr == 0 && s.n >= 1 && s.n <= kGemvRows;
}

// HardSwish and HardSigmoid run as cuDNN pointwise chains, which only cuDNN's runtime-compiled
// fusion engines take (compiled when the engine loads); the build option
// conv_hard_activations=unfused leaves them to the generated elementwise kernels instead.
bool fuse_hard_activations(const Lowering& ctx) {
  return ctx.target().options.conv_hard_activations == ConvHardActivations::Fused;
}

// Where the convolution's result goes: `out` itself, stored channels-last, or (for a partition
// output) a channels-last scratch that is copied into the caller's row-major buffer afterwards.
int result_slot(Lowering& ctx, int out, DType* dtype) {
  if (!ctx.is_binding(out)) {
    ctx.set_channels_last(out);
    *dtype = ctx.dtype_of(out);
    return out;
  }
  *dtype = ctx.activation_dtype();
  const int tmp = ctx.new_scratch(*dtype, ctx.value(out).sizes);
  ctx.set_channels_last(tmp);
  return tmp;
}

// The cuDNN step of a plain convolution of `x` (channels-last, `cp` channels) into a result of
// `y_dtype`; lower_cudnn adds what it fuses.
ConvStep conv_step(const Lowering& ctx, const Shape& s, int64_t cp, int x, DType operand,
                   DType y_dtype) {
  ConvStep step{};
  step.x_dtype = static_cast<uint8_t>(ctx.dtype_of(x));
  step.w_dtype = static_cast<uint8_t>(operand);
  step.y_dtype = static_cast<uint8_t>(y_dtype);
  step.bias_dtype = static_cast<uint8_t>(y_dtype);
  step.activation = static_cast<uint8_t>(ConvActivation::None);
  step.compute = static_cast<uint8_t>(ctx.target().precision);
  step.n = s.n;
  step.c = cp;
  step.k = s.k;
  step.groups = 1;
  step.in_h = s.h;
  step.in_w = s.w;
  step.out_h = s.oh;
  step.out_w = s.ow;
  step.kernel_h = s.kh;
  step.kernel_w = s.kw;
  step.pad_top = s.pt;
  step.pad_left = s.pl;
  step.pad_bottom = s.pb;
  step.pad_right = s.pr;
  step.stride_h = s.sh;
  step.stride_w = s.sw;
  step.dilation_h = s.dh;
  step.dilation_w = s.dw;
  return step;
}

Status lower_cudnn(Lowering& ctx, int index, const Shape& s) {
  const compiler::IrNode& node = ctx.node(index);
  // Assigned into a default-constructed Epilogue: with BATON_ASSIGN_OR_RETURN's initialization
  // GCC 12 warns (falsely) that e.act.op may be read uninitialized.
  Epilogue e;
  BATON_ASSIGN_OR_RETURN(e, epilogue_of(node));
  const int out = node.outputs[0];
  ConvActivation activation = ConvActivation::None;
  float alpha = 0.0f, beta = 0.0f;
  if (e.act.op == "Relu") {
    activation = ConvActivation::Relu;
  } else if (e.act.op == "HardSwish" && fuse_hard_activations(ctx)) {
    activation = ConvActivation::HardSwish;
    alpha = static_cast<float>(ops::kHardSwishAlpha);
    beta = static_cast<float>(ops::kHardSwishBeta);
  } else if (e.act.op == "HardSigmoid" && fuse_hard_activations(ctx)) {
    activation = ConvActivation::HardSigmoid;
    alpha = static_cast<float>(e.act.params[0]);
    beta = static_cast<float>(e.act.params[1]);
  }
  const DType operand = ctx.operand_dtype();
  // Strict fp32 (no TF32) fuses nothing into cuDNN: its graphs with pointwise operations run only
  // on engines that the fp32 filter (restrict_numerics: no tensor cores, no down-converted
  // inputs) can leave empty. ResNet-50's 1x1 convolution 64 -> 256 at 56x56 with its bias,
  // residual and ReLU had no plan at all on an H200 with cuDNN 9.19 ("No execution plans support
  // the graph"), while a plain convolution always has cuDNN's non-tensor-core engines. The bias,
  // the residual and the activation then run in one epilogue kernel after it.
  // (A convolution with nothing to fuse is a plain one already: no epilogue kernel for it.)
  const bool unfused = ctx.target().precision == Precision::FP32 && operand == DType::Float32 &&
                       (has_bias(node) || e.residual >= 0 || !e.act.none());
  if (unfused) activation = ConvActivation::None;
  const bool act_kernel = unfused || (!e.act.none() && activation == ConvActivation::None);
  const std::string epilogue_expression = activation_expression(e.act);

  const int64_t cp = (s.c + 7) / 8 * 8;
  BATON_ASSIGN_OR_RETURN(const int x, ctx.channels_last_copy(node.inputs[0], operand, cp));
  // Filters K, R, S, Cp from K, C, R, S.
  const std::vector<float> wf = ctx.constant_floats(node.inputs[1]);
  std::vector<float> wp(static_cast<size_t>(s.k * s.kh * s.kw * cp), 0.0f);
  for (int64_t k = 0; k < s.k; ++k)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t r = 0; r < s.kh; ++r)
        for (int64_t q = 0; q < s.kw; ++q)
          wp[((k * s.kh + r) * s.kw + q) * cp + c] = wf[((k * s.c + c) * s.kh + r) * s.kw + q];
  const int w = ctx.add_weights(wp, operand, {s.k, s.kh, s.kw, cp});

  DType y_dtype = DType::Float32;
  const int y = act_kernel ? epilogue_input(ctx, out, &y_dtype) : result_slot(ctx, out, &y_dtype);
  const int bias = has_bias(node) ? ctx.weight(node.inputs[2], y_dtype) : -1;
  int z = -1;
  if (unfused) {
    ConvStep step = conv_step(ctx, s, cp, x, operand, y_dtype);
    ctx.add_conv(step, {x, w, -1, -1, y});
    ctx.add_epilogue(y, e.residual, epilogue_expression, out, bias);
    return Status();
  }
  if (e.residual >= 0) {
    BATON_ASSIGN_OR_RETURN(
        z, ctx.channels_last_copy(e.residual, y_dtype, ctx.value(e.residual).sizes[1]));
  }

  ConvStep step = conv_step(ctx, s, cp, x, operand, y_dtype);
  step.has_bias = bias >= 0;
  step.has_residual = z >= 0;
  step.activation = static_cast<uint8_t>(activation);
  step.act_alpha = alpha;
  step.act_beta = beta;
  ctx.add_conv(step, {x, w, bias, z, y});
  finish_epilogue(ctx, y, Epilogue{-1, e.act}, act_kernel, out);
  return Status();
}

// Grouped convolutions (groups > 1; depthwise is groups == C == K): one thread per output element
// (n, oh, ow, k), summing the C / groups input channels of k's group over the window, reading
// along C (coalesced in NHWC: neighbouring threads take neighbouring k, which share their group's
// inputs), with the bias, the residual and the activation applied before the store.
Status lower_grouped(Lowering& ctx, int index, const Shape& s) {
  const compiler::IrNode& node = ctx.node(index);
  // The residual and the activation are applied to the value before it is stored.
  BATON_ASSIGN_OR_RETURN(const Epilogue e, epilogue_of(node));
  const int out = node.outputs[0];
  const int x = node.inputs[0];
  const std::vector<int64_t> st = ctx.strides_of(x);
  const int w = ctx.weight(node.inputs[1], DType::Float32);  // [K, C / groups, KH, KW]
  const int64_t cg = s.c / s.groups, kg = s.k / s.groups;    // channels per group, in and out
  const int bias = has_bias(node) ? ctx.weight(node.inputs[2], DType::Float32) : -1;
  DType y_dtype = DType::Float32;
  const int y = result_slot(ctx, out, &y_dtype);
  const int64_t count = s.n * s.oh * s.ow * s.k;
  // Sizes and strides stay in the code in a static engine whatever kernel_sizes says: as arguments
  // this kernel ran 1.4x slower on an H200 (MobileNetV3's 15 depthwise kernels, 123 against 88 us:
  // its 64-bit address arithmetic per tap is no longer strength-reduced), which cost the model 12%.
  // The generator is written for arguments (and the window stays in the code either way, so its
  // loops unroll); 32-bit index arithmetic is the next thing to measure before switching.
  // A dynamic engine needs its sizes as arguments (one kernel for every size), slower or not.
  KernelArgs args = ctx.dynamic() ? ctx.kernel_args() : KernelArgs(/*in_code=*/true);
  std::string z_param, z_add;
  if (e.residual >= 0) {
    const std::vector<int64_t> zs = ctx.strides_of(e.residual);
    z_param = fmt::format("const {}* __restrict__ z, ", device_type_name(ctx.dtype_of(e.residual)));
    z_add = fmt::format("    v += to_f(z[n * {} + k * {} + oh * {} + ow * {}]);\n",
                        args.value(zs[0]), args.value(zs[1]), args.value(zs[2]), args.value(zs[3]));
  }
  const std::string name = ctx.kernel_name(cg == 1 && kg == 1 ? "depthwise" : "grouped_conv");
  const std::string coordinates = fmt::format(
      "    const long long p = {}, k = i - p * {};\n"
      "    const long long q = {}, ow = p - q * {};\n"
      "    const long long n = {}, oh = q - n * {};\n"
      "    const long long first = (k / {}LL) * {}LL;\n",
      args.quotient("i", s.k, count), args.value(s.k), args.quotient("p", s.ow, count),
      args.value(s.ow), args.quotient("q", s.oh, count), args.value(s.oh), kg, cg);
  const std::string in_h = args.value(s.h), in_w = args.value(s.w);
  const std::string read = fmt::format("x[n * {} + c * {} + ih * {} + iw * {}]", args.value(st[0]),
                                       args.value(st[1]), args.value(st[2]), args.value(st[3]));
  const std::string total = args.value(count);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "const float* __restrict__ w, {}{}{}* __restrict__ y{}) {{\n"
      "  baton_for_each({}, [&](long long i) {{\n"
      "{}"
      "    float v = {};\n"
      "    for (int r = 0; r < {}; ++r) {{\n"
      "      const long long ih = oh * {}LL - {}LL + r * {}LL;\n"
      "      if (ih < 0 || ih >= {}) continue;\n"
      "      for (int q2 = 0; q2 < {}; ++q2) {{\n"
      "        const long long iw = ow * {}LL - {}LL + q2 * {}LL;\n"
      "        if (iw < 0 || iw >= {}) continue;\n"
      "        for (int ci = 0; ci < {}; ++ci) {{\n"
      "          const long long c = first + ci;\n"
      "          v += to_f({}) * w[((k * {} + ci) * {} + r) * {} + q2];\n"
      "        }}\n"
      "      }}\n"
      "    }}\n"
      "{}"
      "    st(&y[i], {});\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(x)),
      bias >= 0 ? "const float* __restrict__ b, " : "", z_param, device_type_name(y_dtype),
      args.parameter(), total, coordinates, bias >= 0 ? "b[k]" : "0.0f", s.kh, s.sh, s.pt, s.dh,
      in_h, s.kw, s.sw, s.pl, s.dw, in_w, cg, read, cg, s.kh, s.kw, z_add, applied_to_v(e.act));
  std::vector<int> operands = {x, w};
  if (bias >= 0) operands.push_back(bias);
  if (e.residual >= 0) operands.push_back(e.residual);
  operands.push_back(y);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands), args);
  finish_epilogue(ctx, y, e, /*kernel=*/false, out);
  return Status();
}

// 3-D convolutions (top of the file): one thread per output element (n, k, od, oh, ow) in
// row-major order, so neighbouring threads take neighbouring ow and read neighbouring inputs;
// each sums its group's C / groups input channels over the window, with the bias, a FusedConv's
// residual and activation applied before the store. X and the residual are read through their
// strides; the output is row-major (rank-5 values have no channels-last layout here).
Status lower_volume(Lowering& ctx, int index) {
  const compiler::IrNode& node = ctx.node(index);
  const Volume s = volume_of(ctx.graph(), node);
  BATON_ASSIGN_OR_RETURN(const Epilogue e, epilogue_of(node));
  const int out = node.outputs[0];
  const int x = node.inputs[0];
  const std::vector<int64_t> st = ctx.strides_of(x);
  const int w = ctx.weight(node.inputs[1], DType::Float32);  // [K, C / groups, KD, KH, KW]
  const int64_t cg = s.c / s.groups, kg = s.k / s.groups;
  const int bias = has_bias(node) ? ctx.weight(node.inputs[2], DType::Float32) : -1;
  // Row-major like the caller's buffers: a partition output is written in place, in its dtype.
  const int y = out;
  const DType y_dtype = ctx.dtype_of(out);
  const int64_t count = s.n * s.k * s.out[0] * s.out[1] * s.out[2];
  KernelArgs args = ctx.dynamic() ? ctx.kernel_args() : KernelArgs(/*in_code=*/true);
  std::string z_param, z_add;
  if (e.residual >= 0) {
    const std::vector<int64_t> zs = ctx.strides_of(e.residual);
    z_param = fmt::format("const {}* __restrict__ z, ", device_type_name(ctx.dtype_of(e.residual)));
    z_add = fmt::format("    v += to_f(z[n * {} + k * {} + od * {} + oh * {} + ow * {}]);\n",
                        args.value(zs[0]), args.value(zs[1]), args.value(zs[2]), args.value(zs[3]),
                        args.value(zs[4]));
  }
  const std::string coordinates = fmt::format(
      "    const long long p = {}, ow = i - p * {};\n"
      "    const long long q = {}, oh = p - q * {};\n"
      "    const long long r = {}, od = q - r * {};\n"
      "    const long long n = {}, k = r - n * {};\n"
      "    const long long first = (k / {}LL) * {}LL;\n",
      args.quotient("i", s.out[2], count), args.value(s.out[2]),
      args.quotient("p", s.out[1], count), args.value(s.out[1]),
      args.quotient("q", s.out[0], count), args.value(s.out[0]), args.quotient("r", s.k, count),
      args.value(s.k), kg, cg);
  const std::string in_d = args.value(s.in[0]), in_h = args.value(s.in[1]),
                    in_w = args.value(s.in[2]);
  const std::string read =
      fmt::format("x[n * {} + c * {} + id * {} + ih * {} + iw * {}]", args.value(st[0]),
                  args.value(st[1]), args.value(st[2]), args.value(st[3]), args.value(st[4]));
  const std::string total = args.value(count);
  const std::string param = args.parameter();
  const std::string name = ctx.kernel_name("conv3d");
  // The taps: one loop per spatial axis, the window in the code (its loops unroll).
  std::string taps;
  const char* axis[3] = {"d", "h", "w"};
  const std::string* in_size[3] = {&in_d, &in_h, &in_w};
  for (int a = 0; a < 3; ++a) {
    taps += fmt::format(
        "    for (int t{0} = 0; t{0} < {1}; ++t{0}) {{\n"
        "      const long long i{0} = o{0} * {2}LL - {3}LL + t{0} * {4}LL;\n"
        "      if (i{0} < 0 || i{0} >= {5}) continue;\n",
        axis[a], s.kernel[a], s.stride[a], s.pad[a], s.dilation[a], *in_size[a]);
  }
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "const float* __restrict__ w, {}{}{}* __restrict__ y{}) {{\n"
      "  baton_for_each({}, [&](long long i) {{\n"
      "{}"
      "    float v = {};\n"
      "{}"
      "      for (int ci = 0; ci < {}; ++ci) {{\n"
      "        const long long c = first + ci;\n"
      "        v += to_f({}) * w[(((k * {} + ci) * {} + td) * {} + th) * {} + tw];\n"
      "      }}\n"
      "    }}}}}}\n"
      "{}"
      "    st(&y[i], {});\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(x)),
      bias >= 0 ? "const float* __restrict__ b, " : "", z_param, device_type_name(y_dtype), param,
      total, coordinates, bias >= 0 ? "b[k]" : "0.0f", taps, cg, read, cg, s.kernel[0], s.kernel[1],
      s.kernel[2], z_add, applied_to_v(e.act));
  std::vector<int> operands = {x, w};
  if (bias >= 0) operands.push_back(bias);
  if (e.residual >= 0) operands.push_back(e.residual);
  operands.push_back(y);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), std::move(operands), args);
  return Status();
}

// The rows path (top of the file): a 1x1 convolution of a 1x1 input, at most kGemvRows images,
// is y[n, k] = b[k] + sum_c x[n, c] w[k, c]: one generated kernel (device/gemv.cuh), the bias, the
// residual and the activation applied before the store.
Status lower_gemv(Lowering& ctx, int index, const Shape& s) {
  const compiler::IrNode& node = ctx.node(index);
  BATON_ASSIGN_OR_RETURN(const Epilogue e, epilogue_of(node));
  const int out = node.outputs[0];
  const int x = node.inputs[0];
  const std::vector<int64_t> st = ctx.strides_of(x);  // [N, C, 1, 1]: row n, column c
  const DType operand = ctx.operand_dtype();
  const int w = ctx.weight(node.inputs[1], operand);  // [K, C, 1, 1]: row-major [K, C]
  DType y_dtype = DType::Float32;
  const int y = result_slot(ctx, out, &y_dtype);  // [N, K, 1, 1]: element (n, k) at n * K + k
  const int bias = has_bias(node) ? ctx.weight(node.inputs[2], DType::Float32) : -1;
  // The rows' count is a template argument (the accumulators are an array); the rest arguments.
  KernelArgs args = ctx.kernel_args();
  std::string z_param, z_add;
  if (e.residual >= 0) {
    const std::vector<int64_t> zs = ctx.strides_of(e.residual);
    z_param = fmt::format("const {}* __restrict__ z, ", device_type_name(ctx.dtype_of(e.residual)));
    z_add =
        fmt::format("    v += to_f(z[n * {} + k * {}]);\n", args.value(zs[0]), args.value(zs[1]));
  }
  // 16 bytes per access of the wider of x and w, when the columns allow it.
  const int v = static_cast<int>(16 / std::max(dtype_size(ctx.dtype_of(x)), dtype_size(operand)));
  const bool vec = st[1] == 1 && s.c % v == 0 && (s.n == 1 || st[0] % v == 0);
  const std::string name = ctx.kernel_name("gemv");
  const std::string row_stride = args.value(st[0]), col_stride = args.value(st[1]),
                    channels = args.value(s.c), columns = args.value(s.k);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2}* __restrict__ x, "
      "const {3}* __restrict__ w, {4}{14}{5}* __restrict__ y{16}) {{\n"
      "  const long long K = {11};\n"
      "  baton_gemv<{6}, {7}>(x, {8}, {9}, w, {10}, K, "
      "[&](int n, long long k, float v) {{\n"
      "    v += {12};\n"
      "{15}"
      "    st(&y[n * K + k], {13});\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(x)), device_type_name(operand),
      bias >= 0 ? "const float* __restrict__ b, " : "", device_type_name(y_dtype), s.n, vec ? v : 1,
      row_stride, col_stride, channels, columns, bias >= 0 ? "b[k]" : "0.0f", applied_to_v(e.act),
      z_param, z_add, args.parameter());
  std::vector<int> operands = {x, w};
  if (bias >= 0) operands.push_back(bias);
  if (e.residual >= 0) operands.push_back(e.residual);
  operands.push_back(y);
  LaunchShape launch;
  launch.block = kBlock;
  launch.grid = static_cast<uint32_t>(
      std::clamp<int64_t>((s.k + kBlock / 32 - 1) / (kBlock / 32), 1, int64_t{1} << 16));
  ctx.add_kernel(name, std::move(code), launch, std::move(operands), args);
  finish_epilogue(ctx, y, e, /*kernel=*/false, out);
  return Status();
}

// The patches path (top of the file). cuBLASLt's epilogue takes the bias and a Relu; a residual
// or another activation is a kernel after the GEMM.
Status lower_patches(Lowering& ctx, int index, const Shape& s) {
  const compiler::IrNode& node = ctx.node(index);
  BATON_ASSIGN_OR_RETURN(const Epilogue e, epilogue_of(node));
  const bool relu = e.act.op == "Relu" && e.residual < 0;
  const bool act_kernel = e.residual >= 0 || (!e.act.none() && !relu);
  const int out = node.outputs[0];
  const DType operand = ctx.operand_dtype();
  const int x = node.inputs[0];
  const std::vector<int64_t> st = ctx.strides_of(x);
  const int64_t depth = s.c * s.kh * s.kw, rows = s.n * s.oh * s.ow;
  // P[row, col]: row = (n, oh, ow), col = (c, r, q), the filters' own order; consecutive threads
  // read consecutive columns of the input.
  const int p = ctx.new_scratch(operand, {rows, depth});
  const int64_t count = rows * depth;
  const std::string name = ctx.kernel_name("patches");
  // Sizes and strides are arguments; the window (taps and strides) stays in the code.
  KernelArgs args = ctx.kernel_args();
  const std::string coordinates = fmt::format(
      "    const long long row = {}, col = i - row * {};\n"
      "    const long long t = col / {}LL, q = col - t * {}LL;\n"
      "    const long long c = t / {}LL, r = t - c * {}LL;\n"
      "    const long long u = {}, ow = row - u * {};\n"
      "    const long long n = {}, oh = u - n * {};\n",
      args.quotient("i", depth, count), args.value(depth), s.kw, s.kw, s.kh, s.kh,
      args.quotient("row", s.ow, count), args.value(s.ow), args.quotient("u", s.oh, count),
      args.value(s.oh));
  const std::string total = args.value(count);
  const std::string read = fmt::format(
      "x[n * {} + c * {} + (oh * {}LL + r) * {} + (ow * {}LL + q) * {}]", args.value(st[0]),
      args.value(st[1]), s.sh, args.value(st[2]), s.sw, args.value(st[3]));
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}* __restrict__ p{}) {{\n"
      "  baton_for_each({}, [&](long long i) {{\n"
      "{}"
      "    st(&p[i], to_f({}));\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(ctx.dtype_of(x)), device_type_name(operand), args.parameter(),
      total, coordinates, read);
  ctx.add_kernel(name, std::move(code), grid_stride_launch(count), {x, p}, args);

  const int w = ctx.weight(node.inputs[1], operand);  // [K, C, KH, KW]: B^T [K, depth] row-major
  DType y_dtype = DType::Float32;
  const int y = act_kernel ? epilogue_input(ctx, out, &y_dtype) : result_slot(ctx, out, &y_dtype);
  const int bias = has_bias(node) ? ctx.weight(node.inputs[2], y_dtype) : -1;
  // Y[rows, K] = P[rows, depth] W^T, W stored [K, depth].
  GemmStep gs = batched_gemm(ctx, y_dtype, 1, rows, s.k, depth, /*w_transposed=*/true, 1.0f);
  const GemmEpilogue epilogue = bias >= 0 ? (relu ? GemmEpilogue::BiasRelu : GemmEpilogue::Bias)
                                          : (relu ? GemmEpilogue::Relu : GemmEpilogue::None);
  gs.epilogue = static_cast<uint8_t>(epilogue);
  ctx.add_gemm(gs, {w, p, -1, y, bias});
  finish_epilogue(ctx, y, e, act_kernel, out);
  return Status();
}

// Whether the input's image count is the same at every size of a dynamic engine (always, in a
// static one). The rows path's count is a template argument (its accumulators are an array), so
// a dynamic batch takes cuDNN at every size rather than the rows kernel at some and cuDNN at
// others, which one engine cannot be.
bool fixed_images(const Lowering& ctx, int x) {
  const compiler::IrValue& v = ctx.graph().values[x];
  return !ctx.dynamic() || !compiler::is_dynamic(v) || ctx.graph().symbols.is_constant(v.dims[0]);
}

Status lower(Lowering& ctx, int index) {
  if (ctx.graph().values[ctx.node(index).inputs[0]].sizes.size() == 5) {
    return lower_volume(ctx, index);
  }
  const Shape s = shape_of(ctx.graph(), ctx.node(index));
  if (s.groups != 1) return lower_grouped(ctx, index, s);
  if (is_rows(s) && ctx.target().options.conv_rows == ConvRows::Kernel &&
      fixed_images(ctx, ctx.node(index).inputs[0]))
    return lower_gemv(ctx, index, s);
  // cuBLASLt writes float32 or the operands' type (result_slot: the output's own dtype, or the
  // activation dtype for a partition output).
  const int out = ctx.node(index).outputs[0];
  const DType y_dtype = ctx.is_binding(out) ? ctx.activation_dtype() : ctx.dtype_of(out);
  if (is_patches(s) && ctx.target().options.conv_patches == ConvPatches::Gemm &&
      (y_dtype == DType::Float32 || y_dtype == ctx.operand_dtype()))
    return lower_patches(ctx, index, s);
  return lower_cudnn(ctx, index, s);
}

}  // namespace

// Input 0 (X) is read in the engine's operand dtype: a value only convolutions and GEMMs read
// is stored in it.
const OpLowering kConvLowering{"Conv", &supports, &lower, 0b1, "", /*layout_aware=*/true};
const OpLowering kFusedConvLowering{"FusedConv",          &supports, &lower, 0b1, "baton",
                                    /*layout_aware=*/true};

}  // namespace baton::cuda
