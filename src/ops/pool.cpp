// ONNX pooling: MaxPool, AveragePool and LpPool over windows, GlobalAveragePool, GlobalMaxPool and
// GlobalLpPool over all spatial positions. X is [N, C, D1, ...]; windowed pools take 1 to 3
// spatial dimensions, global ones any number.
//
// Window geometry, per spatial dimension (in: input size, k: kernel, s: stride, d: dilation,
// dk = (k - 1) * d + 1: the window's extent):
//  - explicit pads (head, tail): out = floor((in + head + tail - dk) / s) + 1, or with ceil_mode
//    ceil(...) + 1 less the last window if it would start in the right padding (at or past
//    in + head): onnxruntime's and PyTorch's rule, which the ONNX spec states from opset 19's text
//    on. A window past the right padding reads only its taps inside the input (and, for
//    AveragePool with count_include_pad, counts only its taps inside [-head, in + tail)).
//  - auto_pad SAME_UPPER / SAME_LOWER: out = ceil(in / s), total padding
//    max(0, (out - 1) * s + dk - in), split with the extra element at the end (UPPER) or at the
//    start (LOWER). The spec's formula, dilation included (onnxruntime leaves the dilation out of
//    the padding, and then its output shape differs from the spec's); ceil_mode does not apply.
//  - auto_pad VALID: no padding, out = floor((in - dk) / s) + 1; ceil_mode does not apply.
// Refused: a window that does not fit in the padded input, and a window that would see no
// input element at all (only padding: MaxPool would have no value, AveragePool would divide by
// zero).
//
// Canonical form: auto_pad NOTSET with the pads it stands for (ceil_mode then 0), strides and
// dilations filled in (1), so the kernel only reads kernel_shape, strides, dilations and pads.
//
// Versions: MaxPool 1, 8 (storage_order and the Indices output), 10 (ceil_mode, dilations), 11,
// 12 (int8 and uint8); AveragePool 1, 7 (count_include_pad), 10 (ceil_mode), 11, 19 (dilations);
// LpPool 2, 11, 18 (ceil_mode, dilations); GlobalAveragePool 1, GlobalMaxPool 1, GlobalLpPool 2
// (LpPool-1 and GlobalLpPool-1, with a float p, are not supported). Baton takes bfloat16 in every
// version (ONNX adds it in opset 22).
#include <algorithm>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/attr_checks.h"
#include "ops/register.h"
#include "ops/shape.h"

