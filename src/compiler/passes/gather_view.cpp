// gather-view: Gathers whose indices the compiler can read from the sizes alone.
//
// Exporters index tensors with positions they compute from the sizes: GPT-2's position
// embedding is Gather(wpe, Range(0, seq)), BERT's Gather(position_table, position_ids[:, :seq])
// over a constant arange, and the attention-mask code of transformers gathers the mask with
// `batch_index * seq + kv_index` from two Ranges. BERT's token type embedding gathers row 0 of
// its table at every position (a zero buffer sliced and expanded). A static compile folds all of
// that into constants; a dynamic one cannot, so a dynamic GPU engine ran a gather kernel per call
// for each (and more scratch), where the static engine ran none: most of the dynamic BERT-base's
// and GPT-2's gap to their static programs at batch 1 (bench/RESULTS.md).
//
// What the indices are is read symbolically: each value of the index chain as an affine function
// of its element's coordinates, `offset + sum_d coef[d] * i_d`, with the offset and coefficients
// size expressions (Range, Unsqueeze, Expand, Cast, Slice of such a value, Add of two, Mul by a
// size, constants whose elements are affine, and any Gather from a tensor of one value). Then:
//  - indices that walk a run of consecutive positions in row-major order (each dimension's
//    coefficient is the product of the sizes after it) read `data`'s elements [offset, offset +
//    count) along the axis in their order: a Slice (a view) and a Reshape (a view), or nothing
//    when the run is the whole axis;
//  - indices that are all one constant value read one row of a constant table: that row, as a
//    constant, replaces the Gather's output in the elementwise Add/Sub/Mul/Div nodes reading it,
//    which broadcast it (every reader must be one whose other operand has the result's shape).
// A sum over a dynamic size is compared by its expression, or by evaluating both at every
// combination of each symbol's minimum, middle and maximum (polynomials of degree at most two in
// each symbol that agree there agree everywhere; these have degree one).
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "baton/core/check.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/rewrite.h"
#include "ops/op_def.h"
#include "ops/shape.h"

namespace baton::compiler {
namespace {

// Elements of a constant index tensor read to find whether it is affine; larger ones are left.
constexpr int64_t kMaxConstantElements = int64_t{1} << 22;

struct Affine {
  sym::SizeExpr offset = 0;
  std::vector<sym::SizeExpr> coef;  // one per dimension; 0 for dimensions of size 1
};

bool is_integer(DType t) {
  return t == DType::Int64 || t == DType::Int32 || t == DType::Int16 || t == DType::Int8 ||
         t == DType::UInt8;
}

// Whether two expressions have the same value at every size in range (see the top of the file).
bool equal_everywhere(const sym::SymbolTable& table, sym::SizeExpr a, sym::SizeExpr b) {
  if (a == b) return true;
  const size_t k = table.num_symbols();
  if (k == 0 || k > 6) return false;
  std::vector<std::vector<int64_t>> choices;
  for (size_t s = 0; s < k; ++s) {
    const sym::SymbolInfo& info = table.symbol(s);
    choices.push_back({info.min, info.min + (info.max - info.min) / 2, info.max});
  }
  size_t grid = 1;
  for (size_t s = 0; s < k; ++s) grid *= 3;
  std::vector<int64_t> at(k);
  for (size_t g = 0; g < grid; ++g) {
    size_t rest = g;
    for (size_t s = 0; s < k; ++s) {
      at[s] = choices[s][rest % 3];
      rest /= 3;
    }
    const Result<int64_t> x = table.evaluate(a, at), y = table.evaluate(b, at);
    if (!x.ok() || !y.ok() || *x != *y) return false;
  }
  return true;
}

bool is_one(const sym::SymbolTable& table, sym::SizeExpr e) {
  const std::optional<int64_t> v = table.constant_value(e);
  return v && *v == 1;
}

bool is_zero(const sym::SymbolTable& table, sym::SizeExpr e) {
  const std::optional<int64_t> v = table.constant_value(e);
  return v && *v == 0;
}

// The constant ints of an optional input (absent: nullopt).
std::optional<std::vector<int64_t>> ints_of(const Graph& graph, const IrNode& node, size_t i) {
  if (i >= node.inputs.size() || node.inputs[i] < 0) return std::nullopt;
  const IrValue& v = graph.values[node.inputs[i]];
  if (!v.constant || !v.sym_values.empty()) return std::nullopt;
  const std::optional<std::vector<double>> d = constant_as_doubles(graph, node.inputs[i]);
  if (!d) return std::nullopt;
  std::vector<int64_t> out;
  for (double x : *d) out.push_back(static_cast<int64_t>(x));
  return out;
}

class AffineReader {
 public:
  explicit AffineReader(Graph& graph) : graph_(graph), table_(graph.symbols) {}

