// ONNX Conv (ops/conv.cpp): per batch item and group, Y_g [M/group, out] = W_g [M/group, C/group *
// K] x col [C/group * K, out], the bias preloaded into Y: through packed_gemm.h's kernel over W
// packed at create when W is a float32 constant (see pack()), else through OpenBLAS (beta = 1).
// Three paths, chosen at create:
//   pointwise  1x1 kernel, stride 1, no padding: X_g itself is the column matrix, no im2col;
//   depthwise  one input channel per group (group == C) with at most 4 output channels each, 1-D
//              or 2-D: a direct kernel per plane (depthwise.h; per group, im2col + GEMM would be a
//              K x out times 1 x K product, all copy and no arithmetic), FusedConv's epilogue
//              applied to each plane right after it;
//   im2col     everything else, in column tiles that bound the buffer (conv_common.h).
// With the Method's threads, the (group, column tile) items run in parallel, or, when there are
// fewer items than threads, one by one with each GEMM split; depthwise runs channels in parallel.
// float16 and bfloat16 are converted to float (X and W at each run, into buffers sized at
// create), computed in float and rounded once per output element; float64 runs dgemm.
// Baton's FusedConv is the same kernel with its epilogue (a residual, an activation) applied to
// each batch item after the convolution (ConvBatchKernel::set_epilogue).
#include <algorithm>
#include <vector>

#include "kernels/cpu/conv_common.h"
#include "kernels/cpu/depthwise.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_gemm.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

enum class ConvPath { Pointwise, Depthwise, Im2col };

// A depthwise conv as 2-D (1-D is 2-D with one row). Float planes (float32, and float16 and
// bfloat16 computed in float) go through depthwise.h's register-blocked kernel over a padded copy
// of the plane; float64 through the loop here: each output row accumulates the weighted input
// rows under it, the valid output columns of each kernel column precomputed at create.
struct DepthwisePlan {
  DepthwiseGeometry g;
  std::vector<int64_t> lo, hi;  // per kernel column: output columns [lo, hi) read inside the row

  DepthwisePlan(const ConvShape& s) {
    const int w = s.spatial - 1;
    if (s.spatial == 2) {
      g.in_h = s.in[0], g.out_h = s.out[0], g.k_h = s.kernel[0];
      g.stride_h = s.strides[0], g.dil_h = s.dilations[0], g.pad_h = s.pads[0];
    }
    g.in_w = s.in[w], g.out_w = s.out[w], g.k_w = s.kernel[w];
    g.stride_w = s.strides[w], g.dil_w = s.dilations[w], g.pad_w = s.pads[w];
    for (int64_t kw = 0; kw < g.k_w; ++kw) {
      const int64_t shift = kw * g.dil_w - g.pad_w;
      const int64_t l = std::clamp<int64_t>(ceil_div(-shift, g.stride_w), 0, g.out_w);
      lo.push_back(l);
      hi.push_back(std::clamp<int64_t>(ceil_div(g.in_w - shift, g.stride_w), l, g.out_w));
    }
  }

  // One output plane from one input plane and its kernel; `padded`: g.scratch_floats() floats.
  void run(const float* x, const float* w, float bias, float* y, float* padded) const {
    depthwise_plane(g, x, w, bias, y, padded);
  }
  void run(const double* x, const double* w, double bias, double* y, double*) const {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      double* row = y + oh * g.out_w;
      std::fill(row, row + g.out_w, bias);
      for (int64_t kh = 0; kh < g.k_h; ++kh) {
        const int64_t ih = oh * g.stride_h + kh * g.dil_h - g.pad_h;
        if (ih < 0 || ih >= g.in_h) continue;
        const double* in = x + ih * g.in_w;
        for (int64_t kw = 0; kw < g.k_w; ++kw) {
          const double wv = w[kh * g.k_w + kw];
          // Output columns [lo, hi) read the input row from lo * stride + shift on.
          const int64_t first = lo[kw], n = hi[kw] - lo[kw];
          const double* src = in + first * g.stride_w + kw * g.dil_w - g.pad_w;
          double* dst = row + first;
          for (int64_t j = 0; j < n; ++j) dst[j] += wv * src[j * g.stride_w];
        }
      }
    }
  }
};

