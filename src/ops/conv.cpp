// ONNX Conv and ConvTranspose (opsets 1 and 11, the same semantics: 11 only rewrote the text;
// bfloat16, which ONNX adds in 22, is taken from 1 on). X is [N, C, D1, ..., Dn] (n >= 1), W is
// [M, C / group, k1, ..., kn] for Conv and [C, M / group, k1, ..., kn] for ConvTranspose, B
// (optional) is [M].
//
// Canonical form (what kernels read): auto_pad "NOTSET", kernel_shape = W's spatial sizes, and
// strides, dilations and pads (begin..., end...) all present. ConvTranspose also has
// output_padding present and output_shape absent: an output_shape (or SAME auto_pad) is turned
// into the pads it implies, and where it asks for more than the input gives (negative total
// padding, which ONNX Runtime clamps to 0), into extra output_padding (elements past the end that
// receive only the bias). output_padding, given or implied, must be less than max(stride,
// dilation) (ONNX 11's text; ONNX Runtime refuses the rest too).
//
// Baton's FusedConv (domain "baton") is a Conv with its epilogue, as the fuse-conv pass writes it
// (compiler/passes/fuse_conv.cpp): Y = act(conv(X, W) + B + Z), Z (optional) a residual of Y's
// shape, the activation as ops/activation.h defines it. Its attributes are Conv's, canonical the
// same way, plus `activation` and `activation_params`.
#include <algorithm>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/activation.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

Result<AutoPad> auto_pad_of(const InferContext& ctx) {
  const std::string& s = ctx.attr_string("auto_pad");
  if (s == "NOTSET") return AutoPad::NotSet;
  if (s == "SAME_UPPER") return AutoPad::SameUpper;
  if (s == "SAME_LOWER") return AutoPad::SameLower;
  if (s == "VALID") return AutoPad::Valid;
  return BATON_ERROR(
      InvalidArgument,
      "{}: attribute 'auto_pad' is '{}'; use NOTSET, SAME_UPPER, SAME_LOWER or VALID", ctx.what(),
      s);
}

// An optional INTS attribute with `per` values per spatial axis (of `spatial`), each at least
// `min`; absent means `fill` everywhere.
Result<std::vector<int64_t>> per_axis(const InferContext& ctx, std::string_view name,
                                      size_t spatial, size_t per, int64_t fill, int64_t min) {
  const size_t count = spatial * per;
  if (ctx.attr_none(name)) return std::vector<int64_t>(count, fill);
  const std::vector<int64_t>& v = ctx.attr_ints(name);
  BATON_CHECK_OR_RETURN(
      v.size() == count, InvalidArgument,
      "{}: attribute '{}' {} has {} values; X has {} spatial axes, so it needs {}", ctx.what(),
      name, shape_to_string(v), v.size(), spatial, count);
  for (int64_t x : v) {
    BATON_CHECK_OR_RETURN(x >= min, InvalidArgument,
                          "{}: attribute '{}' {} has {}; each must be >= {}", ctx.what(), name,
                          shape_to_string(v), x, min);
  }
  return v;
}

// What both ops check and bind alike: ranks, group, bias, kernel_shape, strides, dilations,
// explicit pads (refused beside a SAME or VALID auto_pad).
struct Bound {
  size_t spatial = 0;
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::NotSet;
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::vector<int64_t> dilated;  // (k - 1) * dilation + 1 per axis
};

