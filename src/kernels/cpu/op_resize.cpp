// ONNX Resize (opsets 10 to 19) and Upsample (7, 9): the geometry of ops/resize.h, sampled
// separably. create: for each dimension and each output index along it, the input positions it
// reads ("taps": one for nearest, two for linear, four for cubic) and their weights, computed in
// double from the coordinate transform; a dimension whose every output reads one input element
// with weight 1 (not resized, or nearest) keeps one tap. run: each output element is the sum over
// the taps of every dimension of the product of their weights times the input element (nearest:
// a gather, for any dtype). tf_crop_and_resize writes extrapolation_value where a coordinate falls
// outside the input. Linear and cubic compute in float (double for float64), for float types only.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/kernels.h"
#include "ops/elementwise.h"
#include "ops/op_def.h"
#include "ops/resize.h"
#include "runtime/thread_pool.h"

namespace baton::kernels::cpu {
namespace {

using Interp = ops::ResizeInterp;

// One dimension's taps as the kernel reads them: ops::resize_taps's indices times the input's
// stride along the dimension.
struct AxisTaps {
  int k = 1;
  std::vector<int64_t> offsets;
  std::vector<double> weights;
  std::vector<uint8_t> outside;
};

AxisTaps axis_taps(const ops::ResizeAxis& a, const ops::ResizeSampling& s, int64_t stride) {
  ops::ResizeTaps t = ops::resize_taps(a, s);
  AxisTaps taps;
  taps.k = t.k;
  taps.offsets = std::move(t.index);
  for (int64_t& o : taps.offsets) o *= stride;
  taps.weights = std::move(t.weights);
  taps.outside = std::move(t.outside);
  return taps;
}

// extrapolation_value in the output type (integers saturate).
template <typename S>
S value_as(double v) {
  using C = compute_t<S>;
  if constexpr (std::is_same_v<C, bool>) {
    return BoolByte(v != 0.0);
  } else if constexpr (std::is_integral_v<C>) {
    return ops::scalar::narrow<S>(v);
  } else {
    return store<S>(static_cast<C>(v));
  }
}

template <typename S>
class ResizeKernel final : public runtime::Kernel {
  using C = compute_t<S>;

 public:
  ResizeKernel(const runtime::Value* in, runtime::Value* out, std::vector<AxisTaps> axes,
               double extrapolation, runtime::ThreadPool* pool)
      : in_(in), out_(out), extrapolation_(value_as<S>(extrapolation)), pool_(pool) {
    bool outside = false;
    for (size_t d = 0; d < axes.size(); ++d) {
      AxisTaps& a = axes[d];
      Axis axis;
      axis.k = a.k;
      axis.size = static_cast<int64_t>(a.offsets.size()) / a.k;
      axis.offsets = std::move(a.offsets);
      axis.weights.assign(a.weights.begin(), a.weights.end());
      axis.outside = std::move(a.outside);
      for (uint8_t o : axis.outside) outside = outside || o != 0;
      if (axis.k > 1) active_.push_back(d);
      combos_ *= axis.k;
      axes_.push_back(std::move(axis));
    }
    // Interpolation along the last two dimensions only (an image's height and width), every point
    // inside the input: run_planes.
    planes_ = axes_.size() >= 2 && !outside;
    for (size_t d = 0; planes_ && d + 2 < axes_.size(); ++d) planes_ = axes_[d].k == 1;
  }

  Status run() override {
    const int64_t numel = out_->tensor.numel();
    if (numel == 0) return Status::ok_status();
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    if (planes_) {
      run_planes(x, y);
      return Status::ok_status();
    }
    const size_t rank = axes_.size();
    std::array<int64_t, kMaxRank> index{};
    for (int64_t e = 0; e < numel; ++e) {
      y[e] = sample(x, index.data());
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < axes_[d].size) break;
        index[d] = 0;
      }
    }
    return Status::ok_status();
  }

