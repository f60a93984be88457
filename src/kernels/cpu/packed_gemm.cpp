#include "kernels/cpu/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/vector_math.h"

namespace baton::kernels::cpu {
namespace {

// Rows of W the kernel takes per pass over a panel: kDepth x 32 floats is 32 KB, an L1 cache.
constexpr int64_t kDepth = 256;
// Below this many multiply-adds a product runs on the calling thread (as parallel_gemm).
constexpr double kParallelWork = kParallelGemmWork;
// Rows of A taken through every panel before the next rows: kRowBlock x kDepth floats (120 KB)
// stay in the L2 cache while the panels pass, where panel by panel over all rows re-read A from
// memory once per panel (ConvNeXt's 3136-row Linears ran at 36-74 GFLOP/s). A multiple of both
// tile heights (12 and 6). Only for an A larger than kBlockedA floats (1 MB): a smaller A stays
// in the L2 cache across the panels anyway, and row blocks would read W once per block instead
// of once (BERT-base's 128 rows against 9 MB of FFN weights).
constexpr int64_t kRowBlock = 120;
constexpr int64_t kBlockedA = int64_t{1} << 18;
// packed_rows_gemm: rows of B (and of each packed W block) per pass, so that one panel of B,
// kRowsDepth x 64 floats with AVX-512 (32 KB; 16 columns, 8 KB, with AVX2), and W's block of 6
// rows (3 KB) stay in the L1 and L2 caches while W's row blocks pass over the panel (64 rows, a
// 16 KB panel, ran ResNet-50 slower on a Zen 4 VM with a 32 KB L1); and B's columns per task, a
// multiple of every panel width, whose kRowsDepth x 256 floats (128 KB) stay in the L2 cache.
constexpr int64_t kRowsDepth = 128;
constexpr int64_t kRowsColumns = 256;

enum class Isa { None, Avx2, Avx512 };

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("fma")) {
    return Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
  return Isa::None;
}
const Isa kIsa = detect();

// Columns per panel: two vector registers' worth.
int64_t panel_width() { return kIsa == Isa::Avx512 ? 32 : 16; }

#define BATON_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")))
#define BATON_AVX2 __attribute__((target("avx2,fma")))

// packed_gemm's AVX-512 tile: R rows of C by a panel's 32 columns (`cols` of them real: the last
// panel's others are masked off), over kc rows of the panel. accumulate: C holds the earlier
// depth blocks' sums; otherwise the sums start from `bias` (per column: the panel's columns of
// it), or from zero when it is null. A row-major (element (r, p) at a[r * lda + p]), the panel
// packed (row p at b + p * 32).
template <int R>
BATON_AVX512 void tile_avx512(int64_t kc, const float* a, int64_t lda, const float* b, int64_t,
                              float* c, int64_t ldc, bool accumulate, int64_t cols,
                              const float* bias) {
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32   ? __mmask16(0xFFFF)
                       : cols <= 16 ? __mmask16(0)
                                    : __mmask16((1u << (cols - 16)) - 1);
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    if (accumulate) {
      acc0[r] = _mm512_maskz_loadu_ps(m0, c + r * ldc);
      acc1[r] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
    } else if (bias != nullptr) {
      acc0[r] = _mm512_maskz_loadu_ps(m0, bias);
      acc1[r] = _mm512_maskz_loadu_ps(m1, bias + 16);
    } else {
      acc0[r] = _mm512_setzero_ps();
      acc1[r] = _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b + p * 32);
    const __m512 b1 = _mm512_loadu_ps(b + p * 32 + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + p]);
      acc0[r] = _mm512_fmadd_ps(x, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(x, b1, acc1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
  }
}

// packed_rows_gemm's AVX-512 tile: R rows of a packed W block (element (r, p) at a[p * lda + r],
// lda the block height) by 64 columns of B read in place (row p at b + p * ldb, masked past
// `cols`), the bias per row: four vectors of B and R broadcasts of W per row of depth for 4R
// multiply-adds. Against 12 rows by 32 columns (two vectors, twelve broadcasts) it ran the
// full-size UNet 0.96x and ResNet-50 1.00x (one thread, a Zen 4 VM, interleaved runs) and fits
// row counts of 64 and 128 in whole tiles.
template <int R>
BATON_AVX512 void tile_rows64_avx512(int64_t kc, const float* a, int64_t lda, const float* b,
                                     int64_t ldb, float* c, int64_t ldc, bool accumulate,
                                     int64_t cols, const float* bias) {
  __mmask16 m[4];
  for (int v = 0; v < 4; ++v) {
    const int64_t left = cols - 16 * v;
    m[v] = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  __m512 acc[R][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      acc[r][v] = accumulate        ? _mm512_maskz_loadu_ps(m[v], c + r * ldc + 16 * v)
                  : bias != nullptr ? _mm512_set1_ps(bias[r])
                                    : _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) bv[v] = _mm512_maskz_loadu_ps(m[v], b + p * ldb + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[p * lda + r]);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, m[v], acc[r][v]);
  }
}

