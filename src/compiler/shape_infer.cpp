#include "compiler/shape_infer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/passes.h"

namespace baton::compiler {
namespace {

using Probe = std::vector<int64_t>;  // one value per symbol of the graph

// The assignments inference runs at (shape_infer.h). probes[0] is every symbol at its maximum:
// the sizes the IR records, so that memory is planned for the largest call.
// Every symbol at its maximum.
Probe largest(const sym::SymbolTable& table) {
  Probe hi(table.num_symbols());
  for (size_t s = 0; s < hi.size(); ++s) hi[s] = table.symbol(s).max;
  return hi;
}

std::vector<Probe> make_probes(const sym::SymbolTable& table) {
  const size_t n = table.num_symbols();
  std::vector<Probe> probes;
  const Probe hi = largest(table);
  Probe lo(n);
  for (size_t s = 0; s < n; ++s) lo[s] = table.symbol(s).min;
  probes.push_back(hi);
  probes.push_back(lo);
  for (size_t s = 0; s < n && n > 1; ++s) {
    Probe a = hi, b = lo;
    a[s] = lo[s];
    b[s] = hi[s];
    probes.push_back(a);
    probes.push_back(b);
  }
  // Pseudo-random interior points (a fixed sequence: compiles are reproducible), where distinct
  // symbols almost always take distinct values, so that no expression matches by coincidence.
  uint64_t state = 0x2545F4914F6CDD1DULL;
  for (int k = 0; k < 6; ++k) {
    Probe p(n);
    for (size_t s = 0; s < n; ++s) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const uint64_t span = static_cast<uint64_t>(hi[s] - lo[s]) + 1;
      p[s] = lo[s] + static_cast<int64_t>(state % span);
    }
    probes.push_back(p);
  }
  return probes;
}

// Inputs whose values are size expressions (IrValue::sym_values) are given to inference as data:
// their values at one assignment, in the input's dtype (int64 or int32).
class SymbolicData {
 public:
  Status fill(const Graph& graph, const IrNode& node, std::vector<ops::InputInfo>& infos,
              const Probe& probe) {
    storage_.resize(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      const IrValue& v = graph.values[node.inputs[i]];
      if (v.sym_values.empty()) continue;
      std::vector<uint8_t>& bytes = storage_[i];
      bytes.assign(v.sym_values.size() * dtype_size(v.dtype), 0);
      for (size_t k = 0; k < v.sym_values.size(); ++k) {
        BATON_ASSIGN_OR_RETURN(const int64_t x, graph.symbols.evaluate(v.sym_values[k], probe));
        if (v.dtype == DType::Int32) {
          const auto y = static_cast<int32_t>(x);
          std::memcpy(bytes.data() + k * 4, &y, 4);
        } else {
          std::memcpy(bytes.data() + k * 8, &x, 8);
        }
      }
      infos[i].data = bytes.data();
      infos[i].data_from_sizes = true;
    }
    return Status();
  }

 private:
  std::vector<std::vector<uint8_t>> storage_;
};

std::string describe_probe(const sym::SymbolTable& table, const Probe& p) {
  std::string out;
  for (size_t s = 0; s < p.size(); ++s) {
    out += fmt::format("{}{}={}", s == 0 ? "" : ", ", table.symbol(s).name, p[s]);
  }
  return out;
}

// A hint for a node that fails at some probe: torch.export names each input's batch separately
// ("s33", "s6"), and a model that needs two such dimensions equal fails wherever the probe gives
// them different sizes. Names the first pair of symbols with the same range and different sizes
// at `p`, and the flag that makes them one; "" when there is none.
std::string same_dimension_hint(const sym::SymbolTable& table, const Probe& p) {
  for (size_t a = 0; a < p.size(); ++a) {
    for (size_t b = a + 1; b < p.size(); ++b) {
      const sym::SymbolInfo& x = table.symbol(a);
      const sym::SymbolInfo& y = table.symbol(b);
      if (x.min == y.min && x.max == y.max && p[a] != p[b]) {
        return fmt::format(
            " If '{}' and '{}' are the same dimension (torch.export names each input's "
            "dimensions separately), say so with --dim {}={} instead of a range for '{}'.",
            x.name, y.name, y.name, x.name, y.name);
      }
    }
  }
  return "";
}

// A candidate expression for an output dimension and its value at every probe.
struct Candidate {
  sym::SizeExpr expr;
  std::vector<int64_t> values;
};

class DynamicInference {
 public:
  DynamicInference(Graph& graph, IrNode& node)
      : graph_(graph), node_(node), table_(graph.symbols) {}

