// ONNX Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9).
//
// - Upsample-7 (scales attribute) and -9 (scales input), Resize-10 (X, scales): nearest or linear,
//   coordinates asymmetric (x / scale), nearest rounding as ONNX Runtime does for these versions
//   (down when upsampling, up when downsampling).
// - Resize-11: roi, scales, sizes inputs (an empty tensor stands for an absent one; exactly one of
//   scales and sizes), cubic mode, coordinate_transformation_mode (half_pixel, pytorch_half_pixel,
//   align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize with
//   extrapolation_value), nearest_mode, cubic_coeff_a, exclude_outside.
// - Resize-13: roi and scales optional; tf_half_pixel_for_nn gone.
// - Resize-18: antialias (Baton: 0 only, or any with nearest, which it does not change), axes,
//   keep_aspect_ratio_policy. Resize-19: half_pixel_symmetric.
// scales and sizes decide the output shape and must be known at compile time; so must roi for
// tf_crop_and_resize (other modes ignore it). Any dtype resizes with nearest; linear and cubic
// interpolate the float types only.
//
// Also the sampling itself (resize_taps: which input elements each output index reads, with which
// weights), computed once here for the CPU kernel and the GPU's lowering alike, so that both
// backends pick the same elements.
#include "ops/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/reduce.h"
#include "ops/register.h"

namespace baton::ops {

ResizeSlots resize_slots(const OpDef& def) {
  if (def.name == "Upsample")
    return def.since_version >= 9 ? ResizeSlots{-1, 1, -1} : ResizeSlots{};
  if (def.since_version < 11) return ResizeSlots{-1, 1, -1};
  return ResizeSlots{1, 2, 3};
}

namespace {

double original_coordinate(const ResizeAxis& a, ResizeCoord coord, int64_t i) {
  const auto x = static_cast<double>(i);
  const auto in = static_cast<double>(a.in);
  switch (coord) {
    case ResizeCoord::HalfPixel:
      return (x + 0.5) / a.scale - 0.5;
    case ResizeCoord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / a.length_resized;
      return in / 2 * (1 - adjustment) + (x + 0.5) / a.scale - 0.5;
    }
    case ResizeCoord::PytorchHalfPixel:
      return a.length_resized > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case ResizeCoord::AlignCorners:
      return a.length_resized == 1 ? 0.0 : x * (in - 1) / (a.length_resized - 1);
    case ResizeCoord::Asymmetric:
      return x / a.scale;
    case ResizeCoord::TfHalfPixelForNn:
      return (x + 0.5) / a.scale;
    case ResizeCoord::TfCropAndResize:
      return a.length_resized > 1 ? a.roi_start * (in - 1) + x * (a.roi_end - a.roi_start) *
                                                                 (in - 1) / (a.length_resized - 1)
                                  : 0.5 * (a.roi_start + a.roi_end) * (in - 1);
  }
  return 0.0;
}

int64_t nearest_index(double x, ResizeRounding rounding, double scale) {
  const double f = std::floor(x);
  switch (rounding) {
    case ResizeRounding::Legacy:
      return static_cast<int64_t>(scale < 1 ? std::ceil(x) : std::trunc(x));
    case ResizeRounding::RoundPreferFloor:
      return static_cast<int64_t>(x - f <= 0.5 ? f : f + 1);
    case ResizeRounding::RoundPreferCeil:
      return static_cast<int64_t>(x - f < 0.5 ? f : f + 1);
    case ResizeRounding::Floor:
      return static_cast<int64_t>(f);
    case ResizeRounding::Ceil:
      return static_cast<int64_t>(std::ceil(x));
  }
  return 0;
}

}  // namespace