namespace baton::ops {
namespace {

using Wide = __int128;

constexpr int kMaxPoolSpatial = 3;
// Windows that start in the left padding, checked one by one for seeing an input element when the
// dilation skips over the whole input (below); more than this many is refused as unverified.
constexpr int64_t kMaxLeftWindows = int64_t{1} << 16;

bool has_attr(const InferContext& ctx, std::string_view name) {
  return ctx.def().attr_index(name) >= 0;
}

// X must be [N, C, D1, ...]: at least one spatial dimension.
Status check_pool_input(InferContext& ctx) {
  BATON_CHECK_OR_RETURN(ctx.rank(0) >= 3, InvalidArgument,
                        "{}: X has shape {}; it must be [N, C, D1, ...] (rank 3 or more)",
                        ctx.what(), shape_to_string(ctx.sizes(0)));
  return Status();
}

Status check_p(InferContext& ctx) {
  if (!has_attr(ctx, "p")) return Status();
  const int64_t p = ctx.attr_int("p");
  BATON_CHECK_OR_RETURN(p >= 1, InvalidArgument, "{}: attribute 'p' is {}; it must be 1 or more",
                        ctx.what(), p);
  return Status();
}

// The ints attribute `name`: `n` values, each at least `min`; absent (or not in this version):
// `n` copies of `fallback`.
Result<std::vector<int64_t>> spatial_ints(InferContext& ctx, std::string_view name, size_t n,
                                          int64_t min, int64_t fallback) {
  if (!has_attr(ctx, name) || ctx.attr_none(name)) return std::vector<int64_t>(n, fallback);
  const std::vector<int64_t>& v = ctx.attr_ints(name);
  BATON_CHECK_OR_RETURN(v.size() == n, InvalidArgument,
                        "{}: attribute '{}' is {}; it must have {} values for X {}", ctx.what(),
                        name, shape_to_string(v), n, shape_to_string(ctx.sizes(0)));
  for (int64_t e : v) {
    BATON_CHECK_OR_RETURN(e >= min, InvalidArgument,
                          "{}: attribute '{}' is {}; every value must be {} or more", ctx.what(),
                          name, shape_to_string(v), min);
  }
  return v;
}

struct Dim {
  int64_t in, k, s, d;
  int64_t head = 0, tail = 0, out = 0;
};

// Whether a window starting at `start` (< 0: in the left padding) has a tap inside [0, in).
bool left_window_sees_input(const Dim& g, int64_t start) {
  const int64_t first = (-start + g.d - 1) / g.d;  // the first tap at or past 0
  return first <= g.k - 1 && start + first * g.d < g.in;
}

// Output size and pads of one spatial dimension (see the file comment); `i` names it in errors.
Status pool_dim(InferContext& ctx, size_t i, const std::string& auto_pad, bool ceil_mode,
                bool check_windows, Dim& g) {
  const std::string dim = fmt::format("spatial dimension {} (size {})", i, g.in);
  BATON_CHECK_OR_RETURN(g.in > 0, InvalidArgument,
                        "{}: X {} has an empty {}: no pooling window fits", ctx.what(),
                        shape_to_string(ctx.sizes(0)), dim);
  const Wide dk = Wide{g.k - 1} * g.d + 1;
  Wide out = 0, head = g.head, tail = g.tail;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    out = (Wide{g.in} + g.s - 1) / g.s;
    const Wide total = std::max<Wide>(0, (out - 1) * g.s + dk - g.in);
    head = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    tail = total - head;
  } else {
    const Wide padded = Wide{g.in} + head + tail;
    BATON_CHECK_OR_RETURN(
        padded >= dk, InvalidArgument,
        "{}: the window (kernel {}, dilation {}: extent {}) is larger than {} with pads {} and {}",
        ctx.what(), g.k, g.d, static_cast<int64_t>(std::min<Wide>(dk, INT64_MAX)), dim, g.head,
        g.tail);
    out = (padded - dk) / g.s + 1;
    if (ceil_mode) {
      out = (padded - dk + g.s - 1) / g.s + 1;
      if ((out - 1) * g.s >= Wide{g.in} + head) --out;
    }
  }
  // Everything the kernel computes (window starts, taps, the padded extent) stays in int64.
  const Wide reach = std::max<Wide>((out - 1) * g.s + dk, Wide{g.in} + head + tail) + g.s;
  BATON_CHECK_OR_RETURN(reach <= INT64_MAX, InvalidArgument,
                        "{}: kernel {}, stride {}, dilation {} and pads {}, {} on {} reach past "
                        "int64",
                        ctx.what(), g.k, g.s, g.d, g.head, g.tail, dim);
  g.out = static_cast<int64_t>(out);
  g.head = static_cast<int64_t>(head);
  g.tail = static_cast<int64_t>(tail);
  if (!check_windows) return Status();
  // A window sees no input element when it starts past the input, ends before it, or (a dilation
  // wider than the input) steps over it.
  const int64_t last_start = (g.out - 1) * g.s - g.head;
  bool sees = last_start < g.in && Wide{g.head} < dk;
  if (sees && g.d > g.in && g.head > 0) {
    const int64_t left = std::min(g.out, (g.head + g.s - 1) / g.s);
    BATON_CHECK_OR_RETURN(left <= kMaxLeftWindows, NotSupported,
                          "{}: dilation {} is wider than {}, and {} windows start in the left "
                          "padding (pad {}); Baton checks at most {} such windows for reading "
                          "any input",
                          ctx.what(), g.d, dim, left, g.head, kMaxLeftWindows);
    for (int64_t o = 0; o < left && sees; ++o) sees = left_window_sees_input(g, o * g.s - g.head);
  }
  BATON_CHECK_OR_RETURN(
      sees, InvalidArgument,
      "{}: with kernel {}, stride {}, dilation {} and pads {}, {}, a window on {} "
      "covers only padding and no input element",
      ctx.what(), g.k, g.s, g.d, g.head, g.tail, dim);
  return Status();
}

Status infer_pool(InferContext& ctx) {
  BATON_TRY(check_pool_input(ctx));
  const auto x = ctx.sizes(0);
  const size_t n = x.size() - 2;
  BATON_CHECK_OR_RETURN(n <= kMaxPoolSpatial, NotSupported,
                        "{}: X {} has {} spatial dimensions; Baton pools over 1 to {}", ctx.what(),
                        shape_to_string(x), n, kMaxPoolSpatial);
  BATON_TRY(check_flag(ctx, "ceil_mode"));
  BATON_TRY(check_flag(ctx, "count_include_pad"));
  BATON_TRY(check_flag(ctx, "storage_order"));
  BATON_TRY(check_p(ctx));
  const std::string auto_pad = ctx.attr_string("auto_pad");
  BATON_CHECK_OR_RETURN(auto_pad == "NOTSET" || auto_pad == "SAME_UPPER" ||
                            auto_pad == "SAME_LOWER" || auto_pad == "VALID",
                        InvalidArgument,
                        "{}: attribute 'auto_pad' is '{}'; ONNX allows NOTSET, SAME_UPPER, "
                        "SAME_LOWER and VALID",
                        ctx.what(), auto_pad);
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> kernel,
                         spatial_ints(ctx, "kernel_shape", n, 1, 1));
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> strides, spatial_ints(ctx, "strides", n, 1, 1));
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> dilations,
                         spatial_ints(ctx, "dilations", n, 1, 1));
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> pads, spatial_ints(ctx, "pads", 2 * n, 0, 0));
  const bool explicit_pads = auto_pad == "NOTSET";
  BATON_CHECK_OR_RETURN(
      explicit_pads || std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }),
      InvalidArgument, "{}: attribute 'pads' is {} with auto_pad '{}'; give one or the other",
      ctx.what(), shape_to_string(pads), auto_pad);
  const bool ceil_mode =
      explicit_pads && has_attr(ctx, "ceil_mode") && ctx.attr_int("ceil_mode") == 1;
  // An empty batch or channel dimension runs no window: only the shape matters.
  const bool check_windows = x[0] != 0 && x[1] != 0;
  std::vector<int64_t> y = {x[0], x[1]};
  for (size_t i = 0; i < n; ++i) {
    Dim g{x[2 + i], kernel[i], strides[i], dilations[i], pads[i], pads[n + i]};
    BATON_TRY(pool_dim(ctx, i, auto_pad, ceil_mode, check_windows, g));
    y.push_back(g.out);
    pads[i] = g.head;
    pads[n + i] = g.tail;
  }
  ctx.set_attr("auto_pad", AttrValue::of_string("NOTSET"));
  ctx.set_attr("pads", AttrValue::of_ints(std::move(pads)));
  ctx.set_attr("strides", AttrValue::of_ints(strides));
  if (has_attr(ctx, "dilations")) ctx.set_attr("dilations", AttrValue::of_ints(dilations));
  if (has_attr(ctx, "ceil_mode")) ctx.set_attr("ceil_mode", AttrValue::of_int(ceil_mode ? 1 : 0));
  for (size_t o = 0; o < ctx.num_outputs(); ++o) {
    ctx.output(o).dtype = o == 0 ? ctx.input(0).dtype : DType::Int64;
    ctx.output(o).sizes = y;
  }
  return Status();
}

