#include "baton/compiler/compiler.h"

#include <chrono>
#include <filesystem>

#include "baton/core/check.h"
#include "baton/core/log.h"
#include "compiler/backend_compiler.h"
#include "compiler/emit.h"
#include "compiler/onnx_import.h"
#include "compiler/partition.h"
#include "compiler/passes.h"
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

Result<std::vector<uint8_t>> CompiledProgram::serialize() const {
  // serialize_program fills in the version and segment table: give it a deep copy (ProgramT is
  // move-only), so this const method changes nothing and may run on several threads at once.
  fb::ProgramT copy;
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(fb::Program::Pack(builder, &impl_->program));
  fb::GetProgram(builder.GetBufferPointer())->UnPackTo(&copy);
  const auto spans = impl_->segment_spans();
  return format::serialize_program(copy, spans);
}

Status CompiledProgram::write(const std::string& path) const {
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize());
  return format::write_file_atomically(path, bytes);
}

namespace {

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

Result<CompiledProgram> compile_graph(Graph graph, const CompileOptions& options,
                                      PhaseTimer& timer) {
  BATON_CHECK_OR_RETURN(options.device == "cpu" || !options.backends.empty(), NotSupported,
                        "device '{}' needs a backend that can compile for it, and none was given",
                        options.device);
  timer.start();
  const size_t onnx_nodes = graph.nodes.size();
  BATON_ASSIGN_OR_RETURN(size_t folded, infer_and_fold(graph));
  const size_t removed = eliminate_dead_nodes(graph);
  timer.done("infer",
             fmt::format("shapes inferred, {} nodes folded, {} unused removed", folded, removed));

  timer.start();
  PartitionResult partitions =
      partition_graph(graph, options.backends, options.max_partition_nodes);
  size_t claimed = 0;
  for (const auto& p : partitions.partitions) claimed += p.nodes.size();
  timer.done("partition",
             fmt::format("{} partitions, {} nodes on the cpu", partitions.partitions.size(),
                         partitions.order.size() - claimed));

  timer.start();
  std::optional<Device> label_override;
  if (options.target_device) {
    label_override = Device::parse(*options.target_device);
    BATON_CHECK_OR_RETURN(label_override.has_value(), InvalidArgument,
                          "--target-device '{}' is not a device (expected cpu or cuda:N)",
                          *options.target_device);
  }
  std::vector<LoweredPartition> lowered;
  std::vector<std::string> backend_ids;
  std::vector<Device> labels;
  std::string label_text;
  for (const Partition& p : partitions.partitions) {
    BackendCompiler* backend = options.backends[p.backend];
    if (options.choose_backend) backend = options.choose_backend(p.index, backend);
    BATON_CHECK_OR_RETURN(backend != nullptr, InvalidArgument,
                          "no backend was chosen to lower partition {} ('{}'): give every "
                          "partition a device (e.g. --device {}=cuda:0)",
                          p.index, p.name, p.index);
    auto result = backend->lower(graph, p);
    if (!result.ok()) {
      return Status(result.code(),
                    fmt::format("lowering partition '{}' ({} nodes) for backend "
                                "'{}': {}",
                                p.name, p.nodes.size(), backend->id(), result.status().message()));
    }
    LoweredPartition lp = std::move(result).value();
    // The label comes from the blob itself (or, when given, verbatim from the caller): a
    // partition whose blob does not say where it runs is an error, never a silent default.
    auto built_for = backend->blob_device(lp.blob);
    if (!built_for.ok()) {
      return Status(built_for.code(),
                    fmt::format("partition '{}': cannot read the device its {} blob was built "
                                "for: {}",
                                p.name, backend->id(), built_for.status().message()));
    }
    const Device label = label_override.value_or(*built_for);
    if (label_override && *label_override != *built_for) {
      log_message(LogLevel::Warn, "compiler",
                  fmt::format("partition '{}' is labelled {} (--target-device) but its engine is "
                              "built for {}: the program will only load where both agree",
                              p.name, label.to_string(), built_for->to_string()));
    }
    const std::string text = options.target_device.value_or(built_for->to_string());
    std::erase_if(lp.compile_specs, [](const auto& kv) { return kv.first == "target_device"; });
    lp.compile_specs.insert(lp.compile_specs.begin(),
                            {"target_device", std::vector<uint8_t>(text.begin(), text.end())});
    for (const auto& [key, value] : options.delegate_specs) {
      lp.compile_specs.emplace_back(key, std::vector<uint8_t>(value.begin(), value.end()));
    }
    label_text += fmt::format("{}{}={}", label_text.empty() ? "" : ", ", p.name, text);
    labels.push_back(label);
    lowered.push_back(std::move(lp));
    backend_ids.emplace_back(backend->id());
  }
  timer.done("lower", fmt::format("{} partitions lowered{}{}", lowered.size(),
                                  label_text.empty() ? "" : ": ", label_text));

  timer.start();
  EmitInput in;
  in.graph = &graph;
  in.partitions = &partitions;
  in.lowered = &lowered;
  in.backend_ids = backend_ids;
  in.labels = labels;
  in.io = options.io;
  in.producer = fmt::format(
      "baton 0.1.0 from {} ({}, opset {})", std::filesystem::path(graph.source).filename().string(),
      graph.producer.empty() ? "unknown producer" : graph.producer, graph.opset);
  BATON_ASSIGN_OR_RETURN(EmitOutput out, emit_program(in));
  out.summary.onnx_nodes = onnx_nodes;
  out.summary.folded_nodes = folded;
  for (size_t i = 0; i < partitions.partitions.size(); ++i) {
    const auto& spec = lowered[i].compile_specs.front().second;
    out.summary.partitions.emplace_back(partitions.partitions[i].name,
                                        std::string(spec.begin(), spec.end()));
  }
  std::string arenas;
  for (const auto& [device, bytes] : out.summary.arenas) {
    arenas += fmt::format("{}{} {} bytes", arenas.empty() ? "" : ", ", device, bytes);
  }
  timer.done("plan",
             fmt::format("{} instructions, arenas: {}",
                         out.summary.kernel_calls + out.summary.delegate_calls + out.summary.copies,
                         arenas.empty() ? "none" : arenas));
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

}  // namespace

Result<CompiledProgram> compile_bytes(std::span<const uint8_t> onnx_bytes,
                                      const CompileOptions& options, const std::string& base_dir) {
  BATON_TRY(check_kernels_registered());
  PhaseTimer timer(options);
  timer.start();
  ImportOptions import_options{options.input_shapes};
  BATON_ASSIGN_OR_RETURN(Graph graph,
                         import_onnx_bytes(onnx_bytes, "<memory>", base_dir, import_options));
  timer.done("import", fmt::format("{} nodes, {} values, opset {}", graph.nodes.size(),
                                   graph.values.size(), graph.opset));
  return compile_graph(std::move(graph), options, timer);
}

Result<CompiledProgram> compile_file(const std::string& onnx_path, const CompileOptions& options) {
  BATON_TRY(check_kernels_registered());
  PhaseTimer timer(options);
  timer.start();
  ImportOptions import_options{options.input_shapes};
  BATON_ASSIGN_OR_RETURN(Graph graph, import_onnx_file(onnx_path, import_options));
  timer.done("import", fmt::format("{} nodes, {} values, opset {}", graph.nodes.size(),
                                   graph.values.size(), graph.opset));
  return compile_graph(std::move(graph), options, timer);
}

}  // namespace baton::compiler