ResizeTaps resize_taps(const ResizeAxis& a, const ResizeSampling& s) {
  ResizeTaps taps;
  taps.k = s.interp == ResizeInterp::Nearest ? 1 : s.interp == ResizeInterp::Linear ? 2 : 4;
  const auto k = static_cast<size_t>(taps.k);
  taps.index.assign(static_cast<size_t>(a.out) * k, 0);
  taps.weights.assign(static_cast<size_t>(a.out) * k, 0.0);
  if (s.coord == ResizeCoord::TfCropAndResize) taps.outside.assign(static_cast<size_t>(a.out), 0);
  const int64_t last = a.in - 1;
  auto clamp = [last](int64_t v) { return std::clamp<int64_t>(v, 0, last); };
  for (int64_t i = 0; i < a.out; ++i) {
    int64_t* off = &taps.index[static_cast<size_t>(i) * k];
    double* w = &taps.weights[static_cast<size_t>(i) * k];
    // Bounded so that the integer conversions below stay defined (any |x| past the input is
    // clamped or extrapolated alike).
    const double x = std::clamp(original_coordinate(a, s.coord, i), -0x1p52, 0x1p52);
    if (s.coord == ResizeCoord::TfCropAndResize && (x < 0 || x > static_cast<double>(last))) {
      taps.outside[static_cast<size_t>(i)] = 1;
      continue;
    }
    if (s.interp == ResizeInterp::Nearest) {
      off[0] = clamp(nearest_index(x, s.rounding, a.scale));
      w[0] = 1.0;
    } else if (s.interp == ResizeInterp::Linear) {
      // Outside [0, in - 1] the edge repeats, as ONNX's reference pads.
      const double xc = std::clamp(x, 0.0, static_cast<double>(last));
      const double f = std::floor(xc);
      const double t = xc - f;
      const auto i0 = static_cast<int64_t>(f);
      off[0] = i0;
      off[1] = clamp(i0 + 1);
      w[0] = 1.0 - t;
      w[1] = t;
    } else {
      const double f = std::floor(x);
      const double t = x - f;
      const double A = s.cubic_a;
      const double c[4] = {
          ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
          ((A + 2) * t - (A + 3)) * t * t + 1,
          ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
          ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A,
      };
      const auto i0 = static_cast<int64_t>(f) - 1;
      double sum = 0.0;
      for (int t4 = 0; t4 < 4; ++t4) {
        const int64_t j = i0 + t4;
        w[t4] = s.exclude_outside && (j < 0 || j > last) ? 0.0 : c[t4];
        off[t4] = clamp(j);
        sum += w[t4];
      }
      if (s.exclude_outside && sum != 0.0) {
        for (int t4 = 0; t4 < 4; ++t4) w[t4] /= sum;
      }
    }
  }
  // One tap where every index reads one element with weight 1 (a dimension not resized).
  bool single = true;
  for (int64_t i = 0; i < a.out && single; ++i) {
    const double* w = &taps.weights[static_cast<size_t>(i) * k];
    single = w[0] == 1.0 || (!taps.outside.empty() && taps.outside[static_cast<size_t>(i)]);
    for (size_t t = 1; t < k && single; ++t) single = w[t] == 0.0;
  }
  if (single && k > 1) {
    for (size_t i = 0; i < static_cast<size_t>(a.out); ++i) {
      taps.index[i] = taps.index[i * k];
      taps.weights[i] = taps.weights[i * k];
    }
    taps.index.resize(static_cast<size_t>(a.out));
    taps.weights.resize(static_cast<size_t>(a.out));
    taps.k = 1;
  }
  return taps;
}

std::vector<double> float_values_of(DType dtype, const void* data, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (int64_t k = 0; k < n; ++k) {
    if (dtype == DType::Float64) {
      std::memcpy(&out[k], bytes + 8 * k, 8);
    } else if (dtype == DType::Float16) {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * k, 2);
      out[k] = half_to_float(h);
    } else {
      float f;
      std::memcpy(&f, bytes + 4 * k, 4);
      out[k] = f;
    }
  }
  return out;
}