  std::optional<Affine> of(int value, int depth = 0) {
    if (value < 0 || depth > 40) return std::nullopt;
    if (auto it = memo_.find(value); it != memo_.end()) return it->second;
    std::optional<Affine> a = read(value, depth);
    if (a) {
      // A dimension of size 1 is only ever indexed at 0: its coefficient says nothing.
      const IrValue& v = graph_.values[value];
      for (size_t d = 0; d < a->coef.size(); ++d) {
        if (!is_dynamic(v) && v.sizes[d] == 1) a->coef[d] = table_.constant(0);
        if (is_dynamic(v) && is_one(table_, v.dims[d])) a->coef[d] = table_.constant(0);
      }
    }
    memo_[value] = a;
    return a;
  }

 private:
  Affine uniform(size_t rank, sym::SizeExpr offset) {
    return Affine{offset, std::vector<sym::SizeExpr>(rank, table_.constant(0))};
  }

  // A constant whose elements are offset + sum coef[d] * i_d, with non-negative integers.
  std::optional<Affine> constant_affine(int value) {
    const IrValue& v = graph_.values[value];
    if (is_dynamic(v) || ops::product(v.sizes) > kMaxConstantElements) return std::nullopt;
    const std::optional<std::vector<double>> e = constant_as_doubles(graph_, value);
    if (!e || e->empty()) return std::nullopt;
    const size_t rank = v.sizes.size();
    std::vector<int64_t> strides(rank, 1);
    for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * v.sizes[d];
    const double c = (*e)[0];
    std::vector<double> coef(rank, 0.0);
    for (size_t d = 0; d < rank; ++d) {
      if (v.sizes[d] > 1) coef[d] = (*e)[static_cast<size_t>(strides[d])] - c;
    }
    for (size_t i = 0; i < e->size(); ++i) {
      double want = c;
      size_t rest = i;
      for (size_t d = 0; d < rank; ++d) {
        want += coef[d] * static_cast<double>(rest / static_cast<size_t>(strides[d]));
        rest %= static_cast<size_t>(strides[d]);
      }
      if ((*e)[i] != want) return std::nullopt;
    }
    if (c < 0 || c != static_cast<double>(static_cast<int64_t>(c))) return std::nullopt;
    Affine a{table_.constant(static_cast<int64_t>(c)), {}};
    for (double k : coef) {
      if (k < 0) return std::nullopt;
      a.coef.push_back(table_.constant(static_cast<int64_t>(k)));
    }
    return a;
  }

  // A one-element value the compiler knows as an expression (a size) or a constant.
  std::optional<sym::SizeExpr> scalar_of(int value) {
    const IrValue& v = graph_.values[value];
    if (v.sym_values.size() == 1) return v.sym_values[0];
    if (v.constant && v.sym_values.empty() && !is_dynamic(v) && ops::product(v.sizes) == 1) {
      const std::optional<double> x = scalar_constant(graph_, value);
      if (!x || *x < 0 || *x != static_cast<double>(static_cast<int64_t>(*x))) return std::nullopt;
      return table_.constant(static_cast<int64_t>(*x));
    }
    return std::nullopt;
  }

  // `a` (of rank a.coef.size()) broadcast to `rank` dimensions, aligned at the right.
  Affine widened(const Affine& a, size_t rank) {
    Affine out{a.offset, std::vector<sym::SizeExpr>(rank - a.coef.size(), table_.constant(0))};
    out.coef.insert(out.coef.end(), a.coef.begin(), a.coef.end());
    return out;
  }

