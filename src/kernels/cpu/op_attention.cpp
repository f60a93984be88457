// Baton's Attention (ops/attention.cpp) on the CPU: per batch (the leading dimensions) and tile
// of query rows (in parallel over the Method's threads), S = scale Q K^T by OpenBLAS into a
// [rows, Sk] buffer, the mask added or selected, a row softmax (NaN rows set to 0 when
// nan_to_zero), then Y = P V. A tile holds at most 64K scores, so the buffers do not grow with
// Sq * Sk. float16 and bfloat16 go through float copies; every buffer is sized at create, and a
// size the host cannot hold is an OutOfMemory error naming the node.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm_common.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

struct AttentionShape {
  int64_t batches = 0, sq = 0, sk = 0, d = 0, dv = 0;
  bool k_transposed = false;
  double scale = 1.0;
  int mask = 0;  // 0 none, 1 add, 2 select
  double fill = 0.0;
  bool nan_to_zero = false;
  // The mask's element strides along the scores' dimensions (0 where it broadcasts); the last
  // two are the row and column strides, the rest walk the batches.
  std::vector<int64_t> batch_sizes, mask_batch_strides;
  int64_t mask_row_stride = 0, mask_col_stride = 0;
};

// `s`'s sizes and mask strides from Q, K, V and the mask (null when none) as they are now; its
// vectors already hold one entry per batch dimension.
void size_attention(const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView* mask, AttentionShape& s) {
  const size_t r = q.sizes.size();
  s.sq = q.sizes[r - 2];
  s.d = q.sizes[r - 1];
  s.sk = s.k_transposed ? k.sizes[r - 1] : k.sizes[r - 2];
  s.dv = v.sizes[r - 1];
  std::copy(q.sizes.begin(), q.sizes.end() - 2, s.batch_sizes.begin());
  s.batches = product(q.sizes, 0, r - 2);
  if (mask == nullptr) return;
  // Right-aligned against the scores [..., Sq, Sk]: contiguous strides, 0 where size 1.
  const std::span<const int64_t> m = mask->sizes;
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (size_t i = 0; i < m.size(); ++i) {
    const size_t md = m.size() - 1 - i, sd = r - 1 - i;
    strides[sd] = m[md] == 1 ? 0 : stride;
    stride *= m[md];
  }
  for (size_t i = 0; i + 2 < r; ++i) s.mask_batch_strides[i] = strides[i];
  s.mask_row_stride = strides[r - 2];
  s.mask_col_stride = strides[r - 1];
}

template <typename S>
class AttentionKernel final : public runtime::Kernel {
  using W = blas_t<S>;
  static constexpr bool kDirect = std::is_same_v<S, W>;

 public:
  AttentionKernel(const runtime::KernelCall& call, AttentionShape s)
      : q_(call.inputs[0]),
        k_(call.inputs[1]),
        v_(call.inputs[2]),
        mask_(call.has_input(3) ? call.inputs[3] : nullptr),
        y_(call.outputs[0]),
        s_(std::move(s)),
        pool_(call.pool),
        tile_(row_tile(s_.sq, s_.sk)),
        // Dynamic: a tile at smaller sizes may hold more scores than the created one (whole rows
        // of up to kTileScores), and a smaller GEMM may need scratch the created one does not:
        // the most any sizes up to the created ones ask for.
        scores_per_slot_(static_cast<size_t>(
            call.dynamic ? std::max(s_.sk, std::min(s_.sq * s_.sk, kTileScores)) : tile_ * s_.sk)),
        scratch_per_slot_(call.dynamic
                              ? std::max(s_.k_transposed
                                             ? gemm_scratch_bound(false, false, s_.sq, s_.sk, s_.d)
                                             : size_t{0},
                                         gemm_scratch_bound(false, false, s_.sq, s_.dv, s_.sk))
                              : std::max(gemm_scratch(false, !s_.k_transposed, tile_, s_.sk, s_.d),
                                         gemm_scratch(false, false, tile_, s_.dv, s_.sk))) {
    follow();  // records the sizes s_ and tile_ were made for
  }

  // Batch, query and key lengths may change (every dimension may): the tiles are cut again, as a
  // kernel created at the new sizes cuts them, within the scratch reserved for the largest.
  // run() does so when the sizes changed (PlannedSizes), so the runtime does not resize it.
  Status resize() override {
    follow();
    return Status::ok_status();
  }
  bool follows_sizes() const override { return true; }

