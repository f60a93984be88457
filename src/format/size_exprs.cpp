#include "format/size_exprs.h"

#include <algorithm>

#include "format/program_file_internal.h"

namespace baton::format {

Status evaluate_size_exprs(const fb::Method& method, std::span<const int64_t> symbols,
                           std::span<int64_t> out) {
  const auto* list = method.size_exprs();
  const uint32_t n = detail::vsize(list);
  for (uint32_t i = 0; i < n; ++i) {
    const fb::SizeExpr* e = list->Get(i);
    const auto* ops = e->operands();
    const uint32_t k = detail::vsize(ops);
    auto operand = [&](uint32_t j) { return out[ops->Get(j)]; };
    int64_t v = 0;
    bool ok = true;
    switch (e->op()) {
      case fb::SizeOp::Const:
        v = e->value();
        break;
      case fb::SizeOp::Symbol:
        ok = e->value() >= 0 && static_cast<uint64_t>(e->value()) < symbols.size();
        if (ok) v = symbols[e->value()];
        break;
      case fb::SizeOp::Add:
        v = 0;
        for (uint32_t j = 0; j < k && ok; ++j) ok = !__builtin_add_overflow(v, operand(j), &v);
        break;
      case fb::SizeOp::Mul:
        v = 1;
        for (uint32_t j = 0; j < k && ok; ++j) ok = !__builtin_mul_overflow(v, operand(j), &v);
        break;
      case fb::SizeOp::FloorDiv:
      case fb::SizeOp::CeilDiv: {
        const int64_t a = operand(0), b = operand(1);
        ok = b > 0;
        if (ok) {
          v = a / b;
          if (a % b != 0) v += e->op() == fb::SizeOp::CeilDiv ? (a > 0 ? 1 : 0) : (a < 0 ? -1 : 0);
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
    if (!ok) {
      return BATON_ERROR(InvalidArgument,
                         "size expression {} ({}) cannot be evaluated at these sizes: an overflow, "
                         "a division by a non-positive value or a bad symbol",
                         i, fb::EnumNameSizeOp(e->op()));
    }
    out[i] = v;
  }
  return Status();
}

}  // namespace baton::format
