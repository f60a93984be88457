#include "backends/cuda/builder/dynamic_shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>

#include "baton/core/check.h"
#include "baton/core/log.h"
#include "compiler/shape_values.h"

namespace baton::cuda {
namespace {

// At most this many symbols in one dynamic partition: the fitting grid has 3^k lowerings.
constexpr size_t kMaxSymbols = 4;

// An exact rational, for interpolating on the probe grid (values stay far below 2^63, and the
// grids' denominators are products of differences of three nodes).
struct Frac {
  __int128 n = 0, d = 1;
};
__int128 gcd128(__int128 a, __int128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    const __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}
Frac norm(Frac f) {
  if (f.d < 0) {
    f.n = -f.n;
    f.d = -f.d;
  }
  const __int128 g = gcd128(f.n, f.d);
  if (g > 1) {
    f.n /= g;
    f.d /= g;
  }
  return f;
}
Frac sub(Frac a, Frac b) { return norm({a.n * b.d - b.n * a.d, a.d * b.d}); }
Frac mul(Frac a, Frac b) { return norm({a.n * b.n, a.d * b.d}); }
Frac div(Frac a, Frac b) { return norm({a.n * b.d, a.d * b.n}); }

// In place: y (values at the distinct nodes x) becomes the coefficients c with
// sum_e c[e] x^e = y, by Gaussian elimination on the (at most 3 x 3) Vandermonde system.
void solve_vandermonde(const std::vector<int64_t>& x, std::vector<Frac>& y) {
  const size_t m = x.size();
  std::vector<std::vector<Frac>> a(m, std::vector<Frac>(m));
  for (size_t r = 0; r < m; ++r) {
    __int128 p = 1;
    for (size_t c = 0; c < m; ++c, p *= x[r]) a[r][c] = Frac{p, 1};
  }
  for (size_t c = 0; c < m; ++c) {
    // Nodes are distinct, so the Vandermonde matrix is invertible: the pivot is never zero with
    // rows in node order, but look for one anyway.
    size_t piv = c;
    while (a[piv][c].n == 0) ++piv;
    std::swap(a[piv], a[c]);
    std::swap(y[piv], y[c]);
    for (size_t r = 0; r < m; ++r) {
      if (r == c || a[r][c].n == 0) continue;
      const Frac f = div(a[r][c], a[c][c]);
      for (size_t k = c; k < m; ++k) a[r][k] = sub(a[r][k], mul(f, a[c][k]));
      y[r] = sub(y[r], mul(f, y[c]));
    }
  }
  for (size_t c = 0; c < m; ++c) y[c] = div(y[c], a[c][c]);
}

std::vector<int64_t> minima_of(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<int64_t> out;
  for (const auto& r : ranges) out.push_back(r.first);
  return out;
}

std::string assignment(const sym::SymbolTable& t, std::span<const int64_t> values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    out += fmt::format("{}{}={}", i ? ", " : "", t.symbol(i).name, values[i]);
  }
  return out;
}

// Inverts division_magic: the divisor whose magic `v` is, if there is one.
std::optional<int64_t> magic_divisor(int64_t v) {
  if (v == 0) return 1;
  const uint64_t u = static_cast<uint64_t>(v);
  const uint64_t shift = u >> 32, multiplier = u & 0xffffffffu;
  if (shift > 30 || multiplier == 0) return std::nullopt;
  const unsigned __int128 two_p = static_cast<unsigned __int128>(1) << (shift + 32);
  const auto guess = static_cast<int64_t>(two_p / multiplier);
  for (int64_t d = std::max<int64_t>(2, guess - 1); d <= guess + 1; ++d) {
    if (division_magic(d) == v) return d;
  }
  return std::nullopt;
}

// One lowering of the partition at one assignment of the symbols, reduced to what is fitted
// (everything else was compared with the lowering at the maxima, then dropped).
struct Probe {
  std::vector<int64_t> symbols;
  std::vector<StepRecord> steps;
  std::vector<int64_t> args;
  std::vector<int64_t> counts;  // per step: its launch rule's count (0: none)
};

class Fitter {
 public:
  Fitter(sym::SymbolTable& table, const Probes& probes, const std::vector<Probe>& points)
      : t_(table), probes_(probes), points_(points) {
    for (const auto& v : probes.fit_values) grid_ *= v.size();
  }

