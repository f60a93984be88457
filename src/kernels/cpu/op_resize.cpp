// ONNX Resize (opsets 10 to 19) and Upsample (7, 9): the geometry of ops/resize.h, sampled
// separably. create: for each dimension and each output index along it, the input positions it
// reads ("taps": one for nearest, two for linear, four for cubic) and their weights, computed in
// double from the coordinate transform; a dimension whose every output reads one input element
// with weight 1 (not resized, or nearest) keeps one tap. run: each output element is the sum over
// the taps of every dimension of the product of their weights times the input element (nearest:
// a gather, for any dtype). tf_crop_and_resize writes extrapolation_value where a coordinate falls
// outside the input. Linear and cubic compute in float (double for float64), for float types only.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/elementwise.h"
#include "ops/op_def.h"
#include "ops/resize.h"

namespace baton::kernels::cpu {
namespace {

enum class Interp : uint8_t { Nearest, Linear, Cubic };
enum class Coord : uint8_t {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
// Legacy: Upsample and Resize-10 (ONNX Runtime's rule: floor when upsampling, ceil when
// downsampling).
enum class Rounding : uint8_t { Legacy, RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct Sampling {
  Interp interp = Interp::Nearest;
  Coord coord = Coord::Asymmetric;
  Rounding rounding = Rounding::Legacy;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// One dimension's taps: output index i reads input offsets[i * k + t] with weights[i * k + t].
struct AxisTaps {
  int k = 1;
  std::vector<int64_t> offsets;
  std::vector<double> weights;
  std::vector<uint8_t> outside;  // tf_crop_and_resize: index i extrapolates (empty otherwise)
};

double original_coordinate(const ops::ResizeAxis& a, Coord coord, int64_t i) {
  const auto x = static_cast<double>(i);
  const auto in = static_cast<double>(a.in);
  switch (coord) {
    case Coord::HalfPixel:
      return (x + 0.5) / a.scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / a.length_resized;
      return in / 2 * (1 - adjustment) + (x + 0.5) / a.scale - 0.5;
    }
    case Coord::PytorchHalfPixel:
      return a.length_resized > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case Coord::AlignCorners:
      return a.length_resized == 1 ? 0.0 : x * (in - 1) / (a.length_resized - 1);
    case Coord::Asymmetric:
      return x / a.scale;
    case Coord::TfHalfPixelForNn:
      return (x + 0.5) / a.scale;
    case Coord::TfCropAndResize:
      return a.length_resized > 1 ? a.roi_start * (in - 1) + x * (a.roi_end - a.roi_start) *
                                                                 (in - 1) / (a.length_resized - 1)
                                  : 0.5 * (a.roi_start + a.roi_end) * (in - 1);
  }
  return 0.0;
}

int64_t nearest_index(double x, Rounding rounding, double scale) {
  const double f = std::floor(x);
  switch (rounding) {
    case Rounding::Legacy:
      return static_cast<int64_t>(scale < 1 ? std::ceil(x) : std::trunc(x));
    case Rounding::RoundPreferFloor:
      return static_cast<int64_t>(x - f <= 0.5 ? f : f + 1);
    case Rounding::RoundPreferCeil:
      return static_cast<int64_t>(x - f < 0.5 ? f : f + 1);
    case Rounding::Floor:
      return static_cast<int64_t>(f);
    case Rounding::Ceil:
      return static_cast<int64_t>(std::ceil(x));
  }
  return 0;
}

AxisTaps axis_taps(const ops::ResizeAxis& a, const Sampling& s, int64_t stride) {
  AxisTaps taps;
  taps.k = s.interp == Interp::Nearest ? 1 : s.interp == Interp::Linear ? 2 : 4;
  const auto k = static_cast<size_t>(taps.k);
  taps.offsets.assign(static_cast<size_t>(a.out) * k, 0);
  taps.weights.assign(static_cast<size_t>(a.out) * k, 0.0);
  if (s.coord == Coord::TfCropAndResize) taps.outside.assign(static_cast<size_t>(a.out), 0);
  const int64_t last = a.in - 1;
  auto clamp = [last](int64_t v) { return std::clamp<int64_t>(v, 0, last); };
  for (int64_t i = 0; i < a.out; ++i) {
    int64_t* off = &taps.offsets[static_cast<size_t>(i) * k];
    double* w = &taps.weights[static_cast<size_t>(i) * k];
    // Bounded so that the integer conversions below stay defined (any |x| past the input is
    // clamped or extrapolated alike).
    const double x = std::clamp(original_coordinate(a, s.coord, i), -0x1p52, 0x1p52);
    if (s.coord == Coord::TfCropAndResize && (x < 0 || x > static_cast<double>(last))) {
      taps.outside[static_cast<size_t>(i)] = 1;
      continue;
    }
    if (s.interp == Interp::Nearest) {
      off[0] = clamp(nearest_index(x, s.rounding, a.scale)) * stride;
      w[0] = 1.0;
    } else if (s.interp == Interp::Linear) {
      // Outside [0, in - 1] the edge repeats, as ONNX's reference pads.
      const double xc = std::clamp(x, 0.0, static_cast<double>(last));
      const double f = std::floor(xc);
      const double t = xc - f;
      const auto i0 = static_cast<int64_t>(f);
      off[0] = i0 * stride;
      off[1] = clamp(i0 + 1) * stride;
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
        off[t4] = clamp(j) * stride;
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
      taps.offsets[i] = taps.offsets[i * k];
      taps.weights[i] = taps.weights[i * k];
    }
    taps.offsets.resize(static_cast<size_t>(a.out));
    taps.weights.resize(static_cast<size_t>(a.out));
    taps.k = 1;
  }
  return taps;
}

// extrapolation_value in the output type (integers saturate).
template <typename S>
S value_as(double v) {
  using C = compute_t<S>;
  if constexpr (std::is_same_v<C, bool>) {
    return BoolByte(v != 0.0);
  } else if constexpr (std::is_integral_v<C>) {
    return ops::scalar::narrow<S>(v);
  } else {
    return store<S>(static_cast<C>(v));
  }
}

template <typename S>
class ResizeKernel final : public runtime::Kernel {
  using C = compute_t<S>;