template <typename S>
class ConvKernel final : public ConvBatchKernel<S, ConvKernel<S>> {
  using Base = ConvBatchKernel<S, ConvKernel<S>>;
  using W = typename Base::W;
  using Base::s_;

 public:
  ConvKernel(const runtime::KernelCall& call, const ConvShape& shape, ConvPath path)
      : Base(call, shape),
        window_(shape.window(false)),
        path_(path),
        depthwise_(shape),
        rows_(shape.c_group * shape.kernel_count),
        slots_(pool_slots(call.pool)) {
    // Depthwise applies FusedConv's epilogue to each plane as soon as it is computed.
    this->epilogue_in_compute_ = path_ == ConvPath::Depthwise;
    if (s_.empty || path_ == ConvPath::Depthwise) return;
    tile_ = path == ConvPath::Im2col ? column_tile(rows_, s_.out_count) : s_.out_count;
    // With threads, the (group, column tile) items are the tasks: each thread gathers and
    // multiplies its own columns. Too few groups: narrower tiles, while each keeps enough columns
    // for an efficient GEMM; still too few items: they run one by one, each GEMM split.
    if (slots_ > 1 && s_.group < slots_) {
      const int64_t per_thread = ceil_div(s_.out_count, ceil_div(slots_, s_.group));
      if (per_thread >= kMinTaskColumns) tile_ = std::min(tile_, per_thread);
    }
    const int64_t items = s_.group * ceil_div(s_.out_count, tile_);
    item_parallel_ = slots_ > 1 && items >= slots_;
  }

  // A float32 W that is a constant of the program is packed at create by blocks of rows, one
  // block per group; the GEMM then starts from the bias and applies FusedConv's epilogue to each
  // part of Y as it completes. Since the packed kernel prefetches its next panel (8583bed) it
  // beats OpenBLAS at every depth measured, 16 to 9216 (bench/RESULTS.md, 2026-12-02: DenseNet's
  // 3x3 convolutions to 32 channels 1.3-1.9x, ResNet-50's 3x3 layers 1.1-1.4x, its 1x1 ones at
  // 256 -> 64 and 2048 -> 512 about 2x, a 1024-channel 3x3 1.2x), so every constant W is packed.
  Status pack(const runtime::KernelCall& call) {
    if constexpr (std::is_same_v<S, float>) {
      if (s_.empty || path_ == ConvPath::Depthwise || rows_ == 0 || !call.input_is_constant(1) ||
          !packed_gemm_available()) {
        return Status::ok_status();
      }
      const float* w = call.input(1).data_as<const float>();
      if (few_positions_eligible()) {
        // W^T, its depth tap-major, packed by panels of output channels for packed_gemm (whose
        // columns are then Y's channels).
        std::vector<float> reordered;
        BATON_TRY(tap_major(call, w, reordered));
        BATON_TRY(size_buffer(packed_, static_cast<uint64_t>(packed_size(rows_, s_.m)), call,
                              "packed copy of the convolution's weights"));
        pack_weights(reordered.data(), true, rows_, s_.m, rows_, 0, packed_.data());
        few_positions_ = true;  // the epilogue runs over the item after it
        return Status::ok_status();
      }
      const int64_t per_group = packed_rows_size(s_.m_group, rows_);
      BATON_TRY(size_buffer(packed_, static_cast<uint64_t>(per_group * s_.group), call,
                            "packed copy of the convolution's weights"));
      if (taps_eligible()) {
        std::vector<float> reordered;
        BATON_TRY(tap_major(call, w, reordered));
        pack_rows(reordered.data(), s_.m, rows_, rows_, packed_.data());
        const int64_t padded_w = extent(1);
        for (int64_t kh = 0; kh < s_.kernel[0]; ++kh) {
          for (int64_t kw = 0; kw < s_.kernel[1]; ++kw) tap_offsets_.push_back(kh * padded_w + kw);
        }
        taps_ = true;  // the epilogue runs over the item after it (epilogue_in_compute_ false)
        return Status::ok_status();
      }
      for (int64_t g = 0; g < s_.group; ++g) {
        pack_rows(w + g * s_.m_group * rows_, s_.m_group, rows_, rows_,
                  packed_.data() + g * per_group);
      }
      this->epilogue_in_compute_ = true;
    }
    return Status::ok_status();
  }

