// ONNX MatMul (opset 13): numpy.matmul on float types (ops/matmul.cpp infers the shapes). Each
// batch is one OpenBLAS GEMM; a batch of A against one shared B is a single tall GEMM. resize()
// plans the batches again at the new sizes, in offset tables and scratch sized at create.
// A float32 B that is a 2-D constant of the program (a Linear without bias, as LLaMA's and T5's
// projections and GPT-2's tied output layer export) is packed at create and multiplied by
// packed_gemm.h's kernels, as op_linear.cpp does.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/gemm_common.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_gemm.h"
#include "ops/matmul.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  // Element offsets of batch i's matrices; one entry with m = all rows when every batch of A is
  // multiplied by the same B. Their capacity is reserved at create for the largest batch count.
  std::vector<int64_t> a_offsets, b_offsets;
};

// The plan at `a`, `b` and `y`'s current sizes, in `p`'s vectors, whose capacity must hold the
// batch count (then nothing is allocated).
Status plan_matmul(const TensorView& a, const TensorView& b, const TensorView& y, MatMulPlan& p) {
  const ops::MatMulShape s = ops::matmul_shape(a.sizes, b.sizes);
  // The output's batch dimensions are its leading ones.
  const std::span<const int64_t> out = y.sizes;
  const size_t batch_rank = out.size() - (a.rank() >= 2 ? 1 : 0) - (b.rank() >= 2 ? 1 : 0);
  const std::span<const int64_t> batch = out.first(batch_rank);
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.a_offsets.clear();
  p.b_offsets.clear();
  // An empty output computes nothing: no table of per-batch offsets, which for 2^40 batches of
  // empty matrices would be terabytes.
  if (y.numel() == 0) return Status::ok_status();
  const int64_t batches = product(batch);
  if (static_cast<uint64_t>(batches) > p.a_offsets.capacity()) {
    return Status(Error::Internal, "MatMul: more batches than the kernel was created for");
  }
  if (product(s.b_batch) == 1 && product(s.a_batch) == batches) {
    // One B for every batch and A's batches laid out like the output's: A is one tall
    // [batches * M, K] matrix and a single GEMM does the whole product.
    p.m = batches * s.m;
    p.a_offsets.push_back(0);
    p.b_offsets.push_back(0);
  } else {
    const auto walk = make_broadcast_plan<2>(batch, {s.a_batch, s.b_batch});
    const int64_t a_step = s.m * s.k, b_step = s.k * s.n;
    for_each_broadcast_row<2>(walk, [&](int64_t, const std::array<int64_t, 2>& in, int64_t n) {
      for (int64_t e = 0; e < n; ++e) {
        p.a_offsets.push_back((in[0] + e * walk.strides[0][walk.rank - 1]) * a_step);
        p.b_offsets.push_back((in[1] + e * walk.strides[1][walk.rank - 1]) * b_step);
      }
    });
  }
  return Status::ok_status();
}

// At resize() every dimension may change (batch, sequence, heads; the contraction too).
template <typename S>
class MatMulKernel final : public runtime::Kernel {
  using W = blas_t<S>;
  static constexpr bool kDirect = std::is_same_v<S, W>;

 public:
  MatMulKernel(const runtime::Value* a, const runtime::Value* b, runtime::Value* y, MatMulPlan p,
               int64_t rows, runtime::ThreadPool* pool)
      : a_(a), b_(b), y_(y), p_(std::move(p)), rows_(rows), pool_(pool) {}

  // Packs a constant 2-D B (see the file comment); the kernel then needs no GEMM scratch.
  Status pack(const runtime::KernelCall& call) {
    if constexpr (std::is_same_v<S, float>) {
      const TensorView& b = b_->tensor;
      if (call.input_is_constant(1) && b.rank() == 2) {
        const int64_t n = b.sizes[1];
        return packed_.pack(call, b.data_as<const float>(), false, b.sizes[0], n,
                            std::span<const int64_t>(&n, 1));
      }
    }
    return Status::ok_status();
  }

  Status reserve(const runtime::KernelCall& call) {
    if (!packed_.empty()) return Status::ok_status();
    if constexpr (!kDirect) {
      BATON_TRY(call.reserve_scratch<W>(a_buffer_, a_->tensor.numel(), "float copy of A"));
      BATON_TRY(call.reserve_scratch<W>(b_buffer_, b_->tensor.numel(), "float copy of B"));
      BATON_TRY(call.reserve_scratch<W>(y_buffer_, y_->tensor.numel(), "float copy of Y"));
    }
    // One GEMM scratch per thread: batches run as parallel tasks. Batches of their own GEMM
    // (p_.m rows each) may take OpenBLAS's small-GEMM path, which copies B, where one tall GEMM
    // of all rows_ would not: the scratch covers both.
    const size_t scratch = call.dynamic ? gemm_scratch_bound(false, false, rows_, p_.n, p_.k)
                                        : std::max(gemm_scratch(false, false, rows_, p_.n, p_.k),
                                                   gemm_scratch(false, false, p_.m, p_.n, p_.k));
    return call.reserve_scratch<W>(scratch_, scratch, "GEMM scratch", pool_slots(pool_));
  }

