// A dynamic engine (issue 37, docs/gpu_dynamic_shapes.md): one engine blob that runs a partition
// at every size in its symbols' ranges. The engine is stored as lowered at the symbols' maxima;
// every field that depends on the sizes (a GEMM's m, n and leading dimensions, a kernel's grid and
// size arguments, a view's offset, a range's extent, a binding's dimension) carries a patch: a
// size expression whose value the engine writes into its own copy of the steps before a call at
// new sizes.
//
// How the expressions are found. The lowerings compute with plain integers, so the builder does
// not trace them; it asks them, as shape inference asks each op's own definition
// (compiler/shape_infer.h): the partition is lowered again with the graph's sizes at "probes",
// assignments of the symbols, each lowering taking the maxima's scratch plan and deciding what
// must be the same at every size at the maxima (Lowering::follow). The lowerings must then agree
// on everything but sizes: the same steps, kernels, kernel sources, buffers and weights; where
// they do not (a choice that flips inside the range), the partition is refused, naming the step
// and the sizes at which it differs. Each field that differs is fitted:
//   - a polynomial in the symbols, each of degree at most 2 (sizes, strides, offsets, extents:
//     products and sums of dimensions), interpolated exactly on a grid of three values per
//     symbol and required to have integer coefficients;
//   - a kernel argument that is the division magic of such a polynomial (codegen.h);
//   - a grid that follows a count (LaunchShape's rule): clamp(ceil(count / per_block), 1, cap).
// Every fit is then checked at further probes (each symbol near its ends, pseudo-random points):
// a field that no candidate explains at every probe refuses the partition. Refusing is the safe
// side; like shape inference, the check is at the probes, so a choice that flips only between
// them (a divisibility true at every probe) would pass: the probes include each symbol's values
// next to its ends and odd values to make that unlikely.
#pragma once

#include <functional>

#include "backends/cuda/builder/lowering.h"

namespace baton::cuda {

// Lowers every node of the partition into `ctx` (the builder's loop, EngineBuilder::lower).
using LowerNodes = std::function<Status(Lowering& ctx)>;

// Whether `partition` reads, writes or computes a value with dynamic dimensions.
bool is_dynamic_partition(const compiler::Graph& graph, const compiler::Partition& partition);

// The dynamic engine of `partition`: described at the maxima, with its patches, compiled. When
// the lowering differs at a symbol's value 1 (a unit dimension dropped, a transpose that became a
// view), that symbol's range is split into 1 and the rest, each part an engine of its own, and
// the blob is a bucketed engine (engine_format.h) of those parts.
Result<compiler::LoweredPartition> lower_dynamic(const compiler::Graph& graph,
                                                 const compiler::Partition& partition,
                                                 const EngineTarget& target,
                                                 const LowerNodes& lower_nodes);

// `graph` with every dynamic value's sizes (and every constant that holds sizes at the maxima,
// IrValue::at_max_of) evaluated at `symbols`: what a static compile at those sizes would see.
Result<compiler::Graph> graph_at(const compiler::Graph& graph, std::span<const int64_t> symbols);

// The probes a dynamic engine is fitted on (`fit`: a grid of up to three values per symbol) and
// checked at (`check`), for symbols with the inclusive `ranges` {min, max}.
struct Probes {
  std::vector<std::vector<int64_t>> fit_values;  // per symbol: its grid values (1 to 3)
  std::vector<std::vector<int64_t>> check;       // assignments, one value per symbol
};
using SymbolRanges = std::vector<std::pair<int64_t, int64_t>>;
Probes choose_probes(const SymbolRanges& ranges);

}  // namespace baton::cuda
