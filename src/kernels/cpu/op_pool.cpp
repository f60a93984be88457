// ONNX MaxPool, AveragePool, LpPool and their global forms (ops/pool.cpp), over 1 to 3 spatial
// dimensions (the global forms over any number).
//
// The windowed kernel sees every X as [planes = N * C, D, H, W], 1-D and 2-D inputs with leading
// spatial dimensions of size 1. At create it tabulates, per axis and output position, the first
// tap inside the input, how many taps lie inside the input, and how many inside the padded extent
// [-head, in + tail) (AveragePool's count_include_pad divisor: a ceil_mode window past the right
// padding counts only up to its end, as onnxruntime and PyTorch do); `run` then visits only taps
// inside the input. Sums (AveragePool, LpPool) are taken in double; MaxPool compares in the
// element type, a NaN wins (as in Max), and ties go to the first tap in row-major order. MaxPool's
// Indices are flat positions in X (N and C included), row-major over the spatial dimensions, or
// column-major with storage_order 1.
//
// MaxPool without Indices over float32 planes of at most 2 spatial axes takes a row path instead:
// each output row is the running maximum, tap by tap, of whole input rows (the output columns each
// kernel column reaches inside the input precomputed), which the compiler vectorizes; it is about
// 20x faster than visiting each window. Planes run in parallel over the Method's threads.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

enum class Pool { Max, Average, Lp };

constexpr size_t kAxes = 3;

// One spatial axis: its geometry (canonical attributes) and, per output position, where the
// window's first tap inside the input is, how many of its taps are inside the input, and how many
// inside the padded extent.
struct Axis {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1, head = 0, tail = 0;
  std::vector<int64_t> first, taps, padded;

  void tabulate() {
    const auto n = static_cast<size_t>(out);
    first.resize(n);
    taps.resize(n);
    padded.resize(n);
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = o * s - head;
      const int64_t j0 = start < 0 ? (-start + d - 1) / d : 0;
      // Taps past the input (and, for `padded`, past the right padding) are left out; the
      // definition made sure every window has at least one inside the input.
      const int64_t j1 = std::min(k - 1, floor_div(in - 1 - start, d));
      const int64_t jp = std::min(k - 1, floor_div(in + tail - 1 - start, d));
      const auto i = static_cast<size_t>(o);
      first[i] = start + j0 * d;
      taps[i] = std::max<int64_t>(0, j1 - j0 + 1);
      padded[i] = std::max<int64_t>(0, jp + 1);
    }
  }

  static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
};

template <typename C>
bool beats(C v, C m) {
  if constexpr (std::is_floating_point_v<C>) {
    return v > m || (std::isnan(v) && !std::isnan(m));
  } else {
    return v > m;
  }
}

struct PoolParams {
  int64_t planes = 0;
  std::array<Axis, kAxes> axes;  // D, H, W
  bool count_include_pad = false;
  bool column_major = false;  // MaxPool's storage_order 1
  double p = 2.0;             // LpPool
};

#if defined(__x86_64__) && defined(__GNUC__)
// out[o] = the larger of out[o] and src[2 * o] for o in [lo, hi), a NaN winning, 16 outputs at a
// time: two loads and a permute take the even elements. The library is built for the x86-64
// baseline, whose compiler left this stride-2 loop scalar (ResNet-50's 3x3 stride-2 pool took
// 0.57-0.87 ms on this project's VM against onnxruntime's 0.16).
__attribute__((target("avx512f"))) void max_into_stride2_avx512(float* out, const float* src,
                                                                int64_t lo, int64_t hi) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t o = lo; o < hi; o += 16) {
    const int64_t n = std::min<int64_t>(16, hi - o);
    // The reads stop at src[2 * (hi - 1)], the last element the scalar loop reads.
    const int64_t reads = 2 * n - 1;
    const __mmask16 m0 = reads >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << reads) - 1);
    const __mmask16 m1 = reads <= 16 ? __mmask16(0) : __mmask16((1u << (reads - 16)) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(m0, src + 2 * o);
    const __m512 b = _mm512_maskz_loadu_ps(m1, src + 2 * o + 16);
    const __m512 v = _mm512_permutex2var_ps(a, even, b);
    const __mmask16 live = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    const __m512 cur = _mm512_maskz_loadu_ps(live, out + o);
    const __mmask16 take =
        _mm512_cmp_ps_mask(v, cur, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    _mm512_mask_storeu_ps(out + o, live & take, v);
  }
}
bool detect_avx512() {
  __builtin_cpu_init();  // a static initializer may run before the library's own CPU detection
  return __builtin_cpu_supports("avx512f");
}
const bool kPoolAvx512 = detect_avx512();
#else
constexpr bool kPoolAvx512 = false;
void max_into_stride2_avx512(float*, const float*, int64_t, int64_t) {}
#endif

