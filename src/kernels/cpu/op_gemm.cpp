// ONNX Gemm (opset 13+): Y = alpha * A' * B' + beta * C on float32, where A' is A or A^T
// (transA), B' is B or B^T (transB), and the optional C broadcasts unidirectionally to (M, N).
// The product goes through OpenBLAS's cblas_sgemm.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Gemm";
constexpr size_t kAlpha = 0, kBeta = 1, kTransA = 2, kTransB = 3;

bool has_c(const runtime::OpCall& call) {
  return call.inputs.size() > 2 && call.inputs[2]->is_tensor();
}

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  const TensorView& a = call.inputs[0]->tensor;
  const TensorView& b = call.inputs[1]->tensor;
  BATON_CHECK_OR_RETURN(a.rank() == 2 && b.rank() == 2, InvalidArgument,
                        "{}: A and B must be 2-D, got A {} and B {}", what,
                        shape_to_string(a.sizes), shape_to_string(b.sizes));
  const bool trans_a = call.attrs[kTransA]->i != 0;
  const bool trans_b = call.attrs[kTransB]->i != 0;
  const int64_t m = trans_a ? a.sizes[1] : a.sizes[0];
  const int64_t k = trans_a ? a.sizes[0] : a.sizes[1];
  const int64_t kb = trans_b ? b.sizes[1] : b.sizes[0];
  const int64_t n = trans_b ? b.sizes[0] : b.sizes[1];
  BATON_CHECK_OR_RETURN(k == kb, InvalidArgument,
                        "{}: inner dimensions differ: A {} (transA={}) gives K={}, B {} "
                        "(transB={}) gives K={}",
                        what, shape_to_string(a.sizes), trans_a ? 1 : 0, k,
                        shape_to_string(b.sizes), trans_b ? 1 : 0, kb);
  BATON_CHECK_OR_RETURN(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, NotSupported,
                        "{}: M={}, N={}, K={} exceed the BLAS int range", what, m, n, k);
  std::vector<size_t> others = {1};
  if (has_c(call)) others.push_back(2);
  BATON_TRY(check_same_dtype(call, others, what));
  const std::vector<int64_t> out = {m, n};
  if (has_c(call)) {
    const TensorView& c = call.inputs[2]->tensor;
    BATON_CHECK_OR_RETURN(broadcasts_to(c.sizes, out), InvalidArgument,
                          "{}: C {} does not broadcast (unidirectionally) to the result {}", what,
                          shape_to_string(c.sizes), shape_to_string(out));
  }
  outputs[0].dtype = a.dtype;
  outputs[0].sizes = out;
  return Status::ok_status();
}

class GemmKernel final : public runtime::Kernel {
 public:
  struct Params {
    bool trans_a = false, trans_b = false;
    int m = 0, n = 0, k = 0, lda = 1, ldb = 1;
    float alpha = 1.0f, beta = 1.0f;
    int64_t c_row_stride = 0, c_col_stride = 0;  // elements; 0 along broadcast dimensions
  };

  GemmKernel(const runtime::Value* a, const runtime::Value* b, const runtime::Value* c,
             runtime::Value* y, const Params& p)
      : a_(a), b_(b), c_(c), y_(y), p_(p) {}

  Status run() override {
    float* y = y_->tensor.data_as<float>();
    const int64_t m = p_.m, n = p_.n;
    if (m == 0 || n == 0) return Status::ok_status();
    if (c_ != nullptr) {
      // Y = beta * C first, then sgemm accumulates into it (beta = 1).
      const float* c = c_->tensor.data_as<const float>();
      for (int64_t i = 0; i < m; ++i) {
        const float* ci = c + i * p_.c_row_stride;
        float* yi = y + i * n;
        if (p_.c_col_stride == 1) {
          for (int64_t j = 0; j < n; ++j) yi[j] = p_.beta * ci[j];
        } else {
          const float cv = p_.beta * ci[0];
          for (int64_t j = 0; j < n; ++j) yi[j] = cv;
        }
      }
    }
    if (p_.k == 0) {  // an empty sum; BLAS would reject lda = 0
      if (c_ == nullptr) std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(float));
      return Status::ok_status();
    }
    cblas_sgemm(CblasRowMajor, p_.trans_a ? CblasTrans : CblasNoTrans,
                p_.trans_b ? CblasTrans : CblasNoTrans, p_.m, p_.n, p_.k, p_.alpha,
                a_->tensor.data_as<const float>(), p_.lda, b_->tensor.data_as<const float>(),
                p_.ldb, c_ != nullptr ? 1.0f : 0.0f, y, p_.n);
    return Status::ok_status();
  }

 private:
  const runtime::Value* a_;
  const runtime::Value* b_;
  const runtime::Value* c_;  // nullptr without C
  runtime::Value* y_;
  Params p_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  const TensorView& a = call.inputs[0]->tensor;
  const TensorView& b = call.inputs[1]->tensor;
  GemmKernel::Params p;
  p.trans_a = call.attrs[kTransA]->i != 0;
  p.trans_b = call.attrs[kTransB]->i != 0;
  p.alpha = static_cast<float>(call.attrs[kAlpha]->f);
  p.beta = static_cast<float>(call.attrs[kBeta]->f);
  p.m = static_cast<int>(p.trans_a ? a.sizes[1] : a.sizes[0]);
  p.k = static_cast<int>(p.trans_a ? a.sizes[0] : a.sizes[1]);
  p.n = static_cast<int>(p.trans_b ? b.sizes[0] : b.sizes[1]);
  // Row-major leading dimensions are the stored row lengths; BLAS wants them >= 1.
  p.lda = static_cast<int>(std::max<int64_t>(1, a.sizes[1]));
  p.ldb = static_cast<int>(std::max<int64_t>(1, b.sizes[1]));
  const runtime::Value* c = has_c(call) ? call.inputs[2] : nullptr;
  if (c != nullptr) {
    // C is [], [n], [1], [m, n], [m, 1], [1, n] or [1, 1]: a row stride and a column stride.
    const std::span<const int64_t> cs = c->tensor.sizes;
    const int64_t c_rows = cs.size() == 2 ? cs[0] : 1;
    const int64_t c_cols = cs.empty() ? 1 : cs.back();
    p.c_row_stride = c_rows == 1 ? 0 : c_cols;
    p.c_col_stride = c_cols == 1 ? 0 : 1;
  }
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<GemmKernel>(call.inputs[0], call.inputs[1], c, call.outputs[0], p));
}

}  // namespace

void register_gemm(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 2;
  schema.max_inputs = 3;
  schema.attrs = {float_attr("alpha", 1.0), float_attr("beta", 1.0), int_attr("transA", 0),
                  int_attr("transB", 0)};
  schema.dtypes = {DType::Float32};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
