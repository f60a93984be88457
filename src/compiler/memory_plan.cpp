#include "compiler/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/ir.h"
#include "compiler/placement.h"

namespace baton::compiler {
namespace {

bool device_less(const Device& a, const Device& b) {
  if (a.type != b.type) return a.type < b.type;
  return a.index < b.index;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  MemoryPlan plan;
  plan.arena.assign(requests.size(), -1);
  plan.offset.assign(requests.size(), 0);
  for (const BufferRequest& r : requests) {
    const bool known =
        std::any_of(plan.arenas.begin(), plan.arenas.end(),
                    [&](const MemoryPlan::Arena& a) { return a.device == r.device; });
    if (!known) plan.arenas.push_back({r.device, 0});
  }
  std::sort(plan.arenas.begin(), plan.arenas.end(),
            [](const auto& a, const auto& b) { return device_less(a.device, b.device); });

  // Largest first (ties: earliest first, then request order) into the lowest gap that no
  // lifetime-overlapping buffer occupies.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  std::vector<std::vector<size_t>> placed(plan.arenas.size());
  for (size_t r : order) {
    const BufferRequest& req = requests[r];
    int arena = 0;
    while (plan.arenas[arena].device != req.device) ++arena;
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of overlapping buffers
    for (size_t other : placed[arena]) {
      const BufferRequest& o = requests[other];
      if (o.first <= req.last && req.first <= o.last) {
        busy.emplace_back(plan.offset[other], plan.offset[other] + align_up(o.bytes, alignment));
      }
    }
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    const uint64_t need = align_up(req.bytes, alignment);
    for (const auto& [begin, end] : busy) {
      if (candidate + need <= begin) break;
      candidate = std::max(candidate, end);
    }
    plan.arena[r] = arena;
    plan.offset[r] = candidate;
    plan.arenas[arena].size = std::max(plan.arenas[arena].size, candidate + need);
    placed[arena].push_back(r);
  }
  return plan;
}

Result<ValuePlan> plan_values(const Graph& graph, const Schedule& schedule) {
  // Requests in value-id order, so the same schedule always gives the same plan.
  std::set<int> planned;
  auto consider = [&](int v) {
    if (v >= 0 && !graph.values[v].constant) planned.insert(v);
  };
  for (int v : schedule.inputs) consider(v);
  for (const Step& s : schedule.steps) {
    for (int v : s.inputs) consider(v);
    for (int v : s.outputs) consider(v);
  }
  for (int v : schedule.outputs) consider(v);

  std::vector<BufferRequest> requests;
  std::map<int, size_t> request_of;
  for (int v : planned) {
    const IrValue& iv = graph.values[v];
    const auto bytes = checked_nbytes(iv.dtype, iv.sizes);
    BATON_CHECK_OR_RETURN(bytes.has_value(), Internal,
                          "value '{}' of shape {} reached memory planning with an overflowing size",
                          iv.name, shape_to_string(iv.sizes));
    request_of[v] = requests.size();
    requests.push_back({*bytes, iv.device, std::numeric_limits<int>::max(), -1});
  }
  auto touch = [&](int v, int step) {
    auto it = request_of.find(v);
    if (it == request_of.end()) return;
    BufferRequest& r = requests[it->second];
    r.first = std::min(r.first, step);
    r.last = std::max(r.last, step);
  };
  const int end = static_cast<int>(schedule.steps.size());
  // Method inputs stay intact for the whole call: a caller may set them once and execute many
  // times.
  for (int v : schedule.inputs) {
    touch(v, -1);
    touch(v, end);
  }
  for (int s = 0; s < end; ++s) {
    for (int v : schedule.steps[s].inputs) touch(v, s);
    for (int v : schedule.steps[s].outputs) touch(v, s);
  }
  for (int v : schedule.outputs) touch(v, end);

  const MemoryPlan plan = plan_memory(requests);
  ValuePlan out;
  out.arenas = plan.arenas;
  for (const auto& [v, r] : request_of) out.slots[v] = {plan.arena[r], plan.offset[r]};
  return out;
}

}  // namespace baton::compiler
