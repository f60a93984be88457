// What the Conv and ConvTranspose kernels share: the call's geometry (from the canonical
// attributes, ops/conv.cpp), the window map between GEMM columns and image elements that im2col
// and col2im walk, and the column tiling that bounds the im2col buffer.
//
// Both kernels are a GEMM per group and batch item around a window map. Conv gathers (im2col):
// column p of the buffer is output position p, and its row (c, kernel offset k) holds input
// element p * stride - pad + k * dilation (0 outside). ConvTranspose scatters (col2im): column p is
// input position p, and row (m, k) adds into output element p * stride - pad + k * dilation.
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/gemm_common.h"
#include "kernels/cpu/vector_math.h"
#include "ops/activation.h"

namespace baton::kernels::cpu {

// The index map of one convolution: `cols` are the positions the GEMM's columns run over, `image`
// the tensor the window reads (Conv) or writes (ConvTranspose). Spatial sizes only.
struct ConvWindow {
  int spatial = 0;
  std::array<int64_t, kMaxRank> cols{}, image{}, kernel{}, strides{}, dilations{}, pads{};
  int64_t col_count = 0, image_count = 0, kernel_count = 0;  // products
};

// Geometry of a Conv or ConvTranspose call: X [n, c, in...], Y [n, m, out...], `group` groups of
// c_group input and m_group output channels.
struct ConvShape {
  int64_t n = 0, c = 0, m = 0, group = 1, c_group = 0, m_group = 0;
  int spatial = 0;
  std::array<int64_t, kMaxRank> in{}, out{}, kernel{}, strides{}, dilations{}, pads{};
  int64_t in_count = 0, out_count = 0, kernel_count = 0;  // spatial products
  bool empty = true;                                      // Y has no elements: nothing to do
  bool has_bias = false;

