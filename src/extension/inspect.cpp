#include "baton/extension/inspect.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "baton/core/check.h"
#include "baton/core/text.h"
#include "baton/runtime/backend.h"
#include "format/program_file.h"
#include "format/size_exprs.h"
#include "ops/op_def.h"

namespace baton::extension {
namespace {

using nlohmann::json;

std::string_view str(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : s->string_view();
}

// A string from the file, for the document: names are bytes, and JSON holds text. Valid UTF-8 is
// kept; other bytes become \xNN, so they stay visible and no json::dump can throw on them.
std::string text(const flatbuffers::String* s) { return escape_invalid_utf8(str(s)); }
std::string text(std::string_view s) { return escape_invalid_utf8(s); }

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

json value_json(const fb::Method& m, const fb::Value& v, int index) {
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
      j["value"] = text(v.value_as_String()->value());
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
      j["name"] = text(t->name());
      j["dtype"] = std::string(dtype_name(static_cast<DType>(t->dtype())));
      j["shape"] = list(t->sizes());
      if (t->dims() != nullptr && t->dims()->size() > 0) {
        // Dynamic: each dimension's expression ("shape" is then the largest).
        json dims = json::array();
        for (uint32_t e : *t->dims()) dims.push_back(format::size_expr_text(m, e));
        j["dims"] = std::move(dims);
      }
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

// What the delegate's backend says about its blob: null when the backend is not registered or
// describes nothing; {"error": ...} when the blob does not validate or the description is not a
// JSON object.
json blob_json(std::string_view backend_id, std::span<const uint8_t> blob) {
  const runtime::BackendInterface* backend = runtime::find_backend(backend_id);
  if (backend == nullptr) return json();
  Result<std::string> described = backend->describe_blob(blob);
  // Errors name the blob's bindings and kernels: bytes, like every name.
  if (!described.ok()) return {{"error", text(described.status().to_string())}};
  if (described->empty()) return json();
  json j = json::parse(*described, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return {{"error", text(fmt::format("backend '{}' described its blob with text that is not a "
                                       "JSON object; the backend's describe_blob is broken: {}",
                                       backend_id, described->substr(0, 200)))}};
  }
  return j;
}

json method_json(const format::ProgramFile& file, const fb::Method& m) {
  json j;
  j["name"] = text(m.name());
  j["inputs"] = list(m.inputs());
  // Dynamic shapes: the symbols with their ranges (empty for a static method).
  j["symbols"] = json::array();
  for (uint32_t s = 0; m.symbols() != nullptr && s < m.symbols()->size(); ++s) {
    const fb::Symbol* sym = m.symbols()->Get(s);
    j["symbols"].push_back({{"name", text(sym->name())},
                            {"min", sym->min()},
                            {"max", sym->max()},
                            {"opt", sym->opt()}});
    // A data-dependent size (NonZero's count): the value whose kernel gives it when it runs.
    if (sym->source() >= 0) j["symbols"].back()["source"] = sym->source();
  }
  j["size_exprs"] = m.size_exprs() == nullptr ? 0 : m.size_exprs()->size();
  // The nodes a GPU compile left on the CPU, with why (empty: none, or a CPU-only program).
  j["fallbacks"] = json::array();
  for (uint32_t i = 0; m.fallbacks() != nullptr && i < m.fallbacks()->size(); ++i) {
    const fb::Fallback* f = m.fallbacks()->Get(i);
    j["fallbacks"].push_back(
        {{"node", text(f->node())}, {"op", text(f->op())}, {"reason", text(f->reason())}});
  }
  // The same nodes grouped by reason, in the order each reason first appears (as the compile's
  // warning lists them): what a reader acts on is the reason, not each node.
  j["fallback_reasons"] = json::array();
  std::map<std::string, size_t> group_of;  // reason -> its entry in fallback_reasons
  for (const auto& f : j["fallbacks"]) {
    const std::string reason = f["reason"].get<std::string>();
    auto [it, added] = group_of.emplace(reason, j["fallback_reasons"].size());
    if (added) j["fallback_reasons"].push_back({{"reason", reason}, {"nodes", json::array()}});
    j["fallback_reasons"][it->second]["nodes"].push_back(f["node"]);
  }
  j["outputs"] = list(m.outputs());
  // State (docs/state.md): each tensor kept across calls, the value a call reads and the update
  // it writes (one slot of an arena: the update is made in place).
  j["state"] = json::array();
  for (uint32_t i = 0; m.state() != nullptr && i < m.state()->size(); ++i) {
    const fb::State* st = m.state()->Get(i);
    json entry = {{"name", text(st->name())}, {"value", st->value()}, {"update", st->update()}};
    const auto* values = m.values();
    if (values != nullptr && st->update() >= 0 &&
        static_cast<uint32_t>(st->update()) < values->size()) {
      if (const fb::Tensor* t = values->Get(st->update())->value_as_Tensor()) {
        entry["update_name"] = text(t->name());
        entry["arena"] = t->arena();
        entry["offset"] = t->offset();
      }
    }
    j["state"].push_back(std::move(entry));
  }
  j["values"] = json::array();
  for (uint32_t i = 0; m.values() && i < m.values()->size(); ++i) {
    j["values"].push_back(value_json(m, *m.values()->Get(i), static_cast<int>(i)));
  }
  j["operators"] = json::array();
  for (uint32_t i = 0; m.operators() && i < m.operators()->size(); ++i) {
    const fb::Operator* op = m.operators()->Get(i);
    j["operators"].push_back({{"index", i},
                              {"name", text(op->name())},
                              {"domain", text(op->domain())},
                              {"opset", op->opset()}});
  }
  j["delegates"] = json::array();
  for (uint32_t i = 0; m.delegates() && i < m.delegates()->size(); ++i) {
    const fb::Delegate* d = m.delegates()->Get(i);
    json specs = json::object();
    for (uint32_t k = 0; d->compile_specs() && k < d->compile_specs()->size(); ++k) {
      const fb::CompileSpec* cs = d->compile_specs()->Get(k);
      specs[text(cs->key())] = spec_value(cs->value());
    }
    json dj = {{"index", i},
               {"name", text(d->name())},
               {"backend", text(d->backend())},
               {"device", format::device_of(*d).to_string()},
               {"compile_specs", specs},
               {"target_device", specs.contains("target_device") ? specs["target_device"] : json()},
               {"blob_segment", d->blob_segment()},
               {"blob_size", file.segment(d->blob_segment()).size()}};
    json engine = blob_json(str(d->backend()), file.segment(d->blob_segment()));
    if (!engine.is_null()) {
      dj["engine_device"] = engine.value("device", json());
      dj["sm_arch"] = engine.value("sm_arch", json());
      dj["engine"] = std::move(engine);
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
      x["op"] = text(m.operators()->Get(k->operator_())->name());
      x["node"] = text(k->name());
      x["inputs"] = list(k->inputs());
      x["attributes"] = list(k->attributes());
      // Attributes are stored in the definition's order: their names come from it.
      const fb::Operator* op = m.operators()->Get(k->operator_());
      const ops::OpDef* def =
          ops::op_registry().find(str(op->name()), str(op->domain()), op->opset());
      json names = json::array();
      for (size_t a = 0; a < x["attributes"].size(); ++a) {
        names.push_back(def != nullptr && a < def->attrs.size()
                            ? json(std::string(def->attrs[a].name))
                            : json());
      }
      x["attribute_names"] = std::move(names);
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

json program_json(std::string_view path, const format::ProgramFile& file) {
  json j;
  j["file"] = text(path);
  j["file_size"] = file.bytes().size();
  j["format_version"] = file.header().format_version;
  j["table_checksum"] = fmt::format("{:016x}", file.header().table_checksum);
  j["producer"] = text(file.program().producer());
  j["segments"] = json::array();
  const auto* segs = file.program().segments();
  for (uint32_t i = 0; segs && i < segs->size(); ++i) {
    j["segments"].push_back({{"index", i},
                             {"offset", file.header().segment_base_offset + segs->Get(i)->offset()},
                             {"size", segs->Get(i)->size()},
                             {"checksum", fmt::format("{:016x}", segs->Get(i)->checksum())}});
  }
  j["methods"] = json::array();
  for (uint32_t i = 0; i < file.program().methods()->size(); ++i) {
    j["methods"].push_back(method_json(file, *file.program().methods()->Get(i)));
  }
  return j;
}

// Every string above went through text(); `replace` is the second guard: should one be missed,
// invalid UTF-8 is replaced, never thrown about.
std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

}  // namespace

Result<std::string> describe_program_json(const std::string& path,
                                          const runtime::LoadOptions& options) {
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(path, options));
  return describe_program_json(*program);
}

Result<std::string> describe_program_json(const runtime::Program& program) {
  // The Program verified these bytes when it loaded them; parsing them again only builds the view
  // (so the checksums, which read every byte, are not computed twice).
  format::ParseOptions view_only;
  view_only.verify_checksums = false;
  BATON_ASSIGN_OR_RETURN(format::ProgramFile file,
                         format::ProgramFile::parse(program.bytes(), view_only));
  return dump(program_json(program.origin(), file));
}

std::string model_name(std::string_view value_name) {
  const size_t at = value_name.rfind('@');
  if (at != std::string_view::npos && Device::parse(value_name.substr(at + 1)).has_value()) {
    return std::string(value_name.substr(0, at));
  }
  return std::string(value_name);
}

}  // namespace baton::extension
