#include "baton/compiler/compiler.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <new>
#include <set>
#include <stdexcept>

#include "baton/core/check.h"
#include "baton/core/file.h"
#include "baton/core/log.h"
#include "baton/core/text.h"
#include "compiler/backend_compiler.h"
#include "compiler/emit.h"
#include "compiler/memory_plan.h"
#include "compiler/onnx_import.h"
#include "compiler/partition.h"
#include "compiler/passes.h"
#include "compiler/passes/pass.h"
#include "compiler/placement.h"
#include "compiler/sampling.h"
#include "compiler/shape_values.h"
#include "compiler/state.h"
#include "format/program_file.h"
#include "runtime/kernel.h"

namespace baton::compiler {

struct CompiledProgram::Impl {
  fb::ProgramT program;
  std::vector<std::vector<uint8_t>> segments;
  CompileSummary summary;

  std::vector<std::span<const uint8_t>> segment_spans() const {
    std::vector<std::span<const uint8_t>> out;
    for (const auto& s : segments) out.emplace_back(s);
    return out;
  }
};

CompiledProgram::CompiledProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledProgram::CompiledProgram(CompiledProgram&&) noexcept = default;
CompiledProgram& CompiledProgram::operator=(CompiledProgram&&) noexcept = default;
CompiledProgram::~CompiledProgram() = default;

const CompileSummary& CompiledProgram::summary() const { return impl_->summary; }

namespace {

// Buffers whose size a model chooses are allocated through allocate_bytes, which reports
// OutOfMemory. Should any other allocation run the host out of memory, the caller gets that error
// too, "out of host memory <what>", never std::bad_alloc.
template <typename Fn>
auto without_bad_alloc(std::string_view what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return BATON_ERROR(OutOfMemory, "out of host memory {}", what);
}

}  // namespace

Result<std::vector<uint8_t>> CompiledProgram::serialize() const {
  // A program with gigabytes of constants is copied once more here.
  uint64_t bytes = 0;
  for (const auto& segment : impl_->segments) bytes += segment.size();
  return without_bad_alloc(
      fmt::format("serializing the program ({} bytes of constants and engine blobs)", bytes),
      [&]() -> Result<std::vector<uint8_t>> {
        // serialize_program fills in the version and segment table: give it a deep copy
        // (ProgramT is move-only), so this const method changes nothing and may run on several
        // threads at once.
        fb::ProgramT copy;
        flatbuffers::FlatBufferBuilder builder;
        builder.Finish(fb::Program::Pack(builder, &impl_->program));
        fb::GetProgram(builder.GetBufferPointer())->UnPackTo(&copy);
        const auto spans = impl_->segment_spans();
        return format::serialize_program(copy, spans);
      });
}

Status CompiledProgram::write(const std::string& path) const {
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize());
  return write_file_atomically(path, bytes, LinkAtPath::Follow);
}

Status check_output_path(const std::string& path) {
  return check_file_writable(path, LinkAtPath::Follow);
}

namespace {

constexpr std::string_view kOutOfMemoryHint =
    "the model may ask for more than this host has (check its shapes, --max-fold-bytes and "
    "--max-arena-bytes)";

class PhaseTimer {
 public:
  explicit PhaseTimer(const CompileOptions& options) : options_(options) {}
  void start() { start_ = std::chrono::steady_clock::now(); }
  void done(std::string_view phase, std::string detail) {
    if (!options_.progress) return;
    options_.progress(
        Progress{phase, std::move(detail), std::chrono::steady_clock::now() - start_});
  }