  // Conv's window (columns = output positions, image = X) or ConvTranspose's (columns = input
  // positions, image = Y).
  ConvWindow window(bool transposed) const {
    ConvWindow w;
    w.spatial = spatial;
    w.cols = transposed ? in : out;
    w.image = transposed ? out : in;
    w.kernel = kernel;
    w.strides = strides;
    w.dilations = dilations;
    w.pads = pads;
    w.col_count = transposed ? in_count : out_count;
    w.image_count = transposed ? out_count : in_count;
    w.kernel_count = kernel_count;
    return w;
  }
};

// Reads the call (canonical attributes; ops::infer checked them and the shapes). Sub-products are
// taken only for a non-empty Y, whose sizes (and W's, when c_group > 0) bound them.
inline ConvShape conv_shape(const runtime::KernelCall& call) {
  ConvShape s;
  const auto x = call.input(0).sizes, y = call.output(0).sizes;
  s.spatial = static_cast<int>(x.size()) - 2;
  s.n = x[0];
  s.c = x[1];
  s.m = y[1];
  s.group = call.attr_int("group");
  s.c_group = s.c / s.group;
  s.m_group = s.m / s.group;
  s.has_bias = call.has_input(2);
  const auto kernel = call.attr_ints("kernel_shape"), strides = call.attr_ints("strides");
  const auto dilations = call.attr_ints("dilations"), pads = call.attr_ints("pads");
  for (int d = 0; d < s.spatial; ++d) {
    s.in[d] = x[2 + d];
    s.out[d] = y[2 + d];
    s.kernel[d] = kernel[d];
    s.strides[d] = strides[d];
    s.dilations[d] = dilations[d];
    s.pads[d] = pads[d];
  }
  s.empty = call.output(0).numel() == 0;
  if (!s.empty) {
    s.in_count = product(x, 2, x.size());
    s.out_count = product(y, 2, y.size());
    s.kernel_count = product(kernel);
  }
  return s;
}

// a / b rounded up, b > 0, any sign of a, no overflow.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b > 0 ? 1 : 0); }

// Calls row(offset, q, count, base, lo, hi, shift) for the runs of columns [p0, p1) that share
// all but the last coordinate, for kernel offset `k` (one index per spatial axis):
//   offset  the run's first column minus p0; q its last coordinate; count its length
//   base    the flat image index of the image row the run maps to (last coordinate 0), or -1 when
//           an outer coordinate falls outside the image (the whole run reads zeros)
//   [lo, hi) the last coordinates (within [q, q + count)) that fall inside the image row; column
//           q' maps to image element base + q' * stride + shift
template <typename F>
void for_each_window_row(const ConvWindow& w, const int64_t* k, int64_t p0, int64_t p1, F&& row) {
  const int last = w.spatial - 1;
  const int64_t stride = w.strides[last], width = w.cols[last];
  const int64_t shift = k[last] * w.dilations[last] - w.pads[last];
  // 0 <= q * stride + shift < image width
  const int64_t q_lo = std::clamp<int64_t>(ceil_div(-shift, stride), 0, width);
  const int64_t q_hi = std::clamp<int64_t>(ceil_div(w.image[last] - shift, stride), q_lo, width);
  std::array<int64_t, kMaxRank> q{};
  for (int64_t rest = p0, d = last; d >= 0; --d) {
    q[d] = rest % w.cols[d];
    rest /= w.cols[d];
  }
  for (int64_t p = p0; p < p1;) {
    const int64_t first = q[last];
    const int64_t count = std::min(p1 - p, width - first);
    int64_t base = 0;
    for (int d = 0; d < last && base >= 0; ++d) {
      const int64_t t = q[d] * w.strides[d] + k[d] * w.dilations[d] - w.pads[d];
      base = t < 0 || t >= w.image[d] ? -1 : base * w.image[d] + t;
    }
    if (base >= 0) base *= w.image[last];
    const int64_t lo = std::clamp(q_lo, first, first + count);
    const int64_t hi = std::clamp(q_hi, lo, first + count);
    row(p - p0, first, count, base, lo, hi, shift);
    p += count;
    q[last] += count;
    for (int d = last; d > 0 && q[d] == w.cols[d]; --d) {
      q[d] = 0;
      ++q[d - 1];
    }
  }
}

// Steps through the kernel offsets of `w` in row-major order (k holds w.spatial indices).
inline void next_kernel_offset(const ConvWindow& w, int64_t* k) {
  for (int d = w.spatial - 1; d >= 0; --d) {
    if (++k[d] < w.kernel[d]) return;
    k[d] = 0;
  }
}

// dst[i] = src[2 * i] for i < count, vectorized (conv_common.cpp): im2col's rows at stride 2
// (a stem's 7x7, every downsampling 3x3) were copied element by element, a third of ResNet-50's
// stride-2 3x3 convolution and 40% of its stem on this project's VM.
void copy_stride2(const float* src, int64_t count, float* dst);

// dst[i] = src[i * stride] for i < count.
template <typename T>
void copy_strided(const T* src, int64_t stride, int64_t count, T* dst) {
  for (int64_t i = 0; i < count; ++i) dst[i] = src[i * stride];
}
inline void copy_strided(const float* src, int64_t stride, int64_t count, float* dst) {
  if (stride == 2) {
    copy_stride2(src, count, dst);
  } else {
    copy_strided<float>(src, stride, count, dst);
  }
}

// im2col for columns [p0, p1): col[(c * K + kernel offset) * (p1 - p0) + p - p0] for `channels`
// image planes of w.image_count elements at `image`.
template <typename T>
void im2col(const ConvWindow& w, const T* image, int64_t channels, int64_t p0, int64_t p1, T* col) {
  const int64_t ncols = p1 - p0;
  const int64_t stride = w.strides[w.spatial - 1];
  T* dst = col;
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = image + c * w.image_count;
    std::array<int64_t, kMaxRank> k{};
    for (int64_t kk = 0; kk < w.kernel_count; ++kk, dst += ncols) {
      for_each_window_row(w, k.data(), p0, p1,
                          [&](int64_t offset, int64_t q, int64_t count, int64_t base, int64_t lo,
                              int64_t hi, int64_t shift) {
                            T* out = dst + offset;  // out[j - q] is column j of the run
                            if (base < 0) {
                              std::fill(out, out + count, T(0));
                              return;
                            }
                            std::fill(out, out + (lo - q), T(0));
                            // (`plane` is read only where a column falls inside: an empty
                            // X may have no storage at all.)
                            const int64_t first = base + lo * stride + shift;
                            if (hi > lo && stride == 1) {
                              std::copy(plane + first, plane + first + (hi - lo), out + (lo - q));
                            } else if (hi > lo) {
                              copy_strided(plane + first, stride, hi - lo, out + (lo - q));
                            }
                            std::fill(out + (hi - q), out + count, T(0));
                          });
      next_kernel_offset(w, k.data());
    }
  }
}

