// A dynamic method's size expressions (format version 4, docs/format.md): evaluation of the flat
// list Method.size_exprs, shared by the verifier (which evaluates it with every symbol at its
// maximum and checks the tensors' recorded sizes against it) and the runtime (which evaluates it
// once per call from the symbols its inputs bind).
//
// The list is in dependency order (operands before the expressions that read them), so one pass
// computes every value. Arithmetic is checked: an overflow, a division by a non-positive value
// or a symbol number out of range is an error, never a wrapped value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::fb {
struct Method;
}

namespace baton::format {

// Writes the value of expression i to out[i] (out.size() >= the method's expression count),
// with symbol s set to symbols[s]. The structure must have passed the verifier (operands earlier
// in the list, operand counts right).
Status evaluate_size_exprs(const fb::Method& method, std::span<const int64_t> symbols,
                           std::span<int64_t> out);

// The same list copied out of the file into two flat arrays, for the runtime, which evaluates it
// on every change of shape: reading each expression's table and operand vector from the file
// touched several cache lines per expression. Made once at load (allocates); evaluate() allocates
// nothing and gives what evaluate_size_exprs gives.
class SizeExprList {
 public:
  SizeExprList() = default;
  explicit SizeExprList(const fb::Method& method);
  size_t size() const { return nodes_.size(); }
  // Expression e's operation (an fb::SizeOp) and value (a Const's number, a Symbol's index).
  uint8_t op(uint32_t e) const { return nodes_[e].op; }
  int64_t value(uint32_t e) const { return nodes_[e].value; }
  Status evaluate(std::span<const int64_t> symbols, std::span<int64_t> out) const;

 private:
  struct Node {
    uint8_t op = 0;  // fb::SizeOp
    int64_t value = 0;
    uint32_t first = 0, count = 0;  // its operands in operands_
  };
  std::vector<Node> nodes_;
  std::vector<uint32_t> operands_;
};

// Expression `e` as text ("batch", "(sequence + -1)", "floor(batch * 32 / 16)"), for messages,
// Method::input_dims and inspect. At most `max_nodes` nodes are spelled out ("..." for the rest):
// a hand-made list can share subexpressions so that the full text would be exponentially long,
// or nest them a million deep. The structure must have passed the verifier.
std::string size_expr_text(const fb::Method& method, uint32_t e, int max_nodes = 64);

}  // namespace baton::format