  std::optional<Affine> read(int value, int depth) {
    const IrValue& v = graph_.values[value];
    if (!is_integer(v.dtype)) return std::nullopt;
    const size_t rank = v.sizes.size();
    if (std::optional<sym::SizeExpr> s = scalar_of(value)) return uniform(rank, *s);
    if (v.constant) return v.sym_values.empty() ? constant_affine(value) : std::nullopt;
    if (v.producer < 0) return std::nullopt;
    const IrNode& n = graph_.nodes[v.producer];
    if (n.dead || !n.domain.empty() || n.outputs.size() != 1) return std::nullopt;
    const std::string& op = n.op_type;
    if (op == "Range") {
      const std::optional<sym::SizeExpr> start = scalar_of(n.inputs[0]);
      const std::optional<sym::SizeExpr> delta = scalar_of(n.inputs[2]);
      if (!start || !delta) return std::nullopt;
      return Affine{*start, {*delta}};
    }
    if (op == "Cast" || op == "Identity") {
      if (!is_integer(graph_.values[n.inputs[0]].dtype)) return std::nullopt;
      return of(n.inputs[0], depth + 1);
    }
    if (op == "Unsqueeze") {
      const std::optional<Affine> in = of(n.inputs[0], depth + 1);
      if (!in) return std::nullopt;
      std::optional<std::vector<int64_t>> axes = ints_of(graph_, n, 1);
      if (!axes) {
        if (n.def->attr_index("axes") < 0) return std::nullopt;
        axes = n.attr_ints("axes");
      }
      std::vector<uint8_t> inserted(rank, 0);
      for (int64_t a : *axes) {
        if (a < 0) a += static_cast<int64_t>(rank);
        if (a < 0 || a >= static_cast<int64_t>(rank)) return std::nullopt;
        inserted[static_cast<size_t>(a)] = 1;
      }
      Affine out{in->offset, {}};
      size_t next = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (inserted[d]) {
          out.coef.push_back(table_.constant(0));
        } else {
          if (next >= in->coef.size()) return std::nullopt;
          out.coef.push_back(in->coef[next++]);
        }
      }
      if (next != in->coef.size()) return std::nullopt;
      return out;
    }
    if (op == "Gather" || op == "GatherElements") {
      // Whatever it picks from a tensor of one value everywhere is that value (BERT's token
      // types: a zero buffer gathered at the position ids).
      const std::optional<Affine> data = of(n.inputs[0], depth + 1);
      if (!data || !std::all_of(data->coef.begin(), data->coef.end(),
                                [&](sym::SizeExpr c) { return is_zero(table_, c); })) {
        return std::nullopt;
      }
      return uniform(rank, data->offset);
    }
    if (op == "Expand") {
      const std::optional<Affine> in = of(n.inputs[0], depth + 1);
      if (!in || in->coef.size() > rank) return std::nullopt;
      return widened(*in, rank);
    }
    if (op == "Slice") {
      // Constant starts along constant axes, steps of 1: index i_d reads element start_d + i_d.
      const std::optional<Affine> in = of(n.inputs[0], depth + 1);
      const IrValue& x = graph_.values[n.inputs[0]];
      const std::optional<std::vector<int64_t>> starts = ints_of(graph_, n, 1);
      if (!in || !starts || in->coef.size() != rank) return std::nullopt;
      std::vector<int64_t> axes;
      if (std::optional<std::vector<int64_t>> a = ints_of(graph_, n, 3)) {
        axes = *a;
      } else if (n.inputs.size() > 3 && n.inputs[3] >= 0) {
        return std::nullopt;
      } else {
        for (size_t d = 0; d < starts->size(); ++d) axes.push_back(static_cast<int64_t>(d));
      }
      if (std::optional<std::vector<int64_t>> steps = ints_of(graph_, n, 4)) {
        if (std::any_of(steps->begin(), steps->end(), [](int64_t s) { return s != 1; }))
          return std::nullopt;
      } else if (n.inputs.size() > 4 && n.inputs[4] >= 0) {
        return std::nullopt;
      }
      if (axes.size() != starts->size()) return std::nullopt;
      sym::SizeExpr offset = in->offset;
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t axis = axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k];
        if (axis < 0 || axis >= static_cast<int64_t>(rank)) return std::nullopt;
        int64_t start = (*starts)[k];
        if (start == 0) continue;
        // A start that is not plainly inside a static axis would be clamped: left alone.
        const auto ax = static_cast<size_t>(axis);
        if (is_dynamic(x) && !table_.is_constant(x.dims[ax])) return std::nullopt;
        if (start < 0 || start >= x.sizes[ax]) return std::nullopt;
        Result<sym::SizeExpr> term = table_.mul(in->coef[ax], table_.constant(start));
        if (!term.ok()) return std::nullopt;
        Result<sym::SizeExpr> sum = table_.add(offset, *term);
        if (!sum.ok()) return std::nullopt;
        offset = *sum;
      }
      return Affine{offset, in->coef};
    }
    if (op == "Add" || op == "Mul") {
      const std::optional<Affine> a = of(n.inputs[0], depth + 1);
      const std::optional<Affine> b = of(n.inputs[1], depth + 1);
      if (!a || !b || a->coef.size() > rank || b->coef.size() > rank) return std::nullopt;
      const Affine x = widened(*a, rank), y = widened(*b, rank);
      Affine out{0, std::vector<sym::SizeExpr>(rank)};
      if (op == "Add") {
        Result<sym::SizeExpr> o = table_.add(x.offset, y.offset);
        if (!o.ok()) return std::nullopt;
        out.offset = *o;
        for (size_t d = 0; d < rank; ++d) {
          Result<sym::SizeExpr> c = table_.add(x.coef[d], y.coef[d]);
          if (!c.ok()) return std::nullopt;
          out.coef[d] = *c;
        }
        return out;
      }
      // A product is affine when one side is one value everywhere.
      const auto flat = [&](const Affine& z) {
        return std::all_of(z.coef.begin(), z.coef.end(),
                           [&](sym::SizeExpr c) { return is_zero(table_, c); });
      };
      const Affine* scale = flat(y) ? &y : flat(x) ? &x : nullptr;
      if (scale == nullptr) return std::nullopt;
      const Affine& other = scale == &y ? x : y;
      Result<sym::SizeExpr> o = table_.mul(other.offset, scale->offset);
      if (!o.ok()) return std::nullopt;
      out.offset = *o;
      for (size_t d = 0; d < rank; ++d) {
        Result<sym::SizeExpr> c = table_.mul(other.coef[d], scale->offset);
        if (!c.ok()) return std::nullopt;
        out.coef[d] = *c;
      }
      return out;
    }
    return std::nullopt;
  }

  Graph& graph_;
  sym::SymbolTable& table_;
  std::map<int, std::optional<Affine>> memo_;
};

