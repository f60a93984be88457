// ONNX Softmax, LogSoftmax and Hardmax (ops/softmax.cpp) along one axis; float types (float16 and
// bfloat16 computed in float, sums in double).
//  - Softmax:    exp(x - max) / sum(exp(x - max))
//  - LogSoftmax: (x - max) - log(sum(exp(x - max)))
//  - Hardmax:    1 at the first maximum along the axis, 0 elsewhere (a NaN counts as the maximum,
//                as it does in Max).
// Opsets 1 and 11 normalize over every dimension from `axis` on: the same kernel with the inner
// size 1 and the axis the product of those dimensions.
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

enum class Mode { Softmax, LogSoftmax, Hardmax };

// `a` is the new maximum candidate against the running `m`: a NaN wins and stays.
template <typename C>
bool beats(C a, C m) {
  return a > m || (std::isnan(a) && !std::isnan(m));
}

// The sizes of the [outer, n, inner] view at the input's current sizes. Opsets before 13
// (`flatten`) normalize over [axis, rank) as one dimension. An empty tensor has nothing to
// normalize, and its inner size (2^40 for [0, 2^20, 2^20] along axis 0) must not size the
// per-position buffers: seen as [0, 0, 0].
struct SoftmaxShape {
  int64_t outer = 0, n = 0, inner = 0;
};

SoftmaxShape softmax_shape(const TensorView& in, size_t axis, bool flatten) {
  SoftmaxShape s;
  if (in.numel() == 0) return s;
  const std::span<const int64_t> sizes = in.sizes;
  s.outer = product(sizes, 0, axis);
  s.n = flatten ? product(sizes, axis, sizes.size()) : sizes[axis];
  s.inner = flatten ? 1 : product(sizes, axis + 1, sizes.size());
  return s;
}

// The tensor is seen as [outer, n, inner] with the normalized axis in the middle. Softmax computes
// each [n, inner] slice in C (in the output itself when it is C, else in a buffer sized at create);
// LogSoftmax and Hardmax read the input again instead and need no slice buffer. At resize() every
// dimension may change, the axis too: the buffers sized at create for the largest inner size and
// slice hold the smaller ones.
template <typename S, Mode M>
class SoftmaxKernel final : public runtime::Kernel {
  using C = compute_t<S>;
  static constexpr bool kInPlace = std::is_same_v<S, C> || M != Mode::Softmax;

 public:
  SoftmaxKernel(const runtime::Value* in, runtime::Value* out, size_t axis, bool flatten,
                SoftmaxShape s)
      : in_(in),
        out_(out),
        axis_(axis),
        flatten_(flatten),
        outer_(s.outer),
        n_(s.n),
        inner_(s.inner),
        max_(s.inner > 1 ? s.inner : 0),
        sum_(s.inner > 1 && M != Mode::Hardmax ? s.inner : 0),
        at_(s.inner > 1 && M == Mode::Hardmax ? s.inner : 0),
        slice_(kInPlace ? 0 : s.n * s.inner) {}

  Status resize() override {
    const SoftmaxShape s = softmax_shape(in_->tensor, axis_, flatten_);
    outer_ = s.outer;
    n_ = s.n;
    inner_ = s.inner;
    return Status::ok_status();
  }

  Status run() override {
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    if (n_ == 0) return Status::ok_status();
    for (int64_t o = 0; o < outer_; ++o) {
      const S* xo = x + o * n_ * inner_;
      S* yo = y + o * n_ * inner_;
      if constexpr (M == Mode::Softmax) {
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
      } else if constexpr (M == Mode::LogSoftmax) {
        if (inner_ == 1) {
          log_softmax_row(xo, yo);
        } else {
          log_softmax_strided(xo, yo);
        }
      } else {
        if (inner_ == 1) {
          hardmax_row(xo, yo);
        } else {
          hardmax_strided(xo, yo);
        }
      }
    }
    return Status::ok_status();
  }

