#include "baton/cuda/options.h"

#include <fmt/format.h>

#include <charconv>

#include "baton/core/check.h"

namespace baton::cuda {
namespace {

// One option of struct T: its key, what it takes (the names of an enum's values in order, or
// none for a count), and how it is read and written as text. One table per struct drives
// parsing, printing and the help text, so the three cannot disagree.
template <typename T>
struct Option {
  std::string_view key;
  std::vector<std::string_view> values;  // empty: an integer in [min, max]
  int min = 0, max = 0;
  bool recorded = true;  // false: a diagnostic that does not change the engine
  std::string (*get)(const T&);
  void (*put)(T&, int index_or_number, std::string_view text);
};

template <typename T>
std::string keys_of(const std::vector<Option<T>>& table) {
  std::string out;
  for (const Option<T>& o : table) out += (out.empty() ? "" : ", ") + std::string(o.key);
  return out;
}

std::string values_of(const std::vector<std::string_view>& values) {
  std::string out;
  for (std::string_view v : values) out += (out.empty() ? "" : ", ") + std::string(v);
  return out;
}

// Applies KEY=VALUE to `target`; `kind` names the option set in messages ("CUDA build option").
template <typename T>
Status set_option(const std::vector<Option<T>>& table, T& target, std::string_view kind,
                  std::string_view key, std::string_view value) {
  for (const Option<T>& o : table) {
    if (o.key != key) continue;
    if (!o.values.empty()) {
      for (size_t i = 0; i < o.values.size(); ++i) {
        if (o.values[i] == value) {
          o.put(target, static_cast<int>(i), value);
          return Status();
        }
      }
      return BATON_ERROR(InvalidArgument, "{} {}='{}': the value is one of {}", kind, key, value,
                         values_of(o.values));
    }
    if (o.min == 0 && o.max == 0) {  // free text (a folder)
      o.put(target, 0, value);
      return Status();
    }
    int n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    BATON_CHECK_OR_RETURN(
        ec == std::errc() && end == value.data() + value.size() && n >= o.min && n <= o.max,
        InvalidArgument, "{} {}='{}': the value is a whole number from {} to {}", kind, key, value,
        o.min, o.max);
    o.put(target, n, value);
    return Status();
  }
  return BATON_ERROR(InvalidArgument, "unknown {} '{}': the options are {}", kind, key,
                     keys_of(table));
}

template <typename T>
std::string help_of(const std::vector<Option<T>>& table) {
  const T defaults{};
  std::string out;
  for (const Option<T>& o : table) {
    const std::string taken = !o.values.empty()            ? values_of(o.values)
                              : (o.min == 0 && o.max == 0) ? std::string("a folder")
                                                           : fmt::format("{}..{}", o.min, o.max);
    const std::string value = o.get(defaults);
    out += fmt::format("  {}: {} (default: {})\n", o.key, taken, value.empty() ? "none" : value);
  }
  return out;
}

// Splits "KEY=VALUE" at its first '='.
Status split(std::string_view kind, std::string_view text, std::string_view* key,
             std::string_view* value) {
  const size_t eq = text.find('=');
  BATON_CHECK_OR_RETURN(eq != std::string_view::npos && eq > 0, InvalidArgument,
                        "{} '{}' is not KEY=VALUE", kind, text);
  *key = text.substr(0, eq);
  *value = text.substr(eq + 1);
  return Status();
}

constexpr std::string_view kBuild = "CUDA build option";
constexpr std::string_view kLoad = "load option";

const std::vector<Option<BuildOptions>>& build_table() {
  using B = BuildOptions;
  static const std::vector<Option<B>> table = {
      {"conv_rows",
       {"kernel", "cudnn"},
       0,
       0,
       true,
       [](const B& b) { return std::string(b.conv_rows == ConvRows::Kernel ? "kernel" : "cudnn"); },
       [](B& b, int i, std::string_view) { b.conv_rows = static_cast<ConvRows>(i); }},
      {"conv_patches",
       {"gemm", "cudnn"},
       0,
       0,
       true,
       [](const B& b) {
         return std::string(b.conv_patches == ConvPatches::Gemm ? "gemm" : "cudnn");
       },
       [](B& b, int i, std::string_view) { b.conv_patches = static_cast<ConvPatches>(i); }},
      {"conv_hard_activations",
       {"fused", "unfused"},
       0,
       0,
       true,
       [](const B& b) {
         return std::string(b.conv_hard_activations == ConvHardActivations::Fused ? "fused"
                                                                                  : "unfused");
       },
       [](B& b, int i, std::string_view) {
         b.conv_hard_activations = static_cast<ConvHardActivations>(i);
       }},
      {"gemm_gelu",
       {"cudnn", "kernel"},
       0,
       0,
       true,
       [](const B& b) { return std::string(b.gemm_gelu == GemmGelu::Cudnn ? "cudnn" : "kernel"); },
       [](B& b, int i, std::string_view) { b.gemm_gelu = static_cast<GemmGelu>(i); }},
      {"concat",
       {"in_place", "kernel"},
       0,
       0,
       true,
       [](const B& b) {
         return std::string(b.concat == ConcatReads::InPlace ? "in_place" : "kernel");
       },
       [](B& b, int i, std::string_view) { b.concat = static_cast<ConcatReads>(i); }},
      {"reduce_columns",
       {"split", "whole"},
       0,
       0,
       true,
       [](const B& b) {
         return std::string(b.reduce_columns == ReduceColumns::Split ? "split" : "whole");
       },
       [](B& b, int i, std::string_view) { b.reduce_columns = static_cast<ReduceColumns>(i); }},
      {"kernel_sizes",
       {"arguments", "code"},
       0,
       0,
       true,
       [](const B& b) {
         return std::string(b.kernel_sizes == KernelSizes::Arguments ? "arguments" : "code");
       },
       [](B& b, int i, std::string_view) { b.kernel_sizes = static_cast<KernelSizes>(i); }},
      {"tune_candidates",
       {},
       1,
       kMaxTuneCandidates,
       true,
       [](const B& b) { return std::to_string(b.tune_candidates); },
       [](B& b, int n, std::string_view) { b.tune_candidates = n; }},
      {"dump_kernel_source",
       {},
       0,
       0,
       false,
       [](const B& b) { return b.dump_kernel_source; },
       [](B& b, int, std::string_view text) { b.dump_kernel_source = std::string(text); }},
  };
  return table;
}

const std::vector<Option<LoadOptions>>& load_table() {
  using L = LoadOptions;
  static const std::vector<Option<L>> table = {
      {"cuda_graphs",
       {"0", "1"},
       0,
       0,
       true,
       [](const L& l) { return std::string(l.cuda_graphs ? "1" : "0"); },
       [](L& l, int i, std::string_view) { l.cuda_graphs = i == 1; }},
      {"cuda_graph_shapes",
       {},
       1,
       kMaxGraphShapes,
       true,
       [](const L& l) { return std::to_string(l.cuda_graph_shapes); },
       [](L& l, int n, std::string_view) { l.cuda_graph_shapes = n; }},
      {"cuda_pdl",
       {"0", "1"},
       0,
       0,
       true,
       [](const L& l) { return std::string(l.cuda_pdl ? "1" : "0"); },
       [](L& l, int i, std::string_view) { l.cuda_pdl = i == 1; }},
      {"strict_staging",
       {"0", "1"},
       0,
       0,
       true,
       [](const L& l) { return std::string(l.strict_staging ? "1" : "0"); },
       [](L& l, int i, std::string_view) { l.strict_staging = i == 1; }},
      {"graph_edges",
       {"own", "full"},
       0,
       0,
       true,
       [](const L& l) { return std::string(l.graph_edges == GraphEdges::Own ? "own" : "full"); },
       [](L& l, int i, std::string_view) { l.graph_edges = static_cast<GraphEdges>(i); }},
      {"tune_candidates",
       {},
       1,
       kMaxTuneCandidates,
       true,
       [](const L& l) { return std::to_string(l.tune_candidates); },
       [](L& l, int n, std::string_view) { l.tune_candidates = n; }},
  };
  return table;
}

}  // namespace

Status BuildOptions::set(std::string_view key, std::string_view value) {
  return set_option(build_table(), *this, kBuild, key, value);
}

Result<BuildOptions> BuildOptions::parse(std::span<const std::string> key_values) {
  BuildOptions b;
  for (const std::string& text : key_values) {
    std::string_view key, value;
    BATON_TRY(split(kBuild, text, &key, &value));
    BATON_TRY(b.set(key, value));
  }
  return b;
}

std::vector<std::string> BuildOptions::recorded() const {
  std::vector<std::string> out;
  for (const auto& o : build_table()) {
    if (o.recorded) out.push_back(fmt::format("{}={}", o.key, o.get(*this)));
  }
  return out;
}

std::vector<std::string> BuildOptions::to_strings() const {
  std::vector<std::string> out = recorded();
  if (!dump_kernel_source.empty()) out.push_back("dump_kernel_source=" + dump_kernel_source);
  return out;
}

Status LoadOptions::set(std::string_view key, std::string_view value) {
  return set_option(load_table(), *this, kLoad, key, value);
}

Result<LoadOptions> LoadOptions::parse(std::span<const runtime::BackendOption> options) {
  LoadOptions l;
  for (const runtime::BackendOption& o : options) BATON_TRY(l.set(o.key, o.value));
  return l;
}

std::vector<runtime::BackendOption> LoadOptions::to_backend_options() const {
  std::vector<runtime::BackendOption> out;
  for (const auto& o : load_table()) out.push_back({std::string(o.key), o.get(*this)});
  return out;
}

std::vector<std::string_view> LoadOptions::keys() {
  std::vector<std::string_view> out;
  for (const auto& o : load_table()) out.push_back(o.key);
  return out;
}

std::string build_options_help() { return help_of(build_table()); }
std::string load_options_help() { return help_of(load_table()); }

}  // namespace baton::cuda
