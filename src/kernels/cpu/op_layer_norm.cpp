// ONNX LayerNormalization (opset 17) and Baton's AddLayerNorm (ops/layer_norm.cpp). Each row of
// the normalized dimensions gets its mean and variance in double (two passes, so nothing
// cancels), then y = (x - mean) * inv_std * scale + bias in the compute type. AddLayerNorm first
// forms x + r rounded to the storage type (what the Add it replaces stored), in its Sum output or
// in a row buffer sized at create (one per pool thread). Rows are split over the Method's pool,
// a few thousand elements a task; each row is computed the same way on any thread.
#include <cmath>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/moments.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

// Element offsets into a Scale or B input for each position of a normalized row; left empty when
// the input already has the row's shape (offset = position) or there is no row to normalize.
Status broadcast_offsets(std::span<const int64_t> row, std::span<const int64_t> in, int64_t rows,
                         const runtime::KernelCall& call, std::string_view what,
                         std::vector<int64_t>* offsets) {
  if (product(in) == product(row) || rows == 0) return Status::ok_status();
  BATON_TRY(size_buffer(*offsets, static_cast<uint64_t>(product(row)), call, what));
  const auto plan = make_broadcast_plan<1>(row, {in});
  for_each_broadcast_row<1>(plan, [&](int64_t out, const std::array<int64_t, 1>& at, int64_t n) {
    for (int64_t e = 0; e < n; ++e) {
      (*offsets)[static_cast<size_t>(out + e)] = at[0] + e * plan.strides[0][plan.rank - 1];
    }
  });
  return Status::ok_status();
}

struct Layout {
  size_t axis = 0;  // the first normalized dimension
  int64_t rows = 0, n = 0;
  double epsilon = 0.0;
};

template <typename S>
class LayerNormKernel final : public runtime::Kernel {
  using C = compute_t<S>;

 public:
  // `residual` is AddLayerNorm's R (null for LayerNormalization); `sum` its Sum output (null
  // when absent). `mean` and `inv_std` are LayerNormalization's optional outputs.
  LayerNormKernel(const runtime::Value* x, const runtime::Value* residual,
                  const runtime::Value* scale, const runtime::Value* bias, runtime::Value* y,
                  runtime::Value* sum, runtime::Value* mean, runtime::Value* inv_std, Layout l,
                  std::vector<int64_t> scale_at, std::vector<int64_t> bias_at,
                  runtime::ThreadPool* pool)
      : x_(x),
        r_(residual),
        scale_(scale),
        bias_(bias),
        y_(y),
        sum_(sum),
        mean_(mean),
        inv_std_(inv_std),
        l_(l),
        scale_at_(std::move(scale_at)),
        bias_at_(std::move(bias_at)),
        pool_(pool) {}

  // AddLayerNorm without a Sum output forms x + r in a row of scratch.
  Status reserve(const runtime::KernelCall& call) {
    if (r_ == nullptr || sum_ != nullptr || l_.rows == 0) return Status::ok_status();
    return call.reserve_scratch<S>(row_, static_cast<uint64_t>(l_.n), "row buffer",
                                   pool_slots(pool_));
  }

  // The leading dimensions (batch, sequence) may change; the normalized ones, which shape Scale
  // and B, may not (sizes only shrink, so an equal product means equal sizes).
  Status resize() override {
    const std::span<const int64_t> sizes = x_->tensor.sizes;
    if (product(sizes, l_.axis, sizes.size()) != l_.n) {
      return Status(Error::NotSupported,
                    "layer normalization: only the dimensions before the axis can change");
    }
    return Status::ok_status();
  }
  // run() takes the row count from X (a row count of 0 at create, with no row scratch reserved,
  // stays 0: sizes never grow past the ones created at).
  bool follows_sizes() const override { return true; }

