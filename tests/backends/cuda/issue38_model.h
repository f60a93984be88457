// Issue 38's GPU lowerings in one model, over a batch that may be dynamic (-1). Shared by the
// dynamic engine tests with and without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "testing/onnx_builder.h"

namespace baton::testing {

// Issue 38's lowerings over a dynamic batch: standalone BatchNormalization, Pad (reflect), a
// convolution (grouped: a generated kernel), InstanceNormalization, ConvTranspose, DepthToSpace,
// CumSum, ArgMax and TopK in one engine. (In fp16 the kernels writing the outputs read float16
// scratch and write float32 bindings.)
inline OnnxBuilder issue_38_ops(int64_t batch, int64_t groups) {
  OnnxBuilder b(17);
  b.input("x", {batch, 8, 6, 6});
  auto values = [](size_t n, float scale, float shift) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 11) + shift;
    return v;
  };
  b.initializer("bn_scale", {8}, values(8, 0.1f, 0.5f));
  b.initializer("bn_bias", {8}, values(8, 0.05f, -0.2f));
  b.initializer("bn_mean", {8}, values(8, 0.03f, -0.1f));
  b.initializer("bn_var", {8}, values(8, 0.2f, 0.5f));
  b.initializer_int64("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  b.initializer("w", {8, 8 / groups, 3, 3},
                values(static_cast<size_t>(8 * (8 / groups) * 9), 0.02f, -0.1f));
  b.initializer("in_scale", {8}, values(8, 0.1f, 0.8f));
  b.initializer("in_bias", {8}, values(8, 0.1f, -0.3f));
  b.initializer("wt", {8, 4, 2, 2}, values(8 * 4 * 4, 0.03f, -0.15f));
  b.initializer_int64("axis", {}, {3});
  b.initializer_int64("k", {1}, {3});
  b.node("BatchNormalization", {"x", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"bn"}, "bn");
  auto& pad = b.node("Pad", {"bn", "pads"}, {"padded"}, "pad");
  OnnxBuilder::attr_string(pad, "mode", "reflect");
  auto& conv = b.node("Conv", {"padded", "w"}, {"c"}, "grouped");
  OnnxBuilder::attr_int(conv, "group", groups);
  b.node("InstanceNormalization", {"c", "in_scale", "in_bias"}, {"n"}, "instance_norm");
  auto& up = b.node("ConvTranspose", {"n", "wt"}, {"u"}, "up");
  OnnxBuilder::attr_ints(up, "strides", {2, 2});
  auto& d2s = b.node("DepthToSpace", {"u"}, {"d"}, "d2s");
  OnnxBuilder::attr_int(d2s, "blocksize", 2);
  b.node("CumSum", {"d", "axis"}, {"y"}, "cumsum");
  auto& arg = b.node("ArgMax", {"n"}, {"idx"}, "argmax");
  OnnxBuilder::attr_int(arg, "axis", 1);
  b.node("TopK", {"n", "k"}, {"top", "top_idx"}, "topk");
  b.output("y", {batch, 1, 24, 24});
  b.output("idx", {batch, 1, 6, 6}, onnx::TensorProto::INT64);
  b.output("top", {batch, 8, 6, 3});
  b.output("top_idx", {batch, 8, 6, 3}, onnx::TensorProto::INT64);
  return b;
}

}  // namespace baton::testing