 private:
  struct Axis {
    int k = 1;
    int64_t size = 0;
    std::vector<int64_t> offsets;
    std::vector<C> weights;
    std::vector<uint8_t> outside;
  };

  // The common case without sample()'s per-element walk over every dimension: for each index of
  // the outer dimensions (one tap each), each output row and column read their taps straight from
  // the tables. The arithmetic is sample()'s, in its order (the row's tap fastest, each weight the
  // row's times the column's), so the results are the same to the bit.
  // The output rows (of every plane) split over the pool in tasks of about as many outputs as an
  // elementwise op's (kElementwiseTaskElements); each output is computed as on one thread.
  void run_planes(const S* x, S* out) const {
    const size_t rank = axes_.size();
    const Axis& ah = axes_[rank - 2];
    const Axis& aw = axes_[rank - 1];
    const int kh = ah.k, kw = aw.k;
    int64_t outer = 1;
    for (size_t d = 0; d + 2 < rank; ++d) outer *= axes_[d].size;
    const int64_t rows_total = outer * ah.size;
    const int64_t per_task = std::max<int64_t>(1, kElementwiseTaskElements / aw.size);
    const int64_t tasks = (rows_total + per_task - 1) / per_task;
    auto walk = [&](int64_t first, int64_t last) {
      for (int64_t row = first; row < last; ++row) {
        const int64_t p = row / ah.size, oy = row - p * ah.size;
        // The plane's offset: p split over the outer dimensions, the last fastest.
        int64_t base = 0, rest = p;
        for (size_t d = rank - 2; d-- > 0;) {
          const int64_t i = rest % axes_[d].size;
          rest /= axes_[d].size;
          base += axes_[d].offsets[static_cast<size_t>(i)];
        }
        S* y = out + row * aw.size;
        const int64_t* rows = ah.offsets.data() + oy * kh;
        for (int64_t ox = 0; ox < aw.size; ++ox, ++y) {
          const int64_t* cols = aw.offsets.data() + ox * kw;
          if constexpr (std::is_floating_point_v<C>) {
            if (kh == 1 && kw == 1) {
              *y = x[base + rows[0] + cols[0]];
              continue;
            }
            const C* wy = ah.weights.data() + oy * kh;
            const C* wx = aw.weights.data() + ox * kw;
            if (kh == 2 && kw == 2) {  // bilinear, unrolled: the same operations in the same order
              const S* r0 = x + base + rows[0];
              const S* r1 = x + base + rows[1];
              C sum = 0;
              sum += wy[0] * wx[0] * load(r0[cols[0]]);
              sum += wy[1] * wx[0] * load(r1[cols[0]]);
              sum += wy[0] * wx[1] * load(r0[cols[1]]);
              sum += wy[1] * wx[1] * load(r1[cols[1]]);
              *y = store<S>(sum);
              continue;
            }
            C sum = 0;
            for (int j = 0; j < kw; ++j) {
              for (int i = 0; i < kh; ++i) {
                // sample()'s weight: 1 times each interpolating dimension's, in order.
                C w = 1;
                if (kh > 1) w *= wy[i];
                if (kw > 1) w *= wx[j];
                sum += w * load(x[base + rows[i] + cols[j]]);
              }
            }
            *y = store<S>(sum);
          } else {
            *y = x[base + rows[0] + cols[0]];  // nearest only
          }
        }
      }
    };
    if (pool_ == nullptr || tasks < 2) {
      walk(0, rows_total);
      return;
    }
    pool_->parallel_for(tasks, [&](int64_t t, unsigned) {
      walk(t * per_task, std::min(rows_total, (t + 1) * per_task));
    });
  }

