// ONNX Softmax (opset 13+): exp(x - max) / sum(exp(x - max)) along one axis (default -1) of a
// float32 tensor.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Softmax";
constexpr size_t kAxis = 0;

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const TensorView& x = call.inputs[0]->tensor;
  BATON_TRY(normalize_axis(call.attrs[kAxis]->i, x.rank(), describe(kName, call)));
  return infer_same_as_input(call, outputs);
}

// The tensor is seen as [outer, n, inner] with the softmax axis in the middle.
class SoftmaxKernel final : public runtime::Kernel {
 public:
  SoftmaxKernel(const runtime::Value* in, runtime::Value* out, int64_t outer, int64_t n,
                int64_t inner)
      : in_(in),
        out_(out),
        outer_(outer),
        n_(n),
        inner_(inner),
        max_(inner > 1 ? inner : 0),
        sum_(inner > 1 ? inner : 0) {}

  Status run() override {
    const float* x = in_->tensor.data_as<const float>();
    float* y = out_->tensor.data_as<float>();
    if (n_ == 0) return Status::ok_status();
    for (int64_t o = 0; o < outer_; ++o) {
      const float* xo = x + o * n_ * inner_;
      float* yo = y + o * n_ * inner_;
      if (inner_ == 1) {
        softmax_row(xo, yo);
      } else {
        softmax_strided(xo, yo);
      }
    }
    return Status::ok_status();
  }

 private:
  void softmax_row(const float* x, float* y) const {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n_; ++j) m = std::max(m, x[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < n_; ++j) {
      y[j] = std::exp(x[j] - m);
      sum += y[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n_; ++j) y[j] *= inv;
  }

  // Walks the axis row by row with contiguous inner loops, keeping one running max and sum per
  // inner position in the buffers sized at create.
  void softmax_strided(const float* x, float* y) {
    float* m = max_.data();
    double* sum = sum_.data();
    for (int64_t i = 0; i < inner_; ++i) {
      m[i] = -std::numeric_limits<float>::infinity();
      sum[i] = 0.0;
    }
    for (int64_t j = 0; j < n_; ++j) {
      const float* xj = x + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) m[i] = std::max(m[i], xj[i]);
    }
    for (int64_t j = 0; j < n_; ++j) {
      const float* xj = x + j * inner_;
      float* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) {
        yj[i] = std::exp(xj[i] - m[i]);
        sum[i] += yj[i];
      }
    }
    for (int64_t i = 0; i < inner_; ++i) m[i] = static_cast<float>(1.0 / sum[i]);
    for (int64_t j = 0; j < n_; ++j) {
      float* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) yj[i] *= m[i];
    }
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  int64_t outer_;
  int64_t n_;
  int64_t inner_;
  std::vector<float> max_;   // per inner position: the max, then 1 / sum
  std::vector<double> sum_;  // per inner position
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  const runtime::Value* in = call.inputs[0];
  const std::span<const int64_t> sizes = in->tensor.sizes;
  BATON_ASSIGN_OR_RETURN(
      const int a, normalize_axis(call.attrs[kAxis]->i, in->tensor.rank(), describe(kName, call)));
  const auto axis = static_cast<size_t>(a);
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<SoftmaxKernel>(in, call.outputs[0], product(sizes, 0, axis), sizes[axis],
                                      product(sizes, axis + 1, sizes.size())));
}

}  // namespace

void register_softmax(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.attrs = {int_attr("axis", -1)};
  schema.dtypes = {DType::Float32};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
