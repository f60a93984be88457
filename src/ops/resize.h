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

// `n` float16, float32 or float64 values at `data` as double.
std::vector<double> float_values_of(DType dtype, const void* data, int64_t n);

}  // namespace baton::ops
