#include "compiler/placement.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "baton/core/check.h"
#include "baton/core/log.h"

namespace baton::compiler {
namespace {

std::string device_list(const std::vector<BackendCompiler*>& backends) {
  std::string out;
  for (const BackendCompiler* b : backends) {
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", b->device().to_string(), b->id());
  }
  return out.empty() ? "none" : out;
}

// The compiler of backend `id` that builds for `device`, as an index into `backends`; -1: none.
int backend_for(const std::vector<BackendCompiler*>& backends, std::string_view id, Device device) {
  for (size_t b = 0; b < backends.size(); ++b) {
    if (backends[b]->id() == id && backends[b]->device() == device) return static_cast<int>(b);
  }
  return -1;
}

}  // namespace

Result<PlacementPolicy> make_placement_policy(const CompileOptions& options) {
  PlacementPolicy policy;
  policy.backends = options.backends;
  policy.targets = options.targets;
  policy.io = options.io;
  for (const BackendCompiler* b : policy.backends) {
    BATON_CHECK_OR_RETURN(b != nullptr, InvalidArgument,
                          "CompileOptions::backends holds a null backend compiler: pass the ones "
                          "make_backend_compiler() returned");
  }
  const TargetDevices& t = policy.targets;
  BATON_CHECK_OR_RETURN(t.round_robin.empty() || t.by_partition.empty(), InvalidArgument,
                        "target devices are given both as a list and as a partition map: use one "
                        "(--device cuda:0,cuda:1 or --device 0=cuda:1,1=cuda:0)");
  std::vector<Device> named = t.round_robin;
  for (const auto& [index, device] : t.by_partition) {
    BATON_CHECK_OR_RETURN(index >= 0, InvalidArgument,
                          "the partition map names partition {}: partitions are numbered from 0",
                          index);
    named.push_back(device);
  }
  for (const Device& d : named) {
    const bool built = std::any_of(policy.backends.begin(), policy.backends.end(),
                                   [&](const BackendCompiler* b) { return b->device() == d; });
    BATON_CHECK_OR_RETURN(built, InvalidArgument,
                          "target device {} has no backend compiler that builds for it (the "
                          "backends given build for: {}): make one with "
                          "make_backend_compiler({{{}, ...}}) and add it to "
                          "CompileOptions::backends",
                          d.to_string(), device_list(policy.backends), d.to_string());
  }
  if (options.target_device) {
    policy.label = Device::parse(*options.target_device);
    BATON_CHECK_OR_RETURN(policy.label.has_value(), InvalidArgument,
                          "--target-device '{}' is not a device (expected cpu or cuda:N)",
                          *options.target_device);
    policy.label_text = *options.target_device;
  }
  return policy;
}

Status assign_devices(const PlacementPolicy& policy, PartitionResult& partitions) {
  const TargetDevices& t = policy.targets;
  const int count = static_cast<int>(partitions.partitions.size());
  std::string unused;
  for (const auto& [index, device] : t.by_partition) {
    if (index >= count)
      unused += fmt::format("{}{}={}", unused.empty() ? "" : ",", index, device.to_string());
  }
  if (!unused.empty()) {
    log_message(LogLevel::Warn, "compiler",
                fmt::format("the partition map names partitions this model does not have ({}; "
                            "it has {} partitions): those entries are unused",
                            unused, count));
  }
  for (Partition& p : partitions.partitions) {
    BATON_CHECK_OR_RETURN(p.backend >= 0 && static_cast<size_t>(p.backend) < policy.backends.size(),
                          Internal,
                          "partition '{}' was claimed by backend {}, which is not one of "
                          "the {} given",
                          p.name, p.backend, policy.backends.size());
    const BackendCompiler& claimant = *policy.backends[p.backend];
    Device device = claimant.device();
    if (!t.round_robin.empty()) {
      device = t.round_robin[static_cast<size_t>(p.index) % t.round_robin.size()];
    } else if (!t.by_partition.empty()) {
      auto it = t.by_partition.find(p.index);
      BATON_CHECK_OR_RETURN(it != t.by_partition.end(), InvalidArgument,
                            "partition {} ('{}') has no device in the partition map: give every "
                            "partition one (e.g. --device {}=cuda:0; this model has {} "
                            "partitions)",
                            p.index, p.name, p.index, count);
      device = it->second;
    }
    const int backend = backend_for(policy.backends, claimant.id(), device);
    BATON_CHECK_OR_RETURN(backend >= 0, InvalidArgument,
                          "partition '{}' goes to {}, but no {} backend compiler builds for it "
                          "(the backends given build for: {}): add one for {}",
                          p.name, device.to_string(), claimant.id(), device_list(policy.backends),
                          device.to_string());
    p.backend = backend;
    p.target_device = device;
  }
  return Status();
}

Status label_partition(const PlacementPolicy& policy, const BackendCompiler& lowered_by,
                       Partition& p, LoweredPartition& lowered) {
  // The label comes from the blob itself: a partition whose blob does not say where it runs is
  // an error, never a silent default.
  auto built_for = lowered_by.blob_device(lowered.blob);
  if (!built_for.ok()) {
    return Status(built_for.code(),
                  fmt::format("partition '{}': cannot read the device its {} blob was built "
                              "for: {}",
                              p.name, lowered_by.id(), built_for.status().message()));
  }
  BATON_CHECK_OR_RETURN(*built_for == p.target_device, Internal,
                        "partition '{}' was placed on {}, but the {} backend built its blob for "
                        "{}: label and blob would disagree, so no program is written. This is a "
                        "bug in the {} backend compiler; please report it with the model",
                        p.name, p.target_device.to_string(), lowered_by.id(),
                        built_for->to_string(), lowered_by.id());
  p.blob_device = *built_for;
  std::string text = built_for->to_string();
  if (policy.label) {
    if (*policy.label != *built_for) {
      log_message(LogLevel::Warn, "compiler",
                  fmt::format("partition '{}' is labelled {} (--target-device) but its engine is "
                              "built for {}: the program will only load where both agree",
                              p.name, policy.label->to_string(), built_for->to_string()));
    }
    p.target_device = *policy.label;
    text = policy.label_text;
  }
  std::erase_if(lowered.compile_specs, [](const auto& kv) { return kv.first == "target_device"; });
  lowered.compile_specs.insert(lowered.compile_specs.begin(),
                               {"target_device", std::vector<uint8_t>(text.begin(), text.end())});
  return Status();
}

namespace {

class Placer {
 public:
  Placer(const PlacementPolicy& policy, Graph& graph, const PartitionResult& partitions,
         std::span<const StateBinding> state)
      : policy_(policy), g_(graph), partitions_(partitions) {
    for (const StateBinding& s : state) {
      state_values_.insert(s.value);
      state_updates_.insert(s.update);
    }
  }