  Status run() override {
    l_.rows = product(x_->tensor.sizes, 0, l_.axis);  // dynamic shapes
    // R may hold fewer rows than X (ops/layer_norm.h): row i adds R's row i % r_rows.
    const int64_t r_rows =
        r_ ? std::max<int64_t>(1, product(r_->tensor.sizes) / std::max<int64_t>(l_.n, 1)) : 1;
    const S* x = x_->tensor.data_as<const S>();
    const S* r = r_ ? r_->tensor.data_as<const S>() : nullptr;
    const S* scale = scale_->tensor.data_as<const S>();
    const S* bias = bias_ ? bias_->tensor.data_as<const S>() : nullptr;
    S* y = y_->tensor.data_as<S>();
    const int64_t n = l_.n;
    const int64_t rows_per_task = std::max<int64_t>(1, kTaskElements / std::max<int64_t>(n, 1));
    parallel_for(
        pool_, (l_.rows + rows_per_task - 1) / rows_per_task, [&](int64_t t, unsigned slot) {
          const int64_t end = std::min(l_.rows, (t + 1) * rows_per_task);
          for (int64_t row = t * rows_per_task; row < end; ++row) {
            const S* xr = x + row * n;
            if (r) {
              S* s = sum_ ? sum_->tensor.data_as<S>() + row * n : row_.data<S>(slot);
              const S* rr = r + (r_rows == l_.rows ? row : row % r_rows) * n;
              for (int64_t j = 0; j < n; ++j) s[j] = store<S>(load(xr[j]) + load(rr[j]));
              xr = s;
            }
            const auto [mean, var] = moments(xr, n);
            const double inv = 1.0 / std::sqrt(var + l_.epsilon);
            S* yr = y + row * n;
            if (scale_at_.empty() && bias_at_.empty()) {
              // The common case (Scale and B of the row's shape), without the offset tables' loads.
              for (int64_t j = 0; j < n; ++j) {
                const double b = bias ? static_cast<double>(load(bias[j])) : 0.0;
                yr[j] = store<S>(static_cast<C>((static_cast<double>(load(xr[j])) - mean) * inv *
                                                    static_cast<double>(load(scale[j])) +
                                                b));
              }
            } else {
              for (int64_t j = 0; j < n; ++j) {
                const size_t js = static_cast<size_t>(j);
                const double g =
                    static_cast<double>(load(scale[scale_at_.empty() ? j : scale_at_[js]]));
                const double b =
                    bias ? static_cast<double>(load(bias[bias_at_.empty() ? j : bias_at_[js]]))
                         : 0.0;
                yr[j] = store<S>(
                    static_cast<C>((static_cast<double>(load(xr[j])) - mean) * inv * g + b));
              }
            }
            write_stat(mean_, row, mean);
            write_stat(inv_std_, row, inv);
          }
        });
    return Status::ok_status();
  }

 private:
  static constexpr int64_t kTaskElements = 8192;

  static void write_stat(runtime::Value* out, int64_t row, double v) {
    if (!out) return;
    if (out->tensor.dtype == DType::Float64) {
      out->tensor.data_as<double>()[row] = v;
    } else {
      out->tensor.data_as<float>()[row] = static_cast<float>(v);
    }
  }

  const runtime::Value* x_;
  const runtime::Value* r_;
  const runtime::Value* scale_;
  const runtime::Value* bias_;
  runtime::Value* y_;
  runtime::Value* sum_;
  runtime::Value* mean_;
  runtime::Value* inv_std_;
  Layout l_;
  std::vector<int64_t> scale_at_, bias_at_;
  runtime::ThreadPool* pool_;
  runtime::ScratchRef row_;  // AddLayerNorm without a Sum output: the row's x + r, per thread
};

// `residual`: whether the call is AddLayerNorm (X, R, Scale, B; outputs Y, Sum) rather than
// LayerNormalization (X, Scale, B; outputs Y, Mean, InvStdDev).
Result<std::unique_ptr<runtime::Kernel>> create_normalization(const runtime::KernelCall& call,
                                                              bool residual) {
  const TensorView& x = call.input(0);
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  const std::span<const int64_t> row = x.sizes.subspan(axis);
  Layout l;
  l.axis = axis;
  l.rows = product(x.sizes, 0, axis);
  l.n = product(row);
  l.epsilon = call.attr_float("epsilon");
  const size_t first = residual ? 2 : 1;  // Scale
  const runtime::Value* bias = call.has_input(first + 1) ? call.inputs[first + 1] : nullptr;
  auto out = [&](size_t o) { return o < call.outputs.size() ? call.outputs[o] : nullptr; };
  std::vector<int64_t> scale_at, bias_at;
  BATON_TRY(broadcast_offsets(row, call.input(first).sizes, l.rows, call,
                              "offsets into its broadcast Scale", &scale_at));
  if (bias) {
    BATON_TRY(broadcast_offsets(row, bias->tensor.sizes, l.rows, call,
                                "offsets into its broadcast B", &bias_at));
  }
  std::unique_ptr<runtime::Kernel> kernel;
  Status reserved = Status::ok_status();
  dispatch<ops::kFloatTypes.bits()>(x.dtype, [&]<typename S>() {
    kernel = with_scratch(
        std::make_unique<LayerNormKernel<S>>(
            call.inputs[0], residual ? call.inputs[1] : nullptr, call.inputs[first], bias,
            call.outputs[0], residual ? out(1) : nullptr, residual ? nullptr : out(1),
            residual ? nullptr : out(2), l, std::move(scale_at), std::move(bias_at), call.pool),
        call, reserved);
  });
  BATON_TRY(reserved);
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

Result<std::unique_ptr<runtime::Kernel>> create_layer_norm(const runtime::KernelCall& call) {
  return create_normalization(call, false);
}

Result<std::unique_ptr<runtime::Kernel>> create_add_layer_norm(const runtime::KernelCall& call) {
  return create_normalization(call, true);
}

}  // namespace

void register_layer_norm(runtime::KernelRegistry& registry) {
  registry.add({"LayerNormalization", "", {{"T", ops::kFloatTypes}}, &create_layer_norm});
  registry.add({"AddLayerNorm", "baton", {{"T", ops::kFloatTypes}}, &create_add_layer_norm});
}

}  // namespace baton::kernels::cpu