  // The polynomial through `values` (one per point, the grid's first, in grid order) that
  // holds at every point, if there is one.
  std::optional<sym::SizeExpr> polynomial(const std::vector<int64_t>& values) {
    const size_t k = probes_.fit_values.size();
    std::vector<Frac> a(grid_);
    for (size_t i = 0; i < grid_; ++i) a[i] = Frac{values[i], 1};
    // Axis by axis (the last symbol varies fastest in grid order).
    size_t stride = 1;
    for (size_t axis = k; axis-- > 0;) {
      const size_t m = probes_.fit_values[axis].size();
      for (size_t base = 0; base < grid_; ++base) {
        if ((base / stride) % m != 0) continue;  // the first of its fiber along this axis
        std::vector<Frac> y(m);
        for (size_t j = 0; j < m; ++j) y[j] = a[base + j * stride];
        solve_vandermonde(probes_.fit_values[axis], y);
        for (size_t j = 0; j < m; ++j) a[base + j * stride] = y[j];
      }
      stride *= m;
    }
    // a[index of exponents] is now the coefficient of prod_i symbol_i ^ exponent_i.
    sym::SizeExpr sum = t_.constant(0);
    for (size_t i = 0; i < grid_; ++i) {
      if (a[i].n == 0) continue;
      if (a[i].d != 1 || a[i].n > INT64_MAX || a[i].n < INT64_MIN) return std::nullopt;
      sym::SizeExpr term = t_.constant(static_cast<int64_t>(a[i].n));
      size_t rest = i;
      for (size_t axis = k; axis-- > 0;) {
        const size_t m = probes_.fit_values[axis].size();
        const size_t e = rest % m;
        rest /= m;
        for (size_t p = 0; p < e; ++p) {
          Result<sym::SizeExpr> product =
              t_.mul(term, static_cast<sym::SizeExpr>(axis_symbol(axis)));
          if (!product.ok()) return std::nullopt;
          term = *product;
        }
      }
      Result<sym::SizeExpr> added = t_.add(sum, term);
      if (!added.ok()) return std::nullopt;
      sum = *added;
    }
    if (!holds(sum, values)) return std::nullopt;
    return sum;
  }

  // Whether `e` evaluates to `values` at every point.
  bool holds(sym::SizeExpr e, const std::vector<int64_t>& values) const {
    for (size_t i = 0; i < points_.size(); ++i) {
      const Result<int64_t> v = t_.evaluate(e, points_[i].symbols);
      if (!v.ok() || *v != values[i]) return false;
    }
    return true;
  }

 private:
  sym::SizeExpr axis_symbol(size_t axis) { return *t_.find_symbol(t_.symbol(axis).name); }

  sym::SymbolTable& t_;
  const Probes& probes_;
  const std::vector<Probe>& points_;
  size_t grid_ = 1;
};

// The first line where two kernel sources differ, for messages.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t line = 0, at = 0;
  while (at < a.size() && at < b.size()) {
    const size_t ea = std::min(a.find('\n', at), a.size()),
                 eb = std::min(b.find('\n', at), b.size());
    if (a.compare(at, ea - at, b, at, eb - at) != 0) {
      return fmt::format("line {}: '{}' against '{}'", line + 1, a.substr(at, ea - at),
                         b.substr(at, eb - at));
    }
    at = ea + 1;
    ++line;
  }
  return "lengths differ";
}

