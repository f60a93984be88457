#include "backends/cuda/engine_describe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "backends/cuda/engine_format.h"
#include "baton/core/check.h"
#include "baton/core/text.h"

namespace baton::cuda {
namespace {

using nlohmann::json;

std::string buffer_text(const BufferRef& r) {
  switch (static_cast<Space>(r.space)) {
    case Space::Binding:
      return fmt::format("binding {}+{}", r.index, r.offset);
    case Space::Scratch:
      return fmt::format("scratch@{}", r.offset);
    case Space::Weights:
      return fmt::format("weights@{}", r.offset);
  }
  return "?";
}

// "cuDNN engine 12 (plan eng12_k2=1_k3=0); 41.2 us, fastest of 4" or "cuBLASLt algorithm; ...".
std::string choice_text(const StepChoice& c) {
  std::string what = "cuBLASLt algorithm";
  if (is_cudnn_step(c.kind)) {
    const std::string_view plan(c.cudnn_plan, ::strnlen(c.cudnn_plan, sizeof c.cudnn_plan));
    what = fmt::format("cuDNN engine {} (plan {})", c.cudnn_engine, escape_invalid_utf8(plan));
  }
  return fmt::format("{}; {:.1f} us, fastest of {}", what, c.time_us, c.candidates);
}

// The CUDA runtime and NVRTC number a version major * 1000 + minor * 10 ("13.0"); cuBLAS(Lt) and
// cuDNN major * 10000 + minor * 100 + patch ("13.1.0", "9.19.0").
std::string cuda_version_text(uint32_t v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }
std::string library_version_text(uint32_t v) {
  return fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
}

}  // namespace

std::string describe_step(const EngineBlob& e, size_t index) {
  const StepRecord& s = e.steps()[index];
  switch (static_cast<StepKind>(s.kind)) {
    case StepKind::Gemm:
    case StepKind::Matmul: {
      const GemmStep& g = s.gemm;
      return fmt::format(
          "{} m={} n={} k={} batch={} trans={}{} epilogue={} A={} B={} D={}",
          s.kind == static_cast<uint32_t>(StepKind::Gemm) ? "cuBLASLt" : "cuDNN matmul", g.m, g.n,
          g.k, g.batch, g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N',
          epilogue_name(static_cast<GemmEpilogue>(g.epilogue)), buffer_text(g.a), buffer_text(g.b),
          buffer_text(g.d));
    }
    case StepKind::Kernel: {
      std::string ops;
      for (uint32_t o = 0; o < s.kernel.num_operands; ++o) {
        ops += (o ? " " : "") + buffer_text(s.kernel.operands[o]);
      }
      // Its sizes, strides and offsets (the first 16; a fused kernel of many inputs has more).
      std::string args;
      const std::span<const int64_t> values = e.kernel_args(s.kernel);
      if (!values.empty()) {
        args = fmt::format(" args {}",
                           fmt::join(values.first(std::min<size_t>(values.size(), 16)), " "));
        if (values.size() > 16) args += fmt::format(" ... ({} in all)", values.size());
      }
      // A size-only kernel runs once per shape, when that shape's graph is captured.
      return fmt::format("{} grid {} block {} ({}){}{}",
                         escape_invalid_utf8(e.kernel_name(s.kernel.kernel)), s.kernel.grid[0],
                         s.kernel.block[0], ops, args,
                         is_size_only_kernel(s) ? " [once per shape]" : "");
    }
    case StepKind::Conv: {
      const ConvStep& c = s.conv;
      std::string epilogue = c.has_bias ? "bias" : "";
      if (c.has_residual) epilogue += epilogue.empty() ? "add" : "+add";
      if (c.activation != 0) {
        epilogue += (epilogue.empty() ? "" : "+") +
                    std::string(conv_activation_name(static_cast<ConvActivation>(c.activation)));
        if (c.activation == static_cast<uint8_t>(ConvActivation::HardSigmoid))
          epilogue += fmt::format("({:g},{:g})", c.act_alpha, c.act_beta);
      }
      // A y written into a slice of a wider tensor names its channel pitch.
      const std::string pitch =
          c.y_channel_stride == 0 ? "" : fmt::format(" (channel pitch {})", c.y_channel_stride);
      return fmt::format(
          "cuDNN NHWC {}x{}x{}x{} -> K={} {}x{} stride {}x{} groups {} epilogue={} x={} w={} "
          "y={}{}",
          c.n, c.in_h, c.in_w, c.c, c.k, c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.groups,
          epilogue.empty() ? "none" : epilogue, buffer_text(c.x), buffer_text(c.w),
          buffer_text(c.y), pitch);
    }
    case StepKind::Sdpa: {
      const SdpaStep& a = s.sdpa;
      std::string mask(sdpa_mask_name(static_cast<SdpaMask>(a.mask)));
      if (static_cast<SdpaMask>(a.mask) == SdpaMask::Bias) {
        mask += fmt::format(" [{}, {}, {}, {}] {}", a.bias_batch ? a.b : 1, a.bias_heads ? a.h : 1,
                            a.sq, a.sk, buffer_text(a.bias));
      }
      return fmt::format(
          "cuDNN attention B={} H={} Sq={} Sk={} D={} Dv={} {} scale={} mask={} q={} k={} v={} "
          "o={}",
          a.b, a.h, a.sq, a.sk, a.d, a.dv, dtype_name(static_cast<DType>(a.dtype)), a.scale, mask,
          buffer_text(a.q), buffer_text(a.k), buffer_text(a.v), buffer_text(a.o));
    }
    case StepKind::Copy:
      return fmt::format("{} bytes {} -> {}", s.copy.src.bytes, buffer_text(s.copy.src),
                         buffer_text(s.copy.dst));
  }
  return "unknown step";
}

namespace {

// Expression `i` of a dynamic engine as text ("(batch * sequence) * 768").
std::string expr_text(const EngineBlob& e, uint32_t i, int depth = 0) {
  const ExprRecord& r = e.exprs()[i];
  if (depth > 16) return "...";
  switch (static_cast<ExprOp>(r.op)) {
    case ExprOp::Const:
      return std::to_string(r.value);
    case ExprOp::Symbol:
      return escape_invalid_utf8(e.symbol_name(static_cast<size_t>(r.value)));
    case ExprOp::FloorDiv:
    case ExprOp::CeilDiv:
    case ExprOp::Min:
    case ExprOp::Max: {
      static constexpr const char* kNames[] = {"", "", "", "", "floor", "ceil", "min", "max"};
      const char* sep = r.op <= static_cast<uint32_t>(ExprOp::CeilDiv) ? " / " : ", ";
      return fmt::format("{}({}{}{})", kNames[r.op], expr_text(e, r.a, depth + 1), sep,
                         expr_text(e, r.b, depth + 1));
    }
    default:
      return fmt::format("({} {} {})", expr_text(e, r.a, depth + 1),
                         r.op == static_cast<uint32_t>(ExprOp::Add) ? "+" : "*",
                         expr_text(e, r.b, depth + 1));
  }
}

json dynamic_json(const EngineBlob& e) {
  json d;
  d["symbols"] = json::array();
  // Whether every symbol has an OPT in this engine's range: the engine is then resized to that
  // shape at load, its choices timed there (ExecutionContext::prepare_declared_shape).
  bool prepared = !e.symbols().empty();
  for (size_t i = 0; i < e.symbols().size(); ++i) {
    const SymbolRecord& s = e.symbols()[i];
    json sym = {{"name", escape_invalid_utf8(e.symbol_name(i))}, {"min", s.min}, {"max", s.max}};
    if (s.opt > 0) sym["opt"] = s.opt;
    prepared = prepared && s.opt > 0;
    d["symbols"].push_back(std::move(sym));
  }
  d["opt_prepared_at_load"] = prepared;
  d["exprs"] = e.exprs().size();
  d["patches"] = e.patches().size();
  // The first patches, to show how the engine follows the sizes.
  json shown = json::array();
  for (size_t i = 0; i < e.patches().size() && i < 16; ++i) {
    const PatchRecord& p = e.patches()[i];
    std::string where;
    switch (static_cast<PatchTarget>(p.target)) {
      case PatchTarget::StepField:
        where =
            fmt::format("step {} {}", p.index, step_field_name(e.steps()[p.index].kind, p.offset));
        break;
      case PatchTarget::Arg:
        where = fmt::format("argument {}", p.index);
        break;
      case PatchTarget::BindingSize:
        where = fmt::format("binding '{}' dimension {}",
                            escape_invalid_utf8(e.binding_name(p.index)), p.offset);
        break;
    }
    const std::string value = expr_text(e, p.expr);
    shown.push_back(fmt::format(
        "{} = {}", where,
        p.kind == static_cast<uint8_t>(PatchKind::DivisionMagic) ? "magic(" + value + ")" : value));
  }
  d["first_patches"] = std::move(shown);
  return d;
}

Result<json> describe_one(std::span<const uint8_t> bytes, std::span<const uint8_t> shared);

}  // namespace

Result<std::string> describe_engine_json(std::span<const uint8_t> bytes) {
  BATON_ASSIGN_OR_RETURN(const auto buckets, engine_buckets(bytes));
  // A bucketed engine: the widest bucket (the last) in full, and each bucket's ranges.
  const std::span<const uint8_t> shared = shared_bucket_weights(bytes);
  BATON_ASSIGN_OR_RETURN(json j, describe_one(buckets.back(), shared));
  if (buckets.size() > 1) {
    j["buckets"] = json::array();
    for (const auto& b : buckets) {
      BATON_ASSIGN_OR_RETURN(const EngineBlob e, EngineBlob::parse(b, shared));
      j["buckets"].push_back({{"dynamic", dynamic_json(e)},
                              {"steps", e.steps().size()},
                              {"scratch_bytes", e.header().scratch_bytes}});
    }
  }
  // Binding and kernel names are bytes from the file, escaped above (invalid UTF-8 as \xNN);
  // `replace` is the second guard, so dump never throws.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

Result<json> describe_one(std::span<const uint8_t> bytes, std::span<const uint8_t> shared) {
  BATON_ASSIGN_OR_RETURN(const EngineBlob e, EngineBlob::parse(bytes, shared));
  const EngineHeader& h = e.header();
  json j;
  j["device"] = fmt::format("cuda:{}", h.device_id);
  j["sm_arch"] = sm_arch_name(h.sm_arch);
  j["precision"] = std::string(precision_name(e.precision()));
  j["cuda_version"] = h.cuda_version;
  j["cublaslt_version"] = h.cublaslt_version;
  j["cudnn_version"] = h.cudnn_version;
  j["nvrtc_version"] = h.nvrtc_version;
  j["versions"] = {{"cuda", cuda_version_text(h.cuda_version)},
                   {"cublaslt", library_version_text(h.cublaslt_version)},
                   {"cudnn", library_version_text(h.cudnn_version)},
                   {"nvrtc", cuda_version_text(h.nvrtc_version)}};
  j["scratch_bytes"] = h.scratch_bytes;
  j["workspace_bytes"] = h.workspace_bytes;
  j["weights_bytes"] = e.weights().size();
  j["cubin_bytes"] = e.cubin().size();
  j["kernels"] = e.kernels().size();  // distinct kernels in the cubin (steps may share one)
  // The build options it was built with.
  j["options"] = json::object();
  for (const auto& [key, value] : e.option_pairs()) j["options"][std::string(key)] = value;
  j["bindings"] = json::array();
  for (size_t i = 0; i < e.bindings().size(); ++i) {
    const BindingRecord& b = e.bindings()[i];
    j["bindings"].push_back({{"name", escape_invalid_utf8(e.binding_name(i))},
                             {"dtype", std::string(dtype_name(static_cast<DType>(b.dtype)))},
                             {"shape", std::vector<int64_t>(b.sizes, b.sizes + b.rank)},
                             {"io", b.is_output ? "output" : "input"}});
  }
  if (e.choices().empty()) {
    j["choices"] = "none recorded: chosen at load";
  } else {
    j["choices"] = {{"gpu", escape_invalid_utf8(e.choices_gpu())},
                    {"cublaslt_version", h.choices_cublaslt_version},
                    {"cudnn_version", h.choices_cudnn_version},
                    {"cublaslt", library_version_text(h.choices_cublaslt_version)},
                    {"cudnn", library_version_text(h.choices_cudnn_version)},
                    {"steps", e.choices().size()}};
  }
  j["steps"] = json::array();
  for (size_t index = 0; index < e.steps().size(); ++index) {
    j["steps"].push_back({{"kind", step_kind_name(static_cast<StepKind>(e.steps()[index].kind))},
                          {"what", describe_step(e, index)}});
    if (const StepChoice* c = e.choice(index)) j["steps"].back()["choice"] = choice_text(*c);
  }
  if (e.dynamic()) j["dynamic"] = dynamic_json(e);
  return j;
}

}  // namespace

}  // namespace baton::cuda