// The AVX2 tile: R rows by a panel's 16 columns (two 8-float registers), for both GEMMs. kRows
// false: as tile_avx512 (A row-major, the panel packed, the bias per column); true: as
// tile_rows64_avx512 (A a packed block of W, B read in place and masked, the bias per row).
template <int R, bool kRows>
BATON_AVX2 void tile_avx2(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float* c, int64_t ldc, bool accumulate, int64_t cols, const float* bias) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols)), iota);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols) - 8), iota);
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (accumulate) {
      acc0[r] = _mm256_maskload_ps(c + r * ldc, m0);
      acc1[r] = _mm256_maskload_ps(c + r * ldc + 8, m1);
    } else if (bias != nullptr && kRows) {
      acc0[r] = acc1[r] = _mm256_set1_ps(bias[r]);
    } else if (bias != nullptr) {
      acc0[r] = _mm256_maskload_ps(bias, m0);
      acc1[r] = _mm256_maskload_ps(bias + 8, m1);
    } else {
      acc0[r] = _mm256_setzero_ps();
      acc1[r] = _mm256_setzero_ps();
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = kRows ? _mm256_maskload_ps(b + p * ldb, m0) : _mm256_loadu_ps(b + p * 16);
    const __m256 b1 =
        kRows ? _mm256_maskload_ps(b + p * ldb + 8, m1) : _mm256_loadu_ps(b + p * 16 + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(kRows ? a + p * lda + r : a + r * lda + p);
      acc0[r] = _mm256_fmadd_ps(x, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(x, b1, acc1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_maskstore_ps(c + r * ldc, m0, acc0[r]);
    _mm256_maskstore_ps(c + r * ldc + 8, m1, acc1[r]);
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                        bool, int64_t, const float*);

// packed_gemm's tiles: 12 rows with AVX-512 (24 accumulators of 32 registers), 6 with AVX2 (12 of
// 16); packed_rows_gemm's: 6 rows of 64 columns with AVX-512, AVX2's 6 rows of 16 otherwise. A
// table by row count for the last, shorter tile.
template <int... R>
constexpr std::array<TileFn, sizeof...(R)> avx512_tiles(std::integer_sequence<int, R...>) {
  return {&tile_avx512<R + 1>...};
}
template <int... R>
constexpr std::array<TileFn, sizeof...(R)> rows64_tiles(std::integer_sequence<int, R...>) {
  return {&tile_rows64_avx512<R + 1>...};
}
template <bool kRows, int... R>
constexpr std::array<TileFn, sizeof...(R)> avx2_tiles(std::integer_sequence<int, R...>) {
  return {&tile_avx2<R + 1, kRows>...};
}
constexpr auto kAvx512Tiles = avx512_tiles(std::make_integer_sequence<int, 12>());
constexpr auto kRows64Tiles = rows64_tiles(std::make_integer_sequence<int, 6>());
template <bool kRows>
constexpr auto kAvx2Tiles = avx2_tiles<kRows>(std::make_integer_sequence<int, 6>());

int64_t tile_rows() { return kIsa == Isa::Avx512 ? 12 : 6; }
template <bool kRows = false>
TileFn tile_for(int64_t rows) {
  if (kIsa != Isa::Avx512) return kAvx2Tiles<kRows>[rows - 1];
  return kRows ? kRows64Tiles[rows - 1] : kAvx512Tiles[rows - 1];
}
// packed_rows_gemm's tile: its rows of W and columns of B.
int64_t rows_tile_rows() { return 6; }
int64_t rows_panel_width() { return kIsa == Isa::Avx512 ? 64 : panel_width(); }

// Rows [r0, r1) of C by panel `panel`, over the whole depth.
void panel_rows(int64_t panel, int64_t r0, int64_t r1, int64_t n, int64_t k, const float* a,
                int64_t lda, const float* packed, const float* bias, float* c, int64_t ldc) {
  const int64_t width = panel_width();
  const int64_t mr = tile_rows();
  const float* b = packed + panel * k * width;
  const int64_t col = panel * width;
  const int64_t cols = std::min(width, n - col);
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - k0);
    for (int64_t r = r0; r < r1; r += mr) {
      const int64_t rows = std::min(mr, r1 - r);
      tile_for(rows)(kc, a + r * lda + k0, lda, b + k0 * width, width, c + r * ldc + col, ldc,
                     k0 > 0, cols, bias != nullptr ? bias + col : nullptr);
    }
  }
}

// Rows [r0, r1) of C through every panel, kRowBlock rows at a time.
void row_blocks(int64_t r0, int64_t r1, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* packed, const float* bias, float* c, int64_t ldc) {
  const int64_t panels = (n + panel_width() - 1) / panel_width();
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    for (int64_t panel = 0; panel < panels; ++panel) {
      panel_rows(panel, rb, std::min(r1, rb + kRowBlock), n, k, a, lda, packed, bias, c, ldc);
    }
  }
}

