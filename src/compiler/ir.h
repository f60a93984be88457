// Baton's graph IR: what ONNX import produces and every compiler pass reads and rewrites.
//
// Values are tensors with a dtype and sizes (shape inference fills them in). In a dynamic graph
// (issue 36) a value's sizes may be expressions over the graph's symbols (`dims`, ids in
// Graph::symbols); its `sizes` are then the upper bound of each expression, which is what memory
// planning and every size-based decision that must hold at all shapes read. A value with
// `constant` data is known at compile time (an initializer, a Constant node, or a folded
// subgraph). Nodes are kept in topological order; passes mark nodes `dead` rather than erase them
// so indices stay stable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "core/symbolic.h"
#include "ops/op_def.h"

namespace baton::compiler {

struct IrValue {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  // One size expression per dimension when some dimension is dynamic; empty when every size is
  // static (then `sizes` are the sizes).
  std::vector<sym::SizeExpr> dims;
  // A small integer tensor whose elements are sizes of a dynamic graph (what Shape and the
  // arithmetic exporters write on shapes compute): one expression per element, row-major. Empty
  // otherwise. The nodes computing it still run at run time; this is what the compiler knows of
  // the values (compiler/shape_values.h).
  std::vector<sym::SizeExpr> sym_values;
  // A constant that holds size expressions' values at the symbols' maxima (what the compiler
  // puts in place of a Reshape's or Slice's computed shape input): those expressions, one per
  // element, so a dynamic GPU engine's probes can evaluate it at other sizes
  // (backends/cuda/builder/dynamic_shapes.h). Empty otherwise.
  std::vector<sym::SizeExpr> at_max_of;
  bool shape_known = false;
  // Host bytes of a compile-time constant (row-major, little-endian); null otherwise.
  std::shared_ptr<const std::vector<uint8_t>> constant;
  int producer = -1;  // node index, -1 for graph inputs, constants and copies
  // Where the tensor lives. The cpu until placement (compiler/placement.h) puts delegate inputs
  // and outputs on their partition's device; a copy made by a transfer is a value of its own.
  // Constants stay on the cpu (delegates embed the constants they read).
  Device device;
};

struct IrNode {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for ai.onnx
  int opset = 0;             // the model's opset for this node's domain
  std::vector<int> inputs;   // value indices; -1 for an absent optional input
  std::vector<int> outputs;  // value indices; -1 for an unused optional output
  // The operator's definition at the node's opset, and its attributes bound to it: in the
  // definition's order, defaults filled in, canonical once shapes are inferred. Backends read
  // these, never the model's raw attributes.
  const ops::OpDef* def = nullptr;
  std::vector<ops::AttrValue> attrs;
  bool dead = false;   // folded away or absorbed
  int partition = -1;  // -1: runs on the CPU
  // A node of an If's branch (onnx_import.cpp): it stays only if each condition value `cond`
  // (a bool) is `when`, which inference requires to be known at compile time; otherwise it is
  // dropped before its shapes are inferred (the other branch may be invalid at these shapes).
  struct Guard {
    int cond = -1;
    bool when = true;
    std::string if_node;  // the If's name, for messages
  };
  std::vector<Guard> guards;
  // A guarded node Baton cannot run (no kernel, a later opset): why, reported by inference only
  // if its branch is the one kept (def stays null). Unguarded nodes are reported at import.
  std::string unsupported;

  // Bound attribute `attr_name` (it must be one of the definition's).
  const ops::AttrValue& attr(std::string_view attr_name) const;
  int64_t attr_int(std::string_view attr_name) const { return attr(attr_name).i; }
  double attr_float(std::string_view attr_name) const { return attr(attr_name).f; }
  const std::string& attr_string(std::string_view attr_name) const { return attr(attr_name).s; }
  const std::vector<int64_t>& attr_ints(std::string_view attr_name) const {
    return attr(attr_name).ints;
  }
  const std::vector<double>& attr_floats(std::string_view attr_name) const {
    return attr(attr_name).floats;
  }
  // "Gemm node 'fc1'"
  std::string describe() const;
};

struct Graph {
  std::vector<IrValue> values;
  std::vector<IrNode> nodes;
  std::vector<int> inputs;   // non-constant graph inputs, in ONNX order
  std::vector<int> outputs;  // graph outputs, in ONNX order
  int opset = 0;             // ai.onnx opset
  std::string source;        // model path or "<memory>"
  std::string producer;      // "pytorch 2.11.0"
  // The symbols of the dynamic dimensions and every size expression over them (empty for a
  // static graph).
  sym::SymbolTable symbols;

  int add_value(IrValue v) {
    values.push_back(std::move(v));
    return static_cast<int>(values.size()) - 1;
  }
};

// Whether some dimension of `v` is dynamic.
inline bool is_dynamic(const IrValue& v) { return !v.dims.empty(); }

// Whether a size of one of `node`'s inputs or outputs depends on a data-dependent symbol
// (NonZero's count, docs/dynamic_shapes.md): such a node runs on the CPU, where the count is
// known when the kernel that produces it returns; a GPU engine is built for sizes known before
// the call starts.
bool touches_data_dependent_size(const Graph& graph, const IrNode& node);

// Dimension `d` of `v` as an expression (a constant for a static value).
inline sym::SizeExpr dim_expr(Graph& graph, const IrValue& v, size_t d) {
  return is_dynamic(v) ? v.dims[d] : graph.symbols.constant(v.sizes[d]);
}

// Whether `a` and `b` have the same shape at every size in range: the same upper bounds and the
// same expressions (hash-consed, so equal ids). Comparing `sizes` alone would take a [batch]
// and a [seq] for one shape whenever their maxima agree.
inline bool same_shape(const IrValue& a, const IrValue& b) {
  return a.sizes == b.sizes && a.dims == b.dims;
}

}  // namespace baton::compiler