Result<Bound> bind_common(InferContext& ctx, std::string_view w_layout) {
  const auto x = ctx.sizes(0), w = ctx.sizes(1);
  BATON_CHECK_OR_RETURN(x.size() >= 3, InvalidArgument,
                        "{}: X must be [N, C, D1, ...] with at least one spatial axis, got {}",
                        ctx.what(), shape_to_string(x));
  BATON_CHECK_OR_RETURN(w.size() == x.size(), InvalidArgument,
                        "{}: W must be {} (X's rank {}), got {}", ctx.what(), w_layout, x.size(),
                        shape_to_string(w));
  Bound b;
  b.spatial = x.size() - 2;
  b.group = ctx.attr_int("group");
  BATON_CHECK_OR_RETURN(b.group >= 1, InvalidArgument,
                        "{}: attribute 'group' is {}; it must be >= 1", ctx.what(), b.group);
  BATON_ASSIGN_OR_RETURN(b.auto_pad, auto_pad_of(ctx));
  b.kernel.assign(w.begin() + 2, w.end());
  for (int64_t k : b.kernel) {
    BATON_CHECK_OR_RETURN(k >= 1, InvalidArgument,
                          "{}: W {} has an empty kernel; every kernel size must be >= 1",
                          ctx.what(), shape_to_string(w));
  }
  if (!ctx.attr_none("kernel_shape")) {
    const std::vector<int64_t>& ks = ctx.attr_ints("kernel_shape");
    BATON_CHECK_OR_RETURN(ks == b.kernel, InvalidArgument,
                          "{}: attribute 'kernel_shape' {} differs from W's spatial sizes {} (W is "
                          "{})",
                          ctx.what(), shape_to_string(ks), shape_to_string(b.kernel),
                          shape_to_string(w));
  }
  BATON_ASSIGN_OR_RETURN(b.strides, per_axis(ctx, "strides", b.spatial, 1, 1, 1));
  BATON_ASSIGN_OR_RETURN(b.dilations, per_axis(ctx, "dilations", b.spatial, 1, 1, 1));
  if (!ctx.attr_none("pads")) {
    BATON_CHECK_OR_RETURN(b.auto_pad == AutoPad::NotSet, InvalidArgument,
                          "{}: attributes 'pads' and 'auto_pad' ('{}') are both set; ONNX allows "
                          "one of them",
                          ctx.what(), ctx.attr_string("auto_pad"));
    BATON_ASSIGN_OR_RETURN(b.pads, per_axis(ctx, "pads", b.spatial, 2, 0, 0));
  } else {
    b.pads.assign(2 * b.spatial, 0);
  }
  for (size_t i = 0; i < b.spatial; ++i) {
    int64_t d = 0;
    BATON_CHECK_OR_RETURN(!__builtin_mul_overflow(b.kernel[i] - 1, b.dilations[i], &d) &&
                              !__builtin_add_overflow(d, 1, &d),
                          InvalidArgument,
                          "{}: kernel size {} with dilation {} on spatial axis {} overflows int64",
                          ctx.what(), b.kernel[i], b.dilations[i], i);
    b.dilated.push_back(d);
  }
  return b;
}

Status check_bias(const InferContext& ctx, int64_t m) {
  if (!ctx.has_input(2)) return Status();
  const auto bias = ctx.sizes(2);
  BATON_CHECK_OR_RETURN(bias.size() == 1 && bias[0] == m, InvalidArgument,
                        "{}: B must be [{}] (one value per output channel), got {}", ctx.what(), m,
                        shape_to_string(bias));
  return Status();
}

void set_canonical(InferContext& ctx, const Bound& b) {
  ctx.set_attr("auto_pad", AttrValue::of_string("NOTSET"));
  ctx.set_attr("kernel_shape", AttrValue::of_ints(b.kernel));
  ctx.set_attr("strides", AttrValue::of_ints(b.strides));
  ctx.set_attr("dilations", AttrValue::of_ints(b.dilations));
  ctx.set_attr("pads", AttrValue::of_ints(b.pads));
}

Status overflow(const InferContext& ctx, size_t axis) {
  return BATON_ERROR(InvalidArgument,
                     "{}: the output size along spatial axis {} overflows int64; check the pads, "
                     "strides and output_shape",
                     ctx.what(), axis);
}

Status infer_conv(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(Bound b, bind_common(ctx, "[M, C / group, k1, ...]"));
  const auto x = ctx.sizes(0), w = ctx.sizes(1);
  int64_t c = 0;
  BATON_CHECK_OR_RETURN(!__builtin_mul_overflow(w[1], b.group, &c) && c == x[1], InvalidArgument,
                        "{}: W {} has {} channels per group; times group {} that must be X's {} "
                        "channels (X is {})",
                        ctx.what(), shape_to_string(w), w[1], b.group, x[1], shape_to_string(x));
  BATON_CHECK_OR_RETURN(w[0] % b.group == 0, InvalidArgument,
                        "{}: W {} has {} output channels, not divisible by group {}", ctx.what(),
                        shape_to_string(w), w[0], b.group);
  BATON_TRY(check_bias(ctx, w[0]));
  std::vector<int64_t> y = {x[0], w[0]};
  for (size_t i = 0; i < b.spatial; ++i) {
    const int64_t in = x[2 + i], s = b.strides[i], dk = b.dilated[i];
    int64_t& begin = b.pads[i];
    int64_t& end = b.pads[b.spatial + i];
    if (b.auto_pad == AutoPad::Valid) {
      begin = end = 0;
    } else if (b.auto_pad != AutoPad::NotSet) {
      // SAME: output ceil(in / stride), padded as little as that needs, the odd element at the
      // end (SAME_UPPER) or at the beginning (SAME_LOWER).
      const int64_t out = in / s + (in % s != 0 ? 1 : 0);
      int64_t total = 0;
      if (out > 0) {
        int64_t span = 0;  // (out - 1) * s + dk
        if (__builtin_mul_overflow(out - 1, s, &span) || __builtin_add_overflow(span, dk, &span)) {
          return overflow(ctx, i);
        }
        total = std::max<int64_t>(0, span - in);
      }
      begin = b.auto_pad == AutoPad::SameUpper ? total / 2 : total - total / 2;
      end = total - begin;
    }
    int64_t padded = 0;
    if (__builtin_add_overflow(in, begin, &padded) ||
        __builtin_add_overflow(padded, end, &padded)) {
      return overflow(ctx, i);
    }
    if (padded >= dk) {
      y.push_back((padded - dk) / s + 1);
    } else {
      BATON_CHECK_OR_RETURN(in == 0, InvalidArgument,
                            "{}: spatial axis {} of X {} padded to {} is shorter than the dilated "
                            "kernel ({}); no output position fits",
                            ctx.what(), i, shape_to_string(x), padded, dk);
      y.push_back(0);
    }
  }
  set_canonical(ctx, b);
  ctx.output(0).sizes = std::move(y);
  return Status();
}

