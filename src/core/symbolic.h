// Symbolic sizes (issue 36, dynamic shapes): a size that is an integer expression over named
// symbols with declared ranges ("batch" in 1..32), such as batch * 128 or floor((seq + 1) / 2).
//
// Expressions live in one SymbolTable (per graph, later per program method) and are hash-consed:
// building the same expression twice gives the same SizeExpr id, and construction puts every
// expression in a canonical form, so that structurally equal sizes compare equal by id:
//   - sums and products are flattened, their operands sorted by id, constants folded into one
//     term (a sum's constant last, a product's coefficient first): (a + 1) + (b + 2) is b + a + 3
//     (in id order), 2 * (3 * a) is 6 * a; like terms are not collected beyond that (a + a stays);
//   - x + 0, x * 1, x * 0, floor(x / 1), min(x, x), max(x, x) simplify;
//   - floor(c1 / c2), min and max of constants fold; floor((k * x) / k) is x.
// Nothing here knows shapes or ops: shape inference builds expressions, the memory planner asks
// for their upper bounds, and a call evaluates them once its inputs bind the symbols.
//
// Evaluation and bounds use checked 64-bit arithmetic: an overflow is an error, never a wrapped
// value. Sizes are meant to be non-negative; floor division by a non-positive divisor is refused.
// evaluate, bounds and to_string recurse without remembering shared subexpressions (x * x is not
// collected into a power, so a chain of squares costs exponential time): they are for the
// compiler and for messages; a call will evaluate a method's sizes as one flat list, operands
// before the expressions that read them (ids are already in that order).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "baton/core/error.h"

namespace baton::sym {

using SizeExpr = uint32_t;  // an expression's id in its SymbolTable

enum class Op : uint8_t { Const, Symbol, Add, Mul, FloorDiv, CeilDiv, Min, Max };

struct Node {
  Op op = Op::Const;
  int64_t value = 0;               // Const: the value; Symbol: the symbol's index
  std::vector<SizeExpr> operands;  // Add, Mul: two or more; FloorDiv, CeilDiv, Min, Max: two
  bool operator==(const Node& o) const {
    return op == o.op && value == o.value && operands == o.operands;
  }
};

struct SymbolInfo {
  std::string name;  // the ONNX dim_param ("batch", "s0")
  int64_t min = 0;
  int64_t max = 0;
  int64_t opt = 0;  // the size to tune for (0: max); only recorded
  // -1: a call binds it from its inputs' sizes. Otherwise a data-dependent size (NonZero's
  // count, docs/dynamic_shapes.md): the compiler's value whose dimension it is, given its size by
  // the kernel that writes that value, when it runs.
  int source = -1;
};

// An inclusive range of values an expression can take given its symbols' ranges.
struct Bounds {
  int64_t lo = 0;
  int64_t hi = 0;
};

class SymbolTable {
 public:
  // A new symbol with its range (0 <= min <= max); InvalidArgument when the range is empty or
  // negative, or when `name` is already a symbol (names are the identity users see).
  Result<SizeExpr> add_symbol(const std::string& name, int64_t min, int64_t max, int64_t opt = 0);
  // The symbol named `name`, if there is one.
  std::optional<SizeExpr> find_symbol(const std::string& name) const;
  // Marks symbol `index` as the data-dependent size of value `source` (SymbolInfo::source).
  void set_source(size_t index, int source) { symbols_[index].source = source; }
  // Whether any symbol is a data-dependent size.
  bool has_data_symbols() const;
  // Whether expression `e` depends on a data-dependent symbol.
  bool uses_data_symbol(SizeExpr e) const;
  size_t num_symbols() const { return symbols_.size(); }
  const SymbolInfo& symbol(size_t index) const { return symbols_[index]; }

  SizeExpr constant(int64_t value);
  // Each in canonical form (top of the file). Constant folding is checked: an overflow is an
  // error (a constant size out of int64 range means a broken model, not a size).
  Result<SizeExpr> add(SizeExpr a, SizeExpr b);
  Result<SizeExpr> mul(SizeExpr a, SizeExpr b);
  // floor(a / b) and ceil(a / b) for a >= 0, b > 0 (refused for a constant b <= 0).
  Result<SizeExpr> floor_div(SizeExpr a, SizeExpr b);
  Result<SizeExpr> ceil_div(SizeExpr a, SizeExpr b);
  SizeExpr min(SizeExpr a, SizeExpr b);
  SizeExpr max(SizeExpr a, SizeExpr b);

  const Node& node(SizeExpr e) const { return nodes_[e]; }
  bool is_constant(SizeExpr e) const { return nodes_[e].op == Op::Const; }
  // The value of a constant expression.
  std::optional<int64_t> constant_value(SizeExpr e) const;

  // The value when symbol i is `values[i]` (one value per symbol, each inside its range; an
  // out-of-range value is an InvalidArgument naming the symbol, its value and its range).
  Result<int64_t> evaluate(SizeExpr e, std::span<const int64_t> values) const;
  // The range of values over every in-range assignment of the symbols (interval arithmetic:
  // exact for expressions in which each symbol appears once, an enclosure otherwise).
  Result<Bounds> bounds(SizeExpr e) const;
  // "floor((batch * 128 + 1) / 2)".
  std::string to_string(SizeExpr e) const;

  size_t size() const { return nodes_.size(); }

 private:
  struct NodeHash {
    size_t operator()(const Node& n) const;
  };
  SizeExpr intern(Node node);
  Result<SizeExpr> associative(Op op, SizeExpr a, SizeExpr b);
  Result<SizeExpr> divide(Op op, SizeExpr a, SizeExpr b);

  std::vector<Node> nodes_;
  std::unordered_map<Node, SizeExpr, NodeHash> ids_;
  std::vector<SymbolInfo> symbols_;
};

}  // namespace baton::sym
