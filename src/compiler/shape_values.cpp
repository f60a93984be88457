#include "compiler/shape_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/passes/rewrite.h"
#include "ops/shape.h"

namespace baton::compiler {
namespace {

// Shape tensors are short; a longer integer tensor is data, not sizes.
constexpr size_t kMaxElements = 64;

bool is_index_type(DType t) { return t == DType::Int64 || t == DType::Int32; }

// What the compiler knows of one input's elements: an expression per element (a constant's
// values as constant expressions), or nothing.
struct Known {
  std::vector<sym::SizeExpr> values;
  std::vector<int64_t> sizes;
  bool is_bool = false;
  std::vector<uint8_t> bools;  // for a boolean constant
};

std::optional<Known> known(Graph& graph, int id) {
  if (id < 0) return std::nullopt;
  const IrValue& v = graph.values[id];
  Known k;
  k.sizes = v.sizes;
  if (!v.sym_values.empty()) {
    k.values = v.sym_values;
    return k;
  }
  if (!v.constant || is_dynamic(v)) return std::nullopt;
  const int64_t n = ops::product(v.sizes);
  if (n < 0 || static_cast<size_t>(n) > kMaxElements) return std::nullopt;
  if (v.dtype == DType::Bool) {
    k.is_bool = true;
    k.bools.assign(v.constant->begin(), v.constant->begin() + n);
    return k;
  }
  if (!is_index_type(v.dtype)) return std::nullopt;
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = 0;
    if (v.dtype == DType::Int32) {
      int32_t y = 0;
      std::memcpy(&y, v.constant->data() + i * 4, 4);
      x = y;
    } else {
      std::memcpy(&x, v.constant->data() + i * 8, 8);
    }
    k.values.push_back(graph.symbols.constant(x));
  }
  return k;
}

// Element i of a 0-D or 1-D operand broadcast against `n` elements.
sym::SizeExpr at(const Known& k, size_t i) {
  return k.values.size() == 1 ? k.values[0] : k.values[i];
}

bool broadcastable(const Known& a, const Known& b) {
  return a.sizes.size() <= 1 && b.sizes.size() <= 1 &&
         (a.values.size() == 1 || b.values.size() == 1 || a.values.size() == b.values.size());
}

// a op b, when the table can express it. Subtraction and division keep expressions
// non-negative-coefficient: x - c for a constant c, x / c for a constant c > 0 (sizes are
// non-negative, where ONNX's truncating division is floor division).
std::optional<sym::SizeExpr> arithmetic(sym::SymbolTable& t, std::string_view op, sym::SizeExpr a,
                                        sym::SizeExpr b) {
  const std::optional<int64_t> ca = t.constant_value(a), cb = t.constant_value(b);
  if (ca && cb) {
    int64_t r = 0;
    if (op == "Add" && !__builtin_add_overflow(*ca, *cb, &r)) return t.constant(r);
    if (op == "Sub" && !__builtin_sub_overflow(*ca, *cb, &r)) return t.constant(r);
    if (op == "Mul" && !__builtin_mul_overflow(*ca, *cb, &r)) return t.constant(r);
    if (op == "Div" && *cb != 0 && !(*ca == INT64_MIN && *cb == -1)) return t.constant(*ca / *cb);
    if (op == "Max") return t.constant(std::max(*ca, *cb));
    if (op == "Min") return t.constant(std::min(*ca, *cb));
    return std::nullopt;
  }
  Result<sym::SizeExpr> r = Status(Error::NotSupported, "");
  if (op == "Add") {
    r = t.add(a, b);
  } else if (op == "Mul") {
    r = t.mul(a, b);
  } else if (op == "Sub" && cb && *cb != INT64_MIN) {
    r = t.add(a, t.constant(-*cb));
  } else if (op == "Div" && cb && *cb > 0) {
    r = t.floor_div(a, b);
  } else if (op == "Max") {
    return t.max(a, b);
  } else if (op == "Min") {
    return t.min(a, b);
  }
  if (!r.ok()) return std::nullopt;
  return *r;
}

// Whether a == b for every in-range assignment (true), for none (false), or it depends.
std::optional<bool> equal(sym::SymbolTable& t, sym::SizeExpr a, sym::SizeExpr b) {
  if (a == b) return true;
  const std::optional<int64_t> ca = t.constant_value(a), cb = t.constant_value(b);
  if (ca && cb) return *ca == *cb;
  if (ca || cb) {
    const Result<sym::Bounds> r = t.bounds(ca ? b : a);
    const int64_t c = ca ? *ca : *cb;
    if (r.ok() && (c < r->lo || c > r->hi)) return false;
  }
  return std::nullopt;
}

// The values of `node`'s single output, or nothing.
std::optional<std::vector<sym::SizeExpr>> follow(Graph& graph, IrNode& node,
                                                 std::vector<uint8_t>* bool_out) {
  sym::SymbolTable& t = graph.symbols;
  const std::string& op = node.op_type;
  if (!node.domain.empty() || node.outputs.size() != 1) return std::nullopt;
  const IrValue& out = graph.values[node.outputs[0]];
  if (is_dynamic(out) ||
      static_cast<size_t>(std::max<int64_t>(0, ops::product(out.sizes))) > kMaxElements) {
    return std::nullopt;
  }
  auto input = [&](size_t i) {
    return i < node.inputs.size() ? known(graph, node.inputs[i]) : std::nullopt;
  };

  if (op == "Shape" || op == "Size") {
    const IrValue& in = graph.values[node.inputs[0]];
    std::vector<sym::SizeExpr> dims;
    for (size_t d = 0; d < in.sizes.size(); ++d) dims.push_back(dim_expr(graph, in, d));
    if (op == "Size") {
      sym::SizeExpr n = t.constant(1);
      for (sym::SizeExpr d : dims) {
        Result<sym::SizeExpr> p = t.mul(n, d);
        if (!p.ok()) return std::nullopt;
        n = *p;
      }
      return std::vector<sym::SizeExpr>{n};
    }
    const bool ranged = node.def->attr_index("start") >= 0;
    const int64_t start = ranged ? node.attr_int("start") : 0;
    const int64_t end = ranged ? node.attr_int("end") : static_cast<int64_t>(dims.size());
    return std::vector<sym::SizeExpr>(dims.begin() + start, dims.begin() + end);
  }
  std::optional<Known> x = input(0);
  if (!x || x->is_bool) {
    if (op != "Where") return std::nullopt;
  }
  if (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
      op == "Flatten") {
    return x->values;  // row-major order is unchanged
  }
  if (op == "Cast") {
    if (!is_index_type(out.dtype)) return std::nullopt;
    return x->values;
  }
  if (op == "Gather") {
    std::optional<Known> idx = input(1);
    if (x->sizes.size() != 1 || !idx || idx->is_bool) return std::nullopt;
    std::vector<sym::SizeExpr> r;
    const auto n = static_cast<int64_t>(x->values.size());
    for (sym::SizeExpr e : idx->values) {
      std::optional<int64_t> i = t.constant_value(e);
      if (!i) return std::nullopt;
      const int64_t k = *i < 0 ? *i + n : *i;
      if (k < 0 || k >= n) return std::nullopt;
      r.push_back(x->values[k]);
    }
    return r;
  }
  if (op == "Concat") {
    std::vector<sym::SizeExpr> r;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      std::optional<Known> k = input(i);
      if (!k || k->is_bool || k->sizes.size() != 1) return std::nullopt;
      r.insert(r.end(), k->values.begin(), k->values.end());
    }
    return r;
  }
  if (op == "Slice") {
    // 1-D data with constant starts, ends, axes (0) and steps.
    if (x->sizes.size() != 1) return std::nullopt;
    auto scalar = [&](size_t i, int64_t fallback) -> std::optional<int64_t> {
      if (i >= node.inputs.size() || node.inputs[i] < 0) return fallback;
      std::optional<Known> k = input(i);
      if (!k || k->values.size() != 1) return std::nullopt;
      return t.constant_value(k->values[0]);
    };
    const std::optional<int64_t> s0 = scalar(1, 0), e0 = scalar(2, 0), ax = scalar(3, 0),
                                 st = scalar(4, 1);
    if (!s0 || !e0 || !ax || !st || (*ax != 0 && *ax != -1) || *st == 0) return std::nullopt;
    const auto n = static_cast<int64_t>(x->values.size());
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v += n;
      return std::clamp(v, lo, hi);
    };
    std::vector<sym::SizeExpr> r;
    if (*st > 0) {
      const int64_t end = clamp(*e0, 0, n);
      for (int64_t i = clamp(*s0, 0, n); i < end; i += *st) r.push_back(x->values[i]);
    } else {
      const int64_t end = clamp(*e0, -1, n - 1);
      for (int64_t i = clamp(*s0, -1, n - 1); i > end; i += *st) r.push_back(x->values[i]);
    }
    return r;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min") {
    if (node.inputs.size() != 2) return std::nullopt;
    std::optional<Known> y = input(1);
    if (!y || y->is_bool || !broadcastable(*x, *y)) return std::nullopt;
    std::vector<sym::SizeExpr> r;
    const size_t n = std::max(x->values.size(), y->values.size());
    for (size_t i = 0; i < n; ++i) {
      std::optional<sym::SizeExpr> e = arithmetic(t, op, at(*x, i), at(*y, i));
      if (!e) return std::nullopt;
      r.push_back(*e);
    }
    return r;
  }
  if (op == "Equal") {
    std::optional<Known> y = input(1);
    if (!y || y->is_bool || !broadcastable(*x, *y)) return std::nullopt;
    const size_t n = std::max(x->values.size(), y->values.size());
    bool_out->clear();
    for (size_t i = 0; i < n; ++i) {
      std::optional<bool> e = equal(t, at(*x, i), at(*y, i));
      if (!e) return std::nullopt;
      bool_out->push_back(*e ? 1 : 0);
    }
    return std::vector<sym::SizeExpr>{};
  }
  if (op == "Where") {
    std::optional<Known> c = input(0), a = input(1), b = input(2);
    if (!c || !c->is_bool || !a || !b || a->is_bool || b->is_bool) return std::nullopt;
    if (c->sizes.size() > 1 || !broadcastable(*a, *b)) return std::nullopt;
    const size_t n = std::max({c->bools.size(), a->values.size(), b->values.size()});
    if ((c->bools.size() != 1 && c->bools.size() != n)) return std::nullopt;
    std::vector<sym::SizeExpr> r;
    for (size_t i = 0; i < n; ++i) {
      const bool pick = c->bools[c->bools.size() == 1 ? 0 : i] != 0;
      r.push_back(pick ? at(*a, i) : at(*b, i));
    }
    return r;
  }
  return std::nullopt;
}

