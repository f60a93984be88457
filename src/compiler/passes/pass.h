// The graph optimizer (DESIGN.md §5): passes that run after shape inference and constant folding
// (compiler/passes.h) and before partitioning, each in its own file here with its own unit test
// on hand-built graphs. A pass rewrites matches of its pattern into canonical ops (Baton's
// "baton" domain: Linear, Attention, AddLayerNorm, FusedConv; ONNX's Gelu and Conv), each of which
// has a CPU kernel, so the optimized graph still runs and is tested on the CPU. A recognizer that
// almost matches leaves the graph unchanged.
//
// Rewriting rules every pass follows (compiler/passes/rewrite.h has the helpers): new nodes are
// appended through add_node (bound to their definition and inferred; the values they produce
// keep their names, dtypes and shapes), replaced nodes are marked dead, and the pass returns how
// many matches it rewrote. The pipeline then removes dead nodes' leftovers and restores
// topological order.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

struct OptimizeOptions {
  bool enabled = true;                // false: `--no-optimize`, no pass runs
  std::vector<std::string> disabled;  // `--disable-pass NAME`, by name
  // Whether every target backend lowers an op (domain, name); null: the CPU only, which runs all.
  std::function<bool(std::string_view domain, std::string_view op)> lowered;
  // Whether a GPU backend is among the targets (PassDef::gpu_only).
  bool gpu_target = false;
};

struct PassDef {
  std::string_view name;     // "gelu", as --disable-pass spells it
  std::string_view summary;  // one line for `baton compile --help` and docs
  Result<size_t> (*run)(Graph& graph);
  // The op it writes (domain, name): the pass is skipped when a target backend has no lowering
  // for it (OptimizeOptions::lowered). "LinearSplits" stands for a Linear with several outputs,
  // which a backend lowers only if its BackendCompiler::lowers says so for that name. Empty: the
  // pass writes no new op (cse), and always runs.
  std::string_view produces_domain;
  std::string_view produces;
  // A rewrite only a GPU's lowerings need (conv-1d): skipped when compiling for the CPU alone,
  // whose kernels take the op as written.
  bool gpu_only = false;
};

struct PassReport {
  std::string_view name;
  size_t changed = 0;  // matches rewritten (0 when disabled)
  bool ran = false;
  bool unlowered = false;  // skipped: a target backend has no lowering for its op
  bool cpu_only = false;   // skipped: a GPU-only pass in a compile for the CPU alone
  std::chrono::nanoseconds time{0};
};

// Every pass, in the order they run.
const std::vector<PassDef>& optimizer_passes();

// InvalidArgument naming an unknown pass and listing the known ones.
Status check_pass_names(const std::vector<std::string>& names);

// Runs the enabled passes in order on an inferred, folded graph. One report per pass.
Result<std::vector<PassReport>> optimize(Graph& graph, const OptimizeOptions& options);

// The passes (one file each).
Result<size_t> eliminate_common_subexpressions(Graph& graph);  // cse.cpp
Result<size_t> replace_copies_with_identity(Graph& graph);     // identity.cpp
Result<size_t> fold_batch_norm_into_conv(Graph& graph);        // bn_conv.cpp
Result<size_t> recognize_gelu(Graph& graph);                   // gelu.cpp
Result<size_t> recognize_attention(Graph& graph);              // attention.cpp
Result<size_t> fuse_matmul_add(Graph& graph);                  // matmul_add.cpp
Result<size_t> fuse_shared_input_linears(Graph& graph);        // qkv.cpp
Result<size_t> fuse_add_layer_norm(Graph& graph);              // add_layer_norm.cpp
Result<size_t> fuse_linear_activation(Graph& graph);           // fuse_linear.cpp
Result<size_t> fuse_conv_epilogue(Graph& graph);               // fuse_conv.cpp
Result<size_t> rewrite_conv_1d(Graph& graph);                  // conv_1d.cpp
Result<size_t> rewrite_einsum_as_matmul(Graph& graph);         // einsum.cpp
Result<size_t> rewrite_pow_square(Graph& graph);               // pow_square.cpp
Result<size_t> rewrite_batch_norm_as_affine(Graph& graph);     // bn_affine.cpp
Result<size_t> rewrite_gathers_as_views(Graph& graph);         // gather_view.cpp

}  // namespace baton::compiler