  S sample(const S* x, const int64_t* index) const {
    int64_t base = 0;
    for (size_t d = 0; d < axes_.size(); ++d) {
      const Axis& a = axes_[d];
      if (!a.outside.empty() && a.outside[static_cast<size_t>(index[d])]) return extrapolation_;
      if (a.k == 1) base += a.offsets[static_cast<size_t>(index[d])];
    }
    if constexpr (std::is_floating_point_v<C>) {
      if (active_.empty()) return x[base];
      C sum = 0;
      for (int64_t c = 0; c < combos_; ++c) {
        int64_t rest = c, offset = base;
        C w = 1;
        for (size_t d : active_) {
          const Axis& a = axes_[d];
          const auto t = static_cast<size_t>(index[d] * a.k + rest % a.k);
          rest /= a.k;
          offset += a.offsets[t];
          w *= a.weights[t];
        }
        sum += w * load(x[offset]);
      }
      return store<S>(sum);
    } else {
      return x[base];  // nearest only (the definition refuses interpolating other types)
    }
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  S extrapolation_;
  std::vector<Axis> axes_;
  std::vector<size_t> active_;  // dimensions with more than one tap
  int64_t combos_ = 1;
  bool planes_ = false;  // run_planes applies
  runtime::ThreadPool* pool_;
};

std::string_view attr_or(const runtime::KernelCall& call, std::string_view name,
                         std::string_view fallback) {
  return call.def->attr_index(name) >= 0 ? call.attr_string(name) : fallback;
}

std::vector<double> floats_of(const TensorView& t) {
  return ops::float_values_of(t.dtype, t.data, t.numel());
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const bool modern = call.def->attr_index("coordinate_transformation_mode") >= 0;  // Resize-11+
  const ops::ResizeSampling s = ops::resize_sampling(*call.def, call);
  ops::ResizeArgs args;
  args.upsample = call.def->name == "Upsample";
  if (modern) {
    args.crop_and_resize = s.coord == ops::ResizeCoord::TfCropAndResize;
    args.keep_aspect_ratio_policy = attr_or(call, "keep_aspect_ratio_policy", "stretch");
    if (call.def->attr_index("axes") >= 0 && !call.attr("axes").is_none()) {
      const std::span<const int64_t> a = call.attr_ints("axes");
      args.axes.emplace(a.begin(), a.end());
    }
  }
  const ops::ResizeSlots slots = ops::resize_slots(*call.def);
  if (slots.scales < 0) {
    const std::span<const double> f = call.attr("scales").floats;
    args.scales.assign(f.begin(), f.end());
  } else if (call.has_input(static_cast<size_t>(slots.scales))) {
    args.scales = floats_of(call.input(static_cast<size_t>(slots.scales)));
  }
  if (slots.sizes >= 0 && call.has_input(static_cast<size_t>(slots.sizes))) {
    const TensorView& t = call.input(static_cast<size_t>(slots.sizes));
    args.sizes = ops::int_values_of(t.dtype, t.data, t.numel());
  }
  if (args.crop_and_resize && call.has_input(static_cast<size_t>(slots.roi))) {
    args.roi = floats_of(call.input(static_cast<size_t>(slots.roi)));
  }
  BATON_ASSIGN_OR_RETURN(const std::vector<ops::ResizeAxis> geometry,
                         ops::resize_geometry(x.sizes, args, call.describe()));

  std::vector<AxisTaps> taps;
  if (call.output(0).numel() != 0) {  // then every input dimension is nonzero too
    const std::vector<int64_t> strides = element_strides(x.sizes);
    for (size_t d = 0; d < geometry.size(); ++d) {
      taps.push_back(axis_taps(geometry[d], s, strides[d]));
    }
  }
  const double extrapolation = modern ? call.attr_float("extrapolation_value") : 0.0;
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kAllTypes.bits()>(x.dtype, [&]<typename S>() {
    kernel = std::make_unique<ResizeKernel<S>>(call.inputs[0], call.outputs[0], std::move(taps),
                                               extrapolation, call.pool);
  });
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_resize(runtime::KernelRegistry& registry) {
  registry.add({"Resize", "", {}, &create});
  registry.add({"Upsample", "", {}, &create});
}

}  // namespace baton::kernels::cpu
