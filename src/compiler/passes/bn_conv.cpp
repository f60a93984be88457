// bn-conv: Conv followed by an inference BatchNormalization -> one Conv with the normalization
// folded into its weights and bias. Per output channel m, with s = scale[m] / sqrt(var[m] + eps):
//   W'[m, ...] = W[m, ...] * s,   B'[m] = (B[m] - mean[m]) * s + bias[m]   (B = 0 when absent).
// It applies when W, B and the four statistics are finite constants with var + eps > 0, the
// statistics are per channel (not spatial 0 of opsets 1-7), the BatchNormalization has only its Y
// output, and nothing but it reads the Conv's output. Any spatial rank and group: W's first axis is
// always M.
//
// Only float32 and float64 weights are folded (computed in double, rounded once to the dtype).
// float16 and bfloat16 are left alone: rounding W * s to 11 (or 8) bits changes the result more
// than the unfused kernels do, which compute BatchNormalization in float.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "ops/shape.h"

namespace baton::compiler {
namespace {

// Doubles rounded once to `dtype` (float32 or float64), as a constant's bytes.
std::vector<uint8_t> bytes_of(const std::vector<double>& values, DType dtype) {
  std::vector<uint8_t> bytes;
  if (dtype == DType::Float64) {
    bytes.resize(values.size() * sizeof(double));
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    std::vector<float> narrow(values.begin(), values.end());
    bytes.resize(narrow.size() * sizeof(float));
    std::memcpy(bytes.data(), narrow.data(), bytes.size());
  }
  return bytes;
}

}  // namespace

Result<size_t> fold_batch_norm_into_conv(Graph& graph) {
  const Uses uses(graph);
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t n = 0; n < original; ++n) {
    const IrNode& bn = graph.nodes[n];
    if (!inference_batch_norm(bn)) continue;
    const int y = bn.inputs[0];
    const int c = producer_of(graph, y, "Conv");
    if (c < 0 || !uses.single_use(y)) continue;
    const IrNode& conv = graph.nodes[c];
    const int w = conv.inputs[1];
    const int b = conv.inputs.size() > 2 ? conv.inputs[2] : -1;
    const IrValue& wv = graph.values[w];
    if (wv.dtype != DType::Float32 && wv.dtype != DType::Float64) continue;
    if (wv.sizes.empty() || (b >= 0 && graph.values[b].dtype != wv.dtype)) continue;
    const int64_t m = wv.sizes[0];
    const auto weights = constant_as_doubles(graph, w);
    if (!weights) continue;
    std::optional<std::vector<double>> bias = std::vector<double>(m, 0.0);
    if (b >= 0) bias = constant_as_doubles(graph, b);
    // scale, B, mean, var: one value per output channel each.
    std::vector<std::vector<double>> params;
    for (size_t i = 1; i < 5; ++i) {
      auto p = constant_as_doubles(graph, bn.inputs[i]);
      if (!p || graph.values[bn.inputs[i]].sizes != std::vector<int64_t>{m}) break;
      params.push_back(std::move(*p));
    }
    if (!bias || bias->size() != static_cast<size_t>(m) || params.size() != 4) continue;
    const std::vector<double>& scale = params[0];
    const std::vector<double>& shift = params[1];
    const std::vector<double>& mean = params[2];
    const std::vector<double>& var = params[3];
    const double eps = bn.attr_float("epsilon");

    // The fold is exact only in finite arithmetic: var + eps <= 0 (a division by zero, or the
    // square root of a negative number) or any non-finite statistic, weight or bias would turn
    // the unfolded +-inf into NaN, or NaN into other values. Such a node is left to run as it is.
    const auto finite = [](const std::vector<double>& v) {
      return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
    };
    bool exact = std::isfinite(eps) && finite(*weights) && finite(*bias);
    for (const auto& p : params) exact = exact && finite(p);
    for (int64_t k = 0; exact && k < m; ++k) exact = var[k] + eps > 0.0;
    if (!exact) continue;

    std::vector<double> folded_w = *weights;
    std::vector<double> folded_b(m);
    const size_t per_channel = m > 0 ? folded_w.size() / static_cast<size_t>(m) : 0;
    for (int64_t k = 0; k < m; ++k) {
      const double s = scale[k] / std::sqrt(var[k] + eps);
      for (size_t i = 0; i < per_channel; ++i) folded_w[k * per_channel + i] *= s;
      folded_b[k] = ((*bias)[k] - mean[k]) * s + shift[k];
    }

    const int out = bn.outputs[0];
    const int x = conv.inputs[0];
    NewNode node = copy_of(conv);
    node.name = conv.name + "/bn";
    node.outputs = {out};
    const int nodes[] = {c, static_cast<int>(n)};
    if (!claim(graph, taken, nodes)) continue;
    // Copies: add_constant grows graph.values.
    const DType dtype = wv.dtype;
    const std::vector<int64_t> w_sizes = wv.sizes;
    const std::string out_name = graph.values[out].name;
    const int new_w =
        add_constant(graph, out_name + "/W", dtype, w_sizes, bytes_of(folded_w, dtype));
    const int new_b = add_constant(graph, out_name + "/B", dtype, {m}, bytes_of(folded_b, dtype));
    node.inputs = {x, new_w, new_b};
    BATON_TRY(add_node(graph, std::move(node)));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
