// Baton's Linear (ops/linear.cpp): Y = X W + B as one GEMM per output, each writing its own
// output; the bias and the activation (the fuse-linear pass's Relu or Gelu) are applied after,
// row by row while the row is in cache (the packed kernel below starts its sums from the bias
// instead, leaving only the activation).
//
// A float32 Linear whose W is a constant of the program (a model's weights) packs W once at
// create and multiplies with packed_gemm.h's kernels, on CPUs that have them (AVX2 or AVX-512):
// OpenBLAS would pack W again on every call, which at a few rows costs as much as the product
// (8 x 1024 x 1024: 193 us against OpenBLAS's 555 us on this project's VM). The packed copy is
// as large as W. Otherwise (other types, a W computed by the graph, an older CPU) one OpenBLAS
// GEMM per output reads its columns of W in place (ldb = N).
#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm_common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/vector_math.h"
#include "ops/activation.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

template <typename S>
class LinearKernel final : public runtime::Kernel {
  using W = blas_t<S>;
  static constexpr bool kDirect = std::is_same_v<S, W>;

 public:
  LinearKernel(const runtime::KernelCall& call, int64_t m, int64_t k, int64_t n,
               std::vector<int64_t> splits, bool trans_w, ops::Activation act)
      : x_(call.inputs[0]),
        w_(call.inputs[1]),
        b_(call.has_input(2) ? call.inputs[2] : nullptr),
        outputs_(call.outputs.begin(), call.outputs.end()),
        m_(m),
        k_(k),
        n_(n),
        splits_(std::move(splits)),
        trans_w_(trans_w),
        act_(std::move(act)),
        pool_(call.pool) {}

  // A constant float32 W packed for packed_gemm (see the file comment).
  Status pack(const runtime::KernelCall& call) {
    if constexpr (std::is_same_v<S, float>) {
      if (call.input_is_constant(1)) {
        return packed_.pack(call, w_->tensor.data_as<const float>(), trans_w_, k_,
                            trans_w_ ? k_ : n_, splits_);
      }
    }
    return Status::ok_status();
  }

  // Dynamic shapes: the rows of X (everything but its last axis) may change; K and N are W's.
  // run() takes the row count from X.
  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

  Status reserve(const runtime::KernelCall& call) {
    size_t scratch = 0;
    if (!packed_.empty()) return Status::ok_status();  // the packed path needs none
    for (int64_t s : splits_) {
      scratch = std::max(scratch, call.dynamic ? gemm_scratch_bound(false, trans_w_, m_, s, k_)
                                               : gemm_scratch(false, trans_w_, m_, s, k_));
    }
    BATON_TRY(call.reserve_scratch<W>(scratch_, scratch, "GEMM scratch"));
    if constexpr (!kDirect) {
      BATON_TRY(
          call.reserve_scratch<W>(x_buffer_, static_cast<uint64_t>(m_ * k_), "float copy of X"));
      BATON_TRY(
          call.reserve_scratch<W>(w_buffer_, static_cast<uint64_t>(k_ * n_), "float copy of W"));
      int64_t widest = 0;
      for (int64_t s : splits_) widest = std::max(widest, s);
      BATON_TRY(call.reserve_scratch<W>(y_buffer_, static_cast<uint64_t>(m_ * widest),
                                        "float copy of an output"));
    }
    return Status::ok_status();
  }

  uint64_t held_bytes() const override { return packed_.bytes(); }

