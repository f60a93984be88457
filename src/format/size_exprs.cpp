#include "format/size_exprs.h"

#include <algorithm>

#include "format/program_file_internal.h"

namespace baton::format {

SizeExprList::SizeExprList(const fb::Method& method) {
  const auto* list = method.size_exprs();
  const uint32_t n = detail::vsize(list);
  starts_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const fb::SizeExpr* e = list->Get(i);
    const uint32_t count = detail::vsize(e->operands());
    starts_.push_back(static_cast<uint32_t>(code_.size()));
    code_.push_back(static_cast<int64_t>(e->op()) | (static_cast<int64_t>(count) << 8));
    code_.push_back(e->value());
    for (uint32_t j = 0; j < count; ++j) code_.push_back(e->operands()->Get(j));
  }
}

namespace {

// evaluate()'s error, out of line so that the loop the runtime runs on every change of shape stays
// a few cache lines of code.
[[gnu::cold, gnu::noinline]] Status cannot_evaluate(size_t i, fb::SizeOp op) {
  return BATON_ERROR(InvalidArgument,
                     "size expression {} ({}) cannot be evaluated at these sizes: an overflow, a "
                     "division by a non-positive value or a bad symbol",
                     i, fb::EnumNameSizeOp(op));
}

// SizeExprList::evaluate, as a plain function whose address evaluate_code() gives.
[[gnu::noinline]] Status evaluate_list(const int64_t* at, size_t expressions,
                                       std::span<const int64_t> symbols, std::span<int64_t> out) {
  for (size_t i = 0; i < expressions; ++i) {
    const auto op = static_cast<fb::SizeOp>(at[0] & 0xff);
    const auto count = static_cast<uint32_t>(at[0] >> 8);
    const int64_t value = at[1];
    const int64_t* ops = at + 2;
    at = ops + count;
    auto operand = [&](uint32_t j) { return out[static_cast<size_t>(ops[j])]; };
    int64_t v = 0;
    bool ok = true;
    switch (op) {
      case fb::SizeOp::Const:
        v = value;
        break;
      case fb::SizeOp::Symbol:
        ok = value >= 0 && static_cast<uint64_t>(value) < symbols.size();
        if (ok) v = symbols[value];
        break;
      case fb::SizeOp::Add:
        v = 0;
        for (uint32_t j = 0; j < count && ok; ++j) ok = !__builtin_add_overflow(v, operand(j), &v);
        break;
      case fb::SizeOp::Mul:
        v = 1;
        for (uint32_t j = 0; j < count && ok; ++j) ok = !__builtin_mul_overflow(v, operand(j), &v);
        break;
      case fb::SizeOp::FloorDiv:
      case fb::SizeOp::CeilDiv: {
        const int64_t a = operand(0), b = operand(1);
        ok = b > 0;
        if (ok) {
          v = a / b;
          if (a % b != 0) v += op == fb::SizeOp::CeilDiv ? (a > 0 ? 1 : 0) : (a < 0 ? -1 : 0);
        }
        break;
      }
      case fb::SizeOp::Min:
        v = std::min(operand(0), operand(1));
        break;
      case fb::SizeOp::Max:
        v = std::max(operand(0), operand(1));
        break;
      default:
        ok = false;
        break;
    }
    if (!ok) [[unlikely]]
      return cannot_evaluate(i, op);
    out[i] = v;
  }
  return Status();
}

}  // namespace

Status SizeExprList::evaluate(std::span<const int64_t> symbols, std::span<int64_t> out) const {
  return evaluate_list(code_.data(), starts_.size(), symbols, out);
}

const void* SizeExprList::evaluate_code() { return reinterpret_cast<const void*>(&evaluate_list); }

Status evaluate_size_exprs(const fb::Method& method, std::span<const int64_t> symbols,
                           std::span<int64_t> out) {
  return SizeExprList(method).evaluate(symbols, out);
}

namespace {

std::string text_of(const fb::Method& m, uint32_t e, int& budget) {
  if (--budget < 0) return "...";
  const fb::SizeExpr* x = m.size_exprs()->Get(e);
  const auto* ops = x->operands();
  auto operands = [&](std::string_view sep) {
    std::string out;
    for (uint32_t j = 0; ops != nullptr && j < ops->size() && budget >= 0; ++j) {
      out += (j == 0 ? "" : std::string(sep)) + text_of(m, ops->Get(j), budget);
    }
    return out;
  };
  switch (x->op()) {
    case fb::SizeOp::Const:
      return std::to_string(x->value());
    case fb::SizeOp::Symbol:
      return std::string(detail::str(m.symbols()->Get(static_cast<uint32_t>(x->value()))->name()));
    case fb::SizeOp::Add:
      return "(" + operands(" + ") + ")";
    case fb::SizeOp::Mul:
      return operands(" * ");
    case fb::SizeOp::FloorDiv:
      return "floor(" + operands(" / ") + ")";
    case fb::SizeOp::CeilDiv:
      return "ceil(" + operands(" / ") + ")";
    case fb::SizeOp::Min:
      return "min(" + operands(", ") + ")";
    case fb::SizeOp::Max:
      return "max(" + operands(", ") + ")";
    default:
      return "?";
  }
}

}  // namespace

std::string size_expr_text(const fb::Method& method, uint32_t e, int max_nodes) {
  int budget = max_nodes;
  return text_of(method, e, budget);
}

}  // namespace baton::format