  // s_ and tile_ for the current sizes, computed again only when they changed.
  void follow() {
    const std::span<const int64_t> mask = mask_ ? mask_->tensor.sizes : std::span<const int64_t>();
    if (planned_.changed({q_->tensor.sizes, k_->tensor.sizes, v_->tensor.sizes, mask})) {
      size_attention(q_->tensor, k_->tensor, v_->tensor, mask_ ? &mask_->tensor : nullptr, s_);
      tile_ = row_tile(s_.sq, s_.sk);
    }
  }

  // The scratch, reserved once at create: each thread of the pool gets the scores of one tile of
  // query rows and the GEMMs' scratch; float16 and bfloat16 get float copies of the operands.
  Status reserve(const runtime::KernelCall& call) {
    const uint64_t slots = pool_slots(pool_);
    BATON_TRY(call.reserve_scratch<W>(scores_, scores_per_slot_, "attention scores", slots));
    BATON_TRY(call.reserve_scratch<W>(scratch_, scratch_per_slot_, "GEMM scratch", slots));
    if constexpr (!kDirect) {
      BATON_TRY(call.reserve_scratch<W>(q_buffer_, q_->tensor.numel(), "float copy of Q"));
      BATON_TRY(call.reserve_scratch<W>(k_buffer_, k_->tensor.numel(), "float copy of K"));
      BATON_TRY(call.reserve_scratch<W>(v_buffer_, v_->tensor.numel(), "float copy of V"));
      BATON_TRY(call.reserve_scratch<W>(y_buffer_, y_->tensor.numel(), "float copy of Y"));
    }
    return Status::ok_status();
  }

  // Query rows per tile: the scores of a tile hold at most kTileScores values, so the scratch does
  // not grow with Sq * Sk (sequence 131072 asked for 64 GiB per thread when whole rows x columns
  // were kept); at least one row. Each row's softmax needs its whole row of Sk scores, so a tile
  // is whole rows.
  static constexpr int64_t kTileScores = int64_t{1} << 16;
  static int64_t row_tile(int64_t sq, int64_t sk) {
    return std::max<int64_t>(1, std::min(sq, kTileScores / std::max<int64_t>(sk, 1)));
  }

  Status run() override {
    follow();
    const int64_t sq = s_.sq, sk = s_.sk, d = s_.d, dv = s_.dv;
    if (s_.batches == 0 || sq == 0 || dv == 0) return Status::ok_status();
    const W* q = as_blas<S>(q_->tensor, q_buffer_);
    const W* k = as_blas<S>(k_->tensor, k_buffer_);
    const W* v = as_blas<S>(v_->tensor, v_buffer_);
    W* y = kDirect ? reinterpret_cast<W*>(y_->tensor.data) : y_buffer_.data<W>();
    // Work items are (batch, tile of query rows); each row's result depends on its row alone.
    const int64_t tiles = (sq + tile_ - 1) / tile_;
    parallel_for(pool_, s_.batches * tiles, [&](int64_t item, unsigned slot) {
      const int64_t b = item / tiles;
      const int64_t row0 = (item % tiles) * tile_;
      const int64_t rows = std::min(tile_, sq - row0);
      W* sc = scores_.data<W>(slot);
      W* scratch = scratch_.data<W>(slot);
      if (d == 0 || sk == 0) {
        std::fill(sc, sc + rows * sk, W(0));
      } else {
        gemm<W>(false, !s_.k_transposed, rows, sk, d, static_cast<W>(s_.scale),
                q + (b * sq + row0) * d, d, k + b * sk * d, s_.k_transposed ? sk : d, W(0), sc, sk,
                scratch);
      }
      if (mask_) apply_mask(sc, mask_base(b), row0, rows);
      softmax_rows(sc, rows);
      W* yb = y + (b * sq + row0) * dv;
      if (sk == 0) {
        std::fill(yb, yb + rows * dv, W(0));
      } else {
        gemm<W>(false, false, rows, dv, sk, W(1), sc, sk, v + b * sk * dv, dv, W(0), yb, dv,
                scratch);
      }
    });
    if constexpr (!kDirect) convert<float, S>(y, y_->tensor.data_as<S>(), y_->tensor.numel());
    return Status::ok_status();
  }

