// Compiler passes over the IR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

// How much constant folding may materialize (CompileOptions::max_fold_bytes and
// max_total_fold_bytes).
struct FoldLimits {
  uint64_t max_node_bytes = uint64_t{256} << 20;  // the outputs of one folded node
  uint64_t max_total_bytes = uint64_t{4} << 30;   // every folded output together
  // The work folding one node may take (fold_work: multiply-adds or elements touched); more is
  // left to run time, so that a small model cannot make the compiler compute for hours.
  double max_node_work = 1e10;
};

// An estimate of the work of computing `node` on the CPU, in multiply-adds or elements touched:
// MatMul, Gemm, Linear, Conv, Attention and Einsum by their arithmetic, other ops by the elements
// they read and write. Shapes must be known.
double fold_work(const Graph& graph, const IrNode& node);

struct FoldReport {
  size_t folded = 0;
  // Nodes whose inputs were all constants but whose folded outputs would have passed a limit;
  // they stay in the graph and run at run time. "Add node 'outer' (4398046511104 bytes)", or
  // "Einsum node 'e' (3e+14 operations)".
  std::vector<std::string> kept;
};

// Static shape inference in topological order through each node's definition (which also puts
// its attributes in canonical form); nodes whose inputs are all constants are run on the CPU
// kernels and replaced by their results (Shape and Size too: their result is the input's static
// shape), within `limits` (a node over them is kept, and nothing
// is allocated for it). A node whose dtypes Baton's CPU kernel does not take is NotSupported; all
// such nodes are reported at once.
Result<FoldReport> infer_and_fold(Graph& graph, const FoldLimits& limits = {});

// What inference sees of the node's inputs: dtype, sizes and constant data (absent optional inputs
// not present). Internal when an input has no shape yet (a node read before its producer).
Result<std::vector<ops::InputInfo>> input_infos(const Graph& graph, const IrNode& node);

// Marks nodes whose outputs nobody reads (no graph output depends on them) as dead; a live
// node's If conditions (IrNode::guards) count as read. Returns how many it removed.
size_t eliminate_dead_nodes(Graph& graph);

}  // namespace baton::compiler