// Adds expression `e` (and its operands) to the engine's flat list, binary operations only.
class ExprWriter {
 public:
  explicit ExprWriter(const sym::SymbolTable& t) : t_(t) {}
  uint32_t add(sym::SizeExpr e) {
    if (const auto it = index_.find(e); it != index_.end()) return it->second;
    const sym::Node& n = t_.node(e);
    uint32_t out = 0;
    switch (n.op) {
      case sym::Op::Const:
        out = push({static_cast<uint32_t>(ExprOp::Const), 0, 0, 0, n.value});
        break;
      case sym::Op::Symbol:
        out = push({static_cast<uint32_t>(ExprOp::Symbol), 0, 0, 0, n.value});
        break;
      default: {
        const ExprOp op = n.op == sym::Op::Add        ? ExprOp::Add
                          : n.op == sym::Op::Mul      ? ExprOp::Mul
                          : n.op == sym::Op::FloorDiv ? ExprOp::FloorDiv
                          : n.op == sym::Op::CeilDiv  ? ExprOp::CeilDiv
                          : n.op == sym::Op::Min      ? ExprOp::Min
                                                      : ExprOp::Max;
        uint32_t acc = add(n.operands[0]);
        for (size_t i = 1; i < n.operands.size(); ++i) {
          const uint32_t b = add(n.operands[i]);
          acc = push({static_cast<uint32_t>(op), acc, b, 0, 0});
        }
        out = acc;
      }
    }
    index_[e] = out;
    return out;
  }
  std::vector<ExprRecord> take() { return std::move(records_); }

 private:
  uint32_t push(ExprRecord r) {
    records_.push_back(r);
    return static_cast<uint32_t>(records_.size() - 1);
  }
  const sym::SymbolTable& t_;
  std::map<sym::SizeExpr, uint32_t> index_;
  std::vector<ExprRecord> records_;
};

int64_t read_field(const StepRecord& r, uint32_t offset, uint32_t width) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&r);
  if (width == 4) {
    uint32_t v = 0;
    std::memcpy(&v, bytes + offset, 4);
    return v;
  }
  int64_t v = 0;
  std::memcpy(&v, bytes + offset, 8);
  return v;
}

}  // namespace

bool is_dynamic_partition(const compiler::Graph& graph, const compiler::Partition& partition) {
  if (graph.symbols.num_symbols() == 0) return false;
  for (int v : partition.inputs) {
    if (compiler::is_dynamic(graph.values[v])) return true;
  }
  for (int n : partition.nodes) {
    for (int v : graph.nodes[n].outputs) {
      if (v >= 0 && compiler::is_dynamic(graph.values[v])) return true;
    }
  }
  return false;
}

Probes choose_probes(const SymbolRanges& ranges) {
  Probes p;
  const size_t k = ranges.size();
  std::vector<int64_t> maxima, minima;
  for (size_t i = 0; i < k; ++i) {
    const auto [lo, hi] = ranges[i];
    maxima.push_back(hi);
    minima.push_back(lo);
    // Three nodes when the range has them: the ends and an odd value inside.
    std::vector<int64_t> nodes = {hi};
    if (lo != hi) nodes.push_back(lo);
    if (hi - lo >= 2) {
      int64_t mid = lo + (hi - lo) / 2;
      if (mid % 2 == 0 && mid + 1 < hi) ++mid;
      nodes.push_back(mid);
    }
    p.fit_values.push_back(std::move(nodes));
  }
  // Checks: each symbol one step inside each end (divisibilities that hold at the ends), every
  // symbol at its minimum, and pseudo-random points, odd values preferred.
  auto add = [&](std::vector<int64_t> a) {
    if (std::find(p.check.begin(), p.check.end(), a) == p.check.end()) p.check.push_back(a);
  };
  for (size_t i = 0; i < k; ++i) {
    const auto [lo, hi] = ranges[i];
    for (int64_t v : {hi - 1, lo + 1}) {
      if (v < lo || v > hi) continue;
      std::vector<int64_t> a = maxima;
      a[i] = v;
      add(a);
    }
  }
  add(minima);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int r = 0; r < 4; ++r) {
    std::vector<int64_t> a;
    for (size_t i = 0; i < k; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const auto [lo, hi] = ranges[i];
      const auto span = static_cast<uint64_t>(hi - lo + 1);
      int64_t v = lo + static_cast<int64_t>((state >> 33) % span);
      if (v % 2 == 0 && v + 1 <= hi) ++v;
      a.push_back(v);
    }
    add(a);
  }
  return p;
}

