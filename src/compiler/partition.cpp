#include "compiler/partition.h"

#include <algorithm>
#include <set>

#include "baton/core/check.h"

namespace baton::compiler {

PartitionResult partition_graph(Graph& graph, std::span<BackendCompiler* const> backends,
                                size_t max_nodes) {
  const int n = static_cast<int>(graph.nodes.size());
  std::vector<int> claim(n, -1);
  for (int i = 0; i < n; ++i) {
    IrNode& node = graph.nodes[i];
    node.partition = -1;
    if (node.dead || touches_data_dependent_size(graph, node)) continue;
    for (size_t b = 0; b < backends.size(); ++b) {
      if (backends[b]->supports(graph, node)) {
        claim[i] = static_cast<int>(b);
        break;
      }
    }
  }

  // Kahn's algorithm over live nodes, preferring a ready node with the same claim as the node
  // emitted last: runs of one backend stay contiguous, and a contiguous run of a topological
  // order is convex, so every partition is acyclic.
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    if (graph.nodes[i].dead) continue;
    std::set<int> producers;
    for (int v : graph.nodes[i].inputs) {
      if (v < 0) continue;
      const int p = graph.values[v].producer;
      if (p >= 0 && !graph.nodes[p].dead) producers.insert(p);
    }
    pending[i] = static_cast<int>(producers.size());
    for (int p : producers) users[p].push_back(i);
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i) {
    if (!graph.nodes[i].dead && pending[i] == 0) ready.insert(i);
  }
  PartitionResult result;
  int last_claim = -2;
  while (!ready.empty()) {
    auto pick =
        std::find_if(ready.begin(), ready.end(), [&](int i) { return claim[i] == last_claim; });
    if (pick == ready.end()) pick = ready.begin();
    const int node = *pick;
    ready.erase(pick);
    result.order.push_back(node);
    last_claim = claim[node];
    for (int u : users[node]) {
      if (--pending[u] == 0) ready.insert(u);
    }
  }

  // Runs of one claim become partitions.
  for (size_t k = 0; k < result.order.size();) {
    const int c = claim[result.order[k]];
    size_t end = k + 1;
    while (end < result.order.size() && claim[result.order[end]] == c &&
           (c < 0 || max_nodes == 0 || end - k < max_nodes)) {
      ++end;
    }
    if (c >= 0) {
      Partition p;
      p.index = static_cast<int>(result.partitions.size());
      p.backend = c;
      p.name = fmt::format("{}_{}", backends[c]->id(), p.index);
      p.nodes.assign(result.order.begin() + static_cast<long>(k),
                     result.order.begin() + static_cast<long>(end));
      for (int node : p.nodes) graph.nodes[node].partition = p.index;
      result.partitions.push_back(std::move(p));
    }
    k = end;
  }

  // Boundary values.
  std::vector<uint8_t> is_output(graph.values.size(), 0);
  for (int o : graph.outputs) is_output[o] = 1;
  // Values some node reads outside the partition of their producer (one pass over all reads).
  std::vector<uint8_t> read_elsewhere(graph.values.size(), 0);
  for (int other : result.order) {
    for (int v : graph.nodes[other].inputs) {
      if (v < 0) continue;
      const int prod = graph.values[v].producer;
      if (prod >= 0 && graph.nodes[prod].partition != graph.nodes[other].partition) {
        read_elsewhere[v] = 1;
      }
    }
  }
  for (Partition& p : result.partitions) {
    for (int node : p.nodes) {
      for (int v : graph.nodes[node].inputs) {
        if (v < 0 || graph.values[v].constant) continue;
        const int prod = graph.values[v].producer;
        const bool inside = prod >= 0 && graph.nodes[prod].partition == p.index;
        if (!inside && std::find(p.inputs.begin(), p.inputs.end(), v) == p.inputs.end()) {
          p.inputs.push_back(v);
        }
      }
    }
    for (int node : p.nodes) {
      for (int v : graph.nodes[node].outputs) {
        if (v < 0) continue;
        if (is_output[v] || read_elsewhere[v]) p.outputs.push_back(v);
      }
    }
  }
  return result;
}

}  // namespace baton::compiler
