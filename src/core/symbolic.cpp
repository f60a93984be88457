#include "core/symbolic.h"

#include <algorithm>

#include "baton/core/check.h"

namespace baton::sym {
namespace {

Status overflow(const char* what) {
  return BATON_ERROR(InvalidArgument, "a size expression overflows int64 in {}", what);
}

Result<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return overflow("a sum");
  return r;
}

Result<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return overflow("a product");
  return r;
}

// floor(a / b) and ceil(a / b) for b > 0 (any sign of a; no overflow is possible).
int64_t floor_of(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0 ? 1 : 0); }
int64_t ceil_of(int64_t a, int64_t b) { return a / b + (a % b != 0 && a > 0 ? 1 : 0); }

bool commutative(Op op) { return op == Op::Add || op == Op::Mul || op == Op::Min || op == Op::Max; }

}  // namespace

size_t SymbolTable::NodeHash::operator()(const Node& n) const {
  size_t h = static_cast<size_t>(n.op) * 0x9e3779b97f4a7c15ULL ^ static_cast<size_t>(n.value);
  for (SizeExpr e : n.operands) h = (h ^ e) * 0x100000001b3ULL;
  return h;
}

SizeExpr SymbolTable::intern(Node node) {
  if (commutative(node.op)) {
    // A product's coefficient stays first and a sum's constant last (associative()).
    auto first = node.operands.begin(), last = node.operands.end();
    if (node.op == Op::Mul && is_constant(*first)) ++first;
    if (node.op == Op::Add && is_constant(node.operands.back())) --last;
    std::sort(first, last);
  }
  if (auto it = ids_.find(node); it != ids_.end()) return it->second;
  const SizeExpr id = static_cast<SizeExpr>(nodes_.size());
  nodes_.push_back(node);
  ids_.emplace(std::move(node), id);
  return id;
}

Result<SizeExpr> SymbolTable::add_symbol(const std::string& name, int64_t min, int64_t max,
                                         int64_t opt) {
  BATON_CHECK_OR_RETURN(0 <= min && min <= max, InvalidArgument,
                        "symbol '{}': the range {}..{} is empty or negative; give MIN..MAX with "
                        "0 <= MIN <= MAX",
                        name, min, max);
  BATON_CHECK_OR_RETURN(!find_symbol(name), InvalidArgument, "symbol '{}' is declared twice", name);
  symbols_.push_back({name, min, max, opt});
  return intern(Node{Op::Symbol, static_cast<int64_t>(symbols_.size() - 1), {}});
}

bool SymbolTable::has_data_symbols() const {
  for (const SymbolInfo& s : symbols_) {
    if (s.source >= 0) return true;
  }
  return false;
}

bool SymbolTable::uses_data_symbol(SizeExpr e) const {
  const Node& n = nodes_[e];
  if (n.op == Op::Symbol) return symbols_[static_cast<size_t>(n.value)].source >= 0;
  return std::any_of(n.operands.begin(), n.operands.end(),
                     [&](SizeExpr o) { return uses_data_symbol(o); });
}

std::optional<SizeExpr> SymbolTable::find_symbol(const std::string& name) const {
  for (size_t i = 0; i < symbols_.size(); ++i) {
    if (symbols_[i].name != name) continue;
    const auto it = ids_.find(Node{Op::Symbol, static_cast<int64_t>(i), {}});
    if (it != ids_.end()) return it->second;
  }
  return std::nullopt;
}

SizeExpr SymbolTable::constant(int64_t value) { return intern(Node{Op::Const, value, {}}); }

std::optional<int64_t> SymbolTable::constant_value(SizeExpr e) const {
  if (!is_constant(e)) return std::nullopt;
  return nodes_[e].value;
}

Result<SizeExpr> SymbolTable::associative(Op op, SizeExpr a, SizeExpr b) {
  const int64_t identity = op == Op::Add ? 0 : 1;
  int64_t c = identity;
  std::vector<SizeExpr> terms;
  for (SizeExpr side : {a, b}) {
    const Node& n = nodes_[side];
    const std::vector<SizeExpr> parts = n.op == op ? n.operands : std::vector<SizeExpr>{side};
    for (SizeExpr p : parts) {
      if (const std::optional<int64_t> v = constant_value(p)) {
        BATON_ASSIGN_OR_RETURN(c, op == Op::Add ? checked_add(c, *v) : checked_mul(c, *v));
      } else {
        terms.push_back(p);
      }
    }
  }
  if (op == Op::Mul && c == 0) return constant(0);
  if (terms.empty()) return constant(c);
  if (terms.size() == 1 && c == identity) return terms[0];
  if (c != identity) {
    if (op == Op::Add) {
      terms.push_back(constant(c));
    } else {
      terms.insert(terms.begin(), constant(c));
    }
  }
  return intern(Node{op, 0, std::move(terms)});
}

