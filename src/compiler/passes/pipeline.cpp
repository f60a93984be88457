#include <algorithm>

#include "baton/core/check.h"
#include "compiler/passes.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"

namespace baton::compiler {

const std::vector<PassDef>& optimizer_passes() {
  static const std::vector<PassDef> passes = {
      {"cse",
       "nodes computing the same op on the same inputs (equal constants count as the same) -> "
       "one node",
       &eliminate_common_subexpressions, "", ""},
      {"bn-conv",
       "inference BatchNormalization after a Conv with constant weights -> folded into the "
       "Conv's weights and bias",
       &fold_batch_norm_into_conv, "", "Conv"},
      // After bn-conv: only what it could not fold.
      {"bn-affine",
       "an inference BatchNormalization no Conv takes -> Mul and Add by per-channel constants "
       "(GPU compiles only: they fuse with the elementwise ops around them)",
       &rewrite_batch_norm_as_affine, "", "Mul", /*gpu_only=*/true},
      // After bn-conv, which folds a BatchNormalization into the 1-D Conv before it.
      {"conv-1d",
       "a 1-D Conv or ConvTranspose -> Unsqueeze, the 2-D op over a height of 1, Squeeze (GPU "
       "compiles only: the GPU's convolutions are 2-D)",
       &rewrite_conv_1d, "", "Conv", /*gpu_only=*/true},
      {"einsum",
       "an Einsum of two operands that is one batched matrix product -> Transposes, Reshapes and "
       "a MatMul (GPU compiles only: the GPU has no Einsum lowering)",
       &rewrite_einsum_as_matmul, "", "MatMul", /*gpu_only=*/true},
      // Before add-layernorm, which then takes the position embedding's view as a broadcast
      // residual, and before the Adds it reads a constant row into are fused into other ops.
      {"gather-view",
       "a Gather whose indices are computed from the sizes (a Range, a slice of an arange, "
       "b * seq + s) -> Slice and Reshape views; one that reads one row of a constant table "
       "everywhere -> that row, broadcast by the Add or Mul after it",
       &rewrite_gathers_as_views, "", "Slice"},
      {"gelu", "GELU written as an erf or tanh chain of elementwise ops -> Gelu", &recognize_gelu,
       "", "Gelu"},
      // After gelu, whose tanh form it matches by its Pow(x, 3).
      {"pow-square", "Pow(x, 2) of a float x -> Mul(x, x) (the same to the bit)",
       &rewrite_pow_square, "", "Mul"},
      {"attention",
       "the exporters' scaled-dot-product attention (Mul, MatMul, mask, Softmax, Where(IsNaN), "
       "MatMul) -> baton Attention",
       &recognize_attention, "baton", "Attention"},
      {"matmul-add", "MatMul by a 2-D weight followed by a bias Add -> baton Linear",
       &fuse_matmul_add, "baton", "Linear"},
      {"qkv", "Linears that share their input (Q, K, V) -> one Linear with split outputs",
       &fuse_shared_input_linears, "baton", "LinearSplits"},
      {"add-layernorm", "residual Add followed by LayerNormalization -> baton AddLayerNorm",
       &fuse_add_layer_norm, "baton", "AddLayerNorm"},
      {"identity",
       "a Cast to the dtype its input has, an Expand to the shape it has, a Gather of every "
       "index of an axis in order -> Identity or Reshape (views; "
       "models of opset 13 on)",
       &replace_copies_with_identity, "", "Identity"},
      // After identity: a Cast it turns into a view no longer stands between a GEMM and its
      // activation.
      {"fuse-linear",
       "Linear, MatMul or Gemm followed by Relu or Gelu (directly or through a view) -> baton "
       "Linear with that activation",
       &fuse_linear_activation, "baton", "Linear"},
      {"fuse-conv", "Conv followed by a residual Add and/or an activation -> baton FusedConv",
       &fuse_conv_epilogue, "baton", "FusedConv"},
  };
  return passes;
}

Status check_pass_names(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const auto& passes = optimizer_passes();
    if (std::any_of(passes.begin(), passes.end(),
                    [&](const PassDef& p) { return p.name == name; })) {
      continue;
    }
    std::string known;
    for (const PassDef& p : passes) known += fmt::format("{}{}", known.empty() ? "" : ", ", p.name);
    return BATON_ERROR(InvalidArgument, "there is no optimizer pass '{}'; the passes are: {}", name,
                       known);
  }
  return Status();
}

Result<std::vector<PassReport>> optimize(Graph& graph, const OptimizeOptions& options) {
  BATON_TRY(check_pass_names(options.disabled));
  std::vector<PassReport> reports;
  for (const PassDef& pass : optimizer_passes()) {
    PassReport report;
    report.name = pass.name;
    const bool disabled = !options.enabled ||
                          std::find(options.disabled.begin(), options.disabled.end(), pass.name) !=
                              options.disabled.end();
    // A pass that writes no new op (cse) runs for every backend.
    report.unlowered = !disabled && options.lowered && !pass.produces.empty() &&
                       !options.lowered(pass.produces_domain, pass.produces);
    report.cpu_only = !disabled && !report.unlowered && pass.gpu_only && !options.gpu_target;
    if (!disabled && !report.unlowered && !report.cpu_only) {
      const auto start = std::chrono::steady_clock::now();
      BATON_ASSIGN_OR_RETURN(report.changed, pass.run(graph));
      report.ran = true;
      if (report.changed > 0) {
        // New nodes were appended after their readers: order first (dead-node elimination
        // walks the graph backwards in topological order).
        BATON_TRY(sort_topologically(graph));
        eliminate_dead_nodes(graph);
      }
      report.time = std::chrono::steady_clock::now() - start;
    }
    reports.push_back(report);
  }
  return reports;
}

}  // namespace baton::compiler
