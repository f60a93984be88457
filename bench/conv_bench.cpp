// The CPU Conv kernel on the layers that dominate CNNs, fp32, on one thread (register_builtins()
// puts OpenBLAS on the calling thread; W is a constant, so the kernel packs it as in a loaded
// program): ResNet-50's 7x7 stride-2 stem, its 1x1 and 3x3 bottleneck
// convolutions at each stage, and a MobileNet 3x3 depthwise layer. Each benchmark builds the call
// as the loader does (definition's inference, then the kernel's create) and times Kernel::run;
// "GFLOP/s" counts 2 * N * M * out * C/group * K flops per run.
//
//   baton_conv_bench [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/core/tensor.h"
#include "baton/runtime/value.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"
#include "runtime/kernel.h"

namespace {

using baton::DType;
using baton::runtime::Value;

struct Layer {
  const char* name;
  int64_t n, c, h, w, m, k, stride, pad, group;
};

// ResNet-50 (batch 1, 224x224), MobileNetV2 and UNet layers.
const Layer kLayers[] = {
    {"resnet50/stem_7x7_s2", 1, 3, 224, 224, 64, 7, 2, 3, 1},
    {"resnet50/conv2_1x1_64_256", 1, 64, 56, 56, 256, 1, 1, 0, 1},
    {"resnet50/conv2_1x1_256_64", 1, 256, 56, 56, 64, 1, 1, 0, 1},
    {"resnet50/conv2_3x3_64", 1, 64, 56, 56, 64, 3, 1, 1, 1},
    {"resnet50/conv3_3x3_128", 1, 128, 28, 28, 128, 3, 1, 1, 1},
    {"resnet50/conv3_1x1_512_128", 1, 512, 28, 28, 128, 1, 1, 0, 1},
    {"resnet50/conv3_1x1_128_512", 1, 128, 28, 28, 512, 1, 1, 0, 1},
    {"resnet50/conv4_3x3_256", 1, 256, 14, 14, 256, 3, 1, 1, 1},
    {"resnet50/conv5_3x3_512", 1, 512, 7, 7, 512, 3, 1, 1, 1},
    {"resnet50/conv5_3x3_512_s2", 1, 512, 14, 14, 512, 3, 2, 1, 1},
    {"resnet50/conv5_1x1_512_2048", 1, 512, 7, 7, 2048, 1, 1, 0, 1},
    {"resnet50/conv5_1x1_2048_512", 1, 2048, 7, 7, 512, 1, 1, 0, 1},
    {"resnet50/conv5_1x1_1024_2048_s2", 1, 1024, 14, 14, 2048, 1, 2, 0, 1},
    {"resnet50/conv4_1x1_1024_256", 1, 1024, 14, 14, 256, 1, 1, 0, 1},
    {"resnet50/conv3_3x3_128_s2", 1, 128, 56, 56, 128, 3, 2, 1, 1},
    {"mobilenet/dw_3x3_144_s1", 1, 144, 56, 56, 144, 3, 1, 1, 144},
    {"mobilenet/dw_3x3_96_s2", 1, 96, 112, 112, 96, 3, 2, 1, 96},
    {"resnet50/conv2_3x3_64_batch8", 8, 64, 56, 56, 64, 3, 1, 1, 1},
    // The full-size UNet's (tests/e2e/export_real_models.py) decoder layers: a Concat's channels
    // in, half out, at 256x256 and 128x128, and an encoder layer at 256x256.
    {"unet/dec_3x3_128_64_256", 1, 128, 256, 256, 64, 3, 1, 1, 1},
    {"unet/enc_3x3_64_64_256", 1, 64, 256, 256, 64, 3, 1, 1, 1},
    {"unet/dec_3x3_256_128_128", 1, 256, 128, 128, 128, 3, 1, 1, 1},
};

// One Conv call with its values kept alive, built as the loader builds it.
class ConvCall {
 public:
  explicit ConvCall(const Layer& l) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto tensor = [&](std::vector<int64_t> sizes) {
      shapes_.push_back(std::move(sizes));
      int64_t numel = 1;
      for (int64_t s : shapes_.back()) numel *= s;
      storage_.emplace_back(static_cast<size_t>(numel));
      for (float& v : storage_.back()) v = dist(rng);
      return baton::TensorView{storage_.back().data(), DType::Float32, shapes_.back(),
                               baton::Device::cpu()};
    };
    shapes_.reserve(4);
    storage_.reserve(4);
    const baton::ops::OpDef* def = baton::ops::op_registry().find("Conv", "", 21);
    const std::vector<baton::TensorView> ins = {
        tensor({l.n, l.c, l.h, l.w}), tensor({l.m, l.c / l.group, l.k, l.k}), tensor({l.m})};
    std::vector<baton::ops::AttrValue> attrs;
    for (const baton::ops::AttrDef& d : def->attrs) {
      attrs.push_back(d.presence == baton::ops::AttrDef::Presence::Default
                          ? d.default_value
                          : baton::ops::AttrValue::absent(d.kind));
    }
    attrs[def->attr_index("group")] = baton::ops::AttrValue::of_int(l.group);
    attrs[def->attr_index("strides")] = baton::ops::AttrValue::of_ints({l.stride, l.stride});
    attrs[def->attr_index("pads")] = baton::ops::AttrValue::of_ints({l.pad, l.pad, l.pad, l.pad});
    std::vector<baton::ops::InputInfo> infos;
    for (const baton::TensorView& t : ins) infos.push_back({true, t.dtype, t.sizes, t.data});
    std::vector<baton::ops::OutputInfo> outs(1);
    status_ = baton::ops::infer(*def, "bench", infos, attrs, outs);
    if (!status_.ok()) return;
    const baton::TensorView y = tensor(outs[0].sizes);
    flops_ = 2.0 * static_cast<double>(y.numel()) * static_cast<double>(l.c / l.group) *
             static_cast<double>(l.k * l.k);
    attrs_ = std::move(attrs);
    for (const baton::TensorView& t : ins) values_.push_back(Value::from_tensor(t));
    values_.push_back(Value::from_tensor(y));
    for (const baton::ops::AttrValue& a : attrs_)
      attr_values_.push_back(baton::runtime::attr_as_value(a));
    for (Value& v : values_) value_ptrs_.push_back(&v);
    for (Value& v : attr_values_) attr_ptrs_.push_back(&v);
    baton::runtime::KernelCall call;
    call.def = def;
    call.inputs = std::span<Value* const>(value_ptrs_.data(), 3);
    call.outputs = std::span<Value* const>(value_ptrs_.data() + 3, 1);
    call.attrs = attr_ptrs_;
    call.node_name = "bench";
    // W and B are weights of the program, as in a real model: the kernel packs W at create.
    call.constant_inputs = 0b110;
    call.scratch = &scratch_;
    scratch_.begin_kernel("bench");
    auto kernel = baton::runtime::kernel_registry().find("Conv")->create(call);
    if (!kernel.ok()) {
      status_ = kernel.status();
      return;
    }
    kernel_ = std::move(kernel).value();
    status_ = scratch_.allocate();
  }

  const baton::Status& status() const { return status_; }
  double flops() const { return flops_; }
  baton::Status run() { return kernel_->run(); }

 private:
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<std::vector<float>> storage_;
  std::vector<baton::ops::AttrValue> attrs_;
  std::vector<Value> values_, attr_values_;
  std::vector<Value*> value_ptrs_, attr_ptrs_;
  baton::runtime::ScratchPlan scratch_;  // before the kernel, which points into it
  std::unique_ptr<baton::runtime::Kernel> kernel_;
  baton::Status status_;
  double flops_ = 0.0;
};

void run_layer(benchmark::State& state, const Layer& layer) {
  ConvCall call(layer);
  if (!call.status().ok()) {
    state.SkipWithError(call.status().to_string().c_str());
    return;
  }
  for (auto _ : state) {
    const baton::Status s = call.run();
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(call.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  baton::register_builtins();
  for (const Layer& layer : kLayers) {
    benchmark::RegisterBenchmark(layer.name, [&layer](benchmark::State& s) {
      run_layer(s, layer);
    })->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
