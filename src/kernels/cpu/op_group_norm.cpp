// ONNX InstanceNormalization and GroupNormalization (ops/normalization.cpp). X [N, C, D1, ...] is
// seen as [N, groups, C / groups, spatial] (InstanceNormalization: one group per channel); each
// (n, group) gets its mean and variance in double (two passes, so nothing cancels), then
// y = (x - mean) / sqrt(var + epsilon) * scale + bias with scale and bias per channel, or per
// group for GroupNormalization-18.
#include <cmath>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/moments.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

struct Layout {
  int64_t n = 0, groups = 0, channels_per_group = 0, spatial = 0;
  int64_t num_groups = 0;  // GroupNormalization's attribute; 0 for InstanceNormalization
  bool per_group = false;  // GroupNormalization-18: scale and bias per group
  double epsilon = 0.0;
};

// `l`'s sizes from X's current ones. The batch and the spatial dimensions may change at resize();
// the channels size Scale and B, which do not.
void size_layout(const TensorView& x, Layout& l) {
  l.n = l.groups = l.channels_per_group = l.spatial = 0;
  // Empty X: nothing to normalize (and its other sizes may be huge).
  if (x.numel() == 0) return;
  const int64_t c = x.sizes[1];
  l.n = x.sizes[0];
  l.groups = l.num_groups == 0 ? c : l.num_groups;  // canonical: divides C
  l.channels_per_group = c / l.groups;
  l.spatial = product(x.sizes, 2, x.sizes.size());
}

template <typename S>
class GroupNormKernel final : public runtime::Kernel {
 public:
  GroupNormKernel(const runtime::Value* x, const runtime::Value* scale, const runtime::Value* bias,
                  runtime::Value* y, Layout l)
      : x_(x), scale_(scale), bias_(bias), y_(y), l_(l), channels_(x->tensor.sizes[1]) {}

  Status resize() override {
    if (x_->tensor.sizes[1] != channels_) {
      return Status(Error::NotSupported, "normalization: the channel count cannot change");
    }
    size_layout(x_->tensor, l_);
    return Status::ok_status();
  }

  Status run() override {
    const S* x = x_->tensor.data_as<const S>();
    const S* scale = scale_->tensor.data_as<const S>();
    const S* bias = bias_->tensor.data_as<const S>();
    S* y = y_->tensor.data_as<S>();
    const int64_t size = l_.channels_per_group * l_.spatial;
    for (int64_t n = 0; n < l_.n; ++n) {
      for (int64_t g = 0; g < l_.groups; ++g) {
        const int64_t base = (n * l_.groups + g) * size;
        const S* xg = x + base;
        const auto [mean, var] = moments(xg, size);
        const double inv = 1.0 / std::sqrt(var + l_.epsilon);
        for (int64_t cc = 0; cc < l_.channels_per_group; ++cc) {
          const int64_t at = l_.per_group ? g : g * l_.channels_per_group + cc;
          const double mul = inv * static_cast<double>(load(scale[at]));
          const auto add = static_cast<double>(load(bias[at]));
          const int64_t offset = cc * l_.spatial;
          for (int64_t i = 0; i < l_.spatial; ++i) {
            const double v = static_cast<double>(load(xg[offset + i]));
            y[base + offset + i] = store<S>(static_cast<compute_t<S>>((v - mean) * mul + add));
          }
        }
      }
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* x_;
  const runtime::Value* scale_;
  const runtime::Value* bias_;
  runtime::Value* y_;
  Layout l_;
  int64_t channels_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const bool instance = call.def->name == "InstanceNormalization";
  Layout l;
  l.num_groups = instance ? 0 : call.attr_int("num_groups");
  size_layout(x, l);
  l.per_group = !instance && call.def->since_version < 21;
  l.epsilon = call.attr_float("epsilon");
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kFloatTypes.bits()>(x.dtype, [&]<typename S>() {
    kernel = std::make_unique<GroupNormKernel<S>>(call.inputs[0], call.inputs[1], call.inputs[2],
                                                  call.outputs[0], l);
  });
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_group_norm(runtime::KernelRegistry& registry) {
  registry.add({"InstanceNormalization", "", {}, &create});
  registry.add({"GroupNormalization", "", {}, &create});
}

}  // namespace baton::kernels::cpu
