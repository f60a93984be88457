// ONNX Gemm (opset 13): Y = alpha * A' * B' + beta * C, A' = A or A^T (transA), B' likewise, C
// (optional) broadcast unidirectionally to [M, N]. Float types: OpenBLAS sgemm (float16 and
// bfloat16 through float copies) or dgemm.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm_common.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

struct GemmParams {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 1, ldb = 1;
  double alpha = 1.0, beta = 1.0;
  int64_t c_row_stride = 0, c_col_stride = 0;  // elements; 0 along broadcast dimensions
};

// The call's sizes as BLAS sees them. Row-major leading dimensions are the stored row lengths;
// BLAS wants them >= 1.
GemmParams params(const TensorView& a, const TensorView& b, const runtime::Value* c, bool trans_a,
                  bool trans_b, double alpha, double beta) {
  GemmParams p;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.alpha = alpha;
  p.beta = beta;
  p.m = p.trans_a ? a.sizes[1] : a.sizes[0];
  p.k = p.trans_a ? a.sizes[0] : a.sizes[1];
  p.n = p.trans_b ? b.sizes[0] : b.sizes[1];
  p.lda = std::max<int64_t>(1, a.sizes[1]);
  p.ldb = std::max<int64_t>(1, b.sizes[1]);
  if (c != nullptr) {
    // C is [], [n], [1], [m, n], [m, 1], [1, n] or [1, 1]: a row stride and a column stride.
    const std::span<const int64_t> cs = c->tensor.sizes;
    const int64_t c_rows = cs.size() == 2 ? cs[0] : 1;
    const int64_t c_cols = cs.empty() ? 1 : cs.back();
    p.c_row_stride = c_rows == 1 ? 0 : c_cols;
    p.c_col_stride = c_cols == 1 ? 0 : 1;
  }
  return p;
}

template <typename S>
class GemmKernel final : public runtime::Kernel {
  using W = blas_t<S>;
  static constexpr bool kDirect = std::is_same_v<S, W>;

 public:
  GemmKernel(const runtime::Value* a, const runtime::Value* b, const runtime::Value* c,
             runtime::Value* y, const GemmParams& p, runtime::ThreadPool* pool)
      : a_(a), b_(b), c_(c), y_(y), p_(p), pool_(pool) {}

  // Dynamic shapes: every size follows A, B and C again (GEMM scratch and conversion buffers were
  // reserved at the largest).
  Status resize() override {
    p_ = params(a_->tensor, b_->tensor, c_, p_.trans_a, p_.trans_b, p_.alpha, p_.beta);
    return Status::ok_status();
  }

  Status reserve(const runtime::KernelCall& call) {
    if constexpr (!kDirect) {
      BATON_TRY(call.reserve_scratch<W>(a_buffer_, a_->tensor.numel(), "float copy of A"));
      BATON_TRY(call.reserve_scratch<W>(b_buffer_, b_->tensor.numel(), "float copy of B"));
      BATON_TRY(call.reserve_scratch<W>(y_buffer_, static_cast<uint64_t>(p_.m * p_.n),
                                        "float copy of Y"));
    }
    return call.reserve_scratch<W>(
        scratch_,
        call.dynamic ? gemm_scratch_bound(p_.trans_a, p_.trans_b, p_.m, p_.n, p_.k)
                     : gemm_scratch(p_.trans_a, p_.trans_b, p_.m, p_.n, p_.k),
        "GEMM scratch");
  }

  Status run() override {
    const int64_t m = p_.m, n = p_.n;
    if (m == 0 || n == 0) return Status::ok_status();
    W* y = kDirect ? reinterpret_cast<W*>(y_->tensor.data) : y_buffer_.data<W>();
    if (c_ != nullptr) {
      // Y = beta * C first, then the GEMM accumulates into it (beta = 1).
      const S* c = c_->tensor.data_as<const S>();
      const W beta = static_cast<W>(p_.beta);
      for (int64_t i = 0; i < m; ++i) {
        const S* ci = c + i * p_.c_row_stride;
        W* yi = y + i * n;
        if (p_.c_col_stride == 1) {
          for (int64_t j = 0; j < n; ++j) yi[j] = beta * static_cast<W>(load(ci[j]));
        } else {
          const W cv = beta * static_cast<W>(load(ci[0]));
          for (int64_t j = 0; j < n; ++j) yi[j] = cv;
        }
      }
    }
    if (p_.k == 0) {  // an empty sum; BLAS would reject lda = 0
      if (c_ == nullptr) std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(W));
    } else {
      const W* a = as_blas<S>(a_->tensor, a_buffer_);
      const W* b = as_blas<S>(b_->tensor, b_buffer_);
      parallel_gemm<W>(pool_, p_.trans_a, p_.trans_b, m, n, p_.k, static_cast<W>(p_.alpha), a,
                       p_.lda, b, p_.ldb, c_ != nullptr ? W(1) : W(0), y, n, scratch_.data<W>());
    }
    if constexpr (!kDirect) convert<float, S>(y, y_->tensor.data_as<S>(), m * n);
    return Status::ok_status();
  }

 private:
  const runtime::Value* a_;
  const runtime::Value* b_;
  const runtime::Value* c_;  // nullptr without C
  runtime::Value* y_;
  GemmParams p_;
  runtime::ThreadPool* pool_;
  runtime::ScratchRef a_buffer_, b_buffer_, y_buffer_;  // float16 / bfloat16 only
  runtime::ScratchRef scratch_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& a = call.input(0);
  const TensorView& b = call.input(1);
  const runtime::Value* c = call.has_input(2) ? call.inputs[2] : nullptr;
  const GemmParams p = params(a, b, c, call.attr_int("transA") != 0, call.attr_int("transB") != 0,
                              call.attr_float("alpha"), call.attr_float("beta"));
  BATON_TRY(check_blas_range(call, p.m, p.n, p.k));
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(a.dtype, [&]<typename S>() {
    kernel = with_scratch(std::make_unique<GemmKernel<S>>(call.inputs[0], call.inputs[1], c,
                                                          call.outputs[0], p, call.pool),
                          call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, a.dtype);
  return kernel;
}

}  // namespace

void register_gemm(runtime::KernelRegistry& registry) {
  registry.add({"Gemm", "", {{"T", ops::kFloatTypes}}, &create});
}

}  // namespace baton::kernels::cpu