Status infer_conv_transpose(InferContext& ctx) {
  BATON_ASSIGN_OR_RETURN(Bound b, bind_common(ctx, "[C, M / group, k1, ...]"));
  const auto x = ctx.sizes(0), w = ctx.sizes(1);
  BATON_CHECK_OR_RETURN(w[0] == x[1], InvalidArgument,
                        "{}: W {} must have X's {} input channels first (X is {})", ctx.what(),
                        shape_to_string(w), x[1], shape_to_string(x));
  BATON_CHECK_OR_RETURN(x[1] % b.group == 0, InvalidArgument,
                        "{}: X {} has {} channels, not divisible by group {}", ctx.what(),
                        shape_to_string(x), x[1], b.group);
  int64_t m = 0;
  BATON_CHECK_OR_RETURN(!__builtin_mul_overflow(w[1], b.group, &m), InvalidArgument,
                        "{}: W {} times group {} output channels overflow int64", ctx.what(),
                        shape_to_string(w), b.group);
  BATON_TRY(check_bias(ctx, m));
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                         per_axis(ctx, "output_padding", b.spatial, 1, 0, 0));
  std::vector<int64_t> target;  // output_shape's spatial sizes, or empty
  if (!ctx.attr_none("output_shape")) {
    const std::vector<int64_t>& os = ctx.attr_ints("output_shape");
    // ONNX gives the spatial sizes; ONNX Runtime also takes [N, M, D1, ...].
    BATON_CHECK_OR_RETURN(os.size() == b.spatial || os.size() == b.spatial + 2, InvalidArgument,
                          "{}: attribute 'output_shape' {} must have one size per spatial axis "
                          "({})",
                          ctx.what(), shape_to_string(os), b.spatial);
    target.assign(os.end() - static_cast<ptrdiff_t>(b.spatial), os.end());
    for (int64_t t : target) {
      BATON_CHECK_OR_RETURN(t >= 0, InvalidArgument,
                            "{}: attribute 'output_shape' {} has a negative size", ctx.what(),
                            shape_to_string(os));
    }
  }
  std::vector<int64_t> y = {x[0], m};
  for (size_t i = 0; i < b.spatial; ++i) {
    const int64_t in = x[2 + i], s = b.strides[i];
    const int64_t limit = std::max(s, b.dilations[i]);
    BATON_CHECK_OR_RETURN(output_padding[i] < limit, InvalidArgument,
                          "{}: attribute 'output_padding' {} has {} on spatial axis {}; it must be "
                          "less than max(stride, dilation) = {}",
                          ctx.what(), shape_to_string(output_padding), output_padding[i], i, limit);
    int64_t& begin = b.pads[i];
    int64_t& end = b.pads[b.spatial + i];
    // full = s * (in - 1) + output_padding + dilated kernel: the output before padding is removed.
    int64_t full = 0;
    if (__builtin_mul_overflow(s, in - 1, &full) ||
        __builtin_add_overflow(full, output_padding[i], &full) ||
        __builtin_add_overflow(full, b.dilated[i], &full)) {
      return overflow(ctx, i);
    }
    const bool same = b.auto_pad == AutoPad::SameUpper || b.auto_pad == AutoPad::SameLower;
    if (!target.empty() || same) {
      int64_t want = 0;
      if (!target.empty()) {
        want = target[i];
      } else if (__builtin_mul_overflow(in, s, &want)) {
        return overflow(ctx, i);
      }
      int64_t total = 0;
      if (__builtin_sub_overflow(full, want, &total)) return overflow(ctx, i);
      if (total < 0) {
        // More output than the input reaches: the rest gets only the bias.
        const int64_t given = output_padding[i];
        BATON_CHECK_OR_RETURN(
            -total < limit - given, InvalidArgument,
            "{}: spatial axis {} of size {} ({}) is {} past the {} elements the input reaches; "
            "the output_padding that implies ({} + {}) must be less than max(stride, dilation) "
            "= {}",
            ctx.what(), i, want,
            target.empty() ? "input size times stride, for SAME auto_pad"
                           : "attribute 'output_shape'",
            -total, full, given, -total, limit);
        output_padding[i] = given - total;
        total = 0;
      }
      // The odd element goes at the end for SAME_UPPER and at the beginning otherwise (ONNX 11's
      // text; ONNX Runtime does the same).
      begin = b.auto_pad == AutoPad::SameUpper ? total / 2 : total - total / 2;
      end = total - begin;
      y.push_back(want);
      continue;
    }
    if (b.auto_pad == AutoPad::Valid) begin = end = 0;
    int64_t out = 0;
    if (__builtin_sub_overflow(full, begin, &out) || __builtin_sub_overflow(out, end, &out)) {
      return overflow(ctx, i);
    }
    BATON_CHECK_OR_RETURN(out >= 0, InvalidArgument,
                          "{}: pads {} remove more than the {} elements spatial axis {} of the "
                          "output has before padding",
                          ctx.what(), shape_to_string(b.pads), std::max<int64_t>(full, 0), i);
    y.push_back(out);
  }
  set_canonical(ctx, b);
  ctx.set_attr("output_padding", AttrValue::of_ints(std::move(output_padding)));
  ctx.set_attr("output_shape", AttrValue::absent(AttrKind::Ints));
  ctx.output(0).sizes = std::move(y);
  return Status();
}