  // Sizes only shrink, so the batch count fits the offsets' capacity, and the GEMMs the scratch
  // bound.
  Status resize() override { return plan_matmul(a_->tensor, b_->tensor, y_->tensor, p_); }

  uint64_t held_bytes() const override { return packed_.bytes(); }

  Status run() override {
    const int64_t batches = static_cast<int64_t>(p_.a_offsets.size());
    const int64_t mn = p_.m * p_.n;
    if (mn == 0 || batches == 0) return Status::ok_status();
    W* y = kDirect ? reinterpret_cast<W*>(y_->tensor.data) : y_buffer_.data<W>();
    if (p_.k == 0) {  // an empty sum; BLAS would reject lda = 0
      std::memset(y, 0, static_cast<size_t>(batches * mn) * sizeof(W));
    } else {
      const W* a = as_blas<S>(a_->tensor, a_buffer_);
      const W* b = as_blas<S>(b_->tensor, b_buffer_);
      if (batches == 1 && run_packed(a, y)) {
        // done: B was packed at create
      } else if (batches == 1) {
        parallel_gemm<W>(pool_, false, false, p_.m, p_.n, p_.k, W(1), a, p_.k, b, p_.n, W(0), y,
                         p_.n, scratch_.data<W>());
      } else {
        // One GEMM per task, each thread with its own scratch.
        auto one = [&](int64_t i, unsigned slot) {
          gemm<W>(false, false, p_.m, p_.n, p_.k, W(1), a + p_.a_offsets[i], p_.k,
                  b + p_.b_offsets[i], p_.n, W(0), y + i * mn, p_.n, scratch_.data<W>(slot));
        };
        if (pool_ != nullptr) {
          pool_->parallel_for(batches, one);
        } else {
          for (int64_t i = 0; i < batches; ++i) one(i, 0);
        }
      }
    }
    if constexpr (!kDirect) convert<float, S>(y, y_->tensor.data_as<S>(), batches * mn);
    return Status::ok_status();
  }

 private:
  bool run_packed(const W* a, W* y) {
    if constexpr (std::is_same_v<S, float>) {
      if (packed_.empty()) return false;
      packed_gemm(pool_, p_.m, p_.n, p_.k, a, p_.k, packed_.block(0), nullptr, y, p_.n);
      return true;
    } else {
      return false;
    }
  }

  const runtime::Value* a_;
  const runtime::Value* b_;
  runtime::Value* y_;
  MatMulPlan p_;
  int64_t rows_;  // rows of A over every batch at create: what bounds the GEMM scratch
  runtime::ThreadPool* pool_;
  runtime::ScratchRef a_buffer_, b_buffer_, y_buffer_;  // float16 / bfloat16 only
  runtime::ScratchRef scratch_;                         // per thread of the pool
  PackedWeights packed_;  // a constant 2-D B, packed at create (empty: OpenBLAS reads B)
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& y = call.output(0);
  MatMulPlan p;
  int64_t rows = 0;
  if (y.numel() != 0) {
    const ops::MatMulShape s = ops::matmul_shape(call.input(0).sizes, call.input(1).sizes);
    const int64_t batches = y.numel() / (s.m * s.n);  // M and N are 1 for 1-D operands
    rows = batches * s.m;
    BATON_TRY(size_buffer(p.a_offsets, static_cast<uint64_t>(batches), call, "A batch offsets"));
    BATON_TRY(size_buffer(p.b_offsets, static_cast<uint64_t>(batches), call, "B batch offsets"));
  }
  BATON_TRY(plan_matmul(call.input(0), call.input(1), y, p));
  BATON_TRY(check_blas_range(call, p.m, p.n, p.k));
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(call.input(0).dtype, [&]<typename S>() {
    auto matmul = std::make_unique<MatMulKernel<S>>(call.inputs[0], call.inputs[1], call.outputs[0],
                                                    std::move(p), rows, call.pool);
    reserved = matmul->pack(call);
    if (reserved.ok()) kernel = with_scratch(std::move(matmul), call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, call.input(0).dtype);
  return kernel;
}

}  // namespace

void register_matmul(runtime::KernelRegistry& registry) {
  registry.add({"MatMul", "", {{"T", ops::kFloatTypes}}, &create});
}

}  // namespace baton::kernels::cpu
