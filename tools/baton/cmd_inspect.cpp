// baton inspect: everything in a program file, as text or as one JSON object. The JSON comes from
// the extension library (describe_program_json, which asks each registered backend to describe its
// blobs); the text is rendered from that same document, so the two views cannot disagree.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "baton/core/check.h"
#include "baton/core/text.h"
#include "baton/extension/inspect.h"
#include "baton/runtime/program.h"
#include "commands.h"
#include "report_file.h"
#include "run_common.h"

namespace baton::tool {
namespace {

using nlohmann::json;

// A name for the terminal: the document already shows invalid UTF-8 as \xNN; control characters
// (a newline, an escape sequence in a node name) are shown that way too.
std::string shown(const json& name) { return printable_text(name.get<std::string>()); }

std::string shape_text(const json& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += fmt::format("{}{}", i ? ", " : "", shape[i].get<int64_t>());
  return out + "]";
}

std::string value_text(const json& v) {
  const std::string kind = v["kind"];
  if (kind != "tensor") {
    return v.contains("value")
               ? fmt::format("{} {}", kind,
                             v["value"].dump(-1, ' ', false, json::error_handler_t::replace))
               : kind;
  }
  std::string where;
  if (v["allocation"] == "arena") {
    where = fmt::format("arena {} @ {}", v["arena"].get<int>(), v["offset"].get<uint64_t>());
  } else if (v["allocation"] == "constant") {
    where = fmt::format("constant segment {} @ {}", v["constant_segment"].get<int>(),
                        v["offset"].get<uint64_t>());
  } else {
    where = "no storage";
  }
  std::string shape = shape_text(v["shape"]);
  if (v.contains("dims")) {
    // A dynamic tensor: its expressions, then the largest sizes its memory is planned for.
    std::string dims;
    for (const auto& d : v["dims"]) dims += (dims.empty() ? "" : ", ") + shown(d);
    shape = fmt::format("[{}] (at most {})", dims, shape);
  }
  return fmt::format("tensor '{}' {} {} {} {}", shown(v["name"]), v["dtype"].get<std::string>(),
                     shape, v["device"].get<std::string>(), where);
}

std::string refs(const json& indices) {
  std::string out;
  for (const auto& i : indices) out += fmt::format("{}%{}", out.empty() ? "" : " ", i.get<int>());
  return out.empty() ? "-" : out;
}

// "  attributes: alpha=1 beta=1 transA=0 transB=1" (each named by the op's definition, valued from
// the program's values; an attribute the program leaves unset shows as none).
std::string attributes_text(const json& x, const json& values) {
  if (x["attributes"].empty()) return "";
  std::string out = "\n          attributes:";
  for (size_t a = 0; a < x["attributes"].size(); ++a) {
    const int index = x["attributes"][a].get<int>();
    const json& names = x.value("attribute_names", json::array());
    const std::string name =
        a < names.size() && names[a].is_string() ? shown(names[a]) : fmt::format("#{}", a);
    std::string value = fmt::format("%{}", index);
    if (index >= 0 && static_cast<size_t>(index) < values.size()) {
      const json& v = values[index];
      value = v.contains("value")
                  ? printable_text(v["value"].dump(-1, ' ', false, json::error_handler_t::replace))
                  : std::string(v.value("kind", "?"));
    }
    out += fmt::format(" {}={}", name, value);
  }
  return out;
}

// A delegate blob's description: an engine in the shape docs/cli.md documents (the cuda backend's:
// header, bindings, steps) on lines of its own; any other backend's description as one JSON line.
void print_engine(const json& e) {
  if (e.contains("error")) {
    std::printf("        engine: INVALID: %s\n", shown(e["error"]).c_str());
    return;
  }
  for (const char* key : {"device", "sm_arch", "precision", "cuda_version", "cublaslt_version",
                          "cudnn_version", "nvrtc_version", "weights_bytes", "scratch_bytes",
                          "workspace_bytes", "cubin_bytes", "bindings", "steps"}) {
    if (e.contains(key)) continue;
    std::printf("        engine: %s\n",
                e.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    return;
  }
  // Versions as their libraries write them ("13.0", "9.19.0"); older describers gave only numbers.
  auto version = [&](const char* lib, const char* key) {
    if (e.contains("versions") && e["versions"].contains(lib)) return shown(e["versions"][lib]);
    return std::to_string(e[key].get<int>());
  };
  std::printf("        engine: %s %s %s, built with CUDA %s, cuBLASLt %s, cuDNN %s, NVRTC %s\n",
              e["device"].get<std::string>().c_str(), e["sm_arch"].get<std::string>().c_str(),
              e["precision"].get<std::string>().c_str(), version("cuda", "cuda_version").c_str(),
              version("cublaslt", "cublaslt_version").c_str(),
              version("cudnn", "cudnn_version").c_str(), version("nvrtc", "nvrtc_version").c_str());
  std::printf("        weights %s, scratch %s, workspace %s, cubin %s\n",
              size_text(e["weights_bytes"].get<uint64_t>()).c_str(),
              size_text(e["scratch_bytes"].get<uint64_t>()).c_str(),
              size_text(e["workspace_bytes"].get<uint64_t>()).c_str(),
              size_text(e["cubin_bytes"].get<uint64_t>()).c_str());
  if (e.contains("options") && e["options"].is_object()) {
    std::string options;
    for (const auto& [key, value] : e["options"].items()) {
      options += (options.empty() ? "" : " ") + key + "=" + shown(value);
    }
    std::printf("        options: %s\n", options.empty() ? "none recorded" : options.c_str());
  }
  for (const auto& b : e["bindings"]) {
    std::printf("        %-6s '%s' %s %s\n", b["io"].get<std::string>().c_str(),
                shown(b["name"]).c_str(), b["dtype"].get<std::string>().c_str(),
                shape_text(b["shape"]).c_str());
  }
  if (e.contains("choices")) {
    const json& c = e["choices"];
    if (c.is_object()) {
      const std::string cublaslt = c.contains("cublaslt")
                                       ? shown(c["cublaslt"])
                                       : std::to_string(c["cublaslt_version"].get<int>());
      const std::string cudnn =
          c.contains("cudnn") ? shown(c["cudnn"]) : std::to_string(c["cudnn_version"].get<int>());
      std::printf("        choices: %d timed on %s (cuBLASLt %s, cuDNN %s)\n",
                  c["steps"].get<int>(), shown(c["gpu"]).c_str(), cublaslt.c_str(), cudnn.c_str());
    } else {
      std::printf("        choices: %s\n", shown(c).c_str());
    }
  }
  // A dynamic engine (issue 37): its symbols' ranges and how many fields follow them; a bucketed
  // one lists each bucket (the steps shown are the widest bucket's, at its largest sizes).
  auto ranges = [](const json& d) {
    std::string out, opt;
    for (const auto& sym : d["symbols"]) {
      out += fmt::format("{}{} in {}..{}", out.empty() ? "" : ", ", shown(sym["name"]),
                         sym["min"].get<int64_t>(), sym["max"].get<int64_t>());
      if (sym.contains("opt")) {
        opt += fmt::format("{}{}={}", opt.empty() ? "" : ", ", shown(sym["name"]),
                           sym["opt"].get<int64_t>());
      }
    }
    // The OPT shape this engine prepares (and times its choices at) when it loads.
    if (d.value("opt_prepared_at_load", false)) {
      out += fmt::format(" (prepared at load for {})", opt);
    }
    return out;
  };
  if (e.contains("buckets") && e["buckets"].is_array()) {
    std::printf("        dynamic: %zu engines, one per range of sizes\n", e["buckets"].size());
    for (const auto& b : e["buckets"]) {
      std::printf("          %s: %d steps, %d fields follow the sizes, scratch %s\n",
                  ranges(b["dynamic"]).c_str(), b["steps"].get<int>(),
                  b["dynamic"]["patches"].get<int>(),
                  size_text(b["scratch_bytes"].get<uint64_t>()).c_str());
    }
  } else if (e.contains("dynamic") && e["dynamic"].is_object()) {
    std::printf("        dynamic: %s; %d fields follow the sizes through %d expressions\n",
                ranges(e["dynamic"]).c_str(), e["dynamic"]["patches"].get<int>(),
                e["dynamic"]["exprs"].get<int>());
  }
  if (e.contains("dynamic") && e["dynamic"].is_object()) {
    for (const auto& p : e["dynamic"]["first_patches"]) {
      std::printf("          %s\n", shown(p).c_str());
    }
    if (e.contains("buckets"))
      std::printf("        steps at %s's largest sizes:\n", ranges(e["dynamic"]).c_str());
  }
  int i = 0;
  for (const auto& s : e["steps"]) {
    std::printf("        step %d: %s %s\n", i++, s["kind"].get<std::string>().c_str(),
                shown(s["what"]).c_str());
    if (s.contains("choice")) std::printf("          chosen: %s\n", shown(s["choice"]).c_str());
  }
}

// What `--load` found: the method's CPU kernel scratch, or why it did not load.
void print_loaded(const json& l) {
  if (l.contains("error")) {
    std::printf("  loaded: FAILED: %s\n", shown(l["error"]).c_str());
    return;
  }
  std::printf(
      "  loaded with %u cpu threads: kernel scratch %s, shared by the kernels (the "
      "largest need)\n",
      l["cpu_threads"].get<unsigned>(), size_text(l["scratch_bytes"].get<uint64_t>()).c_str());
  for (const auto& k : l["kernel_scratch"]) {
    if (k["bytes"].get<uint64_t>() == 0) continue;
    std::printf("    %10s  %s\n", size_text(k["bytes"].get<uint64_t>()).c_str(),
                shown(k["kernel"]).c_str());
  }
  if (l.contains("held_bytes") && l["held_bytes"].get<uint64_t>() > 0) {
    std::printf(
        "  packed weights %s, held by the kernels (copies of constant weights made at "
        "load for Baton's own GEMM kernels):\n",
        size_text(l["held_bytes"].get<uint64_t>()).c_str());
    for (const auto& k : l["kernel_held"]) {
      std::printf("    %10s  %s\n", size_text(k["bytes"].get<uint64_t>()).c_str(),
                  shown(k["kernel"]).c_str());
    }
  }
  for (const auto& d : l["delegates"]) {
    const json& c = d["counters"];
    if (!c.contains("device_bytes_at_load")) continue;
    std::printf("  delegate %d: %s of device memory at load (weights, scratch, workspace, staging",
                d["index"].get<int>(),
                size_text(c["device_bytes_at_load"].get<uint64_t>()).c_str());
    if (c.contains("engines")) {
      std::printf("; %llu engine%s", static_cast<unsigned long long>(c["engines"].get<uint64_t>()),
                  c["engines"].get<uint64_t>() == 1 ? "" : "s");
    }
    std::printf(")\n");
  }
}

// Loads each method of the described program as `baton run` would and adds what the load sized
// to its entry ("loaded"); a method that does not load gets the error instead.
Status add_loaded(const InspectArgs& args, const runtime::LoadOptions& load, json& j) {
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(args.program, load));
  runtime::MethodOptions options;
  options.threads = args.threads;
  BATON_ASSIGN_OR_RETURN(options.backend_options, parse_load_options(args.load_options));
  BATON_ASSIGN_OR_RETURN(options.device_map, runtime::parse_device_map(args.device_map));
  for (json& m : j["methods"]) {
    auto method = program->load_method(m["name"].get<std::string>(), options);
    if (!method.ok()) {
      m["loaded"] = {{"error", method.status().to_string()}};
      continue;
    }
    json kernels = json::array(), held = json::array();
    for (const runtime::Method::KernelScratch& k : (*method)->kernel_scratch()) {
      kernels.push_back({{"kernel", escape_invalid_utf8(k.kernel)}, {"bytes", k.bytes}});
    }
    for (const runtime::Method::KernelScratch& k : (*method)->kernel_held()) {
      held.push_back({{"kernel", escape_invalid_utf8(k.kernel)}, {"bytes", k.bytes}});
    }
    // Each delegate's counters right after the load: a GPU delegate's device memory at load
    // (device_bytes_at_load: weights, scratch, workspace, staging) among them.
    json delegates = json::array();
    for (size_t d = 0; d < (*method)->num_delegates(); ++d) {
      json counters = json::object();
      for (const auto& [key, value] : (*method)->delegate_counters(d)) counters[key] = value;
      delegates.push_back({{"index", d}, {"counters", counters}});
    }
    m["loaded"] = {{"cpu_threads", (*method)->cpu_threads()},
                   {"scratch_bytes", (*method)->scratch_bytes()},
                   {"kernel_scratch", kernels},
                   {"held_bytes", (*method)->held_bytes()},
                   {"kernel_held", held},
                   {"delegates", delegates}};
  }
  return Status();
}

void print_text(const json& j) {
  std::printf("program %s: %s, format v%d, table checksum %s\n", shown(j["file"]).c_str(),
              size_text(j["file_size"].get<uint64_t>()).c_str(), j["format_version"].get<int>(),
              j["table_checksum"].get<std::string>().c_str());
  std::printf("producer: %s\n", shown(j["producer"]).c_str());
  std::printf("segments:\n");
  for (const auto& s : j["segments"]) {
    std::printf("  [%d] file offset %llu, %s, checksum %s\n", s["index"].get<int>(),
                static_cast<unsigned long long>(s["offset"].get<uint64_t>()),
                size_text(s["size"].get<uint64_t>()).c_str(),
                s["checksum"].get<std::string>().c_str());
  }
  for (const auto& m : j["methods"]) {
    std::printf(
        "method '%s': %zu inputs, %zu outputs, %zu instructions, %zu delegates, %zu values\n",
        shown(m["name"]).c_str(), m["inputs"].size(), m["outputs"].size(), m["instructions"].size(),
        m["delegates"].size(), m["values"].size());
    std::printf("  inputs:  %s\n  outputs: %s\n", refs(m["inputs"]).c_str(),
                refs(m["outputs"]).c_str());
    if (m.contains("symbols") && !m["symbols"].empty()) {
      std::string symbols;
      for (const auto& s : m["symbols"]) {
        symbols += fmt::format(
            "{}{} in {}..{}{}", symbols.empty() ? "" : ", ", shown(s["name"]),
            s["min"].get<int64_t>(), s["max"].get<int64_t>(),
            s.contains("source") ? fmt::format(" (data-dependent: written by the kernel of %{})",
                                               s["source"].get<int>())
            : s["opt"].get<int64_t>() != 0 ? fmt::format(" (tuned for {})", s["opt"].get<int64_t>())
                                           : std::string());
      }
      std::printf("  dynamic: %s; %d size expressions\n", symbols.c_str(),
                  m["size_exprs"].get<int>());
    }
    if (m.contains("fallbacks") && !m["fallbacks"].empty()) {
      std::printf("  on the cpu (%zu nodes a GPU backend does not take):\n", m["fallbacks"].size());
      for (const auto& f : m["fallbacks"]) {
        std::printf("    %s '%s': %s\n", shown(f["op"]).c_str(), shown(f["node"]).c_str(),
                    shown(f["reason"]).c_str());
      }
    }
    if (m.contains("state") && !m["state"].empty()) {
      std::printf("  state (kept across calls, updated in place; reset_state() zeroes it):\n");
      for (const auto& st : m["state"]) {
        std::string where;
        if (st.contains("arena")) {
          where = fmt::format("  arena {} offset {}", st["arena"].get<int>(),
                              st["offset"].get<uint64_t>());
        }
        std::printf("    '%s' <- '%s'%s\n", shown(st["name"]).c_str(),
                    st.contains("update_name") ? shown(st["update_name"]).c_str() : "?",
                    where.c_str());
      }
    }
    std::printf("  arenas:\n");
    for (const auto& a : m["arenas"]) {
      std::printf("    [%d] %s  %s\n", a["index"].get<int>(),
                  a["device"].get<std::string>().c_str(),
                  size_text(a["size"].get<uint64_t>()).c_str());
    }
    std::printf("  delegates:\n");
    for (const auto& d : m["delegates"]) {
      std::string specs;
      for (const auto& [k, v] : d["compile_specs"].items()) {
        specs += fmt::format(" {}={}", printable_text(k), shown(v));
      }
      std::printf("    [%d] '%s' backend %s, blob segment %d (%s), specs:%s\n",
                  d["index"].get<int>(), shown(d["name"]).c_str(), shown(d["backend"]).c_str(),
                  d["blob_segment"].get<int>(), size_text(d["blob_size"].get<uint64_t>()).c_str(),
                  specs.empty() ? " none" : specs.c_str());
      if (d.contains("engine")) print_engine(d["engine"]);
    }
    std::printf("  instructions:\n");
    for (const auto& x : m["instructions"]) {
      const std::string kind = x["kind"];
      if (kind == "kernel") {
        std::printf("    [%d] kernel   %s '%s'  in %s  -> %s%s\n", x["index"].get<int>(),
                    shown(x["op"]).c_str(), shown(x["node"]).c_str(), refs(x["inputs"]).c_str(),
                    refs(x["outputs"]).c_str(), attributes_text(x, m["values"]).c_str());
      } else if (kind == "delegate") {
        std::printf("    [%d] delegate %d  in %s  -> %s\n", x["index"].get<int>(),
                    x["delegate"].get<int>(), refs(x["inputs"]).c_str(),
                    refs(x["outputs"]).c_str());
      } else {
        std::printf("    [%d] copy     %%%d (%s) -> %%%d (%s)\n", x["index"].get<int>(),
                    x["src"].get<int>(), x["src_device"].get<std::string>().c_str(),
                    x["dst"].get<int>(), x["dst_device"].get<std::string>().c_str());
      }
    }
    std::printf("  values:\n");
    for (const auto& v : m["values"]) {
      std::printf("    %%%-4d %s\n", v["index"].get<int>(), value_text(v).c_str());
    }
    if (m.contains("loaded")) print_loaded(m["loaded"]);
  }
}

}  // namespace

Status run_inspect(const InspectArgs& args) {
  runtime::LoadOptions load;
  load.verify_checksums = !args.no_checksums;
  BATON_ASSIGN_OR_RETURN(const std::string text,
                         extension::describe_program_json(args.program, load));
  if (args.json && !args.load) {
    std::printf("%s\n", text.c_str());
    return Status();
  }
  // The library wrote this text; parse without exceptions all the same.
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  BATON_CHECK_OR_RETURN(j.is_object(), Internal,
                        "describe_program_json returned text that is not a JSON object");
  if (args.load) BATON_TRY(add_loaded(args, load, j));
  if (args.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
  } else {
    print_text(j);
  }
  return Status();
}

}  // namespace baton::tool