// The rows each task takes (whole tiles) when `columns` column parts are split over `threads`:
// all of them when there are at least four parts per thread, else as few rows as give each
// thread about four tasks.
int64_t rows_per_task(int64_t m, int64_t columns, unsigned threads, int64_t mr) {
  const int64_t tiles = (m + mr - 1) / mr;
  const int64_t wanted = 4 * static_cast<int64_t>(threads);
  const int64_t parts = columns >= wanted ? 1 : std::min(tiles, (wanted + columns - 1) / columns);
  return (tiles + parts - 1) / parts * mr;
}

// Rows [r0, r1) (whole row blocks of W but the last) by columns [j0, j1) of packed_rows_gemm's
// C, then the epilogue on them.
void rows_task(int64_t r0, int64_t r1, int64_t j0, int64_t j1, int64_t k, const float* packed,
               const float* b, int64_t ldb, const RowsTaps* taps, const float* bias, float* c,
               int64_t ldc, const RowsEpilogue& epilogue) {
  const int64_t width = rows_panel_width(), mr = rows_tile_rows();
  for (int64_t k0 = 0, kc = 0; k0 < k; k0 += kc) {
    // This depth block's rows of B: B's own rows, or, for taps, channels of one tap (a block never
    // spans two taps, whose rows lie at different shifts of the image).
    const float* bk = b + k0 * ldb;
    kc = std::min(kRowsDepth, k - k0);
    if (taps != nullptr) {
      const int64_t tap = k0 / taps->channels, c0 = k0 % taps->channels;
      bk = b + taps->offsets[tap] + c0 * ldb;
      kc = std::min(kRowsDepth, taps->channels - c0);
    }
    for (int64_t j = j0; j < j1; j += width) {
      // The next panel's rows of B, one page apart in an image of a few thousand positions, are
      // fetched while this panel's row blocks run: the first row block of a panel would
      // otherwise wait on each of them (a stall at B's loads in ResNet-50's 1x1 layers). The
      // first 128 bytes of each row: a whole panel with AVX2's 16 columns, half of AVX-512's 64
      // (all four lines of it ran ResNet-50 1.02x and the UNet 1.07x slower on a Zen 4 VM).
      if (j + width < j1) {
        for (int64_t p = 0; p < kc; ++p) {
          const char* next = reinterpret_cast<const char*>(bk + p * ldb + j + width);
          __builtin_prefetch(next);
          __builtin_prefetch(next + 64);
        }
      }
      for (int64_t r = r0; r < r1; r += mr) {
        const int64_t rows = std::min(mr, r1 - r);
        tile_for<true>(rows)(kc, packed + (r / mr) * k * mr + k0 * mr, mr, bk + j, ldb,
                             c + r * ldc + j, ldc, k0 > 0, std::min(width, j1 - j),
                             bias != nullptr && k0 == 0 ? bias + r : nullptr);
      }
    }
  }
  if (epilogue.residual == nullptr && (epilogue.act == nullptr || epilogue.act->none())) return;
  for (int64_t r = r0; r < r1; ++r) {
    float* row = c + r * ldc + j0;
    if (epilogue.residual != nullptr) {
      const float* z = epilogue.residual + r * epilogue.ld + j0;
      for (int64_t j = 0; j < j1 - j0; ++j) row[j] += z[j];
    }
    if (epilogue.act != nullptr) vmath::apply_activation(*epilogue.act, row, j1 - j0);
  }
}

}  // namespace

int64_t packed_rows_size(int64_t m, int64_t k) {
  const int64_t mr = rows_tile_rows();
  return (m + mr - 1) / mr * mr * k;
}

void pack_rows(const float* w, int64_t m, int64_t k, int64_t ld, float* out) {
  const int64_t mr = rows_tile_rows();
  for (int64_t r0 = 0; r0 < m; r0 += mr) {
    float* block = out + (r0 / mr) * k * mr;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t r = 0; r < mr; ++r) block[p * mr + r] = r0 + r < m ? w[(r0 + r) * ld + p] : 0.0f;
    }
  }
}

void packed_rows_gemm(runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k,
                      const float* packed, const float* b, int64_t ldb, const float* bias, float* c,
                      int64_t ldc, const RowsEpilogue& epilogue) {
  packed_rows_gemm_taps(pool, m, n, k, packed, b, ldb, nullptr, bias, c, ldc, epilogue);
}

