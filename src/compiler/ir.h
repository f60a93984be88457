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
#include <vector>

#include "baton/core/device.h"
#include "baton/core/dtype.h"

namespace baton::compiler {

struct IrValue {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  bool shape_known = false;
  // Host bytes of a compile-time constant (row-major, little-endian); null otherwise.
  std::shared_ptr<const std::vector<uint8_t>> constant;
  int producer = -1;  // node index, -1 for graph inputs and constants
};

struct IrAttribute {
  enum class Kind { Int, Float, String, Ints, Floats, Tensor, Other };
  std::string name;
  Kind kind = Kind::Other;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  // Kind::Tensor: a constant value's data.
  DType tensor_dtype = DType::Float32;
  std::vector<int64_t> tensor_sizes;
  std::shared_ptr<const std::vector<uint8_t>> tensor_data;
  // The ONNX attribute type name, for messages ("INT", "GRAPH", "SPARSE_TENSOR", ...).
  std::string onnx_type;
};

struct IrNode {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for ai.onnx
  int opset = 0;             // the model's opset for this node's domain
  std::vector<int> inputs;   // value indices; -1 for an absent optional input
  std::vector<int> outputs;  // value indices; -1 for an unused optional output
  std::vector<IrAttribute> attributes;
  bool dead = false;   // folded away or absorbed
  int partition = -1;  // -1: runs on the CPU

  const IrAttribute* attribute(const std::string& attr_name) const {
    for (const auto& a : attributes) {
      if (a.name == attr_name) return &a;
    }
    return nullptr;
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
