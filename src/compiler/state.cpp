#include "compiler/state.h"

#include <algorithm>
#include <set>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/partition.h"
#include "compiler/placement.h"
#include "compiler/shape_infer.h"
#include "format/program_file.h"

namespace baton::compiler {
namespace {

int find_named(const Graph& graph, const std::vector<int>& ids, const std::string& name) {
  for (int v : ids) {
    if (graph.values[v].name == name) return v;
  }
  return -1;
}

std::string names_of(const Graph& graph, const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 12; ++i) {
    out += fmt::format("{}'{}'", i == 0 ? "" : ", ", graph.values[ids[i]].name);
  }
  if (ids.size() > 12) out += fmt::format(" and {} more", ids.size() - 12);
  return out.empty() ? "none" : out;
}

// Whether `update` is computed in place over `value`: by a live ScatterND or ScatterElements
// whose data input is `value`.
bool updates_in_place(const Graph& graph, int value, int update) {
  const int p = graph.values[update].producer;
  if (p < 0) return false;
  const IrNode& n = graph.nodes[p];
  return !n.dead && format::is_in_place_op(n.domain, n.op_type) && !n.inputs.empty() &&
         n.inputs[0] == value;
}

// Checks one pair; `what` names it in messages ("--state past=present").
Status check_pair(const Graph& graph, int value, int update, const std::string& what) {
  const IrValue& in = graph.values[value];
  const IrValue& out = graph.values[update];
  BATON_CHECK_OR_RETURN(in.dtype == out.dtype && same_shape(in, out), InvalidArgument,
                        "{}: the input is {} {} and the output {} {}; state is one tensor, so "
                        "both must have one dtype and shape (a cache that grows by concatenation "
                        "is not state: export it with a fixed maximum length and a scatter)",
                        what, dtype_name(in.dtype), shape_text(graph, in), dtype_name(out.dtype),
                        shape_text(graph, out));
  if (!updates_in_place(graph, value, update)) {
    const int p = out.producer;
    const std::string by = p < 0 ? std::string("is not computed by any node")
                                 : fmt::format("is computed by {}", graph.nodes[p].describe());
    return BATON_ERROR(InvalidArgument,
                       "{}: the output {} from the input; Baton updates state in place only "
                       "through a ScatterND or ScatterElements whose data is the input "
                       "(docs/state.md shows exports that write one)",
                       what, by);
  }
  // The caller no longer passes the state, so its dynamic sizes must be ones another input gives.
  for (size_t d = 0; d < in.dims.size(); ++d) {
    const sym::SizeExpr e = in.dims[d];
    if (graph.symbols.is_constant(e)) continue;
    bool given = false;
    for (int i : graph.inputs) {
      if (i == value) continue;
      const IrValue& other = graph.values[i];
      given = given || std::find(other.dims.begin(), other.dims.end(), e) != other.dims.end();
    }
    BATON_CHECK_OR_RETURN(given, InvalidArgument,
                          "{}: axis {} of the state has size {}, which no other input has; a "
                          "call sizes the state from its other inputs, so fix that size "
                          "(--shape or --dim) or give an input with it",
                          what, d, graph.symbols.to_string(e));
  }
  return Status();
}

// Ops whose output a backend may make a view of its first input's bytes (a reshape, a
// transposed or sliced view, a constant Gather) or whose readers may read the inputs where they
// lie (a Concat left to its readers): a reader of such an output reads the state's bytes.
bool may_alias_input(const IrNode& n) {
  static const char* const kViews[] = {"Reshape",  "Flatten",   "Squeeze", "Unsqueeze",
                                       "Identity", "Transpose", "Slice",   "Split",
                                       "Gather",   "Expand",    "Concat"};
  if (!n.domain.empty()) return false;
  for (const char* op : kViews) {
    if (n.op_type == op) return true;
  }
  return false;
}

// In execution order (the method's instructions, each delegate call standing for its partition's
// nodes in their order, since its partition runs whole at that point): the values that may be
// the state's bytes (the state, and every output of a view-like op reading one of them) are read
// by nothing after the scatter that updates it, and are not the scatter's own indices or updates
// (it would read what it writes).
Status check_no_late_alias(const Graph& graph, const StateBinding& s, const Schedule& schedule,
                           const PartitionResult& partitions, const std::string& what) {
  const int scatter = graph.values[s.update].producer;
  std::set<int> aliases{s.value};
  bool after = false;
  // One reader: a node (node >= 0) or a copy instruction.
  auto visit = [&](int node, const Step& step) -> Status {
    const std::vector<int>& inputs = node >= 0 ? graph.nodes[node].inputs : step.inputs;
    int read = -1;
    for (int v : inputs) {
      if (v >= 0 && aliases.count(v)) read = v;
    }
    if (node >= 0 && node == scatter) {
      for (size_t i = 1; i < inputs.size(); ++i) {
        BATON_CHECK_OR_RETURN(!aliases.count(inputs[i]), InvalidArgument,
                              "{}: the scatter's {} ('{}') is a view of the state itself, which "
                              "the scatter overwrites as it reads; leave this pair out of --state",
                              what, i == 1 ? "indices" : "updates", graph.values[inputs[i]].name);
      }
      after = true;
      return Status();
    }
    BATON_CHECK_OR_RETURN(
        !(after && read >= 0), InvalidArgument,
        "{}: {} reads the state{} after its update has overwritten it in place; "
        "read the update ('{}') there instead, or leave this pair out of --state",
        what,
        node >= 0 ? graph.nodes[node].describe()
                  : fmt::format("the copy to {}", step.device.to_string()),
        read == s.value ? std::string()
                        : fmt::format(" (through '{}', a view of it)", graph.values[read].name),
        graph.values[s.update].name);
    if (read >= 0 && node >= 0 && may_alias_input(graph.nodes[node])) {
      for (int v : graph.nodes[node].outputs) {
        if (v >= 0) aliases.insert(v);
      }
    }
    return Status();
  };
  for (const Step& step : schedule.steps) {
    if (step.kind == StepKind::Delegate) {
      for (int node : partitions.partitions[static_cast<size_t>(step.partition)].nodes) {
        BATON_TRY(visit(node, step));
      }
    } else {
      BATON_TRY(visit(step.kind == StepKind::Kernel ? step.node : -1, step));
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<StateBinding>> resolve_state(const Graph& graph,
                                                const std::vector<StatePair>& declared, bool find) {
  std::vector<StateBinding> out;
  std::set<int> used;
  for (const StatePair& pair : declared) {
    const std::string what = fmt::format("--state {}={}", pair.input, pair.output);
    const int value = find_named(graph, graph.inputs, pair.input);
    BATON_CHECK_OR_RETURN(value >= 0, InvalidArgument,
                          "{}: '{}' is not an input of the model (its inputs: {})", what,
                          pair.input, names_of(graph, graph.inputs));
    const int update = find_named(graph, graph.outputs, pair.output);
    BATON_CHECK_OR_RETURN(update >= 0, InvalidArgument,
                          "{}: '{}' is not an output of the model (its outputs: {})", what,
                          pair.output, names_of(graph, graph.outputs));
    BATON_CHECK_OR_RETURN(!used.count(value) && !used.count(update), InvalidArgument,
                          "{}: '{}' or '{}' is in another state pair already", what, pair.input,
                          pair.output);
    BATON_TRY(check_pair(graph, value, update, what));
    used.insert(value);
    used.insert(update);
    out.push_back({pair.input, value, update});
  }
  if (find) {
    for (int update : graph.outputs) {
      const int p = graph.values[update].producer;
      if (used.count(update) || p < 0) continue;
      const IrNode& n = graph.nodes[p];
      if (n.inputs.empty() || n.inputs[0] < 0) continue;
      const int value = n.inputs[0];
      if (used.count(value) ||
          std::find(graph.inputs.begin(), graph.inputs.end(), value) == graph.inputs.end() ||
          !updates_in_place(graph, value, update)) {
        continue;
      }
      BATON_TRY(check_pair(graph, value, update,
                           fmt::format("--state auto (found {}={})", graph.values[value].name,
                                       graph.values[update].name)));
      used.insert(value);
      used.insert(update);
      out.push_back({graph.values[value].name, value, update});
    }
  }
  return out;
}

void mark_in_place(const std::vector<StateBinding>& state, PartitionResult& partitions) {
  for (Partition& p : partitions.partitions) {
    for (const StateBinding& s : state) {
      const bool reads = std::find(p.inputs.begin(), p.inputs.end(), s.value) != p.inputs.end();
      const bool writes =
          std::find(p.outputs.begin(), p.outputs.end(), s.update) != p.outputs.end();
      if (reads && writes) p.in_place.emplace_back(s.value, s.update);
    }
  }
}

std::string in_place_spec(const Partition& partition) {
  std::string out;
  for (const auto& [value, update] : partition.in_place) {
    const auto i = std::find(partition.inputs.begin(), partition.inputs.end(), value);
    const auto o = std::find(partition.outputs.begin(), partition.outputs.end(), update);
    if (i == partition.inputs.end() || o == partition.outputs.end()) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : ";", i - partition.inputs.begin(),
                       o - partition.outputs.begin());
  }
  return out;
}

Status bind_state(const Graph& graph, const std::vector<StateBinding>& state,
                  const PartitionResult& partitions, Schedule& schedule) {
  for (const StateBinding& s : state) {
    const std::string what =
        fmt::format("state '{}' (updated as '{}')", s.name, graph.values[s.update].name);
    const Device device = graph.values[s.value].device;
    const Device update_device = graph.values[s.update].device;
    BATON_CHECK_OR_RETURN(device == update_device, NotSupported,
                          "{}: the state is read on {} but its update is computed on {}; one "
                          "buffer cannot be both. A node the GPU does not take may read it on "
                          "the CPU (the compile's fallbacks list them); otherwise compile the "
                          "decoder for one --device, or leave this pair out of --state",
                          what, device.to_string(), update_device.to_string());
    // The step that writes the update: a CPU scatter, or a delegate whose partition knows it
    // writes in place.
    const auto writer =
        std::find_if(schedule.steps.begin(), schedule.steps.end(), [&](const Step& st) {
          return std::find(st.outputs.begin(), st.outputs.end(), s.update) != st.outputs.end();
        });
    BATON_CHECK_OR_RETURN(writer != schedule.steps.end() && writer->kind != StepKind::Copy,
                          Internal, "{}: no kernel or delegate call writes the update", what);
    if (writer->kind == StepKind::Delegate) {
      const Partition& p = partitions.partitions[static_cast<size_t>(writer->partition)];
      const bool marked = std::find(p.in_place.begin(), p.in_place.end(),
                                    std::make_pair(s.value, s.update)) != p.in_place.end();
      BATON_CHECK_OR_RETURN(marked, NotSupported,
                            "{}: partition '{}' computes the update but does not read the state "
                            "itself, so it cannot update it in place; leave this pair out of "
                            "--state",
                            what, p.name);
    }
    BATON_TRY(check_no_late_alias(graph, s, schedule, partitions, what));
    std::erase(schedule.inputs, s.value);
    std::erase(schedule.outputs, s.update);
  }
  return Status();
}

}  // namespace baton::compiler