  Status run() override {
    m_ = product(x_->tensor.sizes, 0, x_->tensor.sizes.size() - 1);  // dynamic shapes
    if (m_ == 0 || n_ == 0) return Status::ok_status();
    const W* x = k_ > 0 ? as_blas<S>(x_->tensor, x_buffer_) : nullptr;
    const W* w = k_ > 0 ? as_blas<S>(w_->tensor, w_buffer_) : nullptr;
    const S* bias = b_ ? b_->tensor.data_as<const S>() : nullptr;
    int64_t column = 0;
    for (size_t o = 0; o < splits_.size(); ++o) {
      const int64_t cols = splits_[o];
      W* y = kDirect ? reinterpret_cast<W*>(outputs_[o]->tensor.data) : y_buffer_.data<W>();
      if (cols > 0) {
        // Whether the product's sums started from the bias (the packed kernel's way).
        bool biased = false;
        if (k_ == 0) {
          std::fill(y, y + m_ * cols, W(0));
        } else if (run_packed(o, cols, x, bias != nullptr ? bias + column : nullptr, y)) {
          biased = true;
        } else {
          // W [K, N]: the columns start `column` into each row; W [N, K] (transW): rows.
          parallel_gemm<W>(pool_, false, trans_w_, m_, cols, k_, W(1), x, k_,
                           trans_w_ ? w + column * k_ : w + column, trans_w_ ? k_ : n_, W(0), y,
                           cols, scratch_.data<W>());
        }
        const S* row_bias = biased ? nullptr : bias;
        if (kDirect && row_bias == nullptr && act_.none()) {
          column += cols;
          continue;  // nothing left to do to the rows
        }
        S* out = outputs_[o]->tensor.data_as<S>();
        // The rows on the pool, a few thousand elements a task: an erf GELU over BERT's
        // 128 x 3072 hidden values on one thread took longer than the GEMM itself.
        const int64_t rows_per_task = std::max<int64_t>(1, kEpilogueTaskElements / cols);
        parallel_for(pool_, (m_ + rows_per_task - 1) / rows_per_task, [&](int64_t t, unsigned) {
          for (int64_t r = t * rows_per_task; r < std::min(m_, (t + 1) * rows_per_task); ++r) {
            W* row = y + r * cols;
            if (row_bias) {
              for (int64_t j = 0; j < cols; ++j) {
                row[j] += static_cast<W>(load(row_bias[column + j]));
              }
            }
            vmath::apply_activation(act_, row, cols);
            if constexpr (!kDirect) {
              for (int64_t j = 0; j < cols; ++j) out[r * cols + j] = store<S>(row[j]);
            }
          }
        });
      }
      column += cols;
    }
    return Status::ok_status();
  }

 private:
  static constexpr int64_t kEpilogueTaskElements = 8192;

  // Output o's product through the packed W plus `bias` (its columns; may be null), when W was
  // packed.
  bool run_packed(size_t o, int64_t cols, const W* x, const S* bias, W* y) {
    if constexpr (std::is_same_v<S, float>) {
      if (packed_.empty()) return false;
      packed_gemm(pool_, m_, cols, k_, x, k_, packed_.block(o), bias, y, cols);
      return true;
    } else {
      return false;
    }
  }

  const runtime::Value* x_;
  const runtime::Value* w_;
  const runtime::Value* b_;
  std::vector<runtime::Value*> outputs_;
  int64_t m_, k_, n_;
  std::vector<int64_t> splits_;
  bool trans_w_;
  ops::Activation act_;
  runtime::ThreadPool* pool_;
  runtime::ScratchRef scratch_;
  runtime::ScratchRef x_buffer_, w_buffer_, y_buffer_;  // float16 / bfloat16 only
  // W packed at create (float32, constant W, a CPU with the packed kernels), a block per
  // output. Empty: OpenBLAS reads W in place.
  PackedWeights packed_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const TensorView& w = call.input(1);
  const bool trans_w = call.attr_int("transW") != 0;
  const int64_t k = w.sizes[trans_w ? 1 : 0], n = w.sizes[trans_w ? 0 : 1];
  const int64_t m = product(x.sizes, 0, x.sizes.size() - 1);
  const std::span<const int64_t> bound = call.attr_ints("splits");
  std::vector<int64_t> splits(bound.begin(), bound.end());
  if (splits.empty()) splits = {n};
  BATON_TRY(check_blas_range(call, m, n, k));
  BATON_ASSIGN_OR_RETURN(
      ops::Activation act,
      ops::make_activation(call.attr_string("activation"), call.attr_floats("activation_params"),
                           call.describe()));
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(x.dtype, [&]<typename S>() {
    auto linear = std::make_unique<LinearKernel<S>>(call, m, k, n, std::move(splits), trans_w, act);
    reserved = linear->pack(call);
    if (reserved.ok()) kernel = with_scratch(std::move(linear), call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_linear(runtime::KernelRegistry& registry) {
  registry.add({"Linear", "baton", {{"T", ops::kFloatTypes}}, &create});
}

}  // namespace baton::kernels::cpu