  Schedule run() {
    schedule();
    propagate_devices();
    insert_transfers();
    return std::move(out_);
  }

 private:
  void schedule() {
    std::vector<uint8_t> emitted(partitions_.partitions.size(), 0);
    for (int node : partitions_.order) {
      const IrNode& n = g_.nodes[node];
      Step s;
      if (n.partition >= 0) {
        if (emitted[n.partition]) continue;
        emitted[n.partition] = 1;
        const Partition& p = partitions_.partitions[n.partition];
        s.kind = StepKind::Delegate;
        s.partition = p.index;
        s.inputs = p.inputs;
        s.outputs = p.outputs;
        s.device = p.target_device;
      } else {
        s.kind = StepKind::Kernel;
        s.node = node;
        s.inputs = n.inputs;
        s.outputs = n.outputs;
        s.device = Device::cpu();
      }
      out_.steps.push_back(std::move(s));
    }
  }

  // Every tensor a step produces lives where the step runs: a delegate's outputs (each output of
  // a multi-output call included) on its partition's target device, a kernel's on the cpu. What a
  // step reads must be there too; insert_transfers makes it so.
  void propagate_devices() {
    for (const Step& s : out_.steps) {
      for (int v : s.outputs) {
        if (v >= 0) g_.values[v].device = s.device;
      }
    }
    for (int v : g_.inputs) {
      g_.values[v].device = Device::cpu();
      // The caller never passes state, so it lives where it is read, like device I/O.
      if (policy_.io != MethodIo::Device && !state_values_.count(v)) continue;
      // A method input lives where the first instruction that reads it runs.
      for (const Step& s : out_.steps) {
        if (std::find(s.inputs.begin(), s.inputs.end(), v) != s.inputs.end()) {
          g_.values[v].device = s.device;
          break;
        }
      }
    }
  }

  // A reader on another device reads a copy made right before its first read there; later
  // readers on that device share the copy. Readers on the value's own device read it in place:
  // the original stays valid for every later reader, so no value ever goes to the host and back.
  void insert_transfers() {
    std::vector<Step> result;
    for (Step& s : out_.steps) {
      for (int& v : s.inputs) {
        if (v < 0 || g_.values[v].constant) continue;
        if (g_.values[v].device == s.device) continue;
        v = copy_of(v, s.device, result);
      }
      result.push_back(std::move(s));
    }
    out_.inputs = g_.inputs;
    out_.outputs = g_.outputs;
    if (policy_.io == MethodIo::Host) {
      for (int& v : out_.outputs) {
        if (g_.values[v].constant || g_.values[v].device.is_cpu()) continue;
        if (state_updates_.count(v)) continue;  // kept on its device for the next call
        v = copy_of(v, Device::cpu(), result);
      }
    }
    out_.steps = std::move(result);
  }

  // The copy of `v` on `d`, appending the copy step to `steps` when it does not exist yet.
  int copy_of(int v, Device d, std::vector<Step>& steps) {
    const auto key = std::make_pair(v, std::make_pair(static_cast<int>(d.type), int{d.index}));
    if (auto it = copies_.find(key); it != copies_.end()) return it->second;
    IrValue copy = g_.values[v];
    copy.name = g_.values[v].name + "@" + d.to_string();
    copy.constant = nullptr;
    copy.producer = -1;
    copy.device = d;
    const int id = g_.add_value(std::move(copy));
    copies_[key] = id;
    Step c;
    c.kind = StepKind::Copy;
    c.inputs = {v};
    c.outputs = {id};
    c.device = d;
    steps.push_back(std::move(c));
    ++out_.copies;
    return id;
  }

  const PlacementPolicy& policy_;
  Graph& g_;
  const PartitionResult& partitions_;
  Schedule out_;
  std::map<std::pair<int, std::pair<int, int>>, int> copies_;  // (value, device) -> copy
  std::set<int> state_values_;
  std::set<int> state_updates_;
};

}  // namespace

Schedule place_values(const PlacementPolicy& policy, Graph& graph,
                      const PartitionResult& partitions, std::span<const StateBinding> state) {
  return Placer(policy, graph, partitions, state).run();
}

}  // namespace baton::compiler