Result<compiler::Graph> graph_at(const compiler::Graph& graph, std::span<const int64_t> symbols) {
  compiler::Graph g = graph;
  for (compiler::IrValue& v : g.values) {
    for (size_t d = 0; d < v.dims.size(); ++d) {
      BATON_ASSIGN_OR_RETURN(v.sizes[d], g.symbols.evaluate(v.dims[d], symbols));
    }
    if (!v.at_max_of.empty() && v.constant != nullptr) {
      BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                             compiler::size_values_bytes(g.symbols, v.at_max_of, v.dtype, symbols));
      v.constant = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    }
  }
  return g;
}

namespace {

// "; the first that differs is kernel 7, k12_epilogue here and k12_gemv there": which kernel a
// refusal is about, so that whoever reads it can find the size-dependent choice.
std::string first_kernel_difference(const EngineDescription& here, const EngineDescription& there) {
  const size_t n = std::min(here.kernel_names.size(), there.kernel_names.size());
  for (size_t i = 0; i < n; ++i) {
    if (here.kernel_names[i] != there.kernel_names[i] ||
        here.kernel_params[i] != there.kernel_params[i]) {
      return fmt::format(
          "; the first that differs is kernel {}, {} ({} arguments) here and {} ({} "
          "arguments) there",
          i, here.kernel_names[i], here.kernel_params[i].second, there.kernel_names[i],
          there.kernel_params[i].second);
    }
  }
  if (here.kernel_names.size() != there.kernel_names.size()) {
    const bool longer = here.kernel_names.size() > there.kernel_names.size();
    return fmt::format("; the first that differs is kernel {}, {} {}", n,
                       longer ? here.kernel_names[n] : there.kernel_names[n],
                       longer ? "only here" : "only there");
  }
  return "";
}

// The weights of the first bucket built: later buckets whose weights are the same bytes are
// written without them and read the first's (write_buckets' share_first_weights).
struct SharedWeights {
  std::optional<std::vector<uint8_t>> first;
};

// One engine for the symbols in `ranges`. A lowering that differs at some probe (not only in
// sizes), or a field no expression fits, sets `failing` to an assignment where it happened, so
// that lower_buckets can split the range there.
Result<compiler::LoweredPartition> lower_bucket(
    const compiler::Graph& graph, const compiler::Partition& partition, const EngineTarget& target,
    const LowerNodes& lower_nodes, const SymbolRanges& ranges, bool cudnn_fusions,
    std::vector<int64_t>* failing, SharedWeights* shared) {
  sym::SymbolTable table = graph.symbols;
  const size_t k = table.num_symbols();
  std::vector<int64_t> maxima;
  for (const auto& r : ranges) maxima.push_back(r.second);
  // The engine at the bucket's maxima: what the blob stores and every other lowering follows.
  bool at_graph_max = true;
  for (size_t i = 0; i < k; ++i) at_graph_max &= maxima[i] == table.symbol(i).max;
  std::optional<compiler::Graph> upper_graph;
  if (!at_graph_max) {
    BATON_ASSIGN_OR_RETURN(upper_graph, graph_at(graph, maxima));
  }
  Lowering upper(upper_graph ? *upper_graph : graph, partition, target);
  upper.set_dynamic(cudnn_fusions);
  BATON_TRY(lower_nodes(upper));
  // cuDNN's steps (convolutions, fused attention, the erf-GELU matmul) are operation graphs of one
  // shape: the engine builds their plans per shape (ExecutionContext::fit_cudnn), so here they
  // are steps like any other, whose sizes and strides are patched.
  BATON_ASSIGN_OR_RETURN(EngineDescription base, upper.describe());

  const Probes probes = choose_probes(ranges);
  std::vector<std::vector<int64_t>> assignments;
  {
    // The grid, the last symbol varying fastest, then the checks.
    size_t grid = 1;
    for (const auto& v : probes.fit_values) grid *= v.size();
    for (size_t i = 0; i < grid; ++i) {
      size_t rest = i;
      std::vector<int64_t> a(k);
      for (size_t axis = k; axis-- > 0;) {
        a[axis] = probes.fit_values[axis][rest % probes.fit_values[axis].size()];
        rest /= probes.fit_values[axis].size();
      }
      assignments.push_back(std::move(a));
    }
    for (const auto& a : probes.check) assignments.push_back(a);
  }
  log_message(LogLevel::Info, "cuda",
              fmt::format("partition '{}' is dynamic: lowering it at {} sizes to find how its "
                          "steps follow them",
                          partition.name, assignments.size()));

  // How every refusal below ends: what the user can do about it.
  constexpr std::string_view kFix =
      "; fix that dimension with --shape, or compile for --device cpu";
  std::vector<Probe> points;
  for (const auto& a : assignments) {
    Probe p;
    p.symbols = a;
    if (a == maxima) {
      p.steps = base.steps;
      p.args = base.args;
      for (size_t s = 0; s < base.steps.size(); ++s) p.counts.push_back(upper.step_launch(s).count);
      points.push_back(std::move(p));
      continue;
    }
    BATON_ASSIGN_OR_RETURN(const compiler::Graph at, graph_at(graph, a));
    Lowering ctx(at, partition, target);
    ctx.follow(upper);
    const Status lowered = lower_nodes(ctx);
    *failing = a;
    if (!lowered.ok()) {
      return BATON_ERROR(NotSupported,
                         "partition '{}' cannot be one dynamic engine: lowering it at {} failed: "
                         "{}",
                         partition.name, assignment(table, a), lowered.message());
    }
    BATON_ASSIGN_OR_RETURN(const EngineDescription e, ctx.describe());
    const std::string where =
        fmt::format("partition '{}' cannot be one dynamic engine: at {} (against {})",
                    partition.name, assignment(table, a), assignment(table, maxima));
    BATON_CHECK_OR_RETURN(e.steps.size() == base.steps.size(), NotSupported,
                          "{} it lowers to {} steps instead of {}{}", where, e.steps.size(),
                          base.steps.size(), kFix);
    BATON_CHECK_OR_RETURN(e.args.size() == base.args.size() &&
                              e.kernel_names == base.kernel_names &&
                              e.kernel_params == base.kernel_params,
                          NotSupported,
                          "{} its kernels or their arguments differ ({} kernels, {} arguments "
                          "instead of {} and {}{}: a choice made from the sizes){}",
                          where, e.kernel_names.size(), e.args.size(), base.kernel_names.size(),
                          base.args.size(), first_kernel_difference(e, base), kFix);
    for (size_t i = 0; i < ctx.kernel_sources().size(); ++i) {
      BATON_CHECK_OR_RETURN(ctx.kernel_sources()[i] == upper.kernel_sources()[i], NotSupported,
                            "{} kernel {} is generated differently (a choice made from the "
                            "sizes), {}{}",
                            where, base.kernel_names[i],
                            first_difference(ctx.kernel_sources()[i], upper.kernel_sources()[i]),
                            kFix);
    }
    BATON_CHECK_OR_RETURN(e.weights == base.weights, NotSupported,
                          "{} its weights differ (a constant computed from the sizes){}", where,
                          kFix);
    p.steps = e.steps;
    p.args = e.args;
    for (size_t s = 0; s < e.steps.size(); ++s) p.counts.push_back(ctx.step_launch(s).count);
    points.push_back(std::move(p));
    failing->clear();
  }

  Fitter fitter(table, probes, points);
  ExprWriter writer(table);
  std::vector<PatchRecord> patches;
  auto values_of = [&](auto&& get) {
    std::vector<int64_t> v;
    for (const Probe& p : points) v.push_back(get(p));
    return v;
  };
  // "64 at batch=8, sequence=64; 7 at batch=7, sequence=7; ...": what no expression fitted.
  auto listing = [&](const std::vector<int64_t>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 12; ++i) {
      out += fmt::format("{}{} at {}", i ? "; " : "", v[i], assignment(table, points[i].symbols));
    }
    return out + (v.size() > 12 ? "; ..." : "");
  };
  auto varies = [](const std::vector<int64_t>& v) {
    return std::any_of(v.begin(), v.end(), [&](int64_t x) { return x != v[0]; });
  };
  // Bindings: their dimensions are the graph's expressions.
  {
    uint32_t b = 0;
    for (const std::vector<int>* list : {&partition.inputs, &partition.outputs}) {
      for (int v : *list) {
        const compiler::IrValue& iv = graph.values[v];
        for (size_t d = 0; d < iv.dims.size(); ++d) {
          if (table.is_constant(iv.dims[d])) continue;
          patches.push_back({static_cast<uint8_t>(PatchTarget::BindingSize), 0, 8, 0, b,
                             static_cast<uint32_t>(d), writer.add(iv.dims[d])});
        }
        ++b;
      }
    }
  }
  // Steps: every byte outside the patchable fields must agree; each patchable field that
  // differs is fitted.
  for (size_t s = 0; s < base.steps.size(); ++s) {
    const uint32_t kind = base.steps[s].kind;
    const auto fields = patchable_step_fields(kind);
    std::vector<bool> patchable(sizeof(StepRecord), false);
    for (const auto& [off, width] : fields) {
      for (uint32_t i = 0; i < width; ++i) patchable[off + i] = true;
    }
    for (const Probe& p : points) {
      const auto* a = reinterpret_cast<const uint8_t*>(&p.steps[s]);
      const auto* b = reinterpret_cast<const uint8_t*>(&base.steps[s]);
      for (size_t i = 0; i < sizeof(StepRecord); ++i) {
        if (patchable[i] || a[i] == b[i]) continue;
        *failing = p.symbols;
        return BATON_ERROR(NotSupported,
                           "partition '{}' cannot be one dynamic engine: step {} ({}) differs at "
                           "{} from the largest sizes at byte {}, which is not a size (a choice "
                           "made from the sizes){}",
                           partition.name, s, step_kind_name(static_cast<StepKind>(kind)),
                           assignment(table, p.symbols), i, kFix);
      }
    }
    for (const auto& field : fields) {
      // Named copies: clang 14 cannot capture structured bindings in a lambda.
      const uint32_t off = field.first, width = field.second;
      const std::vector<int64_t> v =
          values_of([&](const Probe& p) { return read_field(p.steps[s], off, width); });
      if (!varies(v)) continue;
      std::optional<sym::SizeExpr> e = fitter.polynomial(v);
      const bool grid = kind == static_cast<uint32_t>(StepKind::Kernel) &&
                        off == offsetof(StepRecord, kernel) + offsetof(KernelStep, grid);
      if (!e && grid) {
        const LaunchShape& rule = upper.step_launch(s);
        const std::vector<int64_t> counts = values_of([&](const Probe& p) { return p.counts[s]; });
        if (rule.count > 0 && rule.warp_rows_from > 0) {
          // count rows a block below warp_rows_from, else per_block rows a block: the divisor
          // 1 + (per_block - 1) * min(1, floor(count / warp_rows_from)) is 1 or per_block.
          if (const auto c = fitter.polynomial(counts)) {
            BATON_ASSIGN_OR_RETURN(const sym::SizeExpr many,
                                   table.floor_div(*c, table.constant(rule.warp_rows_from)));
            BATON_ASSIGN_OR_RETURN(
                const sym::SizeExpr extra,
                table.mul(table.constant(rule.per_block - 1), table.min(table.constant(1), many)));
            BATON_ASSIGN_OR_RETURN(const sym::SizeExpr divisor,
                                   table.add(table.constant(1), extra));
            BATON_ASSIGN_OR_RETURN(const sym::SizeExpr blocks, table.ceil_div(*c, divisor));
            if (fitter.holds(blocks, v)) e = blocks;
          }
        } else if (rule.count > 0) {
          if (const auto c = fitter.polynomial(counts)) {
            BATON_ASSIGN_OR_RETURN(const sym::SizeExpr blocks,
                                   table.ceil_div(*c, table.constant(rule.per_block)));
            const sym::SizeExpr clamped =
                table.max(table.min(blocks, table.constant(rule.cap)), table.constant(1));
            if (fitter.holds(clamped, v)) e = clamped;
          }
        }
      }
      // Values that follow no expression may still do so without a symbol's value 1 (a stride
      // that is 0 for a unit dimension): the minima let lower_buckets split there.
      if (!e) *failing = minima_of(ranges);
      BATON_CHECK_OR_RETURN(e.has_value(), NotSupported,
                            "partition '{}' cannot be one dynamic engine: {} of step {} takes "
                            "values that no size expression fits: {}{}",
                            partition.name, step_field_name(kind, off), s, listing(v), kFix);
      patches.push_back({static_cast<uint8_t>(PatchTarget::StepField), 0,
                         static_cast<uint8_t>(width), 0, static_cast<uint32_t>(s), off,
                         writer.add(*e)});
    }
  }
  // Kernel arguments.
  for (size_t i = 0; i < base.args.size(); ++i) {
    const std::vector<int64_t> v = values_of([&](const Probe& p) { return p.args[i]; });
    if (!varies(v)) continue;
    PatchKind kind = PatchKind::Value;
    std::optional<sym::SizeExpr> e = fitter.polynomial(v);
    if (!e) {
      std::vector<int64_t> divisors;
      for (int64_t x : v) {
        const std::optional<int64_t> d = magic_divisor(x);
        if (!d) break;
        divisors.push_back(*d);
      }
      if (divisors.size() == v.size()) {
        e = fitter.polynomial(divisors);
        kind = PatchKind::DivisionMagic;
      }
    }
    if (!e) *failing = minima_of(ranges);
    BATON_CHECK_OR_RETURN(e.has_value(), NotSupported,
                          "partition '{}' cannot be one dynamic engine: kernel argument {} takes "
                          "values that no size expression fits: {}{}",
                          partition.name, i, listing(v), kFix);
    patches.push_back({static_cast<uint8_t>(PatchTarget::Arg), static_cast<uint8_t>(kind), 8, 0,
                       static_cast<uint32_t>(i), 0, writer.add(*e)});
  }

