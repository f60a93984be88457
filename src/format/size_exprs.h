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

// The same list copied out of the file into one flat array, for the runtime, which evaluates it
// on every change of shape: reading each expression's table and operand vector from the file
// touched several cache lines per expression, and after a large model's call each of them missed.
// Made once at load (allocates); evaluate() allocates nothing, reads the array front to back, and
// gives what evaluate_size_exprs gives.
class SizeExprList {
 public:
  SizeExprList() = default;
  explicit SizeExprList(const fb::Method& method);
  size_t size() const { return starts_.size(); }
  // Expression e's operation (an fb::SizeOp) and value (a Const's number, a Symbol's index).
  uint8_t op(uint32_t e) const { return static_cast<uint8_t>(code_[starts_[e]] & 0xff); }
  int64_t value(uint32_t e) const { return code_[starts_[e] + 1]; }
  Status evaluate(std::span<const int64_t> symbols, std::span<int64_t> out) const;
  // The array evaluate() reads, and where evaluate()'s machine code starts, for a caller that
  // prefetches them (Method's prepare_next_resolve).
  std::span<const int64_t> code() const { return code_; }
  static const void* evaluate_code();

 private:
  // Per expression, in order: op | operand count << 8, value, then its operands' indices.
  std::vector<int64_t> code_;
  std::vector<uint32_t> starts_;  // per expression: where it begins in code_
};

// Expression `e` as text ("batch", "(sequence + -1)", "floor(batch * 32 / 16)"), for messages,
// Method::input_dims and inspect. At most `max_nodes` nodes are spelled out ("..." for the rest):
// a hand-made list can share subexpressions so that the full text would be exponentially long,
// or nest them a million deep. The structure must have passed the verifier.
std::string size_expr_text(const fb::Method& method, uint32_t e, int max_nodes = 64);

}  // namespace baton::format