 private:
  const CompileOptions& options_;
  std::chrono::steady_clock::time_point start_;
};

// "3 copies: 1 cpu->cuda:0, 2 cuda:0->cpu" (or "no copies").
std::string describe_copies(const Graph& graph, const Schedule& schedule) {
  std::map<std::string, int> by_route;
  for (const Step& s : schedule.steps) {
    if (s.kind != StepKind::Copy) continue;
    ++by_route[fmt::format("{}->{}", graph.values[s.inputs[0]].device.to_string(),
                           s.device.to_string())];
  }
  if (by_route.empty()) return "no copies";
  std::string out = fmt::format("{} copies:", schedule.copies);
  for (const auto& [route, count] : by_route) {
    out += fmt::format("{} {} {}", out.back() == ':' ? "" : ",", count, route);
  }
  return out;
}

// CompileOptions::expose_intermediates: appends every computed value to the graph's outputs.
std::vector<std::string> expose_intermediates(Graph& graph) {
  std::set<int> outputs(graph.outputs.begin(), graph.outputs.end());
  outputs.insert(graph.inputs.begin(), graph.inputs.end());
  std::vector<std::string> names;
  for (const IrNode& n : graph.nodes) {
    if (n.dead) continue;
    for (int v : n.outputs) {
      if (v < 0 || graph.values[v].constant || graph.values[v].name.empty() ||
          !outputs.insert(v).second) {
        continue;
      }
      graph.outputs.push_back(v);
      names.push_back(graph.values[v].name);
    }
  }
  return names;
}

// The nodes a compile with backends leaves on the CPU, each with the first backend's reason, and
// what CompileOptions::fallback says to do about them: a warning (grouped by reason), an error
// naming them, or nothing (they are listed in the summary and the program either way).
Result<std::vector<CpuFallback>> cpu_fallbacks(const Graph& graph, const PartitionResult& parts,
                                               const CompileOptions& options) {
  std::vector<CpuFallback> out;
  if (options.backends.empty()) return out;
  for (int index : parts.order) {
    const IrNode& node = graph.nodes[static_cast<size_t>(index)];
    if (node.partition >= 0) continue;
    CpuFallback f;
    f.node = node.name.empty() ? fmt::format("#{}", index) : node.name;
    f.op = node.domain.empty() ? node.op_type : fmt::format("{}.{}", node.domain, node.op_type);
    f.reason = touches_data_dependent_size(graph, node)
                   ? std::string("dynamic output size (a size known only when NonZero has run)")
                   : options.backends.front()->unsupported_reason(graph, node);
    out.push_back(std::move(f));
  }
  if (out.empty() || options.fallback == FallbackPolicy::Allow) return out;
  // "no CUDA lowering for LSTM: 'lstm_1', 'lstm_2'; ..." in first-seen order of the reasons.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const CpuFallback& f : out) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const auto& e) { return e.first == f.reason; });
    if (g == groups.end()) {
      groups.push_back({f.reason, {}});
      g = groups.end() - 1;
    }
    g->second.push_back(f.node);
  }
  std::string listing;
  for (const auto& [reason, nodes] : groups) {
    std::string names;
    for (size_t i = 0; i < nodes.size() && i < 8; ++i) {
      names += fmt::format("{}'{}'", i ? ", " : "", nodes[i]);
    }
    if (nodes.size() > 8) names += fmt::format(" and {} more", nodes.size() - 8);
    listing += fmt::format("\n  {} ({} node{}): {}", reason, nodes.size(),
                           nodes.size() == 1 ? "" : "s", names);
  }
  BATON_CHECK_OR_RETURN(options.fallback != FallbackPolicy::Error, NotSupported,
                        "{} node{} would run on the CPU, and fallbacks are refused (--fallback "
                        "error):{}",
                        out.size(), out.size() == 1 ? "" : "s", listing);
  log_message(
      LogLevel::Warn, "compile",
      fmt::format("{} node{} run{} on the CPU (--fallback error refuses this, --fallback "
                  "allow keeps it quiet):{}",
                  out.size(), out.size() == 1 ? "" : "s", out.size() == 1 ? "s" : "", listing));
  return out;
}