  // W's depth reordered tap-major ([M, taps, C] from [M, C, taps]; one group) for the taps GEMM
  // and the few-positions GEMM, whose columns are read a tap at a time.
  Status tap_major(const runtime::KernelCall& call, const float* w,
                   std::vector<float>& reordered) const {
    const int64_t taps = s_.kernel_count, c = s_.c_group;
    BATON_TRY(size_buffer(reordered, static_cast<uint64_t>(s_.m * rows_), call,
                          "tap-major copy of the convolution's weights"));
    for (int64_t m = 0; m < s_.m; ++m) {
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t ch = 0; ch < c; ++ch) {
          reordered[static_cast<size_t>(m * rows_ + t * c + ch)] = w[m * rows_ + ch * taps + t];
        }
      }
    }
    return Status::ok_status();
  }

  // The scratch: float copies (Base), and the column and GEMM buffers, one per thread when items
  // run in parallel.
  Status reserve(const runtime::KernelCall& call) {
    BATON_TRY(this->reserve_conversions(call));
    if (s_.empty) return Status::ok_status();
    if (path_ == ConvPath::Depthwise) {
      if constexpr (std::is_same_v<W, float>) {
        return call.reserve_scratch<W>(col_, static_cast<uint64_t>(depthwise_.g.scratch_floats()),
                                       "padded depthwise plane", slots_);
      }
      return Status::ok_status();
    }
    if (few_positions_) {
      // The positions-major columns, and the channels-last padded image, whose buffer then
      // holds the product by position before it is transposed into Y.
      BATON_TRY(call.reserve_scratch<W>(scratch_, static_cast<uint64_t>(s_.out_count * lda()),
                                        "positions-major columns"));
      const int64_t image = path_ == ConvPath::Pointwise ? 0 : padded_plane() * s_.c;
      return call.reserve_scratch<W>(col_,
                                     static_cast<uint64_t>(std::max(image, s_.out_count * s_.m)),
                                     "channels-last image and the product by position");
    }
    if (taps_) {
      // The zero-padded image (and a kernel row's slack after its last plane, which only the
      // dropped columns read) and the product over the padded width.
      const int64_t plane = padded_plane();
      BATON_TRY(call.reserve_scratch<W>(col_, static_cast<uint64_t>(s_.c * plane + s_.kernel[1]),
                                        "zero-padded image for the taps GEMM"));
      return call.reserve_scratch<W>(scratch_, static_cast<uint64_t>(s_.m * s_.out[0] * extent(1)),
                                     "taps GEMM output over the padded width");
    }
    const uint64_t buffers = item_parallel_ ? slots_ : 1;
    if (path_ == ConvPath::Im2col) {
      BATON_TRY(call.reserve_scratch<W>(col_, static_cast<uint64_t>(rows_ * tile_),
                                        "im2col columns", buffers));
    }
    if (rows_ > 0 && packed_.empty()) {
      const int64_t last = s_.out_count % tile_;
      BATON_TRY(
          call.reserve_scratch<W>(scratch_,
                                  std::max(gemm_scratch(false, false, s_.m_group, tile_, rows_),
                                           gemm_scratch(false, false, s_.m_group, last, rows_)),
                                  "GEMM scratch", buffers));
    }
    return Status::ok_status();
  }

  uint64_t held_bytes() const override { return packed_.size() * sizeof(float); }

  void compute_item(const W* x, const W* w, const S* bias, W* y) {
    if (path_ == ConvPath::Depthwise) {
      // Channels in chunks, a few per thread, so that small planes are not one task each.
      const int64_t chunk = std::max<int64_t>(1, s_.m / (int64_t{4} * slots_));
      const bool epilogue = this->has_epilogue();
      parallel_for(this->pool_, ceil_div(s_.m, chunk), [&](int64_t t, unsigned slot) {
        const int64_t multiplier = s_.m_group;
        W* padded = std::is_same_v<W, float> ? col_.data<W>(slot) : nullptr;
        for (int64_t m = t * chunk; m < std::min(s_.m, (t + 1) * chunk); ++m) {
          depthwise_.run(x + (m / multiplier) * s_.in_count, w + m * s_.kernel_count,
                         bias ? static_cast<W>(load(bias[m])) : W(0), y + m * s_.out_count, padded);
          if (epilogue) this->epilogue_channels(y, m, m + 1);
        }
      });
      return;
    }
    if (few_positions_) {
      few_positions_item(x, bias, y);
      return;
    }
    if (taps_) {
      taps_item(x, bias, y);
      return;
    }
    const int64_t tiles = ceil_div(s_.out_count, tile_);
    auto item = [&](int64_t i, unsigned slot, runtime::ThreadPool* gemm_pool) {
      const int64_t g = i / tiles, p0 = (i % tiles) * tile_;
      const int64_t p1 = std::min(s_.out_count, p0 + tile_);
      W* yg = y + g * s_.m_group * s_.out_count;
      if (!packed_.empty()) {
        packed_item(x, bias, y, g, p0, p1, slot, gemm_pool);
        return;
      }
      for (int64_t m = 0; m < s_.m_group; ++m) {
        const int64_t channel = g * s_.m_group + m;
        const W v = bias ? static_cast<W>(load(bias[channel])) : W(0);
        std::fill(yg + m * s_.out_count + p0, yg + m * s_.out_count + p1, v);
      }
      if (rows_ == 0) return;
      int64_t ld = 0;
      const W* cols = columns(x, g, p0, p1, slot, ld);
      parallel_gemm<W>(gemm_pool, false, false, s_.m_group, p1 - p0, rows_, W(1),
                       w + g * s_.m_group * rows_, rows_, cols, ld, W(1), yg + p0, s_.out_count,
                       scratch_.data<W>(slot));
    };
    const int64_t items = s_.group * tiles;
    if (item_parallel_) {
      this->pool_->parallel_for(items, [&](int64_t i, unsigned slot) { item(i, slot, nullptr); });
    } else {
      for (int64_t i = 0; i < items; ++i) item(i, 0, this->pool_);
    }
  }

 private:
  // Columns [p0, p1) of group g's GEMM operand (X itself for a pointwise conv, else im2col's
  // buffer of thread `slot`), and its leading dimension.
  const W* columns(const W* x, int64_t g, int64_t p0, int64_t p1, unsigned slot,
                   int64_t& ld) const {
    const W* xg = x + g * s_.c_group * s_.in_count;
    if (path_ != ConvPath::Im2col) {
      ld = s_.in_count;
      return xg + p0;
    }
    W* col = col_.data<W>(slot);
    im2col(window_, xg, s_.c_group, p0, p1, col);
    ld = p1 - p0;
    return col;
  }

  // Group g's columns [p0, p1) through the packed weights, bias, residual and activation
  // included (float32 only: packed_ is empty otherwise).
  void packed_item(const W* x, const S* bias, W* y, int64_t g, int64_t p0, int64_t p1,
                   unsigned slot, runtime::ThreadPool* gemm_pool) {
    if constexpr (std::is_same_v<S, float>) {
      int64_t ld = 0;
      const float* cols = columns(x, g, p0, p1, slot, ld);
      const int64_t first = g * s_.m_group;  // the group's first output channel
      const float* z = this->item_residual();
      RowsEpilogue epilogue{z != nullptr ? z + first * s_.out_count + p0 : nullptr, s_.out_count,
                            &this->activation()};
      packed_rows_gemm(gemm_pool, s_.m_group, p1 - p0, rows_,
                       packed_.data() + g * packed_rows_size(s_.m_group, rows_), cols, ld,
                       bias != nullptr ? bias + first : nullptr, y + first * s_.out_count + p0,
                       s_.out_count, epilogue);
    }
  }

  // Few output positions (ResNet-50's last two stages: 14 x 14 and 7 x 7): the GEMM turned
  // around, Y^T [positions, M] = col^T [positions, K * C] x W^T, through packed_gemm over W^T
  // packed by panels of output channels. The rows kernel (positions as its vector columns) fills
  // its panels (then 32 columns wide) at 49 / 64 there and streams W from memory once per panel,
  // and at these sizes W is the largest operand (2-9 MB against 0.1-0.9 MB of columns): ResNet-50's
  // 7 x 7 layers ran at 1.5-3.7x onnxruntime's time in the model, where W is cold
  // (bench/RESULTS.md, 2026-12-02). Here each panel of W is read once, against every position while
  // it is in the L1 cache. The columns are gathered from a channels-last copy of the image with its
  // padding, where each (position, tap) part of a row is one run of C floats (im2col and a
  // transpose took a quarter of a 3x3 convolution's time). Measured one layer at a time
  // (bench/conv_bench.cpp), the turned-around GEMM is faster up to 14 x 14 = 196 positions; at 28 x
  // 28 the 1x1 layers ran 1.4x slower than the rows kernel (the 3x3 ones even), at 56 x 56 2x. The
  // channels-last image grows with the pads, which the output's size does not bound (huge pads at a
  // large stride): past kTapsScratch floats, or where its size would overflow, the convolution
  // keeps the other paths.
  bool few_positions_eligible() const {
    if (path_ == ConvPath::Depthwise || s_.spatial != 2 || s_.group != 1 ||
        s_.out_count > kFewPositions) {
      return false;
    }
    int64_t area = 0, image = 0;
    return !__builtin_mul_overflow(extent(0), extent(1), &area) &&
           !__builtin_mul_overflow(area, s_.c, &image) && image <= kTapsScratch;
  }
  static constexpr int64_t kFewPositions = 196;
  // A padded copy of the image's size along spatial axis d (the taps GEMM's planes, the
  // few-positions path's channels-last image): the begin pad and the image, or as far as the last
  // window reaches, whichever is further (ConvShape keeps only the begin pads). At stride 1 and
  // dilation 1 the second is the first plus the end pad.
  int64_t extent(int d) const {
    return std::max(s_.pads[d] + s_.in[d],
                    (s_.out[d] - 1) * s_.strides[d] + (s_.kernel[d] - 1) * s_.dilations[d] + 1);
  }
  // The columns' row length: the depth rounded up to 16 floats, plus 16 more where rows would
  // otherwise lie a multiple of 1 KB apart: the GEMM reads 12 rows at once, and rows 4 KB apart
  // (a 1024-channel 1x1 convolution) share one set of the L1 cache and evict each other (that
  // convolution ran at half the speed of its 512-channel neighbour).
  int64_t lda() const {
    const int64_t rounded = ceil_div(rows_, int64_t{16}) * 16;
    return rounded % 256 == 0 ? rounded + 16 : rounded;
  }

  // dst [cols, rows] = src [rows, cols]^T (leading dimensions lds and ldd), by 16 x 16 blocks so
  // that both sides stay in cache.
  static void transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                        int64_t ldd) {
    constexpr int64_t kBlock = 16;
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock);
      for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
        const int64_t c1 = std::min(cols, c0 + kBlock);
        for (int64_t c = c0; c < c1; ++c) {
          for (int64_t r = r0; r < r1; ++r) dst[c * ldd + r] = src[r * lds + c];
        }
      }
    }
  }

  // One batch item through the turned-around GEMM: the columns by position (X transposed, for a
  // pointwise convolution; else gathered a tap at a time from the channels-last padded image),
  // the product by position, transposed into Y (the epilogue runs after).
  void few_positions_item(const W* x, const S* bias, W* y) {
    if constexpr (std::is_same_v<S, float>) {
      const int64_t n = s_.out_count, c = s_.c, ld = lda();
      float* image = col_.data<float>();
      float* a = scratch_.data<float>();
      // The copies are split over the pool too (by channel blocks, image rows and output rows),
      // so that they do not leave the other threads idle between the GEMM's parts.
      constexpr int64_t kChannels = 64;
      if (path_ == ConvPath::Pointwise) {
        parallel_for(this->pool_, ceil_div(c, kChannels), [&](int64_t t, unsigned) {
          const int64_t c0 = t * kChannels, c1 = std::min(c, c0 + kChannels);
          transpose(x + c0 * n, n, c1 - c0, n, a + c0, ld);
        });
      } else {
        const int64_t width = extent(1), in_h = s_.in[0], in_w = s_.in[1];
        std::fill(image, image + padded_plane() * c, 0.0f);
        // The image's channels, 16 at a time, to their positions.
        parallel_for(this->pool_, in_h, [&](int64_t h, unsigned) {
          transpose(x + h * in_w, s_.in_count, c, in_w,
                    image + ((s_.pads[0] + h) * width + s_.pads[1]) * c, c);
        });
        parallel_for(this->pool_, s_.out[0], [&](int64_t oy, unsigned) {
          for (int64_t ox = 0; ox < s_.out[1]; ++ox) {
            float* row = a + (oy * s_.out[1] + ox) * ld;
            for (int64_t ky = 0; ky < s_.kernel[0]; ++ky) {
              for (int64_t kx = 0; kx < s_.kernel[1]; ++kx) {
                const int64_t iy = oy * s_.strides[0] + ky * s_.dilations[0];
                const int64_t ix = ox * s_.strides[1] + kx * s_.dilations[1];
                const float* from = image + (iy * width + ix) * c;
                std::copy(from, from + c, row + (ky * s_.kernel[1] + kx) * c);
              }
            }
          }
        });
      }
      float* product = image;  // the image is no longer read
      packed_gemm(this->pool_, n, s_.m, rows_, a, ld, packed_.data(), bias, product, s_.m);
      parallel_for(this->pool_, ceil_div(s_.m, kChannels), [&](int64_t t, unsigned) {
        const int64_t c0 = t * kChannels, c1 = std::min(s_.m, c0 + kChannels);
        transpose(product + c0, s_.m, n, c1 - c0, y + c0 * n, n);
      });
    }
  }

  // The taps GEMM (packed_gemm.h's RowsTaps): a 2-D convolution of one group with stride 1 and
  // dilation 1 reads each tap's rows of B from a zero-padded copy of the image, shifted, where
  // im2col would first write all taps x channels rows (7 MB for a 3x3 of 64 channels over 56x56,
  // a fifth of that convolution's time on this project's VM, bench/RESULTS.md).
  bool taps_eligible() const {
    return path_ == ConvPath::Im2col && s_.spatial == 2 && s_.group == 1 && s_.kernel_count > 1 &&
           s_.strides[0] == 1 && s_.strides[1] == 1 && s_.dilations[0] == 1 &&
           s_.dilations[1] == 1 &&
           s_.c * padded_plane() + s_.m * s_.out[0] * extent(1) <= kTapsScratch;
  }
  // The taps GEMM's scratch (the padded image and the product over the padded width) grows with
  // the image, where im2col's is bounded by its column tiles: past this many floats (64 MiB; a
  // UNet's 64 channels at 256 x 256 take 8.5 M) a convolution keeps im2col.
  static constexpr int64_t kTapsScratch = int64_t{1} << 24;
  int64_t padded_plane() const { return extent(0) * extent(1); }

  // One batch item through the taps GEMM: pad the image, multiply over the padded width, keep
  // each output row's first out[1] columns.
  void taps_item(const W* x, const S* bias, W* y) {
    if constexpr (std::is_same_v<S, float>) {
      const int64_t in_h = s_.in[0], in_w = s_.in[1], top = s_.pads[0], left = s_.pads[1];
      const int64_t padded_w = extent(1), plane = padded_plane();
      const int64_t out_h = s_.out[0], out_w = s_.out[1], wide = out_h * padded_w;
      float* image = col_.data<float>();
      parallel_for(this->pool_, s_.c, [&](int64_t c, unsigned) {
        float* dst = image + c * plane;
        const float* src = x + c * in_h * in_w;
        std::fill(dst, dst + top * padded_w, 0.0f);
        for (int64_t h = 0; h < in_h; ++h) {
          float* row = dst + (top + h) * padded_w;
          std::fill(row, row + left, 0.0f);
          std::copy(src + h * in_w, src + (h + 1) * in_w, row + left);
          std::fill(row + left + in_w, row + padded_w, 0.0f);
        }
        std::fill(dst + (top + in_h) * padded_w, dst + plane, 0.0f);
      });
      std::fill(image + s_.c * plane, image + s_.c * plane + s_.kernel[1], 0.0f);
      float* wide_y = scratch_.data<float>();
      const RowsTaps taps{tap_offsets_.data(), s_.c};
      packed_rows_gemm_taps(this->pool_, s_.m, wide, rows_, packed_.data(), image, plane, &taps,
                            bias, wide_y, wide, RowsEpilogue{});
      parallel_for(this->pool_, s_.m, [&](int64_t m, unsigned) {
        for (int64_t h = 0; h < out_h; ++h) {
          const float* from = wide_y + m * wide + h * padded_w;
          std::copy(from, from + out_w, y + m * s_.out_count + h * out_w);
        }
      });
    }
  }

  // Fewer output columns than this per thread and a conv's GEMM is better split by its rows.
  static constexpr int64_t kMinTaskColumns = 128;

  ConvWindow window_;
  ConvPath path_;
  DepthwisePlan depthwise_;
  int64_t rows_;      // C/group * K: the GEMM's inner size
  unsigned slots_;    // threads of the pool
  int64_t tile_ = 0;  // columns per GEMM
  bool item_parallel_ = false;
  // One buffer per thread when items run in parallel (depthwise: always, the padded planes).
  runtime::ScratchRef col_, scratch_;
  std::vector<float> packed_;         // W packed by row blocks per group (empty: OpenBLAS)
  bool taps_ = false;                 // the taps GEMM (taps_eligible; packed_ is then tap-major)
  bool few_positions_ = false;        // the GEMM turned around (packed_ holds W^T by panels)
  std::vector<int64_t> tap_offsets_;  // each tap's shift in the padded image
};

