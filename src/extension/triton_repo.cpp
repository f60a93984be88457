#include "baton/extension/triton_repo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "baton/core/check.h"
#include "baton/extension/inspect.h"

namespace baton::extension {

std::string_view triton_model_py();  // generated from triton_model.py (cmake/embed_text.cmake)

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Baton's dtype names (dtype_name) as Triton's config spells them.
std::optional<std::string_view> triton_type(std::string_view dtype) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"float32", "TYPE_FP32"}, {"float16", "TYPE_FP16"}, {"bfloat16", "TYPE_BF16"},
      {"float64", "TYPE_FP64"}, {"int64", "TYPE_INT64"},  {"int32", "TYPE_INT32"},
      {"int16", "TYPE_INT16"},  {"int8", "TYPE_INT8"},    {"uint8", "TYPE_UINT8"},
      {"bool", "TYPE_BOOL"}};
  for (const auto& [baton, triton] : kTypes) {
    if (baton == dtype) return triton;
  }
  return std::nullopt;
}

// One input or output as Triton sees it.
struct Port {
  std::string name;           // the model's name (model_name: a host copy's "@cpu" left out)
  std::string dtype;          // Baton's name
  std::vector<int64_t> dims;  // -1 for a dynamic dimension
  std::string first_symbol;   // the leading dimension's symbol, "" when static
};

Result<Port> port_of(const json& value, const std::string& program) {
  Port p;
  p.name = model_name(value.value("name", ""));
  p.dtype = value.value("dtype", "");
  const json shape = value.value("shape", json::array());
  const json dims = value.value("dims", json());
  for (size_t k = 0; k < shape.size(); ++k) {
    int64_t size = shape[k].get<int64_t>();
    if (dims.is_array() && k < dims.size()) {
      const std::string expr = dims[k].get<std::string>();
      const bool number =
          !expr.empty() && std::all_of(expr.begin(), expr.end(),
                                       [](unsigned char c) { return std::isdigit(c) != 0; });
      if (!number) size = -1;
      if (k == 0 && !number) p.first_symbol = expr;
    }
    p.dims.push_back(size);
  }
  for (const char c : p.name) {
    BATON_CHECK_OR_RETURN(c != '"' && c != '\\' && std::isprint(static_cast<unsigned char>(c)),
                          InvalidArgument,
                          "{}: the tensor name '{}' has a character Triton's config cannot hold "
                          "(a quote, a backslash or a control character); rename it in the model",
                          program, p.name);
  }
  BATON_CHECK_OR_RETURN(!p.name.empty(), InvalidArgument, "{}: a tensor has no name", program);
  BATON_CHECK_OR_RETURN(triton_type(p.dtype).has_value(), InvalidArgument,
                        "{}: '{}' is {}, which Triton has no type for", program, p.name, p.dtype);
  return p;
}

std::string dims_text(const std::vector<int64_t>& dims, size_t from) {
  std::string out;
  for (size_t k = from; k < dims.size(); ++k)
    out += fmt::format("{}{}", k > from ? ", " : "", dims[k]);
  return out;
}

Status write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  BATON_CHECK_OR_RETURN(out.good(), IoError, "cannot write {}", path.string());
  return Status();
}

}  // namespace