Result<CompiledProgram> compile_graph(Graph graph, const CompileOptions& options,
                                      PhaseTimer& timer) {
  BATON_ASSIGN_OR_RETURN(const PlacementPolicy policy, make_placement_policy(options));
  timer.start();
  const size_t onnx_nodes = graph.nodes.size();
  BATON_ASSIGN_OR_RETURN(
      FoldReport fold,
      infer_and_fold(graph, FoldLimits{options.max_fold_bytes, options.max_total_fold_bytes,
                                       options.max_fold_work}));
  const size_t folded = fold.folded;
  const size_t removed = eliminate_dead_nodes(graph);
  std::string unfolded;
  if (!fold.kept.empty()) {
    unfolded = fmt::format(
        ", {} left to run time (folding would pass --max-fold-bytes {}, "
        "--max-total-fold-bytes {} or --max-fold-work {:.3g}): {}",
        fold.kept.size(), options.max_fold_bytes, options.max_total_fold_bytes,
        options.max_fold_work, fold.kept.front());
    if (fold.kept.size() > 1) unfolded += fmt::format(" and {} more", fold.kept.size() - 1);
  }
  std::string symbols;
  for (size_t s = 0; s < graph.symbols.num_symbols(); ++s) {
    const sym::SymbolInfo& info = graph.symbols.symbol(s);
    symbols += fmt::format("{}{} in {}..{}", symbols.empty() ? ", dynamic: " : ", ", info.name,
                           info.min, info.max);
  }
  timer.done("infer", fmt::format("shapes inferred, {} nodes folded{}, {} unused removed{}", folded,
                                  unfolded, removed, symbols));
  // A backend that builds blobs for one shape gets no dynamic model: it is refused rather than
  // run on the CPU behind the user's back (the CUDA engine builds dynamic engines, issue 37).
  for (BackendCompiler* backend : options.backends) {
    if (graph.symbols.num_symbols() == 0 || backend->supports_dynamic_shapes()) continue;
    std::string flags;
    for (int id : graph.inputs) {
      const IrValue& v = graph.values[id];
      if (!is_dynamic(v)) continue;
      std::string sizes;
      for (size_t d = 0; d < v.dims.size(); ++d) {
        sizes += (d == 0 ? "" : "x") + (graph.symbols.is_constant(v.dims[d])
                                            ? std::to_string(v.sizes[d])
                                            : "<" + graph.symbols.to_string(v.dims[d]) + ">");
      }
      flags += fmt::format(" --shape {}={}", v.name, sizes);
    }
    return BATON_ERROR(NotSupported,
                       "'{}' has dynamic dimensions ({}), and the '{}' backend does not run "
                       "dynamic shapes yet: compile for --device cpu, or fix the shapes with{} "
                       "(each <name> replaced by a size)",
                       graph.source, symbols.substr(11), backend->id(), flags);
  }

  BATON_TRY(append_sampling(graph, options.sample));

  timer.start();
  // Every backend compiler in the list is a GPU's (the CPU is the fallback, not in the list).
  const bool gpu_target = !options.backends.empty();
  BATON_ASSIGN_OR_RETURN(
      const std::vector<PassReport> pass_reports,
      optimize(graph, OptimizeOptions{options.optimize, options.disabled_passes,
                                      [&](std::string_view domain, std::string_view op) {
                                        for (BackendCompiler* b : options.backends) {
                                          if (!b->lowers(op, domain)) return false;
                                        }
                                        return true;
                                      },
                                      gpu_target}));
  std::string pass_text;
  for (const PassReport& r : pass_reports) {
    pass_text += fmt::format("{}{} {}", pass_text.empty() ? "" : ", ", r.name,
                             r.ran         ? fmt::format("{}", r.changed)
                             : r.unlowered ? std::string("skipped (no GPU lowering yet)")
                             : r.cpu_only  ? std::string("skipped (CPU compile)")
                                           : std::string("off"));
  }
  timer.done("optimize", pass_text);
  if (graph.symbols.num_symbols() > 0) {
    // Shape inputs computed from dynamic sizes become constants at the maxima; the shape
    // arithmetic that computed them is then usually unused (compiler/shape_values.h).
    BATON_TRY(materialize_shape_inputs(graph));
    eliminate_dead_nodes(graph);
  }
  // State pairs are resolved on the optimized graph (its outputs are what the method writes),
  // before partitioning, so that a bad pair fails before any lowering.
  BATON_ASSIGN_OR_RETURN(const std::vector<StateBinding> state,
                         resolve_state(graph, options.state, options.state_auto));
  std::vector<std::string> exposed;
  if (options.expose_intermediates) exposed = expose_intermediates(graph);

  timer.start();
  PartitionResult partitions =
      partition_graph(graph, options.backends, options.max_partition_nodes);
  size_t claimed = 0;
  for (const auto& p : partitions.partitions) claimed += p.nodes.size();
  timer.done("partition",
             fmt::format("{} partitions, {} nodes on the cpu", partitions.partitions.size(),
                         partitions.order.size() - claimed));
  BATON_ASSIGN_OR_RETURN(std::vector<CpuFallback> fallbacks,
                         cpu_fallbacks(graph, partitions, options));

  mark_in_place(state, partitions);

  timer.start();
  BATON_TRY(assign_devices(policy, partitions));
  std::vector<LoweredPartition> lowered;
  std::vector<std::string> backend_ids;
  std::string label_text;
  for (Partition& p : partitions.partitions) {
    BackendCompiler& backend = *options.backends[p.backend];
    auto result = backend.lower(graph, p);
    if (!result.ok()) {
      return Status(result.code(),
                    fmt::format("lowering partition '{}' ({} nodes) for backend '{}' on {}: {}",
                                p.name, p.nodes.size(), backend.id(), p.target_device.to_string(),
                                result.status().message()));
    }
    LoweredPartition lp = std::move(result).value();
    BATON_TRY(label_partition(policy, backend, p, lp));
    if (const std::string spec = in_place_spec(p); !spec.empty()) {
      lp.compile_specs.emplace_back("in_place", std::vector<uint8_t>(spec.begin(), spec.end()));
    }
    for (const auto& [key, value] : options.delegate_specs) {
      lp.compile_specs.emplace_back(key, std::vector<uint8_t>(value.begin(), value.end()));
    }
    const auto& label = lp.compile_specs.front().second;
    label_text += fmt::format("{}{}={}", label_text.empty() ? "" : ", ", p.name,
                              std::string(label.begin(), label.end()));
    lowered.push_back(std::move(lp));
    backend_ids.emplace_back(backend.id());
  }
  timer.done("lower", fmt::format("{} partitions lowered{}{}", lowered.size(),
                                  label_text.empty() ? "" : ": ", label_text));

  timer.start();
  Schedule schedule = place_values(policy, graph, partitions, state);
  BATON_TRY(bind_state(graph, state, partitions, schedule));
  timer.done("place", describe_copies(graph, schedule));

  timer.start();
  BATON_ASSIGN_OR_RETURN(const ValuePlan memory,
                         plan_values(graph, schedule, options.max_arena_bytes, state));
  std::string arenas;
  for (const auto& a : memory.arenas) {
    arenas +=
        fmt::format("{}{} {}", arenas.empty() ? "" : ", ", a.device.to_string(), size_text(a.size));
  }
  timer.done("plan", fmt::format("{} instructions, arenas: {}", schedule.steps.size(),
                                 arenas.empty() ? "none" : arenas));

  EmitInput in;
  in.graph = &graph;
  in.partitions = &partitions;
  in.lowered = &lowered;
  in.backend_ids = std::move(backend_ids);
  in.schedule = &schedule;
  in.memory = &memory;
  in.fallbacks = &fallbacks;
  in.state = &state;
  in.producer = fmt::format(
      "baton 0.1.0 from {} ({}, opset {})", std::filesystem::path(graph.source).filename().string(),
      graph.producer.empty() ? "unknown producer" : graph.producer, graph.opset);
  BATON_ASSIGN_OR_RETURN(EmitOutput out, emit_program(in));
  out.summary.onnx_nodes = onnx_nodes;
  out.summary.folded_nodes = folded;
  for (const PassReport& r : pass_reports) {
    out.summary.passes.emplace_back(std::string(r.name),
                                    r.ran ? static_cast<int64_t>(r.changed) : -1);
  }
  out.summary.unfolded_nodes = std::move(fold.kept);
  out.summary.exposed_values = std::move(exposed);
  out.summary.fallbacks = std::move(fallbacks);
  for (const StateBinding& b : state) {
    out.summary.state.push_back({b.name, graph.values[b.update].name});
  }
  for (size_t i = 0; i < partitions.partitions.size(); ++i) {
    const auto& spec = lowered[i].compile_specs.front().second;
    out.summary.partitions.emplace_back(partitions.partitions[i].name,
                                        std::string(spec.begin(), spec.end()));
  }
  auto impl = std::make_unique<CompiledProgram::Impl>();
  impl->program = std::move(out.program);
  impl->segments = std::move(out.segments);
  impl->summary = std::move(out.summary);
  return CompiledProgram(std::move(impl));
}

}  // namespace

