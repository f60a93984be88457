// ONNX MatMul (opset 13+): numpy.matmul on float32. A 1-D A is a row vector and a 1-D B a column
// vector (the added dimension is removed from the result); leading (batch) dimensions broadcast.
// Each batch is one cblas_sgemm call.
#include <cblas.h>

#include <climits>
#include <cstring>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "MatMul";

// A as [batch..., M, K] and B as [batch..., K, N], after promoting 1-D operands.
struct MatMulShape {
  std::span<const int64_t> a_batch, b_batch;
  int64_t m = 1, k = 1, kb = 1, n = 1;
};

MatMulShape split(std::span<const int64_t> a, std::span<const int64_t> b) {
  MatMulShape s;
  s.k = a.back();
  if (a.size() >= 2) {
    s.m = a[a.size() - 2];
    s.a_batch = a.first(a.size() - 2);
  }
  if (b.size() >= 2) {
    s.kb = b[b.size() - 2];
    s.n = b.back();
    s.b_batch = b.first(b.size() - 2);
  } else {
    s.kb = b[0];
  }
  return s;
}

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  const TensorView& a = call.inputs[0]->tensor;
  const TensorView& b = call.inputs[1]->tensor;
  constexpr size_t kOther[] = {1};
  BATON_TRY(check_same_dtype(call, kOther, what));
  BATON_CHECK_OR_RETURN(a.rank() >= 1 && b.rank() >= 1, InvalidArgument,
                        "{}: operands must have rank >= 1, got A {} and B {}", what,
                        shape_to_string(a.sizes), shape_to_string(b.sizes));
  BATON_TRY(check_rank(a.sizes, what, "A"));
  BATON_TRY(check_rank(b.sizes, what, "B"));
  const MatMulShape s = split(a.sizes, b.sizes);
  BATON_CHECK_OR_RETURN(s.k == s.kb, InvalidArgument,
                        "{}: inner dimensions differ: A {} has K={}, B {} has K={}", what,
                        shape_to_string(a.sizes), s.k, shape_to_string(b.sizes), s.kb);
  BATON_CHECK_OR_RETURN(s.m <= INT_MAX && s.n <= INT_MAX && s.k <= INT_MAX, NotSupported,
                        "{}: M={}, N={}, K={} exceed the BLAS int range", what, s.m, s.n, s.k);
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                         broadcast_shape(s.a_batch, s.b_batch, what + " (batch dimensions)"));
  if (a.rank() >= 2) sizes.push_back(s.m);
  if (b.rank() >= 2) sizes.push_back(s.n);
  outputs[0].dtype = a.dtype;
  outputs[0].sizes = std::move(sizes);
  return Status::ok_status();
}

class MatMulKernel final : public runtime::Kernel {
 public:
  // a_offsets[i], b_offsets[i]: element offsets of batch i's matrices. One entry with m = all
  // rows when every batch of A is multiplied by the same B.
  MatMulKernel(const runtime::Value* a, const runtime::Value* b, runtime::Value* y, int m, int n,
               int k, std::vector<int64_t> a_offsets, std::vector<int64_t> b_offsets)
      : a_(a),
        b_(b),
        y_(y),
        m_(m),
        n_(n),
        k_(k),
        a_offsets_(std::move(a_offsets)),
        b_offsets_(std::move(b_offsets)) {}

  Status run() override {
    const float* a = a_->tensor.data_as<const float>();
    const float* b = b_->tensor.data_as<const float>();
    float* y = y_->tensor.data_as<float>();
    const int64_t batches = static_cast<int64_t>(a_offsets_.size());
    const int64_t mn = static_cast<int64_t>(m_) * n_;
    if (mn == 0 || batches == 0) return Status::ok_status();
    if (k_ == 0) {  // an empty sum; BLAS would reject lda = 0
      std::memset(y, 0, static_cast<size_t>(batches * mn) * sizeof(float));
      return Status::ok_status();
    }
    for (int64_t i = 0; i < batches; ++i) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m_, n_, k_, 1.0f, a + a_offsets_[i],
                  k_, b + b_offsets_[i], n_, 0.0f, y + i * mn, n_);
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* a_;
  const runtime::Value* b_;
  runtime::Value* y_;
  int m_, n_, k_;
  std::vector<int64_t> a_offsets_;
  std::vector<int64_t> b_offsets_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  const TensorView& a = call.inputs[0]->tensor;
  const TensorView& b = call.inputs[1]->tensor;
  const MatMulShape s = split(a.sizes, b.sizes);
  // The output's batch dimensions are its leading ones.
  const std::span<const int64_t> out = call.outputs[0]->tensor.sizes;
  const size_t batch_rank = out.size() - (a.rank() >= 2 ? 1 : 0) - (b.rank() >= 2 ? 1 : 0);
  const std::span<const int64_t> batch = out.first(batch_rank);
  const int64_t batches = product(batch, 0, batch.size());
  const int64_t a_batches = product(s.a_batch, 0, s.a_batch.size());
  const int64_t b_batches = product(s.b_batch, 0, s.b_batch.size());

  std::vector<int64_t> a_offsets, b_offsets;
  int64_t m = s.m;
  if (b_batches == 1 && a_batches == batches) {
    // One B for every batch and A's batches laid out like the output's: A is one tall
    // [batches * M, K] matrix and a single sgemm does the whole product.
    m = batches * s.m;
    if (batches > 0) {
      a_offsets.push_back(0);
      b_offsets.push_back(0);
    }
  } else {
    const auto plan = make_broadcast_plan<2>(batch, {s.a_batch, s.b_batch});
    a_offsets.reserve(batches);
    b_offsets.reserve(batches);
    const int64_t a_step = s.m * s.k, b_step = s.k * s.n;
    for_each_broadcast_row<2>(plan, [&](int64_t, const std::array<int64_t, 2>& in, int64_t n) {
      for (int64_t e = 0; e < n; ++e) {
        a_offsets.push_back((in[0] + e * plan.strides[0][plan.rank - 1]) * a_step);
        b_offsets.push_back((in[1] + e * plan.strides[1][plan.rank - 1]) * b_step);
      }
    });
  }
  BATON_CHECK_OR_RETURN(m <= INT_MAX, NotSupported, "{}: {} rows in all exceed the BLAS int range",
                        describe(kName, call), m);
  return std::unique_ptr<runtime::Kernel>(std::make_unique<MatMulKernel>(
      call.inputs[0], call.inputs[1], call.outputs[0], static_cast<int>(m), static_cast<int>(s.n),
      static_cast<int>(s.k), std::move(a_offsets), std::move(b_offsets)));
}

}  // namespace

void register_matmul(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 2;
  schema.max_inputs = 2;
  schema.dtypes = {DType::Float32};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
