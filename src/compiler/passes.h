// Compiler passes over the IR.
#pragma once

#include <vector>

#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

// Static shape inference in topological order through each node's definition (which also puts
// its attributes in canonical form); nodes whose inputs are all constants, and Shape and Size
// nodes (whose result is the input's static shape), are run on the CPU kernels and replaced by
// their results. A node whose dtypes Baton's CPU kernel does not take is
// NotSupported; all such nodes are reported at once. Returns the number of folded nodes.
Result<size_t> infer_and_fold(Graph& graph);

// Marks nodes whose outputs nobody reads as dead. Returns how many it removed.
size_t eliminate_dead_nodes(Graph& graph);

}  // namespace baton::compiler