namespace {

Status check_kernels_registered() {
  BATON_CHECK_OR_RETURN(!runtime::kernel_registry().names().empty(), InvalidArgument,
                        "no CPU kernels are registered: call baton::register_builtins() before "
                        "compiling");
  return Status();
}

// Imports through `import(ImportOptions)`, then compiles; `source` names the model in an
// out-of-memory message.
template <typename Import>
Result<CompiledProgram> import_and_compile(std::string_view source, const CompileOptions& options,
                                           Import&& import) {
  return without_bad_alloc(
      fmt::format("compiling {}; {}", source, kOutOfMemoryHint), [&]() -> Result<CompiledProgram> {
        BATON_TRY(check_kernels_registered());
        PhaseTimer timer(options);
        timer.start();
        BATON_ASSIGN_OR_RETURN(
            Graph graph,
            import(ImportOptions{options.input_shapes, options.dims,
                                 FoldLimits{options.max_fold_bytes, options.max_total_fold_bytes,
                                            options.max_fold_work}}));
        timer.done("import", fmt::format("{} nodes, {} values, opset {}", graph.nodes.size(),
                                         graph.values.size(), graph.opset));
        return compile_graph(std::move(graph), options, timer);
      });
}

}  // namespace

Result<CompiledProgram> compile_bytes(std::span<const uint8_t> onnx_bytes,
                                      const CompileOptions& options, const std::string& base_dir) {
  return import_and_compile("an ONNX model from memory", options, [&](const ImportOptions& io) {
    return import_onnx_bytes(onnx_bytes, "<memory>", base_dir, io);
  });
}

Result<CompiledProgram> compile_file(const std::string& onnx_path, const CompileOptions& options) {
  return import_and_compile(fmt::format("'{}'", onnx_path), options, [&](const ImportOptions& io) {
    return import_onnx_file(onnx_path, io);
  });
}

}  // namespace baton::compiler