// MaxPool's row path (see the top): per kernel column, the output columns [lo, hi) whose tap lies
// inside the input row.
struct MaxRows {
  std::vector<int64_t> lo, hi;

  explicit MaxRows(const Axis& w) {
    for (int64_t kw = 0; kw < w.k; ++kw) {
      const int64_t shift = kw * w.d - w.head;  // input column = o * s + shift
      int64_t l = 0;
      while (l < w.out && l * w.s + shift < 0) ++l;
      int64_t h = l;
      while (h < w.out && h * w.s + shift < w.in) ++h;
      lo.push_back(l);
      hi.push_back(h);
    }
  }

  // One output plane; a NaN tap wins, as in the window path.
  void run(const Axis& ah, const Axis& aw, const float* x, float* y) const {
    for (int64_t oh = 0; oh < ah.out; ++oh) {
      float* out = y + oh * aw.out;
      std::fill(out, out + aw.out, -std::numeric_limits<float>::infinity());
      for (int64_t kh = 0; kh < ah.k; ++kh) {
        const int64_t ih = oh * ah.s + kh * ah.d - ah.head;
        if (ih < 0 || ih >= ah.in) continue;
        const float* row = x + ih * aw.in;
        for (size_t kw = 0; kw < lo.size(); ++kw) {
          const int64_t shift = static_cast<int64_t>(kw) * aw.d - aw.head;
          const float* src = row + shift;
          if (aw.s == 2 && kPoolAvx512) {
            max_into_stride2_avx512(out, src, lo[kw], hi[kw]);
          } else if (aw.s == 1) {
            for (int64_t o = lo[kw]; o < hi[kw]; ++o) {
              const float v = src[o];
              out[o] = (v > out[o] || v != v) ? v : out[o];
            }
          } else {
            for (int64_t o = lo[kw]; o < hi[kw]; ++o) {
              const float v = src[o * aw.s];
              out[o] = (v > out[o] || v != v) ? v : out[o];
            }
          }
        }
      }
    }
  }
};

template <typename S, Pool K>
class PoolKernel final : public runtime::Kernel {
  using C = compute_t<S>;

 public:
  PoolKernel(const runtime::Value* x, runtime::Value* y, runtime::Value* indices, PoolParams p,
             runtime::ThreadPool* pool)
      : x_(x), y_(y), indices_(indices), p_(std::move(p)), pool_(pool), rows_(p_.axes[2]) {
    rows_path_ = K == Pool::Max && std::is_same_v<S, float> && indices_ == nullptr &&
                 p_.axes[0].in == 1 && p_.axes[0].k == 1 && p_.axes[0].head == 0;
    average_rows_ = K == Pool::Average && std::is_same_v<S, float> && p_.axes[0].in == 1 &&
                    p_.axes[0].k == 1 && p_.axes[0].head == 0;
    // A row of double sums per thread (the spatial sizes never change after create).
    if (average_rows_) {
      sums_.resize(static_cast<size_t>(pool_slots(pool_) * p_.axes[2].out));
    }
  }

  // Dynamic shapes: planes (batch x channels) are independent, so their count may change; the
  // spatial sizes are what the axes' tables were built for.
  Status resize() override {
    const auto x = x_->tensor.sizes, y = y_->tensor.sizes;
    const size_t n = x.size() - 2;
    for (size_t i = 0; i < n; ++i) {
      const Axis& a = p_.axes[kAxes - n + i];
      if (a.in != x[2 + i] || a.out != y[2 + i]) {
        return Status(Error::NotSupported,
                      "the pooling kernels take a dynamic batch and channels, not dynamic "
                      "spatial sizes");
      }
    }
    p_.planes = y_->tensor.numel() == 0 ? 0 : x[0] * x[1];
    return Status::ok_status();
  }

