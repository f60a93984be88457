// The depthwise convolution's plane kernel (one input channel per group, op_conv.cpp's depthwise
// path): one output plane from one input plane and its kernel, for 1-D and 2-D convolutions.
//
// The input plane is first copied into a zero-padded scratch plane, so that every output element
// reads all k_h x k_w taps without a bounds check; then each output row is computed in blocks of
// 16 columns held in registers across all taps (one load, multiply and add per tap and column,
// one store per output), where the old loop read and wrote the output row once per tap.
// The sums run in the old order (the bias, then the taps row by row) without contracted
// multiply-adds, so every CPU gives the same bits (depthwise.cpp is built as vector_math.cpp is);
// a tap that falls in the padding adds w * 0.
#pragma once

#include <cstdint>

namespace baton::kernels::cpu {

struct DepthwiseGeometry {
  int64_t in_h = 1, in_w = 0, out_h = 1, out_w = 0, k_h = 1, k_w = 0;
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, pad_h = 0, pad_w = 0;

  // The padded plane the taps read: rows and columns from -pad to the last one a tap reaches.
  int64_t padded_h() const { return (out_h - 1) * stride_h + (k_h - 1) * dil_h + 1; }
  int64_t padded_w() const { return (out_w - 1) * stride_w + (k_w - 1) * dil_w + 1; }
  // Zeroed floats after the padded plane: a block of 16 columns at stride 2 reads up to 32
  // floats past its first column, which in the last row's last block lie past the plane.
  static constexpr int64_t kSlack = 64;
  // Floats of scratch depthwise_plane needs (0 for an empty output).
  int64_t scratch_floats() const {
    return out_h > 0 && out_w > 0 ? padded_h() * padded_w() + kSlack : 0;
  }
};

// y [out_h, out_w] = bias + the taps of w [k_h, k_w] over x [in_h, in_w]; `padded` holds
// g.scratch_floats() floats. AVX-512 and AVX2 clones where the CPU has them.
void depthwise_plane(const DepthwiseGeometry& g, const float* x, const float* w, float bias,
                     float* y, float* padded);

}  // namespace baton::kernels::cpu