Result<std::vector<ResizeAxis>> resize_geometry(std::span<const int64_t> x, const ResizeArgs& args,
                                                std::string_view what) {
  const int rank = static_cast<int>(x.size());
  std::vector<int> dims;
  if (args.axes) {
    BATON_ASSIGN_OR_RETURN(dims, normalize_axes(*args.axes, rank, what, "axes"));
  } else {
    for (int d = 0; d < rank; ++d) dims.push_back(d);
  }
  const size_t n = dims.size();
  BATON_CHECK_OR_RETURN(args.scales.empty() != args.sizes.empty(), InvalidArgument,
                        "{}: exactly one of 'scales' and 'sizes' must be given (non-empty); {}",
                        what, args.scales.empty() ? "neither is" : "both are");
  std::vector<ResizeAxis> axes(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    axes[d] = {x[d], x[d], 1.0, static_cast<double>(x[d]), 0.0, 1.0};
  }
  if (!args.scales.empty()) {
    BATON_CHECK_OR_RETURN(args.scales.size() == n, InvalidArgument,
                          "{}: 'scales' has {} values for {} axes", what, args.scales.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const double s = args.scales[i];
      ResizeAxis& a = axes[static_cast<size_t>(dims[i])];
      BATON_CHECK_OR_RETURN(std::isfinite(s) && s > 0 && (!args.upsample || s >= 1),
                            InvalidArgument, "{}: scale {} (axis {}) must be {}", what, s, dims[i],
                            args.upsample ? ">= 1" : "positive and finite");
      const double length = static_cast<double>(a.in) * s;
      BATON_CHECK_OR_RETURN(length < 0x1p62, InvalidArgument,
                            "{}: scale {} makes axis {} of size {} too large", what, s, dims[i],
                            a.in);
      a.scale = s;
      a.length_resized = length;
      a.out = static_cast<int64_t>(std::floor(length));
    }
  } else {
    BATON_CHECK_OR_RETURN(args.sizes.size() == n, InvalidArgument,
                          "{}: 'sizes' has {} values for {} axes", what, args.sizes.size(), n);
    for (size_t i = 0; i < n; ++i) {
      BATON_CHECK_OR_RETURN(args.sizes[i] >= 0, InvalidArgument,
                            "{}: 'sizes' holds {} (axis {}); sizes must be >= 0", what,
                            args.sizes[i], dims[i]);
    }
    if (args.keep_aspect_ratio_policy == "stretch") {
      for (size_t i = 0; i < n; ++i) {
        ResizeAxis& a = axes[static_cast<size_t>(dims[i])];
        a.out = args.sizes[i];
        a.scale = a.in == 0 ? 1.0 : static_cast<double>(a.out) / static_cast<double>(a.in);
        a.length_resized = static_cast<double>(a.out);
      }
    } else {
      // One scale for every axis named: the smallest (not_larger) or largest (not_smaller) of
      // sizes / in; each output size rounds in * scale half up.
      const bool smallest = args.keep_aspect_ratio_policy == "not_larger";
      double scale = 0.0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t in = x[static_cast<size_t>(dims[i])];
        BATON_CHECK_OR_RETURN(in > 0, InvalidArgument,
                              "{}: keep_aspect_ratio_policy '{}' needs nonzero input sizes, but "
                              "axis {} has size 0",
                              what, args.keep_aspect_ratio_policy, dims[i]);
        const double s = static_cast<double>(args.sizes[i]) / static_cast<double>(in);
        if (i == 0 || (smallest ? s < scale : s > scale)) scale = s;
      }
      for (size_t i = 0; i < n; ++i) {
        ResizeAxis& a = axes[static_cast<size_t>(dims[i])];
        a.scale = scale;
        a.length_resized = static_cast<double>(a.in) * scale;
        BATON_CHECK_OR_RETURN(a.length_resized < 0x1p62, InvalidArgument,
                              "{}: axis {} of size {} resized by {} is too large", what, dims[i],
                              a.in, scale);
        a.out = static_cast<int64_t>(a.length_resized + 0.5);
      }
    }
  }
  if (args.crop_and_resize) {
    BATON_CHECK_OR_RETURN(args.roi.size() == 2 * n, InvalidArgument,
                          "{}: coordinate_transformation_mode 'tf_crop_and_resize' needs 'roi' "
                          "with {} values (starts, then ends), got {}",
                          what, 2 * n, args.roi.size());
    for (size_t i = 0; i < n; ++i) {
      // A NaN or infinite box edge makes every sampling position NaN, which no index conversion
      // can hold (the kernels would read element 0 everywhere, or worse).
      for (const size_t k : {i, n + i}) {
        BATON_CHECK_OR_RETURN(std::isfinite(args.roi[k]), InvalidArgument,
                              "{}: 'roi' value {} ({} of axis {}) is {}; tf_crop_and_resize needs "
                              "finite box edges",
                              what, k, k < n ? "start" : "end", dims[i], args.roi[k]);
      }
      ResizeAxis& a = axes[static_cast<size_t>(dims[i])];
      a.roi_start = args.roi[i];
      a.roi_end = args.roi[n + i];
    }
  }
  for (size_t d = 0; d < axes.size(); ++d) {
    BATON_CHECK_OR_RETURN(axes[d].in > 0 || axes[d].out == 0, InvalidArgument,
                          "{}: axis {} of the input has size 0 but the output's would be {}; "
                          "there is nothing to sample",
                          what, d, axes[d].out);
  }
  return axes;
}