// col2im for columns [p0, p1): adds col's rows (as laid out by im2col) into `channels` image
// planes at `image`.
template <typename T>
void col2im_add(const ConvWindow& w, const T* col, int64_t channels, int64_t p0, int64_t p1,
                T* image) {
  const int64_t ncols = p1 - p0;
  const int64_t stride = w.strides[w.spatial - 1];
  const T* src_row = col;
  for (int64_t c = 0; c < channels; ++c) {
    T* plane = image + c * w.image_count;
    std::array<int64_t, kMaxRank> k{};
    for (int64_t kk = 0; kk < w.kernel_count; ++kk, src_row += ncols) {
      for_each_window_row(w, k.data(), p0, p1,
                          [&](int64_t offset, int64_t q, int64_t, int64_t base, int64_t lo,
                              int64_t hi, int64_t shift) {
                            if (base < 0) return;
                            const T* src = src_row + offset;  // src[j - q] is column j
                            const int64_t first = base + lo * stride + shift;
                            for (int64_t j = lo; j < hi; ++j) {
                              plane[first + (j - lo) * stride] += src[j - q];
                            }
                          });
      next_kernel_offset(w, k.data());
    }
  }
}

// Columns per GEMM so that an im2col buffer of `rows` rows stays within a budget (at least one
// column): large images are done in tiles instead of one buffer of rows x all columns.
inline int64_t column_tile(int64_t rows, int64_t columns) {
  constexpr int64_t kBudget = int64_t{1} << 20;  // elements
  if (rows == 0) return columns;
  return std::clamp<int64_t>(kBudget / rows, 1, std::max<int64_t>(columns, 1));
}

// BLAS takes int sizes and leading dimensions.
inline Status check_conv_blas_range(const runtime::KernelCall& call,
                                    std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes) {
    BATON_CHECK_OR_RETURN(v <= INT_MAX, NotSupported,
                          "{}: a GEMM size of {} exceeds the BLAS int range", call.describe(), v);
  }
  return Status();
}

// Y's rows start as the bias (per output channel) or as zeros, in the compute type.
template <typename S, typename C>
void fill_bias(const S* bias, int64_t channels, int64_t count, C* y) {
  for (int64_t m = 0; m < channels; ++m) {
    const C v = bias ? static_cast<C>(load(bias[m])) : C(0);
    std::fill(y + m * count, y + (m + 1) * count, v);
  }
}

// The batch loop Conv and ConvTranspose share. X and W are read as the BLAS type (float16 and
// bfloat16 converted at each run into scratch reserved here), each batch item's Y is computed in
// the BLAS type by Derived::compute_item(x_item, w, bias, y_item) (in the output itself, or in a
// buffer that is then rounded once per element). Nothing runs for an empty Y.
template <typename S, typename Derived>
class ConvBatchKernel : public runtime::Kernel {
 protected:
  using W = blas_t<S>;
  static constexpr bool kDirect = std::is_same_v<S, W>;

  ConvBatchKernel(const runtime::KernelCall& call, const ConvShape& shape)
      : x_(call.inputs[0]),
        w_(call.inputs[1]),
        b_(call.has_input(2) ? call.inputs[2] : nullptr),
        y_(call.outputs[0]),
        s_(shape),
        pool_(call.pool) {}

 public:
  // FusedConv's epilogue (ops/conv.cpp): the residual `z` (null: none) added and the activation
  // applied to each batch item after it is computed, channel by channel in parallel (or by the
  // Derived on each channel it computes: epilogue_in_compute_).
  void set_epilogue(const runtime::Value* z, ops::Activation act) {
    z_ = z;
    act_ = std::move(act);
  }

