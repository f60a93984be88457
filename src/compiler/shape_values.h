// Shape arithmetic over dynamic sizes (issue 36, docs/dynamic_shapes.md).
//
// Exporters compute shapes in the graph: Shape of a tensor, Gather of one size, Unsqueeze,
// Concat with constants, Mul or Div by a head count, a Cast, an Equal/Where pair that replaces -1
// entries, and the result feeds a Reshape, an Expand, a ConstantOfShape, a Range or a Slice. In a
// static graph all of that folds to constants. In a dynamic one the compiler follows it instead:
// a value computed from sizes gets its elements as size expressions (IrValue::sym_values), so
// that inference sees the consumer's shape input at every probe (compiler/shape_infer.h), and an
// output dimension can be named after the expression.
//
// Then, once the optimizer is done, materialize_shape_inputs gives every consumer whose shape
// input carries expressions a constant holding the values at the symbols' maxima: the program's
// kernel calls then check at load as static ones do (inference at the largest sizes), the kernels
// take their sizes from the runtime's resolved output sizes (Kernel::resize), and the shape
// arithmetic itself usually becomes dead and is removed. Only inputs that decide sizes alone are
// materialized (a Reshape's or Expand's shape, a ConstantOfShape's input, a Range's limit, a
// Slice's ends); a dynamic value that decides an offset (a Slice's start) is refused by name.
#pragma once

#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

enum class ShapeValues { None, Symbolic, Constant };

// For a node some of whose inputs have sym_values (or a Shape or Size of a dynamic tensor), and
// all of whose other inputs are small integer (or boolean) constants: computes its outputs'
// values as expressions. Constant: every value turned out constant, the outputs are constants
// now and the node is dead. Symbolic: the outputs have sym_values. None: the op is not one this
// follows, or a value cannot be expressed (the node then just runs).
Result<ShapeValues> propagate_shape_values(Graph& graph, IrNode& node);

// See the top of the file. NotSupported naming the node and its input for a dynamic value in an
// input that is not materialized.
Status materialize_shape_inputs(Graph& graph);

// The bytes of a small integer tensor (int32, else int64) whose elements are `exprs` evaluated
// with the symbols at `symbols`: what materialize_shape_inputs puts in place of a shape input (at
// the symbols' maxima, IrValue::at_max_of), and what a dynamic GPU engine's probes put there at
// their sizes (backends/cuda/builder/dynamic_shapes.h).
Result<std::vector<uint8_t>> size_values_bytes(const sym::SymbolTable& table,
                                               const std::vector<sym::SizeExpr>& exprs, DType dtype,
                                               std::span<const int64_t> symbols);

}  // namespace baton::compiler