 public:
  ResizeKernel(const runtime::Value* in, runtime::Value* out, std::vector<AxisTaps> axes,
               double extrapolation)
      : in_(in), out_(out), extrapolation_(value_as<S>(extrapolation)) {
    for (size_t d = 0; d < axes.size(); ++d) {
      AxisTaps& a = axes[d];
      Axis axis;
      axis.k = a.k;
      axis.size = static_cast<int64_t>(a.offsets.size()) / a.k;
      axis.offsets = std::move(a.offsets);
      axis.weights.assign(a.weights.begin(), a.weights.end());
      axis.outside = std::move(a.outside);
      if (axis.k > 1) active_.push_back(d);
      combos_ *= axis.k;
      axes_.push_back(std::move(axis));
    }
  }

  Status run() override {
    const int64_t numel = out_->tensor.numel();
    if (numel == 0) return Status::ok_status();
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    const size_t rank = axes_.size();
    std::array<int64_t, kMaxRank> index{};
    for (int64_t e = 0; e < numel; ++e) {
      y[e] = sample(x, index.data());
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < axes_[d].size) break;
        index[d] = 0;
      }
    }
    return Status::ok_status();
  }

 private:
  struct Axis {
    int k = 1;
    int64_t size = 0;
    std::vector<int64_t> offsets;
    std::vector<C> weights;
    std::vector<uint8_t> outside;
  };