ConvPath choose_path(const ConvShape& s) {
  bool pointwise = true;
  for (int d = 0; d < s.spatial; ++d) {
    pointwise = pointwise && s.kernel[d] == 1 && s.strides[d] == 1 && s.pads[d] == 0 &&
                s.pads[s.spatial + d] == 0;
  }
  if (pointwise) return ConvPath::Pointwise;
  if (s.c_group == 1 && s.m_group <= 4 && s.spatial <= 2) return ConvPath::Depthwise;
  return ConvPath::Im2col;
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const ConvShape shape = conv_shape(call);
  const ConvPath path = choose_path(shape);
  if (!shape.empty && path != ConvPath::Depthwise) {
    const int64_t rows = shape.c_group * shape.kernel_count;
    BATON_TRY(check_conv_blas_range(
        call, {shape.m_group, rows, shape.out_count, shape.in_count,
               path == ConvPath::Im2col ? column_tile(rows, shape.out_count) : 0}));
  }
  const bool fused = call.def->domain == "baton";
  ops::Activation act;
  if (fused) {
    BATON_ASSIGN_OR_RETURN(
        act, ops::make_activation(call.attr_string("activation"),
                                  call.attr_floats("activation_params"), call.describe()));
  }
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(call.input(0).dtype, [&]<typename S>() {
    auto conv = std::make_unique<ConvKernel<S>>(call, shape, path);
    if (fused) conv->set_epilogue(call.has_input(3) ? call.inputs[3] : nullptr, act);
    reserved = conv->pack(call);
    if (reserved.ok()) kernel = with_scratch(std::move(conv), call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_conv(runtime::KernelRegistry& registry) {
  registry.add({"Conv", "", {{"T", ops::kFloatTypes}}, &create});
  registry.add({"FusedConv", "baton", {{"T", ops::kFloatTypes}}, &create});
}

}  // namespace baton::kernels::cpu