  Status run() override {
    // A few planes per task, so that small planes are not one task each.
    const int64_t chunk = std::max<int64_t>(1, p_.planes / (int64_t{4} * pool_slots(pool_)));
    parallel_for(pool_, (p_.planes + chunk - 1) / chunk, [&](int64_t t, unsigned slot) {
      if constexpr (K == Pool::Average && std::is_same_v<S, float>) {
        if (average_rows_) {
          average_planes(t * chunk, std::min(p_.planes, (t + 1) * chunk), slot);
          return;
        }
      }
      run_planes(t * chunk, std::min(p_.planes, (t + 1) * chunk));
    });
    return Status::ok_status();
  }

 private:
  void run_planes(int64_t first_plane, int64_t end_plane) const {
    const S* x = x_->tensor.data_as<const S>();
    S* y = y_->tensor.data_as<S>();
    int64_t* indices = indices_ ? indices_->tensor.data_as<int64_t>() : nullptr;
    const Axis& ad = p_.axes[0];
    const Axis& ah = p_.axes[1];
    const Axis& aw = p_.axes[2];
    const int64_t in_plane = ad.in * ah.in * aw.in;
    const int64_t out_plane = ad.out * ah.out * aw.out;
    if constexpr (K == Pool::Max && std::is_same_v<S, float>) {
      if (rows_path_) {
        for (int64_t plane = first_plane; plane < end_plane; ++plane) {
          rows_.run(ah, aw, x + plane * in_plane, y + plane * out_plane);
        }
        return;
      }
    }
    for (int64_t plane = first_plane; plane < end_plane; ++plane) {
      const S* xp = x + plane * in_plane;
      int64_t o = plane * out_plane;
      std::array<size_t, kAxes> at{};  // the output position, per axis
      for (at[0] = 0; at[0] < ad.first.size(); ++at[0]) {
        for (at[1] = 0; at[1] < ah.first.size(); ++at[1]) {
          for (at[2] = 0; at[2] < aw.first.size(); ++at[2], ++o) {
            if constexpr (K == Pool::Max) {
              C m = std::numeric_limits<C>::lowest();
              int64_t arg = -1;
              for_each_tap(xp, at, [&](S e, int64_t zd, int64_t zh, int64_t zw) {
                const C v = load(e);
                if (arg < 0 || beats(v, m)) {
                  m = v;
                  arg = p_.column_major ? zd + (zh + zw * ah.in) * ad.in
                                        : (zd * ah.in + zh) * aw.in + zw;
                }
              });
              y[o] = store<S>(m);
              if (indices) indices[o] = plane * in_plane + arg;
            } else {
              double sum = 0.0;
              for_each_tap(xp, at, [&](S e, int64_t, int64_t, int64_t) {
                const auto v = static_cast<double>(load(e));
                if constexpr (K == Pool::Average) {
                  sum += v;
                } else {
                  sum += std::pow(std::fabs(v), p_.p);
                }
              });
              y[o] = store<S>(static_cast<C>(finish(sum, at)));
            }
          }
        }
      }
    }
  }

  // AveragePool over float32 planes of at most two spatial axes, a row at a time: each output
  // row's window sums in double, adding whole input rows tap by tap (kernel row, then kernel
  // column, as the window path adds each window's taps: the same sums, the same bits), then each
  // divided by its window's count. The window path's per-window loop ran DenseNet-121's three
  // 2x2 transition pools in 1.0 ms on this project's VM against onnxruntime's 0.085.
  void average_planes(int64_t first_plane, int64_t end_plane, unsigned slot) {
    const float* x = x_->tensor.data_as<const float>();
    float* y = y_->tensor.data_as<float>();
    const Axis& ad = p_.axes[0];
    const Axis& ah = p_.axes[1];
    const Axis& aw = p_.axes[2];
    double* sum = sums_.data() + static_cast<size_t>(slot) * static_cast<size_t>(aw.out);
    const double depth = static_cast<double>(p_.count_include_pad ? ad.padded[0] : ad.taps[0]);
    for (int64_t plane = first_plane; plane < end_plane; ++plane) {
      const float* xp = x + plane * ah.in * aw.in;
      float* yp = y + plane * ah.out * aw.out;
      for (int64_t oh = 0; oh < ah.out; ++oh) {
        const auto h = static_cast<size_t>(oh);
        std::fill(sum, sum + aw.out, 0.0);
        for (int64_t b = 0; b < ah.taps[h]; ++b) {
          const float* row = xp + (ah.first[h] + b * ah.d) * aw.in;
          for (size_t kw = 0; kw < rows_.lo.size(); ++kw) {
            const float* src = row + static_cast<int64_t>(kw) * aw.d - aw.head;
            for (int64_t o = rows_.lo[kw]; o < rows_.hi[kw]; ++o) {
              sum[o] += static_cast<double>(src[o * aw.s]);
            }
          }
        }
        const double rows = static_cast<double>(p_.count_include_pad ? ah.padded[h] : ah.taps[h]);
        for (int64_t o = 0; o < aw.out; ++o) {
          const auto w = static_cast<size_t>(o);
          // finish()'s count, multiplied in its order.
          double count = 1.0;
          count *= depth;
          count *= rows;
          count *= static_cast<double>(p_.count_include_pad ? aw.padded[w] : aw.taps[w]);
          yp[oh * aw.out + o] = static_cast<float>(sum[o] / count);
        }
      }
    }
  }

