// Partitioning: backends claim nodes; claimed nodes are grouped into maximal acyclic partitions.
#pragma once

#include <span>
#include <vector>

#include "compiler/backend_compiler.h"

namespace baton::compiler {

struct PartitionResult {
  // Live nodes in execution order: a topological order that keeps each backend's nodes together.
  std::vector<int> order;
  std::vector<Partition> partitions;
};

// Sets IrNode::partition for claimed nodes. With no backends every node stays on the CPU.
// `max_nodes` (0: unlimited) splits longer runs into consecutive partitions.
PartitionResult partition_graph(Graph& graph, std::span<BackendCompiler* const> backends,
                                size_t max_nodes = 0);

}  // namespace baton::compiler