  S sample(const S* x, const int64_t* index) const {
    int64_t base = 0;
    for (size_t d = 0; d < axes_.size(); ++d) {
      const Axis& a = axes_[d];
      if (!a.outside.empty() && a.outside[static_cast<size_t>(index[d])]) return extrapolation_;
      if (a.k == 1) base += a.offsets[static_cast<size_t>(index[d])];
    }
    if constexpr (std::is_floating_point_v<C>) {
      if (active_.empty()) return x[base];
      C sum = 0;
      for (int64_t c = 0; c < combos_; ++c) {
        int64_t rest = c, offset = base;
        C w = 1;
        for (size_t d : active_) {
          const Axis& a = axes_[d];
          const auto t = static_cast<size_t>(index[d] * a.k + rest % a.k);
          rest /= a.k;
          offset += a.offsets[t];
          w *= a.weights[t];
        }
        sum += w * load(x[offset]);
      }
      return store<S>(sum);
    } else {
      return x[base];  // nearest only (the definition refuses interpolating other types)
    }
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  S extrapolation_;
  std::vector<Axis> axes_;
  std::vector<size_t> active_;  // dimensions with more than one tap
  int64_t combos_ = 1;
};

std::string_view attr_or(const runtime::KernelCall& call, std::string_view name,
                         std::string_view fallback) {
  return call.def->attr_index(name) >= 0 ? call.attr_string(name) : fallback;
}

std::vector<double> floats_of(const TensorView& t) {
  return ops::float_values_of(t.dtype, t.data, t.numel());
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const bool modern = call.def->attr_index("coordinate_transformation_mode") >= 0;  // Resize-11+
  Sampling s;
  const std::string_view mode = call.attr_string("mode");
  s.interp = mode == "linear" ? Interp::Linear : mode == "cubic" ? Interp::Cubic : Interp::Nearest;
  ops::ResizeArgs args;
  args.upsample = call.def->name == "Upsample";
  if (modern) {
    const std::string_view coord = call.attr_string("coordinate_transformation_mode");
    s.coord = coord == "half_pixel"             ? Coord::HalfPixel
              : coord == "half_pixel_symmetric" ? Coord::HalfPixelSymmetric
              : coord == "pytorch_half_pixel"   ? Coord::PytorchHalfPixel
              : coord == "align_corners"        ? Coord::AlignCorners
              : coord == "tf_half_pixel_for_nn" ? Coord::TfHalfPixelForNn
              : coord == "tf_crop_and_resize"   ? Coord::TfCropAndResize
                                                : Coord::Asymmetric;
    const std::string_view rounding = call.attr_string("nearest_mode");
    s.rounding = rounding == "round_prefer_ceil" ? Rounding::RoundPreferCeil
                 : rounding == "floor"           ? Rounding::Floor
                 : rounding == "ceil"            ? Rounding::Ceil
                                                 : Rounding::RoundPreferFloor;
    s.cubic_a = call.attr_float("cubic_coeff_a");
    s.exclude_outside = call.attr_int("exclude_outside") != 0;
    args.crop_and_resize = s.coord == Coord::TfCropAndResize;
    args.keep_aspect_ratio_policy = attr_or(call, "keep_aspect_ratio_policy", "stretch");
    if (call.def->attr_index("axes") >= 0 && !call.attr("axes").is_none()) {
      const std::span<const int64_t> a = call.attr_ints("axes");
      args.axes.emplace(a.begin(), a.end());
    }
  }
  const ops::ResizeSlots slots = ops::resize_slots(*call.def);
  if (slots.scales < 0) {
    const std::span<const double> f = call.attr("scales").floats;
    args.scales.assign(f.begin(), f.end());
  } else if (call.has_input(static_cast<size_t>(slots.scales))) {
    args.scales = floats_of(call.input(static_cast<size_t>(slots.scales)));
  }
  if (slots.sizes >= 0 && call.has_input(static_cast<size_t>(slots.sizes))) {
    const TensorView& t = call.input(static_cast<size_t>(slots.sizes));
    args.sizes = ops::int_values_of(t.dtype, t.data, t.numel());
  }
  if (args.crop_and_resize && call.has_input(static_cast<size_t>(slots.roi))) {
    args.roi = floats_of(call.input(static_cast<size_t>(slots.roi)));
  }
  BATON_ASSIGN_OR_RETURN(const std::vector<ops::ResizeAxis> geometry,
                         ops::resize_geometry(x.sizes, args, call.describe()));

  std::vector<AxisTaps> taps;
  if (call.output(0).numel() != 0) {  // then every input dimension is nonzero too
    const std::vector<int64_t> strides = element_strides(x.sizes);
    for (size_t d = 0; d < geometry.size(); ++d) {
      taps.push_back(axis_taps(geometry[d], s, strides[d]));
    }
  }
  const double extrapolation = modern ? call.attr_float("extrapolation_value") : 0.0;
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kAllTypes.bits()>(x.dtype, [&]<typename S>() {
    kernel = std::make_unique<ResizeKernel<S>>(call.inputs[0], call.outputs[0], std::move(taps),
                                               extrapolation);
  });
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_resize(runtime::KernelRegistry& registry) {
  registry.add({"Resize", "", {}, &create});
  registry.add({"Upsample", "", {}, &create});
}

}  // namespace baton::kernels::cpu