  failing->clear();
  for (size_t i = 0; i < k; ++i) {
    const sym::SymbolInfo& s = table.symbol(i);
    const int64_t opt = s.opt >= ranges[i].first && s.opt <= ranges[i].second ? s.opt : 0;
    base.symbols.push_back({s.name, ranges[i].first, ranges[i].second, opt});
  }
  base.exprs = writer.take();
  base.patches = std::move(patches);
  log_message(LogLevel::Info, "cuda",
              fmt::format("partition '{}' at {}..{}: {} fields follow the sizes through {} "
                          "expressions",
                          partition.name, assignment(table, minima_of(ranges)),
                          assignment(table, maxima), base.patches.size(), base.exprs.size()));
  if (!shared->first) {
    shared->first = base.weights;
  } else if (base.weights == *shared->first) {
    base.weights.clear();
  }
  return upper.compile(std::move(base));
}

// The engines of `ranges`: one, or, where a symbol's value 1 lowers differently, the engines of
// its range split at 1 (recursively, for each symbol that needs it).
Status lower_buckets(const compiler::Graph& graph, const compiler::Partition& partition,
                     const EngineTarget& target, const LowerNodes& lower_nodes,
                     const SymbolRanges& ranges, bool cudnn_fusions,
                     std::vector<compiler::LoweredPartition>* out, SharedWeights* shared) {
  std::vector<int64_t> failing;
  Result<compiler::LoweredPartition> one =
      lower_bucket(graph, partition, target, lower_nodes, ranges, cudnn_fusions, &failing, shared);
  if (one.ok()) {
    out->push_back(std::move(*one));
    return Status();
  }
  for (size_t i = 0; i < failing.size(); ++i) {
    if (failing[i] != 1 || ranges[i].first != 1 || ranges[i].second == 1) continue;
    BATON_CHECK_OR_RETURN(out->size() + 2 <= kMaxBuckets, NotSupported,
                          "partition '{}' would need more than {} engines: {}", partition.name,
                          kMaxBuckets, one.status().message());
    SymbolRanges unit = ranges, rest = ranges;
    unit[i] = {1, 1};
    rest[i] = {2, ranges[i].second};
    log_message(LogLevel::Info, "cuda",
                fmt::format("partition '{}': '{}' = 1 lowers differently; it gets an engine of "
                            "its own",
                            partition.name, graph.symbols.symbol(i).name));
    BATON_TRY(
        lower_buckets(graph, partition, target, lower_nodes, unit, cudnn_fusions, out, shared));
    return lower_buckets(graph, partition, target, lower_nodes, rest, cudnn_fusions, out, shared);
  }
  return one.status();
}

}  // namespace

