// bn-affine: an inference BatchNormalization that bn-conv left (nothing folds it: a DenseNet
// layer's normalization after a Concat, a pre-activation ResNet's) -> Mul(X, S) then Add(., T),
// with per channel c, computed in double and rounded once to float32:
//   S[c] = scale[c] / sqrt(var[c] + epsilon),   T[c] = B[c] - mean[c] * S[c]
// S and T are constants shaped [C, 1, ..., 1], broadcasting over X's spatial dimensions. GPU
// compiles only: there the two ops join the elementwise kernel around them (DenseNet's
// normalization and its ReLU become one kernel, which also keeps the channels-last layout of the
// Concat it reads, so the convolution after it needs no conversion: three of every dense
// layer's six kernels). The CPU keeps its BatchNormalization kernel.
//
// It applies under bn-conv's conditions for the statistics (constant, finite, per channel,
// var + epsilon > 0, only the Y output) to a float32 X of rank 2 or more. The GPU's
// BatchNormalization kernel computed the same S and T: its results are unchanged, now in one
// kernel with its neighbours.
#include <cmath>
#include <cstring>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

Result<size_t> rewrite_batch_norm_as_affine(Graph& graph) {
  std::vector<uint8_t> taken(graph.nodes.size(), 0);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t n = 0; n < original; ++n) {
    const IrNode& bn = graph.nodes[n];
    if (!inference_batch_norm(bn)) continue;
    const int x = bn.inputs[0], y = bn.outputs[0];
    const IrValue& xv = graph.values[x];
    if (xv.dtype != DType::Float32 || xv.sizes.size() < 2) continue;
    // scale, B, mean, var: one value per channel each.
    std::vector<std::vector<double>> params;
    for (size_t i = 1; i < 5; ++i) {
      auto p = constant_as_doubles(graph, bn.inputs[i]);
      if (!p || graph.values[bn.inputs[i]].sizes.size() != 1) break;
      params.push_back(std::move(*p));
    }
    if (params.size() != 4) continue;
    const size_t m = params[0].size();
    bool usable = m > 0 && std::isfinite(bn.attr_float("epsilon"));
    for (const auto& p : params) usable = usable && p.size() == m;
    if (!usable) continue;
    const double eps = bn.attr_float("epsilon");
    std::vector<float> mul(m), add(m);
    for (size_t c = 0; c < m && usable; ++c) {
      const double var = params[3][c] + eps;
      usable = var > 0.0 && std::isfinite(var) && std::isfinite(params[0][c]) &&
               std::isfinite(params[1][c]) && std::isfinite(params[2][c]);
      if (!usable) break;
      const double s = params[0][c] / std::sqrt(var);
      mul[c] = static_cast<float>(s);
      add[c] = static_cast<float>(params[1][c] - params[2][c] * s);
    }
    if (!usable) continue;
    const int nodes[] = {static_cast<int>(n)};
    if (!claim(graph, taken, nodes)) continue;
    // Copies: add_constant, add_value and add_node grow graph.values and graph.nodes.
    const std::string name = bn.name;
    const std::string y_name = graph.values[y].name;
    std::vector<int64_t> sizes(xv.sizes.size() - 1, 1);
    sizes[0] = static_cast<int64_t>(m);
    auto bytes_of = [](const std::vector<float>& v) {
      std::vector<uint8_t> b(v.size() * sizeof(float));
      std::memcpy(b.data(), v.data(), b.size());
      return b;
    };
    const int s = add_constant(graph, y_name + "/bn_scale", DType::Float32, sizes, bytes_of(mul));
    const int t = add_constant(graph, y_name + "/bn_shift", DType::Float32, sizes, bytes_of(add));
    const int scaled = add_value(graph, y_name + "/bn_scaled");
    BATON_TRY(add_node(graph, NewNode{name + "/scale", "Mul", "", 0, {x, s}, {scaled}, {}}));
    BATON_TRY(add_node(graph, NewNode{name + "/shift", "Add", "", 0, {scaled, t}, {y}, {}}));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace baton::compiler