 protected:
  // float16 and bfloat16 are converted into float scratch: X, W, and one batch item of Y.
  Status reserve_conversions(const runtime::KernelCall& call) {
    if constexpr (!kDirect) {
      if (s_.empty) return Status::ok_status();
      BATON_TRY(call.reserve_scratch<W>(x_buffer_, x_->tensor.numel(), "float copy of X"));
      BATON_TRY(call.reserve_scratch<W>(w_buffer_, w_->tensor.numel(), "float copy of W"));
      BATON_TRY(call.reserve_scratch<W>(y_buffer_, static_cast<uint64_t>(s_.m * s_.out_count),
                                        "float copy of one batch item of Y"));
    }
    return Status::ok_status();
  }

 public:
  // Dynamic shapes: the batch may change (its items are computed one by one); channels and
  // spatial sizes are what the window map and weights were built for, so they may not.
  Status resize() override {
    const auto x = x_->tensor.sizes, y = y_->tensor.sizes;
    bool same = x[1] == s_.c && y[1] == s_.m;
    for (int d = 0; d < s_.spatial && same; ++d) {
      same = x[2 + d] == s_.in[d] && y[2 + d] == s_.out[d];
    }
    if (!same) {
      return Status(Error::NotSupported,
                    "the convolution kernels take a dynamic batch only, not dynamic channels or "
                    "spatial sizes");
    }
    s_.n = x[0];
    s_.empty = y_->tensor.numel() == 0;
    return Status::ok_status();
  }

  Status run() override {
    if (s_.empty) return Status::ok_status();
    const W* x = as_blas<S>(x_->tensor, x_buffer_);
    const W* w = as_blas<S>(w_->tensor, w_buffer_);
    const S* bias = b_ ? b_->tensor.data_as<const S>() : nullptr;
    const int64_t y_item = s_.m * s_.out_count;
    for (int64_t n = 0; n < s_.n; ++n) {
      W* y = kDirect ? reinterpret_cast<W*>(y_->tensor.data) + n * y_item : y_buffer_.data<W>();
      item_ = n;
      static_cast<Derived*>(this)->compute_item(x + n * s_.c * s_.in_count, w, bias, y);
      if (has_epilogue() && !epilogue_in_compute_) {
        parallel_for(pool_, s_.m, [&](int64_t m, unsigned) { epilogue_channels(y, m, m + 1); });
      }
      if constexpr (!kDirect) {
        S* out = y_->tensor.data_as<S>() + n * y_item;
        for (int64_t i = 0; i < y_item; ++i) out[i] = store<S>(y[i]);
      }
    }
    return Status::ok_status();
  }

 protected:
  const runtime::Value* x_;
  const runtime::Value* w_;
  const runtime::Value* b_;
  runtime::Value* y_;
  ConvShape s_;
  runtime::ThreadPool* pool_;
  // Set by a Derived whose compute_item applies the epilogue itself (epilogue_channels on each
  // channel while it is still in cache), instead of the pass over the whole item after it.
  bool epilogue_in_compute_ = false;

  bool has_epilogue() const { return z_ != nullptr || !act_.none(); }
  // The residual's values for the item being computed (null: none), and the activation.
  const S* item_residual() const {
    return z_ ? z_->tensor.data_as<const S>() + item_ * s_.m * s_.out_count : nullptr;
  }
  const ops::Activation& activation() const { return act_; }

  // FusedConv's epilogue on output channels [m0, m1) of the batch item being computed (y is that
  // item's output): the residual added, then the activation.
  void epilogue_channels(W* y, int64_t m0, int64_t m1) const {
    const S* z = item_residual();
    for (int64_t m = m0; m < m1; ++m) {
      W* row = y + m * s_.out_count;
      if (z) {
        const S* zr = z + m * s_.out_count;
        for (int64_t i = 0; i < s_.out_count; ++i) row[i] += static_cast<W>(load(zr[i]));
      }
      vmath::apply_activation(act_, row, s_.out_count);
    }
  }

 private:
  int64_t item_ = 0;  // the batch item run() is computing
  const runtime::Value* z_ = nullptr;
  ops::Activation act_;
  runtime::ScratchRef x_buffer_, w_buffer_, y_buffer_;  // float16 / bfloat16 only
};

}  // namespace baton::kernels::cpu
