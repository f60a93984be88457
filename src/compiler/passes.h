// Compiler passes over the IR.
#pragma once

#include <vector>

#include "baton/core/error.h"
#include "baton/runtime/operator.h"
#include "compiler/ir.h"

namespace baton::compiler {

// Checks every live node has a CPU kernel schema (needed for shape inference and folding) at the
// model's opset. Reports all unsupported nodes at once: name, op type, domain, opset.
Status check_supported(const Graph& graph, const runtime::OpRegistry& registry);

// The node's attributes as runtime values in the schema's order, defaults filled in. The values
// point into `node` (lists, strings), which must outlive them. Unknown attributes are an error.
Result<std::vector<runtime::Value>> bind_attributes(const IrNode& node,
                                                    const runtime::OpSchema& schema);

// Static shape inference in topological order; nodes whose inputs are all constants are run on
// the CPU kernels and replaced by their results. Returns the number of folded nodes.
Result<size_t> infer_and_fold(Graph& graph, const runtime::OpRegistry& registry);

// Marks nodes whose outputs nobody reads as dead. Returns how many it removed.
size_t eliminate_dead_nodes(Graph& graph);

}  // namespace baton::compiler
