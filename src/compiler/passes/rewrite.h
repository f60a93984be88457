// Helpers the optimizer passes share to read and rewrite the IR (compiler/passes/pass.h has the
// rules).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/core/error.h"
#include "compiler/ir.h"
#include "ops/activation.h"

namespace baton::compiler {

// Who reads each value: live consumer nodes (once per input slot that reads it) and whether it
// is a graph output. Built once per pass; passes that rewrite keep it valid by not relying on
// it for values they created.
class Uses {
 public:
  explicit Uses(const Graph& graph);
  const std::vector<int>& consumers(int value) const { return consumers_[value]; }
  bool is_output(int value) const { return output_[value] != 0; }
  // Read by exactly one node slot and not a graph output.
  bool single_use(int value) const { return !is_output(value) && consumers_[value].size() == 1; }
  // Every reader of `value` is one of `nodes`, and it is not a graph output.
  bool only_read_by(int value, std::span<const int> nodes) const;

 private:
  std::vector<std::vector<int>> consumers_;
  std::vector<uint8_t> output_;
};

// The live node producing `value` when its op is `op_type` (ai.onnx domain), else -1.
int producer_of(const Graph& graph, int value, std::string_view op_type);

// Whether `node` is a live ai.onnx BatchNormalization that normalizes per channel with running
// statistics and produces Y only (its training outputs, where a model lists them, would need the
// batch's statistics).
bool inference_batch_norm(const IrNode& node);

// The value of a one-element constant (any numeric dtype), if `value` is one.
std::optional<double> scalar_constant(const Graph& graph, int value);

// A constant's elements as doubles (empty optional when `value` is not a constant).
std::optional<std::vector<double>> constant_as_doubles(const Graph& graph, int value);

struct NewNode {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for ai.onnx (the graph's opset), "baton" for canonical ops
  int opset = 0;             // 0: the graph's opset for ai.onnx, 1 for "baton"
  std::vector<int> inputs;   // -1 for an absent optional input
  std::vector<int> outputs;  // existing values (they keep name, dtype and shape) or new ones
  std::vector<std::pair<std::string, ops::AttrValue>> attrs;
};

// Bias `b` as a value of shape [N]: itself, or a reshaped copy of a constant of N elements along
// its last axis ([1, ..., 1, N]); -1 when it is not such a row.
int row_bias(Graph& graph, int b, int64_t n);

// `node` as a NewNode: the same name, op, inputs, outputs and (present) attributes, to be
// re-added with some of them changed.
NewNode copy_of(const IrNode& node);

// The activation `node` computes (ops/activation.h), when it is one the fusion passes fold into
// the op before it: a live ai.onnx unary elementwise row of a float result or a Gelu.
std::optional<ops::Activation> activation_of(const IrNode& node);

// Appends the node: binds its attributes to its definition, runs inference, and checks that
// every output that already has a shape gets the same dtype and shape (Internal otherwise: the
// pass built a wrong node); outputs without one get theirs. Returns the node's index.
Result<int> add_node(Graph& graph, NewNode node);

// A new value for a node's output (no shape yet).
int add_value(Graph& graph, std::string name);

// A new constant value.
int add_constant(Graph& graph, std::string name, DType dtype, std::vector<int64_t> sizes,
                 std::vector<uint8_t> bytes);

// Claims a match's nodes for a rewrite: false when another match of the same pass already took
// one of them (`taken`, one flag per node); else marks them taken and dead.
bool claim(Graph& graph, std::vector<uint8_t>& taken, std::span<const int> nodes);

// Restores topological order of the live nodes (stable: ties keep their order), drops dead nodes
// and renumbers producers. Internal when the graph has a cycle.
Status sort_topologically(Graph& graph);

}  // namespace baton::compiler