  Result<NodeShapes> run(std::vector<ops::AttrValue> raw_attrs, NodeShapes at_max) {
    probes_ = make_probes(table_);
    // The inputs' dimensions as expressions (a static input's as constants) and their values.
    for (int id : node_.inputs) {
      std::vector<sym::SizeExpr> dims;
      if (id >= 0) {
        const IrValue& v = graph_.values[id];
        if (is_dynamic(v)) {
          dims = v.dims;
        } else {
          for (int64_t s : v.sizes) dims.push_back(table_.constant(s));
        }
      }
      input_dims_.push_back(std::move(dims));
    }
    // Inference at every probe: the sizes it gives are the facts the expressions must match.
    std::vector<std::vector<std::vector<int64_t>>> sizes(at_max.outputs.size());
    for (size_t o = 0; o < sizes.size(); ++o) sizes[o].push_back(at_max.outputs[o].sizes);
    for (size_t k = 1; k < probes_.size(); ++k) {
      std::vector<std::vector<int64_t>> in_sizes(node_.inputs.size());
      BATON_ASSIGN_OR_RETURN(std::vector<ops::InputInfo> infos, input_infos(graph_, node_));
      SymbolicData data;
      BATON_TRY(data.fill(graph_, node_, infos, probes_[k]));
      for (size_t i = 0; i < node_.inputs.size(); ++i) {
        if (node_.inputs[i] < 0) continue;
        for (sym::SizeExpr e : input_dims_[i]) {
          BATON_ASSIGN_OR_RETURN(int64_t v, table_.evaluate(e, probes_[k]));
          in_sizes[i].push_back(v);
        }
        infos[i].sizes = in_sizes[i];
      }
      std::vector<ops::AttrValue> attrs = raw_attrs;
      std::vector<ops::OutputInfo> outs(node_.outputs.size());
      if (Status st = ops::infer(*node_.def, node_.name, infos, attrs, outs); !st.ok()) {
        return BATON_ERROR(NotSupported,
                           "{} is not valid at every size in the declared ranges: with {}: {}. "
                           "Narrow the ranges (--dim) or fix the shapes (--shape).{}",
                           node_.describe(), describe_probe(table_, probes_[k]), st.message(),
                           same_dimension_hint(table_, probes_[k]));
      }
      for (size_t a = 0; a < attrs.size(); ++a) {
        BATON_CHECK_OR_RETURN(
            attrs[a] == node_.attrs[a], NotSupported,
            "{}: its canonical attribute '{}' depends on the dynamic sizes ({} at the largest, {} "
            "with {}); Baton cannot run it at dynamic sizes yet: fix the shapes with --shape",
            node_.describe(), node_.def->attrs[a].name, node_.attrs[a].to_string(),
            attrs[a].to_string(), describe_probe(table_, probes_[k]));
      }
      for (size_t o = 0; o < outs.size(); ++o) {
        BATON_CHECK_OR_RETURN(outs[o].sizes.size() == at_max.outputs[o].sizes.size(), NotSupported,
                              "{}: output {} has rank {} at the largest sizes but {} with {}; a "
                              "rank that depends on sizes cannot be dynamic",
                              node_.describe(), o, at_max.outputs[o].sizes.size(),
                              outs[o].sizes.size(), describe_probe(table_, probes_[k]));
        sizes[o].push_back(std::move(outs[o].sizes));
      }
    }
    BATON_TRY(make_candidates());
    at_max.dims.resize(at_max.outputs.size());
    for (size_t o = 0; o < at_max.outputs.size(); ++o) {
      const size_t rank = at_max.outputs[o].sizes.size();
      std::vector<sym::SizeExpr> dims;
      bool dynamic = false;
      for (size_t d = 0; d < rank; ++d) {
        std::vector<int64_t> values;
        for (const auto& probe_sizes : sizes[o]) values.push_back(probe_sizes[d]);
        BATON_ASSIGN_OR_RETURN(sym::SizeExpr e, explain(values, o, d));
        dynamic = dynamic || !table_.is_constant(e);
        dims.push_back(e);
      }
      if (dynamic) at_max.dims[o] = std::move(dims);
    }
    return at_max;
  }