Result<TritonRepoResult> write_triton_repo(const std::string& program_path,
                                           const std::string& out_dir,
                                           const TritonRepoOptions& options) {
  BATON_ASSIGN_OR_RETURN(const std::string described, describe_program_json(program_path));
  const json doc = json::parse(described, nullptr, /*allow_exceptions=*/false);
  BATON_CHECK_OR_RETURN(doc.is_object(), Internal, "{}: the description is not JSON", program_path);
  const json* method = nullptr;
  if (doc.contains("methods") && doc["methods"].is_array()) {
    for (const json& m : doc["methods"]) {
      if (m.value("name", "") == "forward") method = &m;
    }
  }
  BATON_CHECK_OR_RETURN(method != nullptr, InvalidArgument,
                        "{}: no method 'forward', which the Triton model runs", program_path);
  BATON_CHECK_OR_RETURN(method->value("state", json::array()).empty(), InvalidArgument,
                        "{}: the program keeps state (a key/value cache) across calls, so "
                        "requests of different clients would share it; Triton serves stateless "
                        "programs here (for generation use baton generate, docs/generate.md)",
                        program_path);
  const json& values = (*method)["values"];
  std::vector<Port> inputs, outputs;
  for (const json& i : (*method)["inputs"]) {
    BATON_ASSIGN_OR_RETURN(Port p, port_of(values.at(i.get<size_t>()), program_path));
    inputs.push_back(std::move(p));
  }
  for (const json& o : (*method)["outputs"]) {
    BATON_ASSIGN_OR_RETURN(Port p, port_of(values.at(o.get<size_t>()), program_path));
    outputs.push_back(std::move(p));
  }
  BATON_CHECK_OR_RETURN(!inputs.empty() && !outputs.empty(), InvalidArgument,
                        "{}: Triton serves models with inputs and outputs; this one has {} and {}",
                        program_path, inputs.size(), outputs.size());

  // Where the program runs: its delegates' GPU (one), or the CPU.
  std::vector<std::string> gpus;
  for (const json& d : method->value("delegates", json::array())) {
    const std::string device = d.value("target_device", "");
    if (device.rfind("cuda", 0) == 0 && std::find(gpus.begin(), gpus.end(), device) == gpus.end())
      gpus.push_back(device);
  }
  BATON_CHECK_OR_RETURN(gpus.size() <= 1, InvalidArgument,
                        "{}: the program runs on {} GPUs; a Triton instance runs on one. Compile "
                        "it for one GPU (--device cuda:0) and let --gpus place the instances",
                        program_path, gpus.size());
  const std::string device = gpus.empty() ? "cpu" : gpus[0];
  BATON_CHECK_OR_RETURN(
      options.gpus.empty() || device != "cpu", InvalidArgument,
      "{}: --gpus asks for GPU instances but the program runs on the CPU; compile it for a GPU "
      "(baton compile MODEL.onnx --device cuda:0) or leave --gpus out",
      program_path);
  for (int64_t g : options.gpus) {
    BATON_CHECK_OR_RETURN(g >= 0 && g <= 255, InvalidArgument,
                          "--gpus: {} is not a GPU index (0..255)", g);
  }
  BATON_CHECK_OR_RETURN(options.instances >= 1, InvalidArgument,
                        "--instances {}: at least one instance", options.instances);

  // Batching: every input and output leads with one dynamic dimension, the same symbol.
  std::string batch = inputs[0].first_symbol;
  for (const std::vector<Port>* list : {&inputs, &outputs}) {
    for (const Port& p : *list) {
      if (p.first_symbol != batch) batch.clear();
    }
  }
  int64_t max_batch = 0;
  if (!batch.empty()) {
    int64_t lo = 1, hi = 0;
    for (const json& s : method->value("symbols", json::array())) {
      if (s.value("name", "") == batch) {
        lo = s.value("min", int64_t{1});
        hi = s.value("max", int64_t{0});
      }
    }
    BATON_CHECK_OR_RETURN(lo <= 1, InvalidArgument,
                          "{}: its batch dimension '{}' starts at {}, but Triton sends batches "
                          "from 1; compile with --dim {}=1..{}",
                          program_path, batch, lo, batch, hi);
    BATON_CHECK_OR_RETURN(options.max_batch <= hi, InvalidArgument,
                          "--max-batch {}: {} takes batches of 1..{} ('{}'); compile with --dim "
                          "{}=1..{} for more",
                          options.max_batch, program_path, hi, batch, batch, options.max_batch);
    max_batch = options.max_batch > 0 ? options.max_batch : hi;
  } else {
    BATON_CHECK_OR_RETURN(
        options.max_batch <= 0, InvalidArgument,
        "--max-batch {}: {} has no dynamic batch dimension that leads every input and output, so "
        "Triton cannot batch it; compile the model with one (--dim batch=1..{})",
        options.max_batch, program_path, options.max_batch);
  }
  std::vector<int64_t> preferred = options.preferred_batch_sizes;
  if (preferred.empty() && max_batch > 1) {
    for (int64_t b = 2; b < max_batch; b *= 2) preferred.push_back(b);
    preferred.push_back(max_batch);
  }
  for (int64_t b : preferred) {
    BATON_CHECK_OR_RETURN(b >= 1 && b <= max_batch, InvalidArgument,
                          "preferred batch size {} is outside 1..{} (the max batch)", b, max_batch);
  }

  std::string name = options.name;
  if (name.empty()) name = fs::path(program_path).stem().string();
  BATON_CHECK_OR_RETURN(
      !name.empty() && name != "." && name != ".." &&
          std::all_of(
              name.begin(), name.end(),
              [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; }),
      InvalidArgument,
      "model name '{}': Triton's model directory takes letters, digits, '_', '-' and '.' (--name)",
      name);

  // config.pbtxt
  std::string config =
      fmt::format("name: \"{}\"\nbackend: \"python\"\nmax_batch_size: {}\n", name, max_batch);
  const size_t skip = max_batch > 0 ? 1 : 0;  // with batching, dims leave the batch out
  const auto ports = [&](const char* what, const std::vector<Port>& list) {
    config += fmt::format("{} [\n", what);
    for (size_t k = 0; k < list.size(); ++k) {
      const Port& p = list[k];
      std::string dims = dims_text(p.dims, skip);
      // One value per request (a [batch] tensor, or a scalar): Triton's dims need an entry, and
      // the reshape hands the model the shape without it.
      const bool single = dims.empty();
      if (single) dims = "1";
      config += fmt::format("  {{ name: \"{}\" data_type: {} dims: [ {} ]{} }}{}\n", p.name,
                            *triton_type(p.dtype), dims, single ? " reshape: { shape: [ ] }" : "",
                            k + 1 < list.size() ? "," : "");
    }
    config += "]\n";
  };
  ports("input", inputs);
  ports("output", outputs);
  if (max_batch > 0) {
    std::string sizes;
    for (int64_t b : preferred) sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", b);
    config += fmt::format(
        "dynamic_batching {{\n  preferred_batch_size: [ {} ]\n  max_queue_delay_microseconds: "
        "{}\n}}\n",
        sizes, options.queue_delay_us);
  }
  std::vector<int64_t> instance_gpus = options.gpus;
  if (instance_gpus.empty() && device != "cpu")
    instance_gpus.push_back(Device::parse(device)->index);
  if (instance_gpus.empty()) {
    config += fmt::format("instance_group [ {{ count: {} kind: KIND_CPU }} ]\n", options.instances);
  } else {
    std::string list;
    for (int64_t g : instance_gpus) list += fmt::format("{}{}", list.empty() ? "" : ", ", g);
    config += fmt::format("instance_group [ {{ count: {} kind: KIND_GPU gpus: [ {} ] }} ]\n",
                          options.instances, list);
  }

  // What model.py reads.
  json settings;
  settings["program"] = "model.baton";
  settings["device"] = device;
  settings["batching"] = max_batch > 0;
  settings["threads"] = options.threads;
  settings["python_path"] = options.python_path;
  settings["inputs"] = json::array();
  settings["outputs"] = json::array();
  for (const Port& p : inputs) settings["inputs"].push_back(p.name);
  for (const Port& p : outputs) settings["outputs"].push_back(p.name);

  // Written into a directory beside the target and renamed into place: a failure leaves no half
  // repository, and an existing model is replaced only when asked.
  BATON_CHECK_OR_RETURN(!out_dir.empty(), InvalidArgument,
                        "the repository directory is empty; name one (e.g. repo/)");
  const fs::path out(out_dir);
  const fs::path target = out / name;
  std::error_code ec;
  // --overwrite replaces the model directory: never when the program (or what holds it) is it.
  const fs::path program_abs = fs::weakly_canonical(program_path, ec);
  const fs::path target_abs = fs::weakly_canonical(target, ec);
  const auto [t_end, p_at] =
      std::mismatch(target_abs.begin(), target_abs.end(), program_abs.begin(), program_abs.end());
  BATON_CHECK_OR_RETURN(t_end != target_abs.end(), InvalidArgument,
                        "{} would be the model's directory, but it is (or holds) the program {}; "
                        "choose another --name or repository",
                        target.string(), program_path);
  ec.clear();
  fs::create_directories(out, ec);
  BATON_CHECK_OR_RETURN(!ec, IoError, "cannot create {}: {}", out.string(), ec.message());
  BATON_CHECK_OR_RETURN(options.overwrite || !fs::exists(target), InvalidArgument,
                        "{} exists; choose another --name, or replace it with --overwrite",
                        target.string());
  const fs::path staging = out / fmt::format(".{}.writing", name);
  fs::remove_all(staging, ec);
  fs::create_directories(staging / "1", ec);
  BATON_CHECK_OR_RETURN(!ec, IoError, "cannot create {}: {}", staging.string(), ec.message());
  const auto fail = [&](Status s) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    return s;
  };
  if (Status s = write_file(staging / "config.pbtxt", config); !s.ok()) return fail(s);
  if (Status s = write_file(staging / "1" / "model.py", triton_model_py()); !s.ok()) return fail(s);
  if (Status s = write_file(staging / "1" / "baton_model.json", settings.dump(2) + "\n"); !s.ok())
    return fail(s);
  // The program itself: a hard link where the file system allows (a program can be gigabytes),
  // else a copy.
  const fs::path program_copy = staging / "1" / "model.baton";
  fs::create_hard_link(program_path, program_copy, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(program_path, program_copy, ec);
    if (ec) {
      return fail(BATON_ERROR(IoError, "cannot copy {} to {}: {}", program_path,
                              program_copy.string(), ec.message()));
    }
  }
  if (fs::exists(target)) fs::remove_all(target, ec);
  if (!ec) fs::rename(staging, target, ec);
  if (ec) {
    return fail(BATON_ERROR(IoError, "cannot move the repository into {}: {}", target.string(),
                            ec.message()));
  }
  TritonRepoResult r;
  r.model_dir = target.string();
  r.max_batch_size = max_batch;
  r.batch_symbol = max_batch > 0 ? batch : "";
  r.files = {name + "/config.pbtxt", name + "/1/model.py", name + "/1/baton_model.json",
             name + "/1/model.baton"};
  return r;
}

}  // namespace baton::extension