// A constant int64 tensor of `exprs` (their values at the symbols' maxima), carrying the
// expressions as sym_values when some are dynamic: what a Slice's ends or a Reshape's shape
// computed from sizes would be (materialize_shape_inputs turns it into the held constant).
Result<int> sizes_constant(Graph& graph, const std::string& name,
                           const std::vector<sym::SizeExpr>& exprs) {
  std::vector<int64_t> at_max;
  for (size_t s = 0; s < graph.symbols.num_symbols(); ++s) {
    at_max.push_back(graph.symbols.symbol(s).max);
  }
  std::vector<uint8_t> bytes(exprs.size() * sizeof(int64_t));
  bool dynamic = false;
  for (size_t i = 0; i < exprs.size(); ++i) {
    BATON_ASSIGN_OR_RETURN(const int64_t x, graph.symbols.evaluate(exprs[i], at_max));
    std::memcpy(bytes.data() + i * sizeof(int64_t), &x, sizeof(int64_t));
    dynamic |= !graph.symbols.is_constant(exprs[i]);
  }
  const int c = add_constant(graph, name, DType::Int64, {static_cast<int64_t>(exprs.size())},
                             std::move(bytes));
  if (dynamic) graph.values[c].sym_values = exprs;
  return c;
}

// Every live reader of `from` reads `to` instead.
void redirect(Graph& graph, int from, int to) {
  for (IrNode& n : graph.nodes) {
    if (n.dead) continue;
    for (int& in : n.inputs) {
      if (in == from) in = to;
    }
  }
}

