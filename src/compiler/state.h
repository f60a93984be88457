// State (DESIGN.md §10, docs/state.md): a graph input and a graph output that are one tensor kept
// across calls, such as a decoder's key/value cache of a fixed maximum length, whose output is
// the input with this call's new positions scattered in (`present = ScatterND(past, ...)`).
//
// The compiler takes such pairs from CompileOptions::state (declared by name) or finds them
// (CompileOptions::state_auto), checks that the update can happen in place, and then binds the two
// values to one slot of the arena that lives for the whole call: neither is a method input or
// output any more, the runtime zeroes the bytes at load, and each call's scatter writes only its
// new positions into them.
#pragma once

#include <string>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

struct Schedule;         // compiler/placement.h
struct PartitionResult;  // compiler/partition.h

struct StateBinding {
  std::string name;  // the input's name
  int value = -1;    // the graph input (what a call reads)
  int update = -1;   // the graph output (what it leaves for the next call)
};

// Resolves the declared pairs (and, with `find`, every output that is a ScatterND or
// ScatterElements of an input into a tensor of the input's dtype and shape) on the optimized
// graph. InvalidArgument naming the pair and the fix when a name is not a graph input or output,
// a name is used twice, dtypes or shapes differ, the output is not a ScatterND or ScatterElements
// of that very input (the only updates Baton makes in place), or a size of the state is one no
// other input gives (the caller no longer passes the state, so its sizes must follow the others').
Result<std::vector<StateBinding>> resolve_state(const Graph& graph,
                                                const std::vector<StatePair>& declared, bool find);

// After partitioning: records in each partition the state pairs whose input and update are both
// its own (Partition::in_place), so that its backend writes the update in place.
void mark_in_place(const std::vector<StateBinding>& state, PartitionResult& partitions);

// The compile spec that tells a delegate which of its inputs and outputs the method binds to one
// buffer ("in_place": "INPUT=OUTPUT" pairs of indices into the partition's inputs and outputs,
// separated by ';'); empty when the partition has none. The CUDA delegate checks at every call
// that the two pointers agree, since its engine writes the update without copying the input.
std::string in_place_spec(const Partition& partition);

// On the placed schedule: checks that the state and its update live on one device, that the
// update is written in place (a CPU scatter kernel, or a delegate whose partition holds the pair:
// mark_in_place), and that every other reader of each state value runs before its update (the
// update overwrites those bytes), inside a delegate's partition as well as between steps; then
// removes the pairs from the method's inputs and outputs.
Status bind_state(const Graph& graph, const std::vector<StateBinding>& state,
                  const PartitionResult& partitions, Schedule& schedule);

}  // namespace baton::compiler