// `values` as int32 (for an Int32 tensor) or int64 bytes.
std::vector<uint8_t> bytes_of_ints(const std::vector<int64_t>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    if (dtype == DType::Int32) {
      const auto y = static_cast<int32_t>(v);
      std::memcpy(bytes.data() + i * 4, &y, 4);
    } else {
      std::memcpy(bytes.data() + i * 8, &v, 8);
    }
  }
  return bytes;
}

// Constant expressions' values as bytes.
std::vector<uint8_t> bytes_of(const sym::SymbolTable& t, const std::vector<sym::SizeExpr>& values,
                              DType dtype) {
  std::vector<int64_t> ints;
  for (sym::SizeExpr e : values) ints.push_back(*t.constant_value(e));
  return bytes_of_ints(ints, dtype);
}

}  // namespace

Result<ShapeValues> propagate_shape_values(Graph& graph, IrNode& node) {
  std::vector<uint8_t> bools;
  std::optional<std::vector<sym::SizeExpr>> values = follow(graph, node, &bools);
  if (!values) return ShapeValues::None;
  IrValue& out = graph.values[node.outputs[0]];
  if (out.dtype == DType::Bool) {
    if (static_cast<int64_t>(bools.size()) != ops::product(out.sizes)) return ShapeValues::None;
    out.constant = std::make_shared<const std::vector<uint8_t>>(std::move(bools));
  } else {
    if (!is_index_type(out.dtype) ||
        static_cast<int64_t>(values->size()) != ops::product(out.sizes)) {
      return ShapeValues::None;
    }
    const bool constant = std::all_of(values->begin(), values->end(), [&](sym::SizeExpr e) {
      return graph.symbols.is_constant(e);
    });
    if (!constant) {
      out.sym_values = std::move(*values);
      return ShapeValues::Symbolic;
    }
    out.constant =
        std::make_shared<const std::vector<uint8_t>>(bytes_of(graph.symbols, *values, out.dtype));
  }
  out.producer = -1;
  node.dead = true;
  return ShapeValues::Constant;
}

