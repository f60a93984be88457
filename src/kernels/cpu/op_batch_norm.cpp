// ONNX BatchNormalization in inference (ops/normalization.cpp): y = (x - mean) / sqrt(var + eps) *
// scale + B, in double. X is seen as [N, C, inner] (a 1-D X as [N, 1, 1]); the statistics are
// per channel, or with spatial 0 (opsets before 9) per position of [C, inner]. Scale and B (T1)
// and mean and var (T2) may have types other than X's from opset 14 on: each is read through a
// loader for its own dtype, chosen at create. The (batch item, channel) planes are split over the
// Method's pool; a float32 plane runs a loop cloned for AVX-512 and AVX2 (DenseNet-121 runs 62
// standalone BatchNormalizations, 3.2 of its 51 ms at one thread through the baseline loop).
#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

using LoadFn = double (*)(const void* data, int64_t i);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
// As vector_math.cpp: one clone per instruction set, picked when the library loads; this file is
// compiled with -ffp-contract=off (src/CMakeLists.txt), so every clone rounds as the baseline
// does and the bits do not depend on the CPU.
#define BATON_BATCH_NORM_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BATON_BATCH_NORM_CLONES
#endif

// One float plane: (x - mean) * mul + add in double, rounded once, as the generic loop computes
// it (the same bits), eight or four doubles an instruction where the baseline clone does two.
BATON_BATCH_NORM_CLONES void affine_plane_f32(const float* x, float* y, int64_t n, double mean,
                                              double mul, double add) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>((static_cast<double>(x[i]) - mean) * mul + add);
  }
}

// Elements per task when the planes are split over the pool: below this a plane or a few of them
// are not worth a thread's wake-up.
constexpr int64_t kTaskElements = 16384;

template <typename S>
double load_double(const void* data, int64_t i) {
  return static_cast<double>(load(static_cast<const S*>(data)[i]));
}

LoadFn loader_for(DType dtype) {
  LoadFn fn = nullptr;
  dispatch<ops::kFloatTypes.bits()>(dtype, [&]<typename S>() { fn = &load_double<S>; });
  return fn;
}

struct Layout {
  int64_t n = 0, c = 0, inner = 0;
  bool spatial = true;
  double epsilon = 0.0;
};

// Inputs 1 to 4: scale, B, mean, var.
constexpr size_t kParams = 4;

template <typename S>
class BatchNormKernel final : public runtime::Kernel {
 public:
  BatchNormKernel(const runtime::Value* x, std::array<const runtime::Value*, kParams> params,
                  std::array<LoadFn, kParams> loaders, runtime::Value* y, Layout l,
                  runtime::ThreadPool* pool)
      : x_(x), params_(params), loaders_(loaders), y_(y), l_(l), pool_(pool) {}

  // Dynamic shapes: the batch may change; channels and spatial sizes index the parameters.
  Status resize() override {
    const TensorView& x = x_->tensor;
    if (x.numel() == 0) {
      l_.n = 0;
      return Status::ok_status();
    }
    const int64_t c = x.sizes.size() > 1 ? x.sizes[1] : 1;
    const int64_t inner = product(x.sizes, std::min<size_t>(2, x.sizes.size()), x.sizes.size());
    if (c != l_.c || inner != l_.inner) {
      return Status(Error::NotSupported, "BatchNormalization takes a dynamic batch only");
    }
    l_.n = x.sizes[0];
    return Status::ok_status();
  }

  Status run() override {
    const S* x = x_->tensor.data_as<const S>();
    S* y = y_->tensor.data_as<S>();
    std::array<const void*, kParams> p{};
    for (size_t i = 0; i < kParams; ++i) p[i] = params_[i]->tensor.data;
    const int64_t inner = l_.inner, planes = l_.n * l_.c;
    const int64_t per_task = std::max<int64_t>(1, kTaskElements / std::max<int64_t>(inner, 1));
    parallel_for(pool_, (planes + per_task - 1) / per_task, [&](int64_t t, unsigned) {
      for (int64_t plane = t * per_task; plane < std::min(planes, (t + 1) * per_task); ++plane) {
        const int64_t c = plane % l_.c, base = plane * inner;
        if (!l_.spatial) {
          for (int64_t i = 0; i < inner; ++i) {
            y[base + i] = affine(p, c * inner + i).apply(x[base + i]);
          }
        } else {
          const Affine a = affine(p, c);
          if constexpr (std::is_same_v<S, float>) {
            affine_plane_f32(x + base, y + base, inner, a.mean, a.mul, a.add);
          } else {
            for (int64_t i = 0; i < inner; ++i) y[base + i] = a.apply(x[base + i]);
          }
        }
      }
    });
    return Status::ok_status();
  }

 private:
  struct Affine {
    double mean, mul, add;
    S apply(S v) const {
      return store<S>(static_cast<compute_t<S>>((static_cast<double>(load(v)) - mean) * mul + add));
    }
  };

  // The statistics at position `at` of the parameters.
  Affine affine(const std::array<const void*, kParams>& p, int64_t at) const {
    const double scale = loaders_[0](p[0], at), bias = loaders_[1](p[1], at);
    const double mean = loaders_[2](p[2], at), var = loaders_[3](p[3], at);
    return {mean, scale / std::sqrt(var + l_.epsilon), bias};
  }

  const runtime::Value* x_;
  std::array<const runtime::Value*, kParams> params_;
  std::array<LoadFn, kParams> loaders_;
  runtime::Value* y_;
  Layout l_;
  runtime::ThreadPool* pool_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  Layout l;
  // Empty X: nothing to normalize (and its other sizes may be huge).
  if (x.numel() != 0) {
    l.n = x.sizes[0];
    l.c = x.sizes.size() > 1 ? x.sizes[1] : 1;
    l.inner = product(x.sizes, std::min<size_t>(2, x.sizes.size()), x.sizes.size());
  }
  l.spatial = call.def->attr_index("spatial") < 0 || call.attr_int("spatial") == 1;
  l.epsilon = call.attr_float("epsilon");
  std::array<const runtime::Value*, kParams> params{};
  std::array<LoadFn, kParams> loaders{};
  for (size_t i = 0; i < kParams; ++i) {
    params[i] = call.inputs[1 + i];
    loaders[i] = loader_for(params[i]->tensor.dtype);
    if (loaders[i] == nullptr) return no_kernel_for(call, params[i]->tensor.dtype);
  }
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kFloatTypes.bits()>(x.dtype, [&]<typename S>() {
    kernel = std::make_unique<BatchNormKernel<S>>(call.inputs[0], params, loaders, call.outputs[0],
                                                  l, call.pool);
  });
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_batch_norm(runtime::KernelRegistry& registry) {
  registry.add({"BatchNormalization", "", {}, &create});
}

}  // namespace baton::kernels::cpu