Result<compiler::LoweredPartition> lower_dynamic(const compiler::Graph& graph,
                                                 const compiler::Partition& partition,
                                                 const EngineTarget& target,
                                                 const LowerNodes& lower_nodes) {
  const size_t k = graph.symbols.num_symbols();
  BATON_CHECK_OR_RETURN(k <= kMaxSymbols, NotSupported,
                        "partition '{}' has {} dynamic symbols; a GPU engine takes at most {}: "
                        "fix the others with --shape",
                        partition.name, k, kMaxSymbols);
  SymbolRanges ranges;
  for (size_t i = 0; i < k; ++i) {
    const sym::SymbolInfo& s = graph.symbols.symbol(i);
    // A data-dependent size (NonZero's count) sizes nothing in a GPU partition (the compiler
    // keeps every node it reaches on the CPU), and the runtime passes delegates its maximum:
    // pinned there, it adds no probes and no buckets.
    ranges.emplace_back(s.source >= 0 ? s.max : s.min, s.max);
  }
  std::vector<compiler::LoweredPartition> buckets;
  SharedWeights shared;
  // First with cuDNN's fused attention, whose plans the engine builds per shape. Where those
  // steps do not follow the sizes (a layout cuDNN takes at some sizes and not at others, so that
  // a copy comes and goes), the partition is lowered again without them: attention as two GEMMs
  // and a softmax kernel.
  Status fused = lower_buckets(graph, partition, target, lower_nodes, ranges,
                               /*cudnn_fusions=*/true, &buckets, &shared);
  // (Only a partition with an attention node, or a Linear with an exact GELU (gemm.cpp's
  // cudnn_gelu), in an fp16 or bf16 engine has them; any other failure is returned as it is,
  // without lowering everything a second time.)
  const bool has_fusion = std::any_of(partition.nodes.begin(), partition.nodes.end(), [&](int n) {
    const compiler::IrNode& node = graph.nodes[static_cast<size_t>(n)];
    return node.op_type == "Attention" ||
           (node.op_type == "Linear" && node.attr_string("activation") == "Gelu");
  });
  const bool may_fuse =
      has_fusion && (target.precision == Precision::FP16 || target.precision == Precision::BF16);
  if (!fused.ok() && !may_fuse) return fused;
  if (!fused.ok()) {
    buckets.clear();
    shared = SharedWeights();
    const Status plain = lower_buckets(graph, partition, target, lower_nodes, ranges,
                                       /*cudnn_fusions=*/false, &buckets, &shared);
    if (!plain.ok()) return plain;
    log_message(LogLevel::Info, "cuda",
                fmt::format("partition '{}': with cuDNN's fused attention and GELU matmul it is "
                            "not one dynamic engine ({}); it runs attention as GEMMs and a "
                            "softmax kernel, and GELU as a kernel after its GEMM",
                            partition.name, fused.message()));
  }
  if (buckets.size() == 1) return std::move(buckets[0]);
  // The widest bucket (the one holding the maxima, which sizes the staging) last: a call takes
  // the first bucket that holds its sizes, so the narrow ones come first.
  std::vector<std::vector<uint8_t>> blobs;
  for (auto& b : buckets) blobs.push_back(std::move(b.blob));
  compiler::LoweredPartition out = std::move(buckets[0]);
  out.blob = write_buckets(blobs, /*share_first_weights=*/true);
  return out;
}

}  // namespace baton::cuda
