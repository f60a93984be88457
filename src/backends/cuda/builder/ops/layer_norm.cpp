// LayerNormalization and Baton's AddLayerNorm on the GPU: one generated kernel calling
// baton_layer_norm (device/layer_norm.cuh), a warp or a block per normalized row. Constant Scale
// and B are expanded to one row (their broadcasting done here, once) and kept in float32; a
// runtime Scale or B must already have the row's shape. LayerNormalization's optional Mean and
// InvStdDev outputs are not produced on the GPU: such a node stays on the CPU.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "backends/cuda/builder/ops/registry.h"
#include "backends/cuda/builder/ops/row_launch.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

constexpr int64_t kLayerNormVec = 8;  // elements a vector access (device/layer_norm.cuh)

bool float_tensor(const compiler::IrValue& v) {
  const bool float_type =
      v.dtype == DType::Float32 || v.dtype == DType::Float16 || v.dtype == DType::BFloat16;
  const auto n = checked_numel(v.sizes);
  return float_type && v.sizes.size() <= kEngineMaxRank && n.has_value() && *n > 0;
}

// `residual`: AddLayerNorm (X, R, Scale, B; Y, Sum) rather than LayerNormalization (X, Scale, B;
// Y, Mean, InvStdDev).
bool supports_normalization(const compiler::Graph& graph, const compiler::IrNode& node,
                            bool residual) {
  if (node.inputs.empty() || node.outputs.empty() || node.outputs[0] < 0) return false;
  const size_t max_outputs = residual ? 2 : 1;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const int v = node.outputs[o];
    if (v < 0) continue;
    if (o >= max_outputs || !float_tensor(graph.values[v])) return false;
  }
  for (int v : node.inputs) {
    if (v >= 0 && !float_tensor(graph.values[v])) return false;
  }
  const std::vector<int64_t>& x = graph.values[node.inputs[0]].sizes;
  const auto axis = static_cast<size_t>(node.attr_int("axis"));  // canonical: in [0, rank)
  const int64_t n = ops::product(x, axis, x.size());
  if (ops::product(x, 0, axis) > INT_MAX) return false;  // one row per warp or block
  // A runtime Scale or B is read as one row as it is.
  const size_t first = residual ? 2 : 1;
  for (size_t i = first; i < node.inputs.size() && i < first + 2; ++i) {
    const int v = node.inputs[i];
    if (v >= 0 && !graph.values[v].constant && ops::product(graph.values[v].sizes) != n) {
      return false;
    }
  }
  return true;
}

bool supports_layer_norm(const compiler::Graph& graph, const compiler::IrNode& node) {
  return supports_normalization(graph, node, false);
}

bool supports_add_layer_norm(const compiler::Graph& graph, const compiler::IrNode& node) {
  return supports_normalization(graph, node, true);
}

