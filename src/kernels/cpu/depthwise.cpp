#include "kernels/cpu/depthwise.h"

#include <algorithm>
#include <cstring>

namespace baton::kernels::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
// As vector_math.cpp: one clone per instruction set, picked when the library loads.
#define BATON_DEPTHWISE_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BATON_DEPTHWISE_CLONES
#endif

// Output columns per register block: one AVX-512 register, two AVX2 ones, four SSE ones (GCC's
// vector extension lowers the 16 lanes to what the clone has).
constexpr int64_t kBlock = 16;
typedef float Lanes __attribute__((vector_size(kBlock * sizeof(float))));

inline __attribute__((always_inline)) Lanes load_lanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);  // unaligned
  return v;
}

// Copies x into the zero-padded plane the taps read, and zeroes the slack after it.
inline __attribute__((always_inline)) void pad_plane(const DepthwiseGeometry& g, const float* x,
                                                     float* padded) {
  const int64_t ph = g.padded_h(), pw = g.padded_w();
  // Input columns [c0, c1) land at padded columns [c0 + pad_w, c1 + pad_w).
  const int64_t c0 = std::max<int64_t>(0, -g.pad_w);
  const int64_t c1 = std::clamp<int64_t>(pw - g.pad_w, c0, g.in_w);
  for (int64_t r = 0; r < ph; ++r) {
    float* row = padded + r * pw;
    const int64_t ih = r - g.pad_h;
    if (ih < 0 || ih >= g.in_h || c1 <= c0) {
      std::fill(row, row + pw, 0.0f);
      continue;
    }
    const int64_t left = c0 + g.pad_w, width = c1 - c0;
    std::fill(row, row + left, 0.0f);
    std::memcpy(row + left, x + ih * g.in_w + c0, static_cast<size_t>(width) * sizeof(float));
    std::fill(row + left + width, row + pw, 0.0f);
  }
  std::fill(padded + ph * pw, padded + ph * pw + DepthwiseGeometry::kSlack, 0.0f);
}

// The 16 columns from `src` at column stride S (1 or 2; 0: g's stride, read one by one, and only
// the first n: at a large stride the lanes past n would reach beyond the plane's slack).
template <int S>
inline __attribute__((always_inline)) Lanes taps(const float* src, int64_t stride, int64_t n) {
  if constexpr (S == 1) {
    return load_lanes(src);
  } else if constexpr (S == 2) {
    const Lanes a = load_lanes(src), b = load_lanes(src + kBlock);
    return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  } else {
    Lanes v = {};
    for (int64_t j = 0; j < n; ++j) v[j] = src[j * stride];
    return v;
  }
}

// Columns [ow, ow + n) of output row `oh`, n <= kBlock, in registers across all taps. A short
// block's lanes past n read further along the padded plane (or its slack) and are not stored.
template <int S>
inline __attribute__((always_inline)) void block(const DepthwiseGeometry& g, const float* padded,
                                                 const float* w, float bias, float* y, int64_t oh,
                                                 int64_t ow, int64_t n) {
  const int64_t pw = g.padded_w();
  const int64_t stride = S > 0 ? S : g.stride_w;
  Lanes acc = Lanes{} + bias;
  for (int64_t kh = 0; kh < g.k_h; ++kh) {
    const float* row = padded + (oh * g.stride_h + kh * g.dil_h) * pw + ow * stride;
    for (int64_t kw = 0; kw < g.k_w; ++kw) {
      acc += w[kh * g.k_w + kw] * taps<S>(row + kw * g.dil_w, stride, n);
    }
  }
  float* out = y + oh * g.out_w + ow;
  if (n == kBlock) {
    std::memcpy(out, &acc, sizeof acc);
  } else {
    float lanes[kBlock];
    std::memcpy(lanes, &acc, sizeof acc);
    std::memcpy(out, lanes, static_cast<size_t>(n) * sizeof(float));
  }
}

template <int S>
inline __attribute__((always_inline)) void rows(const DepthwiseGeometry& g, const float* padded,
                                                const float* w, float bias, float* y) {
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    int64_t ow = 0;
    for (; ow < g.out_w; ow += kBlock) {
      block<S>(g, padded, w, bias, y, oh, ow, std::min(kBlock, g.out_w - ow));
    }
  }
}

BATON_DEPTHWISE_CLONES void plane(const DepthwiseGeometry& g, const float* x, const float* w,
                                  float bias, float* y, float* padded) {
  pad_plane(g, x, padded);
  if (g.stride_w == 1) {
    rows<1>(g, padded, w, bias, y);
  } else if (g.stride_w == 2) {
    rows<2>(g, padded, w, bias, y);
  } else {
    rows<0>(g, padded, w, bias, y);
  }
}

}  // namespace

void depthwise_plane(const DepthwiseGeometry& g, const float* x, const float* w, float bias,
                     float* y, float* padded) {
  if (g.out_h <= 0 || g.out_w <= 0) return;
  plane(g, x, w, bias, y, padded);
}

}  // namespace baton::kernels::cpu