void packed_rows_gemm_taps(runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k,
                           const float* packed, const float* b, int64_t ldb, const RowsTaps* taps,
                           const float* bias, float* c, int64_t ldc, const RowsEpilogue& epilogue) {
  const unsigned threads = pool_slots(pool);
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t chunks = (n + kRowsColumns - 1) / kRowsColumns;
  if (threads == 1 || work < kParallelWork) {
    for (int64_t t = 0; t < chunks; ++t) {
      rows_task(0, m, t * kRowsColumns, std::min(n, (t + 1) * kRowsColumns), k, packed, b, ldb,
                taps, bias, c, ldc, epilogue);
    }
    return;
  }
  // Tasks of a column chunk each; with few chunks (a small image) W's rows are cut too, in whole
  // row blocks, so that every thread has several tasks to take.
  const int64_t part_rows = rows_per_task(m, chunks, threads, rows_tile_rows());
  const int64_t parts = (m + part_rows - 1) / part_rows;
  parallel_for(pool, parts * chunks, [&](int64_t t, unsigned) {
    const int64_t r0 = (t % parts) * part_rows, j0 = (t / parts) * kRowsColumns;
    rows_task(r0, std::min(m, r0 + part_rows), j0, std::min(n, j0 + kRowsColumns), k, packed, b,
              ldb, taps, bias, c, ldc, epilogue);
  });
}

bool packed_gemm_available() { return kIsa != Isa::None; }

const char* packed_gemm_isa() {
  return kIsa == Isa::Avx512 ? "avx512" : kIsa == Isa::Avx2 ? "avx2" : "";
}

int64_t packed_size(int64_t k, int64_t n) {
  const int64_t width = panel_width();
  return (n + width - 1) / width * width * k;
}

void pack_weights(const float* w, bool trans, int64_t k, int64_t n, int64_t ld, int64_t col,
                  float* out) {
  const int64_t width = panel_width();
  for (int64_t j0 = 0; j0 < n; j0 += width) {
    const int64_t cols = std::min(width, n - j0);
    for (int64_t p = 0; p < k; ++p) {
      float* row = out + (j0 / width) * k * width + p * width;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t column = col + j0 + j;
        row[j] = trans ? w[column * ld + p] : w[p * ld + column];
      }
      std::fill(row + cols, row + width, 0.0f);
    }
  }
}

Status PackedWeights::pack(const runtime::KernelCall& call, const float* w, bool trans, int64_t k,
                           int64_t ld, std::span<const int64_t> splits) {
  if (!packed_gemm_available() || k <= 0) return Status::ok_status();
  uint64_t total = 0;
  for (int64_t cols : splits) total += static_cast<uint64_t>(packed_size(k, cols));
  BATON_TRY(size_buffer(data_, total, call, "packed copy of the weights"));
  BATON_TRY(size_buffer(offsets_, splits.size(), call, "packed weights' offsets"));
  int64_t column = 0, offset = 0;
  for (size_t o = 0; o < splits.size(); ++o) {
    offsets_[o] = offset;
    pack_weights(w, trans, k, splits[o], ld, column, data_.data() + offset);
    offset += packed_size(k, splits[o]);
    column += splits[o];
  }
  return Status::ok_status();
}

void packed_gemm(runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* packed, const float* bias, float* c, int64_t ldc) {
  const int64_t width = panel_width();
  const int64_t panels = (n + width - 1) / width;
  const unsigned threads = pool_slots(pool);
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool blocked = m > kRowBlock && m * k > kBlockedA;
  if (threads == 1 || work < kParallelWork) {
    if (blocked) {
      row_blocks(0, m, n, k, a, lda, packed, bias, c, ldc);
    } else {
      for (int64_t panel = 0; panel < panels; ++panel) {
        panel_rows(panel, 0, m, n, k, a, lda, packed, bias, c, ldc);
      }
    }
    return;
  }
  // Many rows (an image's pixels, a long sequence): tasks of a row block through every panel.
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  if (blocked && blocks >= 4 * static_cast<int64_t>(threads)) {
    parallel_for(pool, blocks, [&](int64_t t, unsigned) {
      row_blocks(t * kRowBlock, std::min(m, (t + 1) * kRowBlock), n, k, a, lda, packed, bias, c,
                 ldc);
    });
    return;
  }
  // Otherwise tasks of one panel each; with few panels (a narrow split of W) the rows are cut
  // too, in whole tiles, so that every thread has several tasks to take.
  const int64_t chunk_rows = rows_per_task(m, panels, threads, tile_rows());
  const int64_t chunks = (m + chunk_rows - 1) / chunk_rows;
  parallel_for(pool, panels * chunks, [&](int64_t t, unsigned) {
    const int64_t panel = t / chunks, r0 = (t % chunks) * chunk_rows;
    panel_rows(panel, r0, std::min(m, r0 + chunk_rows), n, k, a, lda, packed, bias, c, ldc);
  });
}

}  // namespace baton::kernels::cpu
