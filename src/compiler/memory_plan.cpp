#include "compiler/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <string>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/ir.h"
#include "compiler/placement.h"
#include "compiler/state.h"
#include "format/program_file.h"

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

namespace {

// "'y' float32 [1048576, 1048576] (4398046511104 bytes, made by Add node 'outer')"
std::string describe_value(const Graph& graph, int v, uint64_t bytes) {
  const IrValue& iv = graph.values[v];
  std::string made_by = iv.producer >= 0
                            ? fmt::format(", made by {}", graph.nodes[iv.producer].describe())
                            : std::string(", a method input or a copy");
  return fmt::format("'{}' {} {} ({} bytes{})", iv.name, dtype_name(iv.dtype),
                     shape_to_string(iv.sizes), bytes, made_by);
}

// The arena on `device` would be `size` ("4398046511104", "at least ..."): an error naming the
// largest tensors in it.
Status arena_too_large(const Graph& graph, const std::vector<BufferRequest>& requests,
                       const std::vector<int>& value_of, Device device, const std::string& size,
                       uint64_t limit) {
  std::vector<size_t> on_device;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (requests[r].device == device) on_device.push_back(r);
  }
  std::stable_sort(on_device.begin(), on_device.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  std::string largest;
  for (size_t i = 0; i < on_device.size() && i < 3; ++i) {
    const size_t r = on_device[i];
    largest += fmt::format("\n  {}", describe_value(graph, value_of[r], requests[r].bytes));
  }
  return BATON_ERROR(InvalidArgument,
                     "'{}': the memory arena on {} would be {} bytes, over the limit of {} bytes "
                     "(--max-arena-bytes; the program format allows at most {}). Its largest "
                     "tensors:{}\nCheck the input shapes (--shape) and the model; raise "
                     "--max-arena-bytes if the host or GPU really has that much memory",
                     graph.source, device.to_string(), size, limit, kMaxArenaBytes, largest);
}

}  // namespace

namespace {

// Layout operators as views: a CPU Reshape, Flatten, Squeeze, Unsqueeze or Identity whose input
// is planned here (not a constant, not a method input, which a caller may overwrite between
// calls) writes its output over its input's bytes, which are the same bytes in another shape:
// the kernel sees equal pointers and copies nothing (kernels/cpu/common.h), and the loader accepts
// that exact overlap for these ops only (format/method_verifier.cpp). Returns, per value, the value
// whose slot it shares (itself when none); chains resolve to their first value.
std::map<int, int> view_roots(const Graph& graph, const Schedule& schedule,
                              const std::set<int>& planned,
                              const std::vector<StateBinding>& state) {
  std::map<int, int> root;
  // State is kept like a method input: a view of it would see the update's new entries.
  std::set<int> method_inputs(schedule.inputs.begin(), schedule.inputs.end());
  for (const StateBinding& s : state) {
    method_inputs.insert(s.value);
    method_inputs.insert(s.update);
  }
  for (const Step& s : schedule.steps) {
    if (s.kind != StepKind::Kernel || s.inputs.empty() || s.outputs.size() != 1) continue;
    const IrNode& n = graph.nodes[s.node];
    const int in = s.inputs[0], out = s.outputs[0];
    if (!format::is_view_op(n.domain, n.op_type) || in < 0 || out < 0 || !planned.count(in) ||
        !planned.count(out) || method_inputs.count(in) || method_inputs.count(out)) {
      continue;
    }
    const IrValue& a = graph.values[in];
    const IrValue& b = graph.values[out];
    if (a.device != b.device || !a.device.is_cpu() || a.dtype != b.dtype) continue;
    const auto it = root.find(in);
    root[out] = it == root.end() ? in : it->second;
  }
  return root;
}

}  // namespace

Result<ValuePlan> plan_values(const Graph& graph, const Schedule& schedule,
                              uint64_t max_arena_bytes, const std::vector<StateBinding>& state) {
  const uint64_t limit = std::min(max_arena_bytes, kMaxArenaBytes);
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

  const std::map<int, int> views = view_roots(graph, schedule, planned, state);
  // Values planned in another's slot: views with their roots, and each state's update with its
  // value (bind_state made sure a kernel step writes the one from the other, so both are planned).
  std::map<int, int> shared = views;
  for (const StateBinding& st : state) shared[st.update] = st.value;
  std::vector<BufferRequest> requests;
  std::vector<int> value_of;  // per request
  std::map<int, size_t> request_of;
  for (int v : planned) {
    if (shared.count(v)) continue;  // planned with the value whose slot it shares
    const IrValue& iv = graph.values[v];
    const auto bytes = checked_nbytes(iv.dtype, iv.sizes);
    BATON_CHECK_OR_RETURN(bytes.has_value(), Internal,
                          "value '{}' of shape {} reached memory planning with an overflowing size",
                          iv.name, shape_to_string(iv.sizes));
    request_of[v] = requests.size();
    value_of.push_back(v);
    requests.push_back({*bytes, iv.device, std::numeric_limits<int>::max(), -1});
  }
  // Every request within the limit, and their sum (which bounds every offset plan_memory makes)
  // far from overflow, before planning.
  std::map<Device, uint64_t, bool (*)(const Device&, const Device&)> sums(&device_less);
  for (const BufferRequest& r : requests) {
    uint64_t& sum = sums[r.device];
    if (r.bytes > limit) {
      return arena_too_large(graph, requests, value_of, r.device,
                             fmt::format("at least {}", r.bytes), limit);
    }
    if (sum != UINT64_MAX &&
        __builtin_add_overflow(sum, align_up(r.bytes, kTensorAlignment), &sum)) {
      sum = UINT64_MAX;
    }
  }
  for (const auto& [device, sum] : sums) {
    if (sum > (uint64_t{1} << 62)) {
      return arena_too_large(graph, requests, value_of, device, "more than 2^62", limit);
    }
  }
  // A view's uses extend its root's lifetime (and an update's, its state's).
  for (const auto& [v, r] : shared) request_of[v] = request_of.at(r);
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
  // State outlives every call: no other value may ever use its bytes.
  for (const StateBinding& st : state) {
    touch(st.value, -1);
    touch(st.value, end);
  }
  for (int s = 0; s < end; ++s) {
    for (int v : schedule.steps[s].inputs) touch(v, s);
    for (int v : schedule.steps[s].outputs) touch(v, s);
  }
  for (int v : schedule.outputs) touch(v, end);

  const MemoryPlan plan = plan_memory(requests);
  for (const MemoryPlan::Arena& a : plan.arenas) {
    if (a.size > limit) {
      return arena_too_large(graph, requests, value_of, a.device, fmt::format("{}", a.size), limit);
    }
  }
  ValuePlan out;
  out.arenas = plan.arenas;
  out.views = views.size();
  for (const auto& [v, r] : request_of) out.slots[v] = {plan.arena[r], plan.offset[r]};
  return out;
}

}  // namespace baton::compiler