Status materialize_shape_inputs(Graph& graph) {
  std::vector<int64_t> at_max;
  for (size_t s = 0; s < graph.symbols.num_symbols(); ++s) {
    at_max.push_back(graph.symbols.symbol(s).max);
  }
  const size_t count = graph.nodes.size();
  for (size_t n = 0; n < count; ++n) {
    IrNode& node = graph.nodes[n];
    if (node.dead) continue;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int id = node.inputs[i];
      if (id < 0 || graph.values[id].sym_values.empty() || !node.def->input_slot(i).shape_input) {
        continue;
      }
      const IrValue& v = graph.values[id];
      const std::string& op = node.op_type;
      auto constant_input = [&](size_t k) {
        return k >= node.inputs.size() || node.inputs[k] < 0 ||
               graph.values[node.inputs[k]].constant != nullptr;
      };
      // Inputs that decide sizes alone: the kernels take those from the resolved output sizes.
      const bool sizes_only =
          node.domain.empty() &&
          ((op == "Reshape" && i == 1) || (op == "Expand" && i == 1) ||
           (op == "ConstantOfShape" && i == 0) ||
           (op == "Range" && i == 1 && constant_input(0) && constant_input(2)) ||
           (op == "Slice" && i == 2 && constant_input(1) && constant_input(3) &&
            constant_input(4)));
      if (!sizes_only) {
        std::string exprs;
        for (size_t k = 0; k < v.sym_values.size(); ++k) {
          exprs += (k == 0 ? "" : ", ") + graph.symbols.to_string(v.sym_values[k]);
        }
        return BATON_ERROR(NotSupported,
                           "{}: its input '{}' ('{}') is computed from dynamic sizes ([{}]), and "
                           "Baton does not run {} with that input changing between calls yet; "
                           "fix the shapes with --shape",
                           node.describe(), node.def->input_slot(i).name, v.name, exprs, op);
      }
      BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                             size_values_bytes(graph.symbols, v.sym_values, v.dtype, at_max));
      const std::vector<int64_t> sizes = v.sizes;
      const DType dtype = v.dtype;
      const std::string name = v.name + "@max";
      std::vector<sym::SizeExpr> held = v.sym_values;
      node.inputs[i] = add_constant(graph, name, dtype, sizes, std::move(bytes));
      graph.values[node.inputs[i]].at_max_of = std::move(held);
    }
  }
  return Status();
}

Result<std::vector<uint8_t>> size_values_bytes(const sym::SymbolTable& table,
                                               const std::vector<sym::SizeExpr>& exprs, DType dtype,
                                               std::span<const int64_t> symbols) {
  std::vector<int64_t> values;
  for (sym::SizeExpr e : exprs) {
    BATON_ASSIGN_OR_RETURN(const int64_t x, table.evaluate(e, symbols));
    values.push_back(x);
  }
  return bytes_of_ints(values, dtype);
}

}  // namespace baton::compiler