  // Calls f(element, d, h, w) for each tap of the window at output position `at` that lies inside
  // the input, in row-major order.
  template <typename F>
  void for_each_tap(const S* xp, const std::array<size_t, kAxes>& at, F&& f) const {
    const Axis& ad = p_.axes[0];
    const Axis& ah = p_.axes[1];
    const Axis& aw = p_.axes[2];
    const int64_t fd = ad.first[at[0]], fh = ah.first[at[1]], fw = aw.first[at[2]];
    const int64_t nd = ad.taps[at[0]], nh = ah.taps[at[1]], nw = aw.taps[at[2]];
    for (int64_t a = 0; a < nd; ++a) {
      const int64_t zd = fd + a * ad.d;
      for (int64_t b = 0; b < nh; ++b) {
        const int64_t zh = fh + b * ah.d;
        const S* row = xp + (zd * ah.in + zh) * aw.in;
        for (int64_t c = 0; c < nw; ++c) {
          const int64_t zw = fw + c * aw.d;
          f(row[zw], zd, zh, zw);
        }
      }
    }
  }

  // AveragePool's mean or LpPool's p-th root of the window's `sum`.
  double finish(double sum, const std::array<size_t, kAxes>& at) const {
    if constexpr (K == Pool::Lp) {
      return std::pow(sum, 1.0 / p_.p);
    } else {
      // In double: padded counts may multiply past int64 (huge pads).
      double count = 1.0;
      for (size_t i = 0; i < kAxes; ++i) {
        const Axis& a = p_.axes[i];
        count *= static_cast<double>(p_.count_include_pad ? a.padded[at[i]] : a.taps[at[i]]);
      }
      return sum / count;
    }
  }

  const runtime::Value* x_;
  runtime::Value* y_;
  runtime::Value* indices_;  // MaxPool's optional Indices, or null
  PoolParams p_;
  runtime::ThreadPool* pool_;
  MaxRows rows_;  // also the average rows' kernel-column ranges
  bool rows_path_ = false;
  bool average_rows_ = false;
  std::vector<double> sums_;  // average rows: out_w double sums per thread
};

// The global forms: one value per plane of `n` spatial positions.
template <typename S, Pool K>
class GlobalPoolKernel final : public runtime::Kernel {
  using C = compute_t<S>;

 public:
  GlobalPoolKernel(const runtime::Value* x, runtime::Value* y, int64_t planes, int64_t n, double p)
      : x_(x), y_(y), planes_(planes), n_(n), p_(p) {}

  Status resize() override {
    const auto x = x_->tensor.sizes;
    const bool empty = x_->tensor.numel() == 0;
    planes_ = empty ? 0 : x[0] * x[1];
    n_ = empty ? 0 : product(x, 2, x.size());
    return Status::ok_status();
  }

