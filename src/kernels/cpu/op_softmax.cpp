// ONNX Softmax (opset 13): exp(x - max) / sum(exp(x - max)) along one axis; float types (float16
// and bfloat16 computed in float, sums in double).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// The tensor is seen as [outer, n, inner] with the softmax axis in the middle. Each [n, inner]
// slice is computed in C (in the output itself when it is C, else in a buffer sized at create).
template <typename S>
class SoftmaxKernel final : public runtime::Kernel {
  using C = compute_t<S>;
  static constexpr bool kInPlace = std::is_same_v<S, C>;

 public:
  SoftmaxKernel(const runtime::Value* in, runtime::Value* out, int64_t outer, int64_t n,
                int64_t inner)
      : in_(in),
        out_(out),
        outer_(outer),
        n_(n),
        inner_(inner),
        max_(inner > 1 ? inner : 0),
        sum_(inner > 1 ? inner : 0),
        slice_(kInPlace ? 0 : n * inner) {}

  Status run() override {
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    if (n_ == 0) return Status::ok_status();
    for (int64_t o = 0; o < outer_; ++o) {
      const S* xo = x + o * n_ * inner_;
      S* yo = y + o * n_ * inner_;
      C* work = nullptr;
      if constexpr (kInPlace) {
        work = yo;
      } else {
        work = slice_.data();
      }
      if (inner_ == 1) {
        softmax_row(xo, work);
      } else {
        softmax_strided(xo, work);
      }
      if constexpr (!kInPlace) {
        for (int64_t j = 0; j < n_ * inner_; ++j) yo[j] = store<S>(work[j]);
      }
    }
    return Status::ok_status();
  }

 private:
  void softmax_row(const S* x, C* y) const {
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < n_; ++j) m = std::max(m, load(x[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < n_; ++j) {
      y[j] = std::exp(load(x[j]) - m);
      sum += y[j];
    }
    const C inv = static_cast<C>(1.0 / sum);
    for (int64_t j = 0; j < n_; ++j) y[j] *= inv;
  }

  // Walks the axis row by row with contiguous inner loops, keeping one running max and sum per
  // inner position in the buffers sized at create.
  void softmax_strided(const S* x, C* y) {
    C* m = max_.data();
    double* sum = sum_.data();
    for (int64_t i = 0; i < inner_; ++i) {
      m[i] = -std::numeric_limits<C>::infinity();
      sum[i] = 0.0;
    }
    for (int64_t j = 0; j < n_; ++j) {
      const S* xj = x + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) m[i] = std::max(m[i], load(xj[i]));
    }
    for (int64_t j = 0; j < n_; ++j) {
      const S* xj = x + j * inner_;
      C* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) {
        yj[i] = std::exp(load(xj[i]) - m[i]);
        sum[i] += yj[i];
      }
    }
    for (int64_t i = 0; i < inner_; ++i) m[i] = static_cast<C>(1.0 / sum[i]);
    for (int64_t j = 0; j < n_; ++j) {
      C* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) yj[i] *= m[i];
    }
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  int64_t outer_;
  int64_t n_;
  int64_t inner_;
  std::vector<C> max_;       // per inner position: the max, then 1 / sum
  std::vector<double> sum_;  // per inner position
  std::vector<C> slice_;     // one [n, inner] slice when S is not C
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const runtime::Value* in = call.inputs[0];
  const std::span<const int64_t> sizes = in->tensor.sizes;
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  // An empty tensor has nothing to normalize, and its inner size (2^40 for [0, 2^20, 2^20] along
  // axis 0) must not size the per-position buffers: seen as [0, 0, 0].
  const bool empty = in->tensor.numel() == 0;
  const int64_t outer = empty ? 0 : product(sizes, 0, axis);
  const int64_t n = empty ? 0 : sizes[axis];
  const int64_t inner = empty ? 0 : product(sizes, axis + 1, sizes.size());
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kFloatTypes.bits()>(in->tensor.dtype, [&]<typename S>() {
    kernel = std::make_unique<SoftmaxKernel<S>>(in, call.outputs[0], outer, n, inner);
  });
  if (!kernel) return no_kernel_for(call, in->tensor.dtype);
  return kernel;
}

}  // namespace

void register_softmax(runtime::KernelRegistry& registry) {
  registry.add({"Softmax", "", {}, &create});
}

}  // namespace baton::kernels::cpu
