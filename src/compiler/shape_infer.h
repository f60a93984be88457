// Shape inference of one node, static or dynamic (issue 36, docs/dynamic_shapes.md).
//
// Every op definition infers concrete shapes (ops/op_def.h). For a node with dynamic inputs the
// compiler needs each output dimension as a size expression over the graph's symbols. Rather than
// a second, symbolic copy of every definition's rules, it asks the one definition: it runs the
// op's inference at the upper bound of every symbol and at a set of other in-range assignments
// ("probes": every symbol at its minimum, each symbol alone at its minimum and at its maximum,
// and pseudo-random points where the symbols take distinct values), and then names each output
// dimension by the first candidate expression whose values match at every probe:
//   - a constant (the same size everywhere),
//   - one of the inputs' dimensions,
//   - a product of consecutive dimensions of one input (Flatten, Reshape merging axes),
//   - the sum of one axis over inputs of equal rank (Concat),
//   - any of these plus a constant offset (Pad, a Slice that drops a fixed number),
//   - any of these times or divided by a constant (a Reshape's -1 splitting or merging axes).
// A dimension none of these explains is refused with the values seen, and so is a node whose
// inference fails at some probe (the model is not valid at every size in the ranges: a broadcast
// of two different symbols, a Reshape to a size the exporter baked in) or whose canonical
// attributes depend on the sizes. Refusing is the safe side: a dynamic program never computes
// with a size expression that was not checked at every probe.
//
// Depends on ops (definitions) and the IR.
#pragma once

#include <vector>

#include "baton/core/error.h"
#include "compiler/ir.h"
#include "ops/op_def.h"

namespace baton::compiler {

struct NodeShapes {
  // Dtypes and sizes; in a dynamic node the sizes are the upper bounds.
  std::vector<ops::OutputInfo> outputs;
  // Per output: one expression per dimension, or empty when the output is static.
  std::vector<std::vector<sym::SizeExpr>> dims;
};

// Infers `node`'s outputs from its inputs' shapes and puts its attributes in canonical form.
// Errors name the node; for dynamic nodes they also name the symbols' values at which inference
// failed or which dimension has no expression.
Result<NodeShapes> infer_node_shapes(Graph& graph, IrNode& node);

// Writes `shapes` to the node's output values (dtype, sizes, dims, shape_known).
void set_output_shapes(Graph& graph, const IrNode& node, NodeShapes shapes);

// "[batch, 3, 224, 224]" for a dynamic value, shape_to_string(sizes) for a static one.
std::string shape_text(const Graph& graph, const IrValue& v);

}  // namespace baton::compiler
