// Baton's graph IR: what ONNX import produces and every compiler pass reads and rewrites.
//
// Values are tensors with static dtype and sizes (shape inference fills them in). A value with
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
#include "ops/op_def.h"

namespace baton::compiler {

struct IrValue {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
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

  int add_value(IrValue v) {
    values.push_back(std::move(v));
    return static_cast<int>(values.size()) - 1;
  }
};

}  // namespace baton::compiler