// Gather `g` whose indices walk a run of consecutive positions: Slice and Reshape views. Returns
// whether it rewrote.
Result<bool> rewrite_run(Graph& graph, const Uses& uses, int g, const Affine& idx) {
  sym::SymbolTable& table = graph.symbols;
  // Copies: the nodes and values added below may move the graph's vectors.
  const IrNode gather = graph.nodes[g];
  const int data = gather.inputs[0], out = gather.outputs[0];
  const IrValue dv = graph.values[data];
  const IrValue iv = graph.values[gather.inputs[1]];
  if (uses.is_output(out) || iv.sizes.empty()) return false;
  const int64_t rank = static_cast<int64_t>(dv.sizes.size());
  int64_t axis = gather.attr_int("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  const auto a = static_cast<size_t>(axis);
  // Row-major strides: the last dimension's coefficient 1, each other the product after it.
  sym::SizeExpr count = table.constant(1);
  bool walks_something = false;
  for (size_t d = iv.sizes.size(); d-- > 0;) {
    const sym::SizeExpr dim = dim_expr(graph, iv, d);
    if (is_one(table, dim)) continue;
    if (!equal_everywhere(table, idx.coef[d], count)) return false;
    walks_something = true;
    BATON_ASSIGN_OR_RETURN(count, table.mul(count, dim));
  }
  if (!walks_something) return false;
  const std::optional<int64_t> start = table.constant_value(idx.offset);
  if (!start || *start < 0) return false;
  const sym::SizeExpr axis_dim = dim_expr(graph, dv, a);
  // Dims first: nothing is added to the graph before the rewrite is known to apply.
  // The result's shape: data's dimensions with the indices' in place of the axis.
  std::vector<sym::SizeExpr> dims;
  for (size_t d = 0; d < a; ++d) dims.push_back(dim_expr(graph, dv, d));
  for (size_t d = 0; d < iv.sizes.size(); ++d) dims.push_back(dim_expr(graph, iv, d));
  for (size_t d = a + 1; d < dv.sizes.size(); ++d) dims.push_back(dim_expr(graph, dv, d));
  for (sym::SizeExpr e : dims) {
    // Reshape reads a 0 as "keep the input's size": a dimension that can be 0 is left alone.
    BATON_ASSIGN_OR_RETURN(const sym::Bounds b, table.bounds(e));
    if (b.lo < 1) return false;
  }
  std::vector<int> added;  // nodes added, dead again if the rewrite does not apply after all
  int source = data;
  if (*start != 0 || !equal_everywhere(table, count, axis_dim)) {
    // A part of the axis: the axis must hold all of it at the largest sizes.
    if (!table.is_constant(axis_dim)) return false;
    BATON_ASSIGN_OR_RETURN(const sym::Bounds b, table.bounds(count));
    if (b.lo < 1 || *start + b.hi > dv.sizes[a]) return false;
    BATON_ASSIGN_OR_RETURN(const sym::SizeExpr end, table.add(count, table.constant(*start)));
    const std::string name = gather.name + "/slice";
    BATON_ASSIGN_OR_RETURN(const int starts,
                           sizes_constant(graph, name + "/starts", {table.constant(*start)}));
    BATON_ASSIGN_OR_RETURN(const int ends, sizes_constant(graph, name + "/ends", {end}));
    BATON_ASSIGN_OR_RETURN(const int axes,
                           sizes_constant(graph, name + "/axes", {table.constant(axis)}));
    source = add_value(graph, graph.values[out].name + "/run");
    BATON_ASSIGN_OR_RETURN(
        const int slice,
        add_node(graph, NewNode{name, "Slice", "", 0, {data, starts, ends, axes}, {source}, {}}));
    added.push_back(slice);
  }
  const int result = add_value(graph, graph.values[out].name + "/view");
  int view = -1;
  if (same_shape(graph.values[source], graph.values[out])) {
    BATON_ASSIGN_OR_RETURN(
        view,
        add_node(graph,
                 NewNode{gather.name + "/identity", "Identity", "", 0, {source}, {result}, {}}));
  } else {
    BATON_ASSIGN_OR_RETURN(const int shape, sizes_constant(graph, gather.name + "/shape", dims));
    BATON_ASSIGN_OR_RETURN(
        view,
        add_node(
            graph,
            NewNode{gather.name + "/reshape", "Reshape", "", 0, {source, shape}, {result}, {}}));
  }
  added.push_back(view);
  // The views' inferred shape must be the Gather's, expression for expression; where inference
  // named a dimension otherwise, the Gather stays and the new nodes go.
  if (!same_shape(graph.values[result], graph.values[out]) ||
      graph.values[result].dtype != graph.values[out].dtype) {
    for (int n : added) graph.nodes[n].dead = true;
    return false;
  }
  graph.nodes[g].dead = true;
  redirect(graph, out, result);
  return true;
}

// Gather `g` of a constant table whose indices are all `row`: the row, as a constant, read by
// the elementwise nodes after it, which broadcast it. Returns whether it rewrote.
Result<bool> rewrite_row(Graph& graph, const Uses& uses, int g, int64_t row) {
  const IrNode& gather = graph.nodes[g];
  const int data = gather.inputs[0], out = gather.outputs[0];
  const IrValue& dv = graph.values[data];
  const IrValue& iv = graph.values[gather.inputs[1]];
  if (!dv.constant || is_dynamic(dv) || uses.is_output(out) || uses.consumers(out).empty()) {
    return false;
  }
  const int64_t rank = static_cast<int64_t>(dv.sizes.size());
  int64_t axis = gather.attr_int("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  const auto a = static_cast<size_t>(axis);
  if (row < 0) row += dv.sizes[a];
  if (row < 0 || row >= dv.sizes[a]) return false;
  for (int c : uses.consumers(out)) {
    const IrNode& n = graph.nodes[c];
    const bool binary =
        n.domain.empty() && n.inputs.size() == 2 && n.outputs.size() == 1 &&
        (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div");
    if (!binary || n.inputs[0] == n.inputs[1]) return false;
    const int other = n.inputs[0] == out ? n.inputs[1] : n.inputs[0];
    // The other operand alone gives the result's shape, so the row broadcasts into it.
    if (!same_shape(graph.values[other], graph.values[n.outputs[0]]) ||
        graph.values[n.outputs[0]].sizes.size() < static_cast<size_t>(rank) - 1 + iv.sizes.size()) {
      return false;
    }
  }
  // The row's bytes: data[..., row, ...] along the axis, with a 1 per index dimension there.
  const size_t elem = dtype_size(dv.dtype);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < a; ++d) outer *= dv.sizes[d];
  for (size_t d = a + 1; d < dv.sizes.size(); ++d) inner *= dv.sizes[d];
  std::vector<uint8_t> bytes(static_cast<size_t>(outer * inner) * elem);
  for (int64_t o = 0; o < outer; ++o) {
    const size_t from = static_cast<size_t>((o * dv.sizes[a] + row) * inner) * elem;
    std::memcpy(bytes.data() + static_cast<size_t>(o * inner) * elem, dv.constant->data() + from,
                static_cast<size_t>(inner) * elem);
  }
  std::vector<int64_t> sizes(dv.sizes.begin(), dv.sizes.begin() + axis);
  sizes.insert(sizes.end(), iv.sizes.size(), 1);
  sizes.insert(sizes.end(), dv.sizes.begin() + axis + 1, dv.sizes.end());
  const int constant =
      add_constant(graph, gather.name + "/row", dv.dtype, std::move(sizes), std::move(bytes));
  graph.nodes[g].dead = true;
  redirect(graph, out, constant);
  return true;
}

}  // namespace

Result<size_t> rewrite_gathers_as_views(Graph& graph) {
  if (ops::op_registry().find("Reshape", "", graph.opset) == nullptr ||
      ops::op_registry().find("Slice", "", graph.opset) == nullptr ||
      ops::op_registry().find("Identity", "", graph.opset) == nullptr || graph.opset < 13) {
    return size_t{0};
  }
  const Uses uses(graph);
  AffineReader reader(graph);
  size_t rewritten = 0;
  const size_t original = graph.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    const IrNode& n = graph.nodes[i];
    if (n.dead || n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2 ||
        n.outputs.size() != 1 || n.outputs[0] < 0) {
      continue;
    }
    // Constant indices fold with a constant table, and the identity pass takes a static
    // Gather of every index; what is left here is indices computed at run time, or a table that
    // is not constant.
    const int indices = n.inputs[1];
    if (graph.values[indices].constant != nullptr) continue;
    const std::optional<Affine> idx = reader.of(indices);
    if (!idx || idx->coef.size() != graph.values[indices].sizes.size()) continue;
    const bool uniform = std::all_of(idx->coef.begin(), idx->coef.end(),
                                     [&](sym::SizeExpr c) { return is_zero(graph.symbols, c); });
    bool done = false;
    if (uniform) {
      const std::optional<int64_t> row = graph.symbols.constant_value(idx->offset);
      if (row) {
        BATON_ASSIGN_OR_RETURN(done, rewrite_row(graph, uses, static_cast<int>(i), *row));
      }
    } else {
      BATON_ASSIGN_OR_RETURN(done, rewrite_run(graph, uses, static_cast<int>(i), *idx));
    }
    rewritten += done ? 1 : 0;
  }
  return rewritten;
}

}  // namespace baton::compiler
