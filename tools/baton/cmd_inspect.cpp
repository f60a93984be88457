// baton inspect: everything in a program file, as text or as one JSON object. Both views are
// rendered from the same JSON document so they cannot disagree.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backends/cuda/engine_format.h"
#include "baton/core/check.h"
#include "baton/runtime/program.h"
#include "commands.h"
#include "format/program_file.h"
#include "runtime/program_impl.h"

namespace baton::tool {
namespace {

using nlohmann::json;

std::string_view str(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : s->string_view();
}

template <typename T>
json list(const flatbuffers::Vector<T>* v) {
  json out = json::array();
  if (v != nullptr) {
    for (uint32_t i = 0; i < v->size(); ++i) out.push_back(v->Get(i));
  }
  return out;
}

// Printable bytes as a string, anything else as hex.
std::string spec_value(const flatbuffers::Vector<uint8_t>* v) {
  if (v == nullptr) return "";
  const bool printable =
      std::all_of(v->begin(), v->end(), [](uint8_t c) { return c >= 0x20 && c < 0x7f; });
  if (printable) return std::string(v->begin(), v->end());
  std::string hex = "0x";
  for (uint8_t c : *v) hex += fmt::format("{:02x}", c);
  return hex;
}

json value_json(const fb::Value& v, int index) {
  json j;
  j["index"] = index;
  switch (v.value_type()) {
    case fb::ValueKind::Null:
      j["kind"] = "none";
      break;
    case fb::ValueKind::Int:
      j["kind"] = "int";
      j["value"] = v.value_as_Int()->value();
      break;
    case fb::ValueKind::Float:
      j["kind"] = "float";
      j["value"] = v.value_as_Float()->value();
      break;
    case fb::ValueKind::String:
      j["kind"] = "string";
      j["value"] = std::string(str(v.value_as_String()->value()));
      break;
    case fb::ValueKind::IntList:
      j["kind"] = "int_list";
      j["value"] = list(v.value_as_IntList()->items());
      break;
    case fb::ValueKind::FloatList:
      j["kind"] = "float_list";
      j["value"] = list(v.value_as_FloatList()->items());
      break;
    case fb::ValueKind::Tensor: {
      const fb::Tensor* t = v.value_as_Tensor();
      j["kind"] = "tensor";
      j["name"] = std::string(str(t->name()));
      j["dtype"] = std::string(dtype_name(static_cast<DType>(t->dtype())));
      j["shape"] = list(t->sizes());
      j["device"] = format::device_of(*t).to_string();
      switch (t->allocation()) {
        case fb::AllocationKind::Arena:
          j["allocation"] = "arena";
          j["arena"] = t->arena();
          j["offset"] = t->offset();
          break;
        case fb::AllocationKind::Constant:
          j["allocation"] = "constant";
          j["arena"] = nullptr;
          j["constant_segment"] = t->constant_segment();
          j["offset"] = t->offset();
          break;
        default:
          j["allocation"] = "none";
          j["arena"] = nullptr;
          j["offset"] = nullptr;
          break;
      }
      break;
    }
    default:
      j["kind"] = "unknown";
      break;
  }
  return j;
}

std::string buffer_text(const cuda::BufferRef& r) {
  switch (static_cast<cuda::Space>(r.space)) {
    case cuda::Space::Binding:
      return fmt::format("binding {}+{}", r.index, r.offset);
    case cuda::Space::Scratch:
      return fmt::format("scratch@{}", r.offset);
    case cuda::Space::Weights:
      return fmt::format("weights@{}", r.offset);
  }
  return "?";
}

// A CUDA engine's header, bindings and steps; {"error": ...} when the blob does not validate.
json engine_json(std::span<const uint8_t> bytes) {
  auto parsed = cuda::EngineBlob::parse(bytes);
  if (!parsed.ok()) return {{"error", parsed.status().to_string()}};
  const cuda::EngineBlob& e = *parsed;
  const cuda::EngineHeader& h = e.header();
  json j;
  j["device"] = fmt::format("cuda:{}", h.device_id);
  j["sm_arch"] = cuda::sm_arch_name(h.sm_arch);
  j["precision"] = std::string(cuda::precision_name(e.precision()));
  j["cuda_version"] = h.cuda_version;
  j["cublaslt_version"] = h.cublaslt_version;
  j["cudnn_version"] = h.cudnn_version;
  j["nvrtc_version"] = h.nvrtc_version;
  j["scratch_bytes"] = h.scratch_bytes;
  j["workspace_bytes"] = h.workspace_bytes;
  j["weights_bytes"] = e.weights().size();
  j["cubin_bytes"] = e.cubin().size();
  j["bindings"] = json::array();
  for (size_t i = 0; i < e.bindings().size(); ++i) {
    const cuda::BindingRecord& b = e.bindings()[i];
    j["bindings"].push_back({{"name", std::string(e.binding_name(i))},
                             {"dtype", std::string(dtype_name(static_cast<DType>(b.dtype)))},
                             {"shape", std::vector<int64_t>(b.sizes, b.sizes + b.rank)},
                             {"io", b.is_output ? "output" : "input"}});
  }
  j["steps"] = json::array();
  for (const cuda::StepRecord& s : e.steps()) {
    switch (static_cast<cuda::StepKind>(s.kind)) {
      case cuda::StepKind::Gemm: {
        const cuda::GemmStep& g = s.gemm;
        j["steps"].push_back(
            {{"kind", "gemm"},
             {"what",
              fmt::format("cuBLASLt m={} n={} k={} batch={} trans={}{} epilogue={} "
                          "A={} B={} D={}",
                          g.m, g.n, g.k, g.batch, g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N',
                          cuda::epilogue_name(static_cast<cuda::GemmEpilogue>(g.epilogue)),
                          buffer_text(g.a), buffer_text(g.b), buffer_text(g.d))}});
        break;
      }
      case cuda::StepKind::Kernel: {
        std::string ops;
        for (uint32_t o = 0; o < s.kernel.num_operands; ++o) {
          ops += (o ? " " : "") + buffer_text(s.kernel.operands[o]);
        }
        j["steps"].push_back(
            {{"kind", "kernel"},
             {"what", fmt::format("{} grid {} block {} ({})", e.kernel_name(s.kernel.kernel),
                                  s.kernel.grid[0], s.kernel.block[0], ops)}});
        break;
      }
      case cuda::StepKind::Copy:
        j["steps"].push_back(
            {{"kind", "copy"},
             {"what", fmt::format("{} bytes {} -> {}", s.copy.src.bytes, buffer_text(s.copy.src),
                                  buffer_text(s.copy.dst))}});
        break;
    }
  }
  return j;
}

json method_json(const format::ProgramFile& file, const fb::Method& m) {
  json j;
  j["name"] = std::string(str(m.name()));
  j["inputs"] = list(m.inputs());
  j["outputs"] = list(m.outputs());
  j["values"] = json::array();
  for (uint32_t i = 0; m.values() && i < m.values()->size(); ++i) {
    j["values"].push_back(value_json(*m.values()->Get(i), static_cast<int>(i)));
  }
  j["operators"] = json::array();
  for (uint32_t i = 0; m.operators() && i < m.operators()->size(); ++i) {
    const fb::Operator* op = m.operators()->Get(i);
    j["operators"].push_back({{"index", i},
                              {"name", std::string(str(op->name()))},
                              {"domain", std::string(str(op->domain()))},
                              {"opset", op->opset()}});
  }
  j["delegates"] = json::array();
  for (uint32_t i = 0; m.delegates() && i < m.delegates()->size(); ++i) {
    const fb::Delegate* d = m.delegates()->Get(i);
    json specs = json::object();
    for (uint32_t k = 0; d->compile_specs() && k < d->compile_specs()->size(); ++k) {
      const fb::CompileSpec* cs = d->compile_specs()->Get(k);
      specs[std::string(str(cs->key()))] = spec_value(cs->value());
    }
    json dj = {{"index", i},
               {"name", std::string(str(d->name()))},
               {"backend", std::string(str(d->backend()))},
               {"compile_specs", specs},
               {"target_device", specs.contains("target_device") ? specs["target_device"] : json()},
               {"blob_segment", d->blob_segment()},
               {"blob_size", file.segment(d->blob_segment()).size()}};
    if (str(d->backend()) == "cuda") {
      dj["engine"] = engine_json(file.segment(d->blob_segment()));
      dj["engine_device"] = dj["engine"].value("device", json());
      dj["sm_arch"] = dj["engine"].value("sm_arch", json());
    }
    j["delegates"].push_back(dj);
  }
  j["arenas"] = json::array();
  for (uint32_t i = 0; m.arenas() && i < m.arenas()->size(); ++i) {
    const fb::Arena* a = m.arenas()->Get(i);
    j["arenas"].push_back(
        {{"index", i}, {"device", format::device_of(*a).to_string()}, {"size", a->size()}});
  }
  auto device_of = [&](int v) {
    const fb::Tensor* t = m.values()->Get(v)->value_as_Tensor();
    return format::device_of(*t).to_string();
  };
  j["instructions"] = json::array();
  for (uint32_t i = 0; m.instructions() && i < m.instructions()->size(); ++i) {
    const fb::Instruction* ins = m.instructions()->Get(i);
    json x;
    x["index"] = i;
    if (const auto* k = ins->instruction_as_KernelCall()) {
      x["kind"] = "kernel";
      x["operator"] = k->operator_();
      x["op"] = std::string(str(m.operators()->Get(k->operator_())->name()));
      x["node"] = std::string(str(k->name()));
      x["inputs"] = list(k->inputs());
      x["attributes"] = list(k->attributes());
      x["outputs"] = list(k->outputs());
      json args = x["inputs"];
      for (const auto& a : x["attributes"]) args.push_back(a);
      for (const auto& o : x["outputs"]) args.push_back(o);
      x["args"] = args;
    } else if (const auto* d = ins->instruction_as_DelegateCall()) {
      x["kind"] = "delegate";
      x["delegate"] = d->delegate();
      x["inputs"] = list(d->inputs());
      x["outputs"] = list(d->outputs());
      json args = x["inputs"];
      for (const auto& o : x["outputs"]) args.push_back(o);
      x["args"] = args;
    } else if (const auto* c = ins->instruction_as_DeviceCopy()) {
      x["kind"] = "copy";
      x["src"] = c->src();
      x["dst"] = c->dst();
      x["args"] = {c->src(), c->dst()};
      x["src_device"] = device_of(c->src());
      x["dst_device"] = device_of(c->dst());
    }
    j["instructions"].push_back(x);
  }
  return j;
}

json program_json(const std::string& path, const format::ProgramFile& file) {
  json j;
  j["file"] = path;
  j["file_size"] = file.bytes().size();
  j["format_version"] = file.header().format_version;
  j["producer"] = std::string(str(file.program().producer()));
  j["segments"] = json::array();
  const auto* segs = file.program().segments();
  for (uint32_t i = 0; segs && i < segs->size(); ++i) {
    j["segments"].push_back({{"index", i},
                             {"offset", file.header().segment_base_offset + segs->Get(i)->offset()},
                             {"size", segs->Get(i)->size()}});
  }
  j["methods"] = json::array();
  for (uint32_t i = 0; i < file.program().methods()->size(); ++i) {
    j["methods"].push_back(method_json(file, *file.program().methods()->Get(i)));
  }
  return j;
}

std::string shape_text(const json& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += fmt::format("{}{}", i ? ", " : "", shape[i].get<int64_t>());
  return out + "]";
}

std::string value_text(const json& v) {
  const std::string kind = v["kind"];
  if (kind != "tensor") {
    return v.contains("value") ? fmt::format("{} {}", kind, v["value"].dump()) : kind;
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
  return fmt::format("tensor '{}' {} {} {} {}", v["name"].get<std::string>(),
                     v["dtype"].get<std::string>(), shape_text(v["shape"]),
                     v["device"].get<std::string>(), where);
}

std::string refs(const json& indices) {
  std::string out;
  for (const auto& i : indices) out += fmt::format("{}%{}", out.empty() ? "" : " ", i.get<int>());
  return out.empty() ? "-" : out;
}

void print_engine(const json& e) {
  if (e.contains("error")) {
    std::printf("        engine: INVALID: %s\n", e["error"].get<std::string>().c_str());
    return;
  }
  std::printf("        engine: %s %s %s, built with CUDA %d, cuBLASLt %d, cuDNN %d, NVRTC %d\n",
              e["device"].get<std::string>().c_str(), e["sm_arch"].get<std::string>().c_str(),
              e["precision"].get<std::string>().c_str(), e["cuda_version"].get<int>(),
              e["cublaslt_version"].get<int>(), e["cudnn_version"].get<int>(),
              e["nvrtc_version"].get<int>());
  std::printf(
      "        weights %llu bytes, scratch %llu bytes, workspace %llu bytes, cubin %llu bytes\n",
      static_cast<unsigned long long>(e["weights_bytes"].get<uint64_t>()),
      static_cast<unsigned long long>(e["scratch_bytes"].get<uint64_t>()),
      static_cast<unsigned long long>(e["workspace_bytes"].get<uint64_t>()),
      static_cast<unsigned long long>(e["cubin_bytes"].get<uint64_t>()));
  for (const auto& b : e["bindings"]) {
    std::printf("        %-6s '%s' %s %s\n", b["io"].get<std::string>().c_str(),
                b["name"].get<std::string>().c_str(), b["dtype"].get<std::string>().c_str(),
                shape_text(b["shape"]).c_str());
  }
  int i = 0;
  for (const auto& s : e["steps"]) {
    std::printf("        step %d: %s %s\n", i++, s["kind"].get<std::string>().c_str(),
                s["what"].get<std::string>().c_str());
  }
}

void print_text(const json& j) {
  std::printf("program %s: %llu bytes, format v%d\n", j["file"].get<std::string>().c_str(),
              static_cast<unsigned long long>(j["file_size"].get<uint64_t>()),
              j["format_version"].get<int>());
  std::printf("producer: %s\n", j["producer"].get<std::string>().c_str());
  std::printf("segments:\n");
  for (const auto& s : j["segments"]) {
    std::printf("  [%d] file offset %llu, %llu bytes\n", s["index"].get<int>(),
                static_cast<unsigned long long>(s["offset"].get<uint64_t>()),
                static_cast<unsigned long long>(s["size"].get<uint64_t>()));
  }
  for (const auto& m : j["methods"]) {
    std::printf(
        "method '%s': %zu inputs, %zu outputs, %zu instructions, %zu delegates, %zu values\n",
        m["name"].get<std::string>().c_str(), m["inputs"].size(), m["outputs"].size(),
        m["instructions"].size(), m["delegates"].size(), m["values"].size());
    std::printf("  inputs:  %s\n  outputs: %s\n", refs(m["inputs"]).c_str(),
                refs(m["outputs"]).c_str());
    std::printf("  arenas:\n");
    for (const auto& a : m["arenas"]) {
      std::printf("    [%d] %s  %llu bytes\n", a["index"].get<int>(),
                  a["device"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(a["size"].get<uint64_t>()));
    }
    std::printf("  delegates:\n");
    for (const auto& d : m["delegates"]) {
      std::string specs;
      for (const auto& [k, v] : d["compile_specs"].items()) {
        specs += fmt::format(" {}={}", k, v.get<std::string>());
      }
      std::printf("    [%d] '%s' backend %s, blob segment %d (%llu bytes), specs:%s\n",
                  d["index"].get<int>(), d["name"].get<std::string>().c_str(),
                  d["backend"].get<std::string>().c_str(), d["blob_segment"].get<int>(),
                  static_cast<unsigned long long>(d["blob_size"].get<uint64_t>()),
                  specs.empty() ? " none" : specs.c_str());
      if (d.contains("engine")) print_engine(d["engine"]);
    }
    std::printf("  instructions:\n");
    for (const auto& x : m["instructions"]) {
      const std::string kind = x["kind"];
      if (kind == "kernel") {
        std::printf("    [%d] kernel   %s '%s'  in %s  attrs %s  -> %s\n", x["index"].get<int>(),
                    x["op"].get<std::string>().c_str(), x["node"].get<std::string>().c_str(),
                    refs(x["inputs"]).c_str(), refs(x["attributes"]).c_str(),
                    refs(x["outputs"]).c_str());
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
  }
}

}  // namespace

Status run_inspect(const InspectArgs& args) {
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(args.program));
  const json j = program_json(args.program, program->impl().file);
  if (args.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_text(j);
  }
  return Status();
}

}  // namespace baton::tool
