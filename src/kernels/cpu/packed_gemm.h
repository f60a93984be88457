// A float GEMM whose right-hand matrix is packed once, at load, for a product with a constant
// weight matrix (Linear's W): Y[m, n] = X[m, k] * W[k, n] (or W[n, k] transposed).
//
// Why: OpenBLAS packs B into its own panel layout on every call. For the GEMMs of a model with few
// rows (a batch-8 MLP, one token, BERT-small's 64 rows) that packing is as long as the product
// itself: a 4 x 1024 MLP at batch 8 ran 2.2x slower than onnxruntime, whose MLAS packs its
// weights once at load (bench/RESULTS.md, "oneDNN's matmul against OpenBLAS"). oneDNN's matmul
// with weights reordered once measured 2.5-2.8x faster there, but its execute() allocates (five
// heap allocations a call in oneDNN 2.6, its argument map), and execute() must not; so Baton packs
// W itself and multiplies with a small register-tiled kernel.
//
// Layout: W is cut into panels of kPanel columns (32 with AVX-512, 16 with AVX2); a panel holds
// its k rows one after the other, kPanel floats each, the columns past n zero. The kernel keeps a
// tile of rows x kPanel outputs in registers, reads X in place (broadcasting one element at a
// time) and the panel as it is stored, a block of kDepth rows of it at a time so that the block
// stays in the L1 cache while the row tiles of X pass over it; an X larger than 1 MB goes 120 rows
// at a time through every panel, so that those rows stay in the L2 cache while the panels pass.
//
// Only CPUs with AVX2 and FMA (x86-64-v3) or AVX-512 (x86-64-v4) have these kernels; elsewhere
// packed_gemm_available() is false and the kernels keep OpenBLAS. Every output element is one
// chain of fused multiply-adds over k in order, whatever the thread count and the tile it falls
// in, so the bits are the same at 1 and N threads (not the bits of OpenBLAS's product).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "baton/core/error.h"
#include "ops/activation.h"
#include "runtime/thread_pool.h"

namespace baton::runtime {
struct KernelCall;
}

namespace baton::kernels::cpu {

// Whether this CPU has the packed kernels, and which ("avx512", "avx2"; "" when none).
bool packed_gemm_available();
const char* packed_gemm_isa();

// Floats a packed copy of a k x n matrix takes.
int64_t packed_size(int64_t k, int64_t n);

// Packs columns [col, col + n) of W: W is [k, ld] row-major (trans false: element (p, j) at
// w[p * ld + j]) or [*, ld] holding W^T (trans true: element (p, j) at w[j * ld + p]). `out` holds
// packed_size(k, n) floats.
void pack_weights(const float* w, bool trans, int64_t k, int64_t n, int64_t ld, int64_t col,
                  float* out);

// C[m, n] = bias[n] + A[m, k] * packed (k, n): A row-major with leading dimension lda, C with
// ldc; bias (n floats, broadcast over the rows) may be null. The sums start from the bias, so it
// costs no pass of its own. Split over `pool` (null: the calling thread) by blocks of 120 rows
// when X is large, else by panels of columns, and by rows too when there are few panels.
// Allocates nothing. k > 0.
void packed_gemm(runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* packed, const float* bias, float* c, int64_t ldc);

// The same kernels with the roles of the operands swapped, for a convolution's GEMM, whose
// constant weight is the left operand: Y [m, n] = W [m, k] x X [k, n] with X an image's channels
// by its positions (or im2col's columns), read in place. W is packed by blocks of 6 rows (with
// AVX-512 and AVX2): block i holds rows [i * h, i * h + h) as k groups of h floats, rows past m
// zero.
int64_t packed_rows_size(int64_t m, int64_t k);
void pack_rows(const float* w, int64_t m, int64_t k, int64_t ld, float* out);

// What packed_rows_gemm applies to each part of C once its sums are complete, while the part is
// still in cache: C += residual (null: none; leading dimension ld), then the activation (null or
// none: none).
struct RowsEpilogue {
  const float* residual = nullptr;
  int64_t ld = 0;
  const ops::Activation* act = nullptr;
};

// C[m, n] = bias[m] + packed (m, k) x B[k, n], B row-major with leading dimension ldb, C with
// ldc, bias (m floats, one per row) may be null; then the epilogue. Split over `pool` (null: the
// calling thread) by chunks of 256 columns, and by row blocks too when there are few chunks. The
// same bits on every thread count. Allocates nothing. k > 0.
void packed_rows_gemm(runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k,
                      const float* packed, const float* b, int64_t ldb, const float* bias, float* c,
                      int64_t ldc, const RowsEpilogue& epilogue);

// B as the taps of a stride-1 convolution over a zero-padded image, an im2col that is never
// written: the depth is taps x channels, tap-major, and B's row (t, c) is channel c's plane (ldb
// floats apart) read from offsets[t] floats on. The columns are the image's positions in its
// padded width, so each output row has (padded width - output width) columns past its end that
// the caller drops. W's columns must be packed in the same tap-major order.
struct RowsTaps {
  const int64_t* offsets = nullptr;  // one per tap
  int64_t channels = 0;
};
// packed_rows_gemm with k = taps x channels and B as `taps` describes (null: B itself).
void packed_rows_gemm_taps(runtime::ThreadPool* pool, int64_t m, int64_t n, int64_t k,
                           const float* packed, const float* b, int64_t ldb, const RowsTaps* taps,
                           const float* bias, float* c, int64_t ldc, const RowsEpilogue& epilogue);

// A kernel's constant weight packed for packed_gemm at create, one block per output (Linear's
// splits; a MatMul has one), so that no panel straddles two outputs.
class PackedWeights {
 public:
  // Packs W [k, ld] (trans: [*, ld] holding W^T) into one block per entry of `splits`, their
  // columns in order, when this CPU has the packed kernels and k > 0 (else leaves it empty: the
  // kernel keeps OpenBLAS). A copy the host cannot hold is an OutOfMemory error naming `call`'s
  // node, never a std::bad_alloc.
  Status pack(const runtime::KernelCall& call, const float* w, bool trans, int64_t k, int64_t ld,
              std::span<const int64_t> splits);
  bool empty() const { return offsets_.empty(); }
  uint64_t bytes() const { return data_.size() * sizeof(float); }
  // Output o's block (pack succeeded and was not empty).
  const float* block(size_t o) const { return data_.data() + offsets_[o]; }

 private:
  std::vector<float> data_;
  std::vector<int64_t> offsets_;
};

}  // namespace baton::kernels::cpu