Result<SizeExpr> SymbolTable::add(SizeExpr a, SizeExpr b) { return associative(Op::Add, a, b); }
Result<SizeExpr> SymbolTable::mul(SizeExpr a, SizeExpr b) { return associative(Op::Mul, a, b); }

// floor (op FloorDiv) or ceil (CeilDiv) of a / b: the two differ only in how a constant quotient
// rounds; (k * x) / d with d dividing k is exact either way, (k / d) * x.
Result<SizeExpr> SymbolTable::divide(Op op, SizeExpr a, SizeExpr b) {
  const std::optional<int64_t> d = constant_value(b);
  if (d) {
    BATON_CHECK_OR_RETURN(*d > 0, InvalidArgument,
                          "a size divided by {}: sizes are divided by positive numbers only", *d);
    if (*d == 1) return a;
    if (const std::optional<int64_t> v = constant_value(a)) {
      return constant(op == Op::FloorDiv ? floor_of(*v, *d) : ceil_of(*v, *d));
    }
    const Node& n = nodes_[a];
    if (n.op == Op::Mul && is_constant(n.operands[0]) && nodes_[n.operands[0]].value % *d == 0) {
      const int64_t k = nodes_[n.operands[0]].value / *d;
      SizeExpr rest = n.operands.size() == 2
                          ? n.operands[1]
                          : intern(Node{Op::Mul, 0, {n.operands.begin() + 1, n.operands.end()}});
      return mul(constant(k), rest);
    }
  }
  return intern(Node{op, 0, {a, b}});
}

Result<SizeExpr> SymbolTable::floor_div(SizeExpr a, SizeExpr b) {
  return divide(Op::FloorDiv, a, b);
}
Result<SizeExpr> SymbolTable::ceil_div(SizeExpr a, SizeExpr b) { return divide(Op::CeilDiv, a, b); }

SizeExpr SymbolTable::min(SizeExpr a, SizeExpr b) {
  if (a == b) return a;
  const std::optional<int64_t> x = constant_value(a), y = constant_value(b);
  if (x && y) return constant(std::min(*x, *y));
  return intern(Node{Op::Min, 0, {a, b}});
}

SizeExpr SymbolTable::max(SizeExpr a, SizeExpr b) {
  if (a == b) return a;
  const std::optional<int64_t> x = constant_value(a), y = constant_value(b);
  if (x && y) return constant(std::max(*x, *y));
  return intern(Node{Op::Max, 0, {a, b}});
}

Result<int64_t> SymbolTable::evaluate(SizeExpr e, std::span<const int64_t> values) const {
  const Node& n = nodes_[e];
  switch (n.op) {
    case Op::Const:
      return n.value;
    case Op::Symbol: {
      const SymbolInfo& s = symbols_[static_cast<size_t>(n.value)];
      BATON_CHECK_OR_RETURN(static_cast<size_t>(n.value) < values.size(), InvalidArgument,
                            "symbol '{}' has no value", s.name);
      const int64_t v = values[static_cast<size_t>(n.value)];
      BATON_CHECK_OR_RETURN(s.min <= v && v <= s.max, InvalidArgument,
                            "symbol '{}' is {}, outside its range {}..{}", s.name, v, s.min, s.max);
      return v;
    }
    case Op::Add:
    case Op::Mul: {
      int64_t r = n.op == Op::Add ? 0 : 1;
      for (SizeExpr o : n.operands) {
        BATON_ASSIGN_OR_RETURN(const int64_t v, evaluate(o, values));
        BATON_ASSIGN_OR_RETURN(r, n.op == Op::Add ? checked_add(r, v) : checked_mul(r, v));
      }
      return r;
    }
    case Op::FloorDiv:
    case Op::CeilDiv: {
      BATON_ASSIGN_OR_RETURN(const int64_t a, evaluate(n.operands[0], values));
      BATON_ASSIGN_OR_RETURN(const int64_t b, evaluate(n.operands[1], values));
      BATON_CHECK_OR_RETURN(b > 0, InvalidArgument, "{} divides by {}", to_string(e), b);
      return n.op == Op::FloorDiv ? floor_of(a, b) : ceil_of(a, b);
    }
    case Op::Min:
    case Op::Max: {
      BATON_ASSIGN_OR_RETURN(const int64_t a, evaluate(n.operands[0], values));
      BATON_ASSIGN_OR_RETURN(const int64_t b, evaluate(n.operands[1], values));
      return n.op == Op::Min ? std::min(a, b) : std::max(a, b);
    }
  }
  return BATON_ERROR(Internal, "size expression {} has an unknown op", e);
}