 private:
  Result<std::vector<int64_t>> values_of(sym::SizeExpr e) {
    std::vector<int64_t> out;
    for (const Probe& p : probes_) {
      BATON_ASSIGN_OR_RETURN(int64_t v, table_.evaluate(e, p));
      out.push_back(v);
    }
    return out;
  }

  Status add(sym::SizeExpr e) {
    if (table_.is_constant(e)) return Status();
    for (const Candidate& c : candidates_) {
      if (c.expr == e) return Status();
    }
    BATON_ASSIGN_OR_RETURN(std::vector<int64_t> values, values_of(e));
    candidates_.push_back({e, std::move(values)});
    return Status();
  }

  Status make_candidates() {
    // The sizes an input holds as values (a Reshape's shape, a Range's limit).
    for (int id : node_.inputs) {
      if (id < 0) continue;
      for (sym::SizeExpr e : graph_.values[id].sym_values) BATON_TRY(add(e));
    }
    // Each input dimension, and products of consecutive dimensions of one input.
    for (const auto& dims : input_dims_) {
      for (size_t a = 0; a < dims.size(); ++a) {
        sym::SizeExpr product = dims[a];
        BATON_TRY(add(product));
        for (size_t b = a + 1; b < dims.size(); ++b) {
          BATON_ASSIGN_OR_RETURN(product, table_.mul(product, dims[b]));
          BATON_TRY(add(product));
        }
      }
    }
    // The sum of one axis over the inputs of the most common rank.
    size_t rank = 0;
    for (const auto& dims : input_dims_) rank = std::max(rank, dims.size());
    for (size_t axis = 0; axis < rank; ++axis) {
      std::optional<sym::SizeExpr> sum;
      size_t terms = 0;
      for (const auto& dims : input_dims_) {
        if (dims.size() != rank) continue;
        if (!sum) {
          sum = dims[axis];
        } else {
          BATON_ASSIGN_OR_RETURN(sum, table_.add(*sum, dims[axis]));
        }
        ++terms;
      }
      if (terms > 1) BATON_TRY(add(*sum));
    }
    return Status();
  }

  Result<sym::SizeExpr> explain(const std::vector<int64_t>& values, size_t output, size_t axis) {
    if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; })) {
      return table_.constant(values[0]);
    }
    for (const Candidate& c : candidates_) {
      if (c.values == values) return c.expr;
    }
    // A candidate plus a constant offset.
    for (const Candidate& c : candidates_) {
      const int64_t offset = values[0] - c.values[0];
      bool match = true;
      for (size_t k = 0; k < values.size() && match; ++k) match = values[k] - c.values[k] == offset;
      if (match) return table_.add(c.expr, table_.constant(offset));
    }
    // A candidate times or divided by a constant (a Reshape's -1: the element count over the
    // sizes given, as in [17, -1, 16] of [17, batch, 32], which is 2 * batch).
    for (const Candidate& c : candidates_) {
      if (c.values[0] == 0 || values[0] == 0) continue;
      if (values[0] % c.values[0] == 0) {
        const int64_t k = values[0] / c.values[0];
        bool match = true;
        for (size_t i = 0; i < values.size() && match; ++i) match = values[i] == k * c.values[i];
        if (match) return table_.mul(table_.constant(k), c.expr);
      } else if (c.values[0] % values[0] == 0) {
        const int64_t k = c.values[0] / values[0];
        bool match = true;
        for (size_t i = 0; i < values.size() && match; ++i) match = values[i] * k == c.values[i];
        if (match) return table_.floor_div(c.expr, table_.constant(k));
      }
    }
    std::string seen;
    for (size_t k = 0; k < values.size(); ++k) {
      seen += fmt::format("{}{} with {}", k == 0 ? "" : "; ", values[k],
                          describe_probe(table_, probes_[k]));
    }
    std::string hint;
    for (size_t k = 0; k < probes_.size() && hint.empty(); ++k) {
      hint = same_dimension_hint(table_, probes_[k]);
    }
    return BATON_ERROR(NotSupported,
                       "{}: Baton cannot express axis {} of output '{}' as a size expression over "
                       "its inputs' dynamic sizes (its sizes: {}); fix the shapes with --shape.{}",
                       node_.describe(), axis, graph_.values[node_.outputs[output]].name, seen,
                       hint);
  }

  Graph& graph_;
  IrNode& node_;
  sym::SymbolTable& table_;
  std::vector<Probe> probes_;
  std::vector<std::vector<sym::SizeExpr>> input_dims_;
  std::vector<Candidate> candidates_;
};

