// A DenseNet dense block in small: every layer concatenates all earlier feature maps, scales and
// shifts them per channel (the Mul and Add that bn-affine makes of a BatchNormalization), applies
// a ReLU and convolves them into `growth` new channels. Shared by the builder tests (no GPU) and
// the GPU tests. With `layers` of 14 the widest Concats have 14 and 15 inputs: too many pointers
// for the elementwise kernel that reads them (16 a kernel), so those keep their own kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "testing/onnx_builder.h"

namespace baton::testing {

inline OnnxBuilder dense_block(int64_t batch, int layers, int64_t growth = 4) {
  OnnxBuilder b(17);
  b.input("x", {batch, 8, 6, 6});
  auto values = [](size_t n, float scale, float shift, size_t salt) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = scale * static_cast<float>((i * 7 + salt * 5) % 13) + shift;
    }
    return v;
  };
  const int64_t first = 16;
  b.initializer("w0", {first, 8, 3, 3},
                values(static_cast<size_t>(first * 8 * 9), 0.01f, -0.06f, 0));
  auto& c0 = b.node("Conv", {"x", "w0"}, {"f0"}, "conv0");
  OnnxBuilder::attr_ints(c0, "pads", {1, 1, 1, 1});
  std::vector<std::string> features = {"f0"};
  int64_t channels = first;
  // Scale, shift, ReLU of `in` (channels wide): what a layer and the block's end both do.
  auto normalized = [&](const std::string& in, const std::string& name) {
    const auto c = static_cast<size_t>(channels);
    b.initializer("s_" + name, {1, channels, 1, 1}, values(c, 0.05f, 0.6f, c));
    b.initializer("t_" + name, {1, channels, 1, 1}, values(c, 0.04f, -0.2f, c + 1));
    b.node("Mul", {in, "s_" + name}, {"m_" + name}, "mul_" + name);
    b.node("Add", {"m_" + name, "t_" + name}, {"a_" + name}, "add_" + name);
    b.node("Relu", {"a_" + name}, {"r_" + name}, "relu_" + name);
    return "r_" + name;
  };
  auto joined = [&](const std::string& name) {
    if (features.size() == 1) return features[0];
    auto& cat = b.node("Concat", features, {"cat_" + name}, "concat_" + name);
    OnnxBuilder::attr_int(cat, "axis", 1);
    return "cat_" + name;
  };
  for (int l = 1; l <= layers; ++l) {
    const std::string name = std::to_string(l);
    const std::string r = normalized(joined(name), name);
    b.initializer("w_" + name, {growth, channels, 3, 3},
                  values(static_cast<size_t>(growth * channels * 9), 0.004f, -0.024f,
                         static_cast<size_t>(l)));
    auto& conv = b.node("Conv", {r, "w_" + name}, {"f" + name}, "conv_" + name);
    OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
    features.push_back("f" + name);
    channels += growth;
  }
  b.output(normalized(joined("end"), "end"), {batch, channels, 6, 6});
  return b;
}

}  // namespace baton::testing
