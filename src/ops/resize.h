// Resize and Upsample's output geometry, shared by the definitions (resize.cpp) and the CPU kernel
// (kernels/cpu/op_resize.cpp), which recomputes it from the same constants at create.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "baton/core/dtype.h"
#include "baton/core/error.h"
#include "ops/op_def.h"

namespace baton::ops {

// Where a version's inputs are (-1: it has none): Upsample-7 has only X; Upsample-9 and
// Resize-10 take scales as input 1; Resize-11 on take roi, scales and sizes as inputs 1, 2, 3.
struct ResizeSlots {
  int roi = -1, scales = -1, sizes = -1;
};
ResizeSlots resize_slots(const OpDef& def);

// What one call asks for, from its attributes and constant inputs. Empty scales or sizes are
// absent (ONNX writes an absent one as an empty tensor, or as "").
struct ResizeArgs {
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::vector<double> roi;                   // read only for tf_crop_and_resize
  std::optional<std::vector<int64_t>> axes;  // Resize-18: the axes scales/sizes/roi name
  std::string_view keep_aspect_ratio_policy = "stretch";
  bool crop_and_resize = false;  // coordinate_transformation_mode tf_crop_and_resize
  bool upsample = false;         // Upsample: scales must be >= 1
};

// One dimension of the resize. `scale` is what the coordinate transforms divide by;
// `length_resized` is in * scale, the resized length they use (fractional where scales do not
// divide evenly; ONNX's reference uses it so), or the exact size where sizes give it.
struct ResizeAxis {
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double length_resized = 0.0;
  double roi_start = 0.0, roi_end = 1.0;
};

// The per-dimension geometry of resizing `x`: output sizes floor(in * scale) from scales (as ONNX's
// shape inference and reference do, also for tf_crop_and_resize), or sizes (adjusted by
// keep_aspect_ratio_policy). Errors name `what`.
Result<std::vector<ResizeAxis>> resize_geometry(std::span<const int64_t> x, const ResizeArgs& args,
                                                std::string_view what);

// How the output positions sample the input: the attributes of Resize-11 on (Upsample and
// Resize-10 have only `mode`: asymmetric coordinates and their own nearest rounding, Legacy).
enum class ResizeInterp : uint8_t { Nearest, Linear, Cubic };
enum class ResizeCoord : uint8_t {
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
enum class ResizeRounding : uint8_t { Legacy, RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeSampling {
  ResizeInterp interp = ResizeInterp::Nearest;
  ResizeCoord coord = ResizeCoord::Asymmetric;
  ResizeRounding rounding = ResizeRounding::Legacy;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// The sampling a node's attributes ask for. `Attrs` is what the node's bound attributes are read
// through (runtime::KernelCall for the CPU kernel, compiler::IrNode for a GPU lowering): both
// have attr_string, attr_float and attr_int.
template <typename Attrs>
ResizeSampling resize_sampling(const OpDef& def, const Attrs& a) {
  ResizeSampling s;
  const std::string_view mode = a.attr_string("mode");
  s.interp = mode == "linear"  ? ResizeInterp::Linear
             : mode == "cubic" ? ResizeInterp::Cubic
                               : ResizeInterp::Nearest;
  if (def.attr_index("coordinate_transformation_mode") < 0) return s;  // before Resize-11
  const std::string_view coord = a.attr_string("coordinate_transformation_mode");
  s.coord = coord == "half_pixel"             ? ResizeCoord::HalfPixel
            : coord == "half_pixel_symmetric" ? ResizeCoord::HalfPixelSymmetric
            : coord == "pytorch_half_pixel"   ? ResizeCoord::PytorchHalfPixel
            : coord == "align_corners"        ? ResizeCoord::AlignCorners
            : coord == "tf_half_pixel_for_nn" ? ResizeCoord::TfHalfPixelForNn
            : coord == "tf_crop_and_resize"   ? ResizeCoord::TfCropAndResize
                                              : ResizeCoord::Asymmetric;
  const std::string_view rounding = a.attr_string("nearest_mode");
  s.rounding = rounding == "round_prefer_ceil" ? ResizeRounding::RoundPreferCeil
               : rounding == "floor"           ? ResizeRounding::Floor
               : rounding == "ceil"            ? ResizeRounding::Ceil
                                               : ResizeRounding::RoundPreferFloor;
  s.cubic_a = a.attr_float("cubic_coeff_a");
  s.exclude_outside = a.attr_int("exclude_outside") != 0;
  return s;
}

// One dimension's taps: output index i reads input index index[i * k + t] with weight
// weights[i * k + t] (computed in double from the coordinate transform: one tap for nearest, two
// for linear, four for cubic; an index outside the input is clamped to its edge). A dimension
// whose every output reads one input element with weight 1 (not resized, or nearest) has k = 1.
// tf_crop_and_resize: outside[i] says output index i extrapolates (empty otherwise).
struct ResizeTaps {
  int k = 1;
  std::vector<int64_t> index;
  std::vector<double> weights;
  std::vector<uint8_t> outside;
};
ResizeTaps resize_taps(const ResizeAxis& a, const ResizeSampling& s);

// `n` float16, float32 or float64 values at `data` as double.
std::vector<double> float_values_of(DType dtype, const void* data, int64_t n);

}  // namespace baton::ops