Status infer_global_pool(InferContext& ctx) {
  BATON_TRY(check_pool_input(ctx));
  BATON_TRY(check_p(ctx));
  const auto x = ctx.sizes(0);
  const int64_t spatial = product(x, 2, x.size());
  BATON_CHECK_OR_RETURN(spatial > 0 || x[0] == 0 || x[1] == 0, InvalidArgument,
                        "{}: X {} has no spatial positions to pool over", ctx.what(),
                        shape_to_string(x));
  std::vector<int64_t> y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  ctx.output(0).dtype = ctx.input(0).dtype;
  ctx.output(0).sizes = std::move(y);
  return Status();
}

enum Attrs : unsigned {
  kCeilMode = 1,
  kCountIncludePad = 2,
  kDilations = 4,
  kStorageOrder = 8,
  kP = 16,
};

void add_pool(OpRegistry& registry, std::string_view name, int since, unsigned attrs,
              DTypeSet types, bool indices) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.inputs = {{"X", "T"}};
  def.outputs = {{"Y", "T"}};
  if (indices) def.outputs.push_back({"Indices", "I", Arity::Optional});
  def.attrs.push_back(attr_string("auto_pad", "NOTSET"));
  if (attrs & kCeilMode) def.attrs.push_back(attr_int("ceil_mode", 0));
  if (attrs & kCountIncludePad) def.attrs.push_back(attr_int("count_include_pad", 0));
  if (attrs & kDilations) def.attrs.push_back(attr_optional("dilations", AttrKind::Ints));
  def.attrs.push_back(attr_required("kernel_shape", AttrKind::Ints));
  if (attrs & kP) def.attrs.push_back(attr_int("p", 2));
  def.attrs.push_back(attr_optional("pads", AttrKind::Ints));
  if (attrs & kStorageOrder) def.attrs.push_back(attr_int("storage_order", 0));
  def.attrs.push_back(attr_optional("strides", AttrKind::Ints));
  def.types = {{"T", types}};
  if (indices) def.types.push_back({"I", DTypeSet{DType::Int64}});
  def.infer = &infer_pool;
  registry.add(std::move(def));
}