  Status run() override {
    const S* x = x_->tensor.data_as<const S>();
    S* y = y_->tensor.data_as<S>();
    for (int64_t plane = 0; plane < planes_; ++plane) {
      const S* xp = x + plane * n_;
      if constexpr (K == Pool::Max) {
        C m = load(xp[0]);
        for (int64_t i = 1; i < n_; ++i) {
          const C v = load(xp[i]);
          if (beats(v, m)) m = v;
        }
        y[plane] = store<S>(m);
      } else {
        double sum = 0.0;
        for (int64_t i = 0; i < n_; ++i) {
          const auto v = static_cast<double>(load(xp[i]));
          if constexpr (K == Pool::Average) {
            sum += v;
          } else {
            sum += std::pow(std::fabs(v), p_);
          }
        }
        const double r =
            K == Pool::Average ? sum / static_cast<double>(n_) : std::pow(sum, 1.0 / p_);
        y[plane] = store<S>(static_cast<C>(r));
      }
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* x_;
  runtime::Value* y_;
  int64_t planes_, n_;
  double p_;
};

bool has_attr(const runtime::KernelCall& call, std::string_view name) {
  return call.def->attr_index(name) >= 0;
}

template <Pool K>
constexpr uint32_t pool_types() {
  return K == Pool::Max ? (ops::kFloatTypes | DTypeSet{DType::Int8, DType::UInt8}).bits()
                        : ops::kFloatTypes.bits();
}

template <Pool K>
Result<std::unique_ptr<runtime::Kernel>> create_pool(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const TensorView& y = call.output(0);
  PoolParams p;
  // Empty output: nothing to tabulate (an empty batch may come with huge spatial sizes).
  if (y.numel() != 0) {
    const size_t n = x.sizes.size() - 2;  // canonical: 1 to 3 spatial axes
    const auto kernel = call.attr_ints("kernel_shape");
    const auto strides = call.attr_ints("strides");
    const auto pads = call.attr_ints("pads");
    p.planes = x.sizes[0] * x.sizes[1];
    for (size_t i = 0; i < n; ++i) {
      Axis& a = p.axes[kAxes - n + i];
      a.in = x.sizes[2 + i];
      a.out = y.sizes[2 + i];
      a.k = kernel[i];
      a.s = strides[i];
      a.d = has_attr(call, "dilations") ? call.attr_ints("dilations")[i] : 1;
      a.head = pads[i];
      a.tail = pads[n + i];
    }
    for (Axis& a : p.axes) a.tabulate();
    p.count_include_pad =
        has_attr(call, "count_include_pad") && call.attr_int("count_include_pad") == 1;
    p.column_major = has_attr(call, "storage_order") && call.attr_int("storage_order") == 1;
    if (has_attr(call, "p")) p.p = static_cast<double>(call.attr_int("p"));
  }
  runtime::Value* indices = call.outputs.size() > 1 ? call.outputs[1] : nullptr;
  std::unique_ptr<runtime::Kernel> k;
  dispatch<pool_types<K>()>(x.dtype, [&]<typename S>() {
    k = std::make_unique<PoolKernel<S, K>>(call.inputs[0], call.outputs[0], indices, std::move(p),
                                           call.pool);
  });
  if (!k) return no_kernel_for(call, x.dtype);
  return k;
}

template <Pool K>
Result<std::unique_ptr<runtime::Kernel>> create_global_pool(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const bool empty = x.numel() == 0;
  const int64_t planes = empty ? 0 : x.sizes[0] * x.sizes[1];
  const int64_t n = empty ? 0 : product(x.sizes, 2, x.sizes.size());
  const double p = has_attr(call, "p") ? static_cast<double>(call.attr_int("p")) : 2.0;
  std::unique_ptr<runtime::Kernel> k;
  dispatch<ops::kFloatTypes.bits()>(x.dtype, [&]<typename S>() {
    k = std::make_unique<GlobalPoolKernel<S, K>>(call.inputs[0], call.outputs[0], planes, n, p);
  });
  if (!k) return no_kernel_for(call, x.dtype);
  return k;
}

}  // namespace

void register_pool(runtime::KernelRegistry& registry) {
  registry.add({"MaxPool", "", {}, &create_pool<Pool::Max>});
  registry.add({"AveragePool", "", {}, &create_pool<Pool::Average>});
  registry.add({"LpPool", "", {}, &create_pool<Pool::Lp>});
  registry.add({"GlobalMaxPool", "", {}, &create_global_pool<Pool::Max>});
  registry.add({"GlobalAveragePool", "", {}, &create_global_pool<Pool::Average>});
  registry.add({"GlobalLpPool", "", {}, &create_global_pool<Pool::Lp>});
}

}  // namespace baton::kernels::cpu