namespace {

Status one_of(InferContext& ctx, std::string_view name,
              std::initializer_list<std::string_view> ok) {
  const std::string& v = ctx.attr_string(name);
  for (std::string_view o : ok) {
    if (v == o) return Status();
  }
  std::string list;
  for (std::string_view o : ok) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", o);
  return BATON_ERROR(InvalidArgument, "{}: attribute '{}' is '{}'; {}-{} takes {}", ctx.what(),
                     name, v, ctx.def().name, ctx.def().since_version, list);
}

Status flag(InferContext& ctx, std::string_view name) {
  const int64_t v = ctx.attr_int(name);
  BATON_CHECK_OR_RETURN(v == 0 || v == 1, InvalidArgument,
                        "{}: attribute '{}' is {}; it must be 0 or 1", ctx.what(), name, v);
  return Status();
}

// A float input's values, which must be known at compile time (an empty one is known).
Result<std::vector<double>> constant_floats(const InferContext& ctx, size_t i,
                                            std::string_view why) {
  const InputInfo& in = ctx.input(i);
  const std::string_view name = ctx.def().input_slot(i).name;
  BATON_CHECK_OR_RETURN(in.sizes.size() == 1, InvalidArgument,
                        "{}: input '{}' must be 1-D, got shape {}", ctx.what(), name,
                        shape_to_string(in.sizes));
  if (in.sizes[0] == 0) return std::vector<double>();
  BATON_CHECK_OR_RETURN(in.data != nullptr, NotSupported,
                        "{}: input '{}' must be a constant (or computed from constants and static "
                        "shapes): {}",
                        ctx.what(), name, why);
  return float_values_of(in.dtype, in.data, in.sizes[0]);
}

Status infer(InferContext& ctx) {
  const OpDef& def = ctx.def();
  const bool resize = def.name == "Resize";
  const int v = def.since_version;
  const auto x = ctx.sizes(0);
  BATON_CHECK_OR_RETURN(!x.empty(), InvalidArgument,
                        "{}: the input is a scalar; {} needs rank >= 1", ctx.what(), def.name);

  if (resize && v >= 11) {
    BATON_TRY(one_of(ctx, "mode", {"nearest", "linear", "cubic"}));
  } else {
    BATON_TRY(one_of(ctx, "mode", {"nearest", "linear"}));
  }
  const std::string mode = ctx.attr_string("mode");
  ResizeArgs args;
  args.upsample = !resize;
  if (resize && v >= 11) {
    if (v == 11) {
      BATON_TRY(one_of(ctx, "coordinate_transformation_mode",
                       {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                        "tf_half_pixel_for_nn", "tf_crop_and_resize"}));
    } else if (v < 19) {
      BATON_TRY(one_of(ctx, "coordinate_transformation_mode",
                       {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                        "tf_crop_and_resize"}));
    } else {
      BATON_TRY(one_of(ctx, "coordinate_transformation_mode",
                       {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                        "asymmetric", "tf_crop_and_resize"}));
    }
    BATON_TRY(
        one_of(ctx, "nearest_mode", {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
    BATON_TRY(flag(ctx, "exclude_outside"));
    args.crop_and_resize =
        ctx.attr_string("coordinate_transformation_mode") == "tf_crop_and_resize";
  }
  if (resize && v >= 18) {
    BATON_TRY(flag(ctx, "antialias"));
    BATON_CHECK_OR_RETURN(ctx.attr_int("antialias") == 0 || mode == "nearest", NotSupported,
                          "{}: antialias = 1 ({} mode) is not supported by Baton's Resize; "
                          "export with antialias off",
                          ctx.what(), mode);
    BATON_TRY(one_of(ctx, "keep_aspect_ratio_policy", {"stretch", "not_larger", "not_smaller"}));
    args.keep_aspect_ratio_policy = ctx.attr_string("keep_aspect_ratio_policy");
    if (!ctx.attr_none("axes")) args.axes = ctx.attr_ints("axes");
  }
  const bool is_float = kFloatTypes.contains(ctx.input(0).dtype);
  BATON_CHECK_OR_RETURN(mode == "nearest" || is_float, NotSupported,
                        "{}: Baton interpolates ({} mode) float types only, the input is {}; "
                        "nearest takes every dtype",
                        ctx.what(), mode, dtype_name(ctx.input(0).dtype));

  const ResizeSlots slots = resize_slots(def);
  const std::string_view shape_why =
      "the output's shape depends on its values, and Baton does not follow a dynamic one here";
  if (slots.scales < 0) {
    args.scales = ctx.attr(std::string_view("scales")).floats;  // Upsample-7's attribute
    BATON_CHECK_OR_RETURN(!args.scales.empty(), InvalidArgument, "{}: attribute 'scales' is empty",
                          ctx.what());
  } else if (ctx.has_input(static_cast<size_t>(slots.scales))) {
    BATON_ASSIGN_OR_RETURN(args.scales,
                           constant_floats(ctx, static_cast<size_t>(slots.scales), shape_why));
  }
  if (slots.sizes >= 0 && ctx.has_input(static_cast<size_t>(slots.sizes))) {
    BATON_ASSIGN_OR_RETURN(args.sizes, ctx.int_values(static_cast<size_t>(slots.sizes)));
  }
  if (args.crop_and_resize && ctx.has_input(static_cast<size_t>(slots.roi))) {
    BATON_ASSIGN_OR_RETURN(
        args.roi, constant_floats(ctx, static_cast<size_t>(slots.roi),
                                  "tf_crop_and_resize precomputes its sampling positions from it"));
  }
  BATON_ASSIGN_OR_RETURN(const std::vector<ResizeAxis> axes, resize_geometry(x, args, ctx.what()));
  std::vector<int64_t> y;
  for (const ResizeAxis& a : axes) y.push_back(a.out);
  ctx.output(0).sizes = std::move(y);
  return Status();
}

constexpr DTypeSet kRoiTypes{DType::Float16, DType::Float32, DType::Float64};

}  // namespace

void register_resize(OpRegistry& registry) {
  const TypeConstraint scales_type{"tensor(float)", {DType::Float32}};
  {
    OpDef def;
    def.name = "Upsample";
    def.since_version = 7;
    def.inputs = {{"X", "T"}};
    def.outputs = {{"Y", "T"}};
    def.attrs = {attr_string("mode", "nearest"), attr_required("scales", AttrKind::Floats)};
    def.types = {{"T", kAllTypes}};
    def.infer = &infer;
    registry.add(def);

    def.since_version = 9;
    def.inputs = {{"X", "T"}, {"scales", "tensor(float)", Arity::Single, true}};
    def.attrs = {attr_string("mode", "nearest")};
    def.types = {{"T", kAllTypes}, scales_type};
    registry.add(std::move(def));
  }
  {
    OpDef def;
    def.name = "Resize";
    def.since_version = 10;
    def.inputs = {{"X", "T"}, {"scales", "tensor(float)", Arity::Single, true}};
    def.outputs = {{"Y", "T"}};
    def.attrs = {attr_string("mode", "nearest")};
    def.types = {{"T", kAllTypes}, scales_type};
    def.infer = &infer;
    registry.add(std::move(def));
  }
  for (int since : {11, 13, 18, 19}) {
    OpDef def;
    def.name = "Resize";
    def.since_version = since;
    // roi and scales are required inputs at opset 11 (possibly empty), optional from 13. roi
    // counts as a shape input: tf_crop_and_resize needs it at compile time (ONNX's text also
    // sizes that mode's output by it).
    const Arity roi_scales = since == 11 ? Arity::Single : Arity::Optional;
    def.inputs = {{"X", "T1"},
                  {"roi", "T2", roi_scales, true},
                  {"scales", "tensor(float)", roi_scales, true},
                  {"sizes", "tensor(int64)", Arity::Optional, true}};
    def.outputs = {{"Y", "T1"}};
    def.attrs = {attr_string("coordinate_transformation_mode", "half_pixel"),
                 attr_float("cubic_coeff_a", -0.75),
                 attr_int("exclude_outside", 0),
                 attr_float("extrapolation_value", 0.0),
                 attr_string("mode", "nearest"),
                 attr_string("nearest_mode", "round_prefer_floor")};
    if (since >= 18) {
      def.attrs.push_back(attr_int("antialias", 0));
      def.attrs.push_back(attr_optional("axes", AttrKind::Ints));
      def.attrs.push_back(attr_string("keep_aspect_ratio_policy", "stretch"));
    }
    def.types = {
        {"T1", kAllTypes}, {"T2", kRoiTypes}, scales_type, {"tensor(int64)", {DType::Int64}}};
    def.infer = &infer;
    registry.add(std::move(def));
  }
}

}  // namespace baton::ops