// A node whose output has a data-dependent axis (NonZero's count): that axis becomes a new symbol
// in 0..its upper bound, whose source is the output (SymbolInfo::source; the kernel gives it a
// size when it runs); the output's other axes are the sizes inference gave at the largest sizes,
// which must not follow the input's dynamic sizes (NonZero's rank does not).
Result<NodeShapes> data_dependent_shapes(Graph& graph, const IrNode& node, NodeShapes shapes) {
  for (size_t o = 0; o < shapes.outputs.size(); ++o) {
    const ops::OutputInfo& out = shapes.outputs[o];
    if (out.data_dependent_axis < 0) continue;
    std::vector<sym::SizeExpr> dims;
    for (size_t a = 0; a < out.sizes.size(); ++a) {
      if (static_cast<int>(a) != out.data_dependent_axis) {
        dims.push_back(graph.symbols.constant(out.sizes[a]));
        continue;
      }
      // Named after the node, so that inspect and messages say where the size comes from.
      std::string name = fmt::format("count({})", node.name);
      for (int k = 2; graph.symbols.find_symbol(name); ++k) {
        name = fmt::format("count({})#{}", node.name, k);
      }
      BATON_ASSIGN_OR_RETURN(const sym::SizeExpr e,
                             graph.symbols.add_symbol(name, 0, out.sizes[a]));
      graph.symbols.set_source(static_cast<size_t>(graph.symbols.node(e).value), node.outputs[o]);
      dims.push_back(e);
    }
    shapes.dims[o] = std::move(dims);
  }
  return shapes;
}

}  // namespace

Result<NodeShapes> infer_node_shapes(Graph& graph, IrNode& node) {
  BATON_ASSIGN_OR_RETURN(std::vector<ops::InputInfo> inputs, input_infos(graph, node));
  const bool dynamic = std::any_of(node.inputs.begin(), node.inputs.end(), [&](int id) {
    return id >= 0 && (is_dynamic(graph.values[id]) || !graph.values[id].sym_values.empty());
  });
  SymbolicData data;
  if (dynamic) BATON_TRY(data.fill(graph, node, inputs, largest(graph.symbols)));
  const std::vector<ops::AttrValue> raw_attrs = node.attrs;
  NodeShapes shapes;
  shapes.outputs.resize(node.outputs.size());
  BATON_TRY(ops::infer(*node.def, node.name, inputs, node.attrs, shapes.outputs));
  shapes.dims.resize(node.outputs.size());
  if (std::any_of(shapes.outputs.begin(), shapes.outputs.end(),
                  [](const ops::OutputInfo& o) { return o.data_dependent_axis >= 0; })) {
    return data_dependent_shapes(graph, node, std::move(shapes));
  }
  if (!dynamic) return shapes;
  return DynamicInference(graph, node).run(raw_attrs, std::move(shapes));
}

void set_output_shapes(Graph& graph, const IrNode& node, NodeShapes shapes) {
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] < 0) continue;
    IrValue& out = graph.values[node.outputs[o]];
    out.dtype = shapes.outputs[o].dtype;
    out.sizes = std::move(shapes.outputs[o].sizes);
    out.dims = std::move(shapes.dims[o]);
    out.shape_known = true;
  }
}

std::string shape_text(const Graph& graph, const IrValue& v) {
  if (!is_dynamic(v)) return shape_to_string(v.sizes);
  std::string out = "[";
  for (size_t d = 0; d < v.dims.size(); ++d) {
    out += (d == 0 ? "" : ", ") + graph.symbols.to_string(v.dims[d]);
  }
  return out + "]";
}

}  // namespace baton::compiler
