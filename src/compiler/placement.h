// Placement (DESIGN.md §5): which device each partition is built for, and where every value lives.
//
// Three steps around lowering, all on the IR:
//   1. assign_devices (before lowering): each partition gets its target device from the policy
//      (round robin over a list, a partition -> device map, or the claimant's own device) and the
//      backend compiler that builds for that device;
//   2. label_partition (after lowering): the device read back from the blob must be the one
//      assigned (an assertion: label and blob cannot drift); a caller's --target-device replaces
//      the label verbatim, with a warning where it disagrees with the blob; the label is written
//      as the partition's "target_device" compile spec;
//   3. place_values: device propagation (every delegate input and output, each output of a
//      multi-output call included, on its partition's target device), explicit transfers where a
//      value crosses devices, and method I/O (--io). The result is the schedule the memory
//      planner and the emitter read.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/core/device.h"
#include "baton/core/error.h"
#include "compiler/backend_compiler.h"
#include "compiler/ir.h"
#include "compiler/partition.h"
#include "compiler/state.h"

namespace baton::compiler {

// The caller's placement choices, checked once before anything is built.
struct PlacementPolicy {
  std::vector<BackendCompiler*> backends;  // not owned
  TargetDevices targets;
  // --target-device: the device its text names, and the text itself (written verbatim).
  std::optional<Device> label;
  std::string label_text;
  MethodIo io = MethodIo::Host;
};

// Checks the options' placement part: at most one form of `targets`; every device named has a
// backend compiler that builds for it; --target-device is a device. InvalidArgument otherwise,
// naming the option and the fix.
Result<PlacementPolicy> make_placement_policy(const CompileOptions& options);

// Sets each partition's target_device and backend (the compiler in `policy.backends` with the
// claimant's id that builds for that device). InvalidArgument when the partition map leaves a
// partition out or no compiler of the partition's backend builds for its device.
Status assign_devices(const PlacementPolicy& policy, PartitionResult& partitions);

// After `lowered_by` lowered `partition`: reads the blob's device back and asserts it is the
// assigned one (Internal otherwise: a backend bug), applies --target-device, and puts the
// "target_device" compile spec first in `lowered.compile_specs`.
Status label_partition(const PlacementPolicy& policy, const BackendCompiler& lowered_by,
                       Partition& partition, LoweredPartition& lowered);

enum class StepKind { Kernel, Delegate, Copy };

// One instruction of the method, over value ids of the graph (copies included).
struct Step {
  StepKind kind = StepKind::Kernel;
  int node = -1;             // Kernel: the IR node
  int partition = -1;        // Delegate: the partition index
  std::vector<int> inputs;   // value ids; -1 = absent optional input
  std::vector<int> outputs;  // value ids; -1 = unused optional output
  Device device;             // where it runs (a copy: its destination)
};

struct Schedule {
  std::vector<Step> steps;   // in execution order
  std::vector<int> inputs;   // method inputs (the graph's)
  std::vector<int> outputs;  // method outputs: the graph's, or their host copies under --io host
  size_t copies = 0;
};

// Orders the method's instructions (CPU kernels and one delegate call per partition, in
// `partitions.order`), writes devices onto graph.values, and inserts transfers: a reader on
// another device than a value's reads a copy made right before the first such read, and later
// readers on that device share it; readers on the value's own device read it in place, so
// consecutive partitions on one device hand tensors over in device memory and a device -> host ->
// same device round trip never appears. Copies are new values of `graph` (named "x@cuda:1",
// producer -1). Needs assign_devices (and label_partition) to have run.
//
// `state` pairs are not method I/O (compiler/state.h): a state input lives where its first reader
// runs whatever --io says, and its update gets no host copy.
Schedule place_values(const PlacementPolicy& policy, Graph& graph,
                      const PartitionResult& partitions, std::span<const StateBinding> state = {});

}  // namespace baton::compiler