 private:
  C row_max(const S* x) const {
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < n_; ++j) m = std::max(m, load(x[j]));
    return m;
  }

  // Per inner position: the running max (in max_) and the sum of exp(x - max) (in sum_), with the
  // exponentials stored in `e` unless it is null.
  void strided_max_and_sum(const S* x, C* e) {
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
      for (int64_t i = 0; i < inner_; ++i) {
        const C v = std::exp(load(xj[i]) - m[i]);
        if (e != nullptr) e[j * inner_ + i] = v;
        sum[i] += v;
      }
    }
  }

  void softmax_row(const S* x, C* y) const {
    const C m = row_max(x);
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
    strided_max_and_sum(x, y);
    C* m = max_.data();
    const double* sum = sum_.data();
    for (int64_t i = 0; i < inner_; ++i) m[i] = static_cast<C>(1.0 / sum[i]);
    for (int64_t j = 0; j < n_; ++j) {
      C* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) yj[i] *= m[i];
    }
  }

  void log_softmax_row(const S* x, S* y) const {
    const C m = row_max(x);
    double sum = 0.0;
    for (int64_t j = 0; j < n_; ++j) sum += std::exp(load(x[j]) - m);
    const C log_sum = static_cast<C>(std::log(sum));
    for (int64_t j = 0; j < n_; ++j) y[j] = store<S>(load(x[j]) - m - log_sum);
  }

  void log_softmax_strided(const S* x, S* y) {
    strided_max_and_sum(x, nullptr);
    const C* m = max_.data();
    double* sum = sum_.data();
    // (x - max) - log(sum): the max and the (small) log kept apart, or the log would round away
    // against a large max.
    for (int64_t i = 0; i < inner_; ++i) sum[i] = std::log(sum[i]);
    for (int64_t j = 0; j < n_; ++j) {
      const S* xj = x + j * inner_;
      S* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) {
        yj[i] = store<S>(load(xj[i]) - m[i] - static_cast<C>(sum[i]));
      }
    }
  }

  void hardmax_row(const S* x, S* y) const {
    int64_t at = 0;
    C m = load(x[0]);
    for (int64_t j = 1; j < n_; ++j) {
      const C v = load(x[j]);
      if (beats(v, m)) {
        m = v;
        at = j;
      }
    }
    for (int64_t j = 0; j < n_; ++j) y[j] = store<S>(j == at ? C(1) : C(0));
  }

  void hardmax_strided(const S* x, S* y) {
    C* m = max_.data();
    int64_t* at = at_.data();
    for (int64_t i = 0; i < inner_; ++i) {
      m[i] = load(x[i]);
      at[i] = 0;
    }
    for (int64_t j = 1; j < n_; ++j) {
      const S* xj = x + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) {
        const C v = load(xj[i]);
        if (beats(v, m[i])) {
          m[i] = v;
          at[i] = j;
        }
      }
    }
    for (int64_t j = 0; j < n_; ++j) {
      S* yj = y + j * inner_;
      for (int64_t i = 0; i < inner_; ++i) yj[i] = store<S>(j == at[i] ? C(1) : C(0));
    }
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  size_t axis_;
  bool flatten_;
  int64_t outer_;
  int64_t n_;
  int64_t inner_;
  std::vector<C> max_;       // per inner position: the max (then 1 / sum, or max + log(sum))
  std::vector<double> sum_;  // per inner position
  std::vector<int64_t> at_;  // Hardmax: per inner position, where the max is
  std::vector<C> slice_;     // Softmax: one [n, inner] slice when S is not C
};

template <Mode M>
Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const runtime::Value* in = call.inputs[0];
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  // Opsets before 13 normalize over [axis, rank) as one dimension.
  const bool flatten = call.def->since_version < 13;
  const SoftmaxShape s = softmax_shape(in->tensor, axis, flatten);
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kFloatTypes.bits()>(in->tensor.dtype, [&]<typename S>() {
    kernel = std::make_unique<SoftmaxKernel<S, M>>(in, call.outputs[0], axis, flatten, s);
  });
  if (!kernel) return no_kernel_for(call, in->tensor.dtype);
  return kernel;
}

}  // namespace

void register_softmax(runtime::KernelRegistry& registry) {
  registry.add({"Softmax", "", {}, &create<Mode::Softmax>});
  registry.add({"LogSoftmax", "", {}, &create<Mode::LogSoftmax>});
  registry.add({"Hardmax", "", {}, &create<Mode::Hardmax>});
}

}  // namespace baton::kernels::cpu