 private:
  // The mask's element offset for batch b (row-major over batch_sizes).
  int64_t mask_base(int64_t b) const {
    int64_t base = 0;
    for (size_t i = s_.batch_sizes.size(); i-- > 0;) {
      base += (b % s_.batch_sizes[i]) * s_.mask_batch_strides[i];
      b /= s_.batch_sizes[i];
    }
    return base;
  }

  // v rounded to the storage type and back.
  static compute_t<S> rounded(W v) { return load(store<S>(static_cast<compute_t<S>>(v))); }

  // Rows [row0, row0 + rows) of the scores, held from sc on.
  void apply_mask(W* sc, int64_t base, int64_t row0, int64_t rows) const {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = base + (row0 + i) * s_.mask_row_stride;
      W* r = sc + i * s_.sk;
      if (s_.mask == 1) {
        const S* m = mask_->tensor.data_as<const S>();
        for (int64_t j = 0; j < s_.sk; ++j) {
          // What the MatMul and the Add it replaces stored: each result in the storage type.
          const compute_t<S> sum = rounded(r[j]) + load(m[row + j * s_.mask_col_stride]);
          r[j] = static_cast<W>(rounded(static_cast<W>(sum)));
        }
      } else {
        // Any nonzero byte keeps the score (a bool tensor's bytes are not trusted to be 0 or 1).
        const uint8_t* m = mask_->tensor.data_as<const uint8_t>();
        for (int64_t j = 0; j < s_.sk; ++j) {
          if (!m[row + j * s_.mask_col_stride]) r[j] = static_cast<W>(s_.fill);
        }
      }
    }
  }

  void softmax_rows(W* sc, int64_t rows) const {
    for (int64_t i = 0; i < rows; ++i) {
      W* r = sc + i * s_.sk;
      W m = -std::numeric_limits<W>::infinity();
      for (int64_t j = 0; j < s_.sk; ++j) m = std::max(m, r[j]);
      double sum = 0.0;
      for (int64_t j = 0; j < s_.sk; ++j) {
        r[j] = std::exp(r[j] - m);
        sum += r[j];
      }
      const W inv = static_cast<W>(1.0 / sum);
      for (int64_t j = 0; j < s_.sk; ++j) {
        // The Softmax it replaces stored P in the storage type.
        W p = static_cast<W>(rounded(r[j] * inv));
        if (s_.nan_to_zero && std::isnan(p)) p = W(0);
        r[j] = p;
      }
    }
  }

  const runtime::Value* q_;
  const runtime::Value* k_;
  const runtime::Value* v_;
  const runtime::Value* mask_;
  runtime::Value* y_;
  PlannedSizes<4> planned_;  // the sizes s_ and tile_ were computed for
  AttentionShape s_;
  runtime::ThreadPool* pool_;
  int64_t tile_;  // query rows per work item
  size_t scores_per_slot_, scratch_per_slot_;
  runtime::ScratchRef scores_, scratch_;                           // per thread of the pool
  runtime::ScratchRef q_buffer_, k_buffer_, v_buffer_, y_buffer_;  // float16 / bfloat16 only
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& q = call.input(0);
  const size_t r = q.sizes.size();
  AttentionShape s;
  s.k_transposed = call.attr_int("k_transposed") != 0;
  s.batch_sizes.assign(r - 2, 0);
  s.mask_batch_strides.assign(r - 2, 0);
  s.scale = call.attr_float("scale");
  const std::string_view kind = call.attr_string("mask_kind");
  s.mask = kind == "add" ? 1 : kind == "select" ? 2 : 0;
  s.fill = call.attr_float("mask_fill");
  s.nan_to_zero = call.attr_int("nan_to_zero") != 0;
  size_attention(q, call.input(1), call.input(2), s.mask ? &call.input(3) : nullptr, s);
  BATON_TRY(check_blas_range(call, s.sq, std::max(s.sk, s.dv), std::max(s.d, s.sk)));
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(q.dtype, [&]<typename S>() {
    kernel = with_scratch(std::make_unique<AttentionKernel<S>>(call, std::move(s)), call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, q.dtype);
  return kernel;
}

}  // namespace

void register_attention(runtime::KernelRegistry& registry) {
  registry.add({"Attention", "baton", {{"T", ops::kFloatTypes}}, &create});
}

}  // namespace baton::kernels::cpu