Result<Bounds> SymbolTable::bounds(SizeExpr e) const {
  const Node& n = nodes_[e];
  switch (n.op) {
    case Op::Const:
      return Bounds{n.value, n.value};
    case Op::Symbol: {
      const SymbolInfo& s = symbols_[static_cast<size_t>(n.value)];
      return Bounds{s.min, s.max};
    }
    case Op::Add:
    case Op::Mul: {
      Bounds r = n.op == Op::Add ? Bounds{0, 0} : Bounds{1, 1};
      for (SizeExpr o : n.operands) {
        BATON_ASSIGN_OR_RETURN(const Bounds v, bounds(o));
        if (n.op == Op::Add) {
          BATON_ASSIGN_OR_RETURN(r.lo, checked_add(r.lo, v.lo));
          BATON_ASSIGN_OR_RETURN(r.hi, checked_add(r.hi, v.hi));
        } else {
          // The extremes of a product of intervals are among the products of their ends.
          int64_t c[4];
          BATON_ASSIGN_OR_RETURN(c[0], checked_mul(r.lo, v.lo));
          BATON_ASSIGN_OR_RETURN(c[1], checked_mul(r.lo, v.hi));
          BATON_ASSIGN_OR_RETURN(c[2], checked_mul(r.hi, v.lo));
          BATON_ASSIGN_OR_RETURN(c[3], checked_mul(r.hi, v.hi));
          r = {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
        }
      }
      return r;
    }
    case Op::FloorDiv:
    case Op::CeilDiv: {
      BATON_ASSIGN_OR_RETURN(const Bounds a, bounds(n.operands[0]));
      BATON_ASSIGN_OR_RETURN(const Bounds b, bounds(n.operands[1]));
      BATON_CHECK_OR_RETURN(b.lo > 0, InvalidArgument,
                            "{} may divide by {}: sizes are divided by positive numbers only",
                            to_string(e), b.lo);
      // Monotone in the dividend; for a dividend of one sign, monotone in the divisor too.
      auto div = [&](int64_t x, int64_t y) {
        return n.op == Op::FloorDiv ? floor_of(x, y) : ceil_of(x, y);
      };
      const int64_t c[4] = {div(a.lo, b.lo), div(a.lo, b.hi), div(a.hi, b.lo), div(a.hi, b.hi)};
      return Bounds{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case Op::Min:
    case Op::Max: {
      BATON_ASSIGN_OR_RETURN(const Bounds a, bounds(n.operands[0]));
      BATON_ASSIGN_OR_RETURN(const Bounds b, bounds(n.operands[1]));
      if (n.op == Op::Min) return Bounds{std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      return Bounds{std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
  }
  return BATON_ERROR(Internal, "size expression {} has an unknown op", e);
}

std::string SymbolTable::to_string(SizeExpr e) const {
  const Node& n = nodes_[e];
  switch (n.op) {
    case Op::Const:
      return std::to_string(n.value);
    case Op::Symbol:
      return symbols_[static_cast<size_t>(n.value)].name;
    case Op::Add:
    case Op::Mul: {
      std::string out;
      for (SizeExpr o : n.operands) {
        if (!out.empty()) out += n.op == Op::Add ? " + " : " * ";
        const bool paren = n.op == Op::Mul && nodes_[o].op == Op::Add;
        out += paren ? "(" + to_string(o) + ")" : to_string(o);
      }
      return out;
    }
    case Op::FloorDiv:
    case Op::CeilDiv: {
      // Operands that are sums or products in parentheses: floor((seq + 1) / 2).
      auto operand = [&](SizeExpr o) {
        const Op op = nodes_[o].op;
        return op == Op::Add || op == Op::Mul ? "(" + to_string(o) + ")" : to_string(o);
      };
      return std::string(n.op == Op::FloorDiv ? "floor(" : "ceil(") + operand(n.operands[0]) +
             " / " + operand(n.operands[1]) + ")";
    }
    case Op::Min:
    case Op::Max:
      return std::string(n.op == Op::Min ? "min(" : "max(") + to_string(n.operands[0]) + ", " +
             to_string(n.operands[1]) + ")";
  }
  return "?";
}

}  // namespace baton::sym