Status infer_fused_conv(InferContext& ctx) {
  BATON_TRY(infer_conv(ctx));
  if (ctx.has_input(3)) {
    const auto z = ctx.sizes(3);
    const std::vector<int64_t>& y = ctx.output(0).sizes;
    BATON_CHECK_OR_RETURN(std::vector<int64_t>(z.begin(), z.end()) == y, InvalidArgument,
                          "{}: the residual Z {} must have the output's shape {}", ctx.what(),
                          shape_to_string(z), shape_to_string(y));
  }
  BATON_ASSIGN_OR_RETURN(const Activation act, canonical_activation(ctx));
  (void)act;
  return Status();
}

void add_versions(OpRegistry& registry, OpDef def) {
  for (int version : {1, 11}) {
    OpDef d = def;
    d.since_version = version;
    registry.add(std::move(d));
  }
}

}  // namespace

void register_conv(OpRegistry& registry) {
  OpDef conv;
  conv.name = "Conv";
  conv.inputs = {{"X", "T"}, {"W", "T"}, {"B", "T", Arity::Optional}};
  conv.outputs = {{"Y", "T"}};
  conv.attrs = {attr_string("auto_pad", "NOTSET"),
                attr_optional("dilations", AttrKind::Ints),
                attr_int("group", 1),
                attr_optional("kernel_shape", AttrKind::Ints),
                attr_optional("pads", AttrKind::Ints),
                attr_optional("strides", AttrKind::Ints)};
  conv.types = {{"T", kFloatTypes}};
  conv.infer = &infer_conv;
  add_versions(registry, conv);

  OpDef transpose = conv;
  transpose.name = "ConvTranspose";
  transpose.attrs = {attr_string("auto_pad", "NOTSET"),
                     attr_optional("dilations", AttrKind::Ints),
                     attr_int("group", 1),
                     attr_optional("kernel_shape", AttrKind::Ints),
                     attr_optional("output_padding", AttrKind::Ints),
                     attr_optional("output_shape", AttrKind::Ints),
                     attr_optional("pads", AttrKind::Ints),
                     attr_optional("strides", AttrKind::Ints)};
  transpose.infer = &infer_conv_transpose;
  add_versions(registry, transpose);

  OpDef fused = conv;
  fused.name = "FusedConv";
  fused.domain = "baton";
  fused.since_version = 1;
  fused.inputs = {{"X", "T"}, {"W", "T"}, {"B", "T", Arity::Optional}, {"Z", "T", Arity::Optional}};
  fused.attrs.push_back(attr_string("activation", ""));
  fused.attrs.push_back(attr_floats("activation_params", {}));
  fused.infer = &infer_fused_conv;
  registry.add(std::move(fused));
}

}  // namespace baton::ops
