#include "backends/cuda/builder/engine_builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "backends/cuda/builder/dynamic_shapes.h"
#include "backends/cuda/builder/lowering.h"
#include "backends/cuda/builder/ops/registry.h"
#include "backends/cuda/device.h"
#include "backends/cuda/engine.h"
#include "backends/cuda/tuning.h"
#include "baton/core/check.h"
#include "baton/core/log.h"
#include "baton/cuda/backend.h"

namespace baton::cuda {
namespace {

// An elementwise node joins the open run when it has the run's shape and reads something the run
// produced (a contiguous run in execution order, so outside readers of the run's results always
// come after the fused kernel).
bool joins(const Lowering& ctx, const std::vector<int>& run, int index) {
  const compiler::IrNode& n = ctx.node(index);
  if (ctx.value(n.outputs[0]).sizes != ctx.value(ctx.node(run[0]).outputs[0]).sizes) return false;
  for (int v : n.inputs) {
    for (int m : run) {
      if (ctx.node(m).outputs[0] == v) return true;
    }
  }
  return false;
}

}  // namespace

bool EngineBuilder::supports(const compiler::Graph& graph, const compiler::IrNode& node) const {
  if (node.def == nullptr) return false;
  const OpLowering* lowering = find_lowering(node.op_type, node.domain);
  return lowering != nullptr && lowering->supports(graph, node);
}

std::string EngineBuilder::unsupported_reason(const compiler::Graph& graph,
                                              const compiler::IrNode& node) const {
  const std::string op =
      node.domain.empty() ? node.op_type : fmt::format("{}.{}", node.domain, node.op_type);
  if (node.def == nullptr || find_lowering(node.op_type, node.domain) == nullptr) {
    return fmt::format("no CUDA lowering for {}", op);
  }
  // The lowerings say yes or no; what they looked at is the operands' dtypes, ranks, which are
  // constants, and the attributes. The operands are what a reader compares across nodes.
  auto operands = [&](const std::vector<int>& list) {
    std::string out;
    for (int v : list) {
      if (v < 0) continue;
      const compiler::IrValue& iv = graph.values[static_cast<size_t>(v)];
      out += fmt::format("{}{}[{}]{}", out.empty() ? "" : ", ", dtype_name(iv.dtype),
                         fmt::join(iv.sizes, ", "), iv.constant ? " constant" : "");
    }
    return out;
  };
  return fmt::format(
      "the CUDA lowering of {} does not take this form of it (inputs {}; outputs {})", op,
      operands(node.inputs), operands(node.outputs));
}

bool EngineBuilder::lowers(std::string_view op, std::string_view domain) const {
  // A Linear with split outputs (compiler/passes/pass.h) is lowered by the Linear lowering.
  if (op == "LinearSplits" && domain == "baton") return find_lowering("Linear", domain) != nullptr;
  return find_lowering(op, domain) != nullptr;
}

Result<Device> EngineBuilder::blob_device(std::span<const uint8_t> blob) const {
  // The blob is a fresh std::vector here; parse a 64-byte aligned copy.
  const AlignedBlobCopy aligned(blob);
  BATON_ASSIGN_OR_RETURN(const auto buckets, engine_buckets(aligned.span()));
  BATON_ASSIGN_OR_RETURN(EngineBlob parsed,
                         EngineBlob::parse(buckets[0], shared_bucket_weights(aligned.span())));
  return Device::cuda(static_cast<int16_t>(parsed.header().device_id));
}

Result<compiler::LoweredPartition> EngineBuilder::lower(const compiler::Graph& graph,
                                                        const compiler::Partition& partition) {
  BATON_CHECK_OR_RETURN(target_.sm_arch >= 50, InvalidArgument,
                        "no SM architecture to build for (pass --arch sm_XY or build on a GPU)");
  const LowerNodes lower_nodes = [&](Lowering& ctx) -> Status {
    const compiler::Graph& g = ctx.graph();
    std::vector<int> run;  // the open run of elementwise nodes
    auto flush = [&]() -> Status {
      if (run.empty()) return Status();
      Status s = lower_fused_group(ctx, run);
      run.clear();
      return s;
    };
    for (int index : partition.nodes) {
      if (ctx.absorbed(index)) continue;
      const compiler::IrNode& n = g.nodes[index];
      if (is_fusible(g, n)) {
        if (!run.empty() && !joins(ctx, run, index)) BATON_TRY(flush());
        run.push_back(index);
        continue;
      }
      BATON_TRY(flush());
      if (n.op_type == "Concat" && n.domain.empty() && concat_reads_in_place(ctx, index)) {
        // Its readers read its inputs where they are (lower_fused_group). The run before was
        // closed above, so that no kernel reads a piece the same kernel writes.
        ctx.defer_concat(index);
        continue;
      }
      // Every reader of a deferred Concat is elementwise (concat_reads_in_place); should another
      // step read one all the same, it gets the Concat's kernel first.
      for (int v : n.inputs) {
        if (v >= 0 && ctx.deferred_concat(v) >= 0) BATON_TRY(lower_deferred_concat(ctx, v));
      }
      const OpLowering* lowering = find_lowering(n.op_type, n.domain);
      BATON_CHECK_OR_RETURN(lowering != nullptr && lowering->lower != nullptr, Internal,
                            "{} reached the CUDA builder without a lowering", n.describe());
      ctx.read_row_major_inputs(index, lowering->layout_aware, lowering->strided);
      const Status lowered = lowering->lower(ctx, index);
      ctx.end_reads();
      BATON_TRY(lowered);
    }
    return flush();
  };
  compiler::LoweredPartition lowered;
  if (is_dynamic_partition(graph, partition)) {
    BATON_ASSIGN_OR_RETURN(lowered, lower_dynamic(graph, partition, target_, lower_nodes));
  } else {
    Lowering ctx(graph, partition, target_);
    BATON_TRY(lower_nodes(ctx));
    BATON_ASSIGN_OR_RETURN(lowered, ctx.finish());
  }
  BATON_ASSIGN_OR_RETURN(lowered.blob,
                         record_timed_choices(std::move(lowered.blob), partition.name));
  return lowered;
}

// With the engine's GPU here, its GEMM algorithms and cuDNN engines are timed now (by loading the
// engine as the runtime would) and recorded in the blob, so that loading it later times nothing.
// Without it, or when timing fails, the blob is left as it was: the loader chooses.
Result<std::vector<uint8_t>> EngineBuilder::record_timed_choices(std::vector<uint8_t> blob,
                                                                 const std::string& name) const {
  {
    // A bucketed engine: each of its engines times its own.
    const AlignedBlobCopy aligned(blob);
    BATON_ASSIGN_OR_RETURN(const auto buckets, engine_buckets(aligned.span()));
    if (buckets.size() > 1 || buckets[0].data() != aligned.span().data()) {
      const std::span<const uint8_t> shared = shared_bucket_weights(aligned.span());
      std::vector<std::vector<uint8_t>> timed;
      for (const auto& b : buckets) {
        BATON_ASSIGN_OR_RETURN(
            std::vector<uint8_t> one,
            record_engine_choices(std::vector<uint8_t>(b.begin(), b.end()), name, shared));
        timed.push_back(std::move(one));
      }
      return write_buckets(timed, !shared.empty());
    }
  }
  return record_engine_choices(std::move(blob), name, {});
}

Result<std::vector<uint8_t>> EngineBuilder::record_engine_choices(
    std::vector<uint8_t> blob, const std::string& name,
    std::span<const uint8_t> shared_weights) const {
  const int candidates = target_.options.tune_candidates;
  if (candidates <= 1) return blob;
  bool here = false;
  for (const DeviceInfo& d : devices()) {
    here |= d.index == target_.device_id &&
            cubin_runs_on(target_.sm_arch, static_cast<uint32_t>(d.sm_arch));
  }
  if (!here) return blob;
  const AlignedBlobCopy aligned(blob);
  BATON_ASSIGN_OR_RETURN(const EngineBlob parsed,
                         EngineBlob::parse(aligned.span(), shared_weights));
  if (parsed.num_choice_steps() == 0) return blob;
  Result<std::shared_ptr<Engine>> engine =
      Engine::load(aligned.span(), name, candidates, true, nullptr, shared_weights);
  if (!engine.ok()) {
    log_message(LogLevel::Warn, "cuda",
                fmt::format("could not time the algorithms of partition '{}' on cuda:{} ({}): they "
                            "will be chosen when the program is loaded",
                            name, target_.device_id, engine.status().message()));
    return blob;
  }
  const EngineChoices choices = (*engine)->choices();
  if (choices.steps.empty()) return blob;
  const ChoiceStats& stats = (*engine)->choice_stats();
  log_message(LogLevel::Info, "cuda",
              fmt::format("partition '{}': timed the algorithms of {} GEMM and convolution steps "
                          "on cuda:{} ({} candidates each, {:.0f} ms); recorded in the program",
                          name, choices.steps.size(), target_.device_id, candidates, stats.ms));
  return record_choices(blob, choices, shared_weights);
}

}  // namespace baton::cuda