// A constant Scale or B broadcast (right-aligned) to the normalized dimensions `row`.
std::vector<float> expand_to_row(const std::vector<float>& values,
                                 const std::vector<int64_t>& sizes,
                                 const std::vector<int64_t>& row) {
  const int64_t n = ops::product(row);
  if (static_cast<int64_t>(values.size()) == n) return values;
  // Element strides of `sizes` along `row`'s dimensions (0 where it broadcasts).
  std::vector<int64_t> strides(row.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t sd = sizes.size() - 1 - i, rd = row.size() - 1 - i;
    strides[rd] = sizes[sd] == 1 ? 0 : stride;
    stride *= sizes[sd];
  }
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = j, offset = 0;
    for (size_t d = row.size(); d-- > 0;) {
      offset += (rest % row[d]) * strides[d];
      rest /= row[d];
    }
    out[static_cast<size_t>(j)] = values[static_cast<size_t>(offset)];
  }
  return out;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& node = ctx.node(index);
  const bool residual = node.op_type == "AddLayerNorm";
  const size_t first = residual ? 2 : 1;  // Scale
  const int x = node.inputs[0];
  const std::vector<int64_t>& xs = ctx.value(x).sizes;
  const auto axis = static_cast<size_t>(node.attr_int("axis"));  // canonical: in [0, rank)
  const std::vector<int64_t> row(xs.begin() + static_cast<std::ptrdiff_t>(axis), xs.end());
  const int64_t rows = ops::product(xs, 0, axis), n = ops::product(row);

  // Operands: the value itself, constants as weights. "" marks an absent one.
  std::vector<int> operands;
  std::vector<std::string> types;
  auto tensor = [&](int v, DType constant_dtype) {
    if (v < 0) {
      types.emplace_back();
      return;
    }
    if (ctx.is_constant(v)) v = ctx.weight(v, constant_dtype);
    operands.push_back(v);
    types.emplace_back(device_type_name(ctx.dtype_of(v)));
  };
  auto row_values = [&](size_t i) {
    const int v = i < node.inputs.size() ? node.inputs[i] : -1;
    if (v < 0 || !ctx.is_constant(v)) {
      tensor(v, DType::Float32);
      return;
    }
    const std::vector<float> values =
        expand_to_row(ctx.constant_floats(v), ctx.value(v).sizes, row);
    const int w = ctx.add_weights(values, DType::Float32, {n});
    operands.push_back(w);
    types.emplace_back("float");
  };
  tensor(x, ctx.activation_dtype());
  tensor(residual ? node.inputs[1] : -1, ctx.activation_dtype());
  row_values(first);
  row_values(first + 1);
  tensor(node.outputs[0], DType::Float32);
  tensor(residual && node.outputs.size() > 1 ? node.outputs[1] : -1, DType::Float32);

  // Rows whose length is a multiple of 8 are read and written 8 elements at a time
  // (device/layer_norm.cuh); a block per row then gets one such group a thread (BERT's 768-wide
  // rows: 96 threads, one 16-byte load of each input), which also keeps 8 single elements a
  // thread within reach when a pointer turns out misaligned for the vector path.
  const int vec = n % kLayerNormVec == 0 ? kLayerNormVec : 1;
  // A dynamic engine's LayerNorm picks a warp or a block per row at each call's row count
  // (switching_row_launch); a static one's is chosen here.
  const bool switching = ctx.dynamic() && n <= kWarpRowLimit;
  RowLaunch rl = switching ? switching_row_launch(rows)
                           : row_launch(rows, n, ops::product(ctx.upper_sizes_of(x), 0, axis));
  if (vec > 1 && !rl.warp && !switching) {
    const int64_t groups = n / vec;
    rl.launch.block = static_cast<uint32_t>(std::clamp<int64_t>((groups + 31) / 32 * 32, 32, 1024));
  }
  const std::string name = ctx.kernel_name(residual ? "add_layer_norm" : "layer_norm");
  // Parameters x, r, scale, bias, y, sum (the absent ones left out), passed on as typed nulls.
  static constexpr const char* kNames[] = {"x", "r", "scale", "bias", "y", "sum"};
  std::string params, call;
  for (size_t i = 0; i < types.size(); ++i) {
    const bool output = i >= 4;
    if (types[i].empty()) {
      call += fmt::format("{}({}float*)nullptr", i ? ", " : "", output ? "" : "const ");
      continue;
    }
    params += fmt::format("{}{}{}* __restrict__ {}", params.empty() ? "" : ", ",
                          output ? "" : "const ", types[i], kNames[i]);
    call += fmt::format("{}{}", i ? ", " : "", kNames[i]);
  }
  KernelArgs args = ctx.kernel_args();
  // R's rows: X's, or fewer when R is broadcast over X's leading dimensions (ops/layer_norm.h).
  const int64_t r_rows = residual
                             ? std::max<int64_t>(1, ops::product(ctx.value(node.inputs[1]).sizes) /
                                                        std::max<int64_t>(n, 1))
                             : rows;
  const std::string rows_arg = args.value(rows), n_arg = args.value(n);
  // Decided by shape, not by the sizes at hand: a dynamic engine's lowerings at every size must
  // pass the same arguments ([1, seq, hidden] against [batch, seq, hidden] at batch 1 too).
  const bool broadcast_r =
      residual && !compiler::same_shape(ctx.value(node.inputs[1]), ctx.value(x));
  const std::string r_rows_arg = broadcast_r ? args.value(r_rows) : rows_arg;
  const std::string tail =
      fmt::format("{}, {}, {}, {}, {}", call, rows_arg, r_rows_arg, n_arg,
                  float_literal(static_cast<float>(node.attr_float("epsilon"))));
  const std::string body = switching ? fmt::format(
                                           "  if ({} >= {}) baton_layer_norm<true, {}>({});\n"
                                           "  else baton_layer_norm<false, {}>({});\n",
                                           rows_arg, kWarpRowsMin, vec, tail, vec, tail)
                                     : fmt::format("  baton_layer_norm<{}, {}>({});\n",
                                                   rl.warp ? "true" : "false", vec, tail);
  std::string code =
      fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}{}) {{\n{}}}\n",
                  rl.launch.block, name, params, args.parameter(), body);
  ctx.add_kernel(name, std::move(code), rl.launch, std::move(operands), args);
  return Status();
}

}  // namespace

const OpLowering kLayerNormLowering{"LayerNormalization", &supports_layer_norm, &lower};
const OpLowering kAddLayerNormLowering{"AddLayerNorm", &supports_add_layer_norm, &lower, 0,
                                       "baton"};

}  // namespace baton::cuda