void add_global_pool(OpRegistry& registry, std::string_view name, int since, bool p) {
  OpDef def;
  def.name = name;
  def.since_version = since;
  def.inputs = {{"X", "T"}};
  def.outputs = {{"Y", "T"}};
  if (p) def.attrs.push_back(attr_int("p", 2));
  def.types = {{"T", kFloatTypes}};
  def.infer = &infer_global_pool;
  registry.add(std::move(def));
}

}  // namespace

void register_pool(OpRegistry& registry) {
  const DTypeSet f = kFloatTypes;
  add_pool(registry, "MaxPool", 1, 0, f, false);
  add_pool(registry, "MaxPool", 8, kStorageOrder, f, true);
  for (int since : {10, 11}) {
    add_pool(registry, "MaxPool", since, kCeilMode | kDilations | kStorageOrder, f, true);
  }
  add_pool(registry, "MaxPool", 12, kCeilMode | kDilations | kStorageOrder,
           f | DTypeSet{DType::Int8, DType::UInt8}, true);

  add_pool(registry, "AveragePool", 1, 0, f, false);
  add_pool(registry, "AveragePool", 7, kCountIncludePad, f, false);
  for (int since : {10, 11}) {
    add_pool(registry, "AveragePool", since, kCeilMode | kCountIncludePad, f, false);
  }
  add_pool(registry, "AveragePool", 19, kCeilMode | kCountIncludePad | kDilations, f, false);

  for (int since : {2, 11}) add_pool(registry, "LpPool", since, kP, f, false);
  add_pool(registry, "LpPool", 18, kCeilMode | kDilations | kP, f, false);

  add_global_pool(registry, "GlobalAveragePool", 1, false);
  add_global_pool(registry, "GlobalMaxPool", 1, false);
  add_global_pool(registry, "GlobalLpPool", 2, true);
}

}  // namespace baton::ops
