// baton compare: the same inputs through onnxruntime (CPU, the reference) and through Baton, and
// every output compared element by element; with --per-node, every intermediate value too, to
// find the first node whose value differs.
//
// onnxruntime runs in a Python interpreter (ort_reference.py, carried inside this binary): the
// PyPI wheel is the onnxruntime a Debian machine can install, and it has no C API headers. The
// interpreter is BATON_PYTHON, else the build's virtual environment, else python3.
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "baton/core/check.h"
#include "baton/core/file.h"
#include "baton/core/text.h"
#include "baton/extension/inspect.h"
#include "baton/extension/npy.h"
#include "baton/runtime/program.h"
#include "commands.h"
#include "gpu_run.h"
#include "report_file.h"
#include "run_common.h"
#include "value_compare.h"

extern char** environ;

namespace baton::tool {

extern const char kOrtReferenceScript[];  // ort_reference.py (generated at build time)

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Millis = std::chrono::duration<double, std::milli>;

constexpr int kMismatchExit = 3;

// The program's GPU precision (the loosest of its engines'), "fp32" for a CPU program, from the
// program's description.
std::string program_precision(const runtime::Program& program) {
  std::string precision = "fp32";
  Result<std::string> text = extension::describe_program_json(program);
  if (!text.ok()) return precision;
  const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return precision;
  for (const auto& m : j.value("methods", json::array())) {
    for (const auto& d : m.value("delegates", json::array())) {
      if (!d.contains("engine") || !d["engine"].is_object()) continue;
      const json& p = d["engine"].value("precision", json());
      if (p.is_string()) precision = std::string(looser(precision, p.get<std::string>()));
    }
  }
  return precision;
}

// A folder for the files both sides read and write; removed at the end unless the caller keeps it.
class WorkDir {
 public:
  static Result<WorkDir> create(const std::string& keep) {
    WorkDir w;
    if (!keep.empty()) {
      std::error_code ec;
      fs::create_directories(keep, ec);
      BATON_CHECK_OR_RETURN(!ec, IoError, "--save-dir '{}': {}", keep, ec.message());
      w.path_ = keep;
      return w;
    }
    std::string pattern = (fs::temp_directory_path() / "baton-compare-XXXXXX").string();
    BATON_CHECK_OR_RETURN(::mkdtemp(pattern.data()) != nullptr, IoError,
                          "cannot make a temporary folder {}: {} (set TMPDIR to a writable one)",
                          pattern, std::strerror(errno));
    w.path_ = pattern;
    w.remove_ = true;
    return w;
  }
  WorkDir(WorkDir&& o) noexcept : path_(std::move(o.path_)), remove_(o.remove_) {
    o.remove_ = false;
  }
  WorkDir& operator=(WorkDir&&) = delete;
  ~WorkDir() {
    std::error_code ec;
    if (remove_) fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }
  // A subfolder (made if missing), for one run of several.
  Result<std::string> folder(const std::string& name) const {
    const std::string path = file(name);
    std::error_code ec;
    fs::create_directories(path, ec);
    BATON_CHECK_OR_RETURN(!ec, IoError, "cannot make '{}': {}", path, ec.message());
    return path;
  }

 private:
  WorkDir() = default;
  std::string path_;
  bool remove_ = false;
};

std::string python_interpreter() {
  if (const char* p = std::getenv("BATON_PYTHON"); p != nullptr && *p != '\0') return p;
#ifdef BATON_DEFAULT_PYTHON
  std::error_code ec;
  if (fs::exists(BATON_DEFAULT_PYTHON, ec)) return BATON_DEFAULT_PYTHON;
#endif
  return "python3";
}

// A file the reference run wrote (its log, its report), as text.
Result<std::string> read_text(const std::string& path, std::string_view what) {
  BATON_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                         read_regular_file(path, uint64_t{1} << 30, what));
  return std::string(bytes.begin(), bytes.end());
}

// Runs the reference script; its output goes to a log in the work folder, shown on failure.
// False: the model's input and output names are not the request's (reference.json has the
// model's), and nothing was run.
Result<bool> run_reference(const std::string& model, const std::string& dir) {
  const std::string script = (fs::path(dir) / "ort_reference.py").string();
  BATON_TRY(write_text_file(script, kOrtReferenceScript));
  const std::string python = python_interpreter();
  const std::string log = (fs::path(dir) / "onnxruntime.log").string();
  // The log is a fresh file: whatever is at its name (a --save-dir of an earlier run, or a link
  // planted there) is removed first, and the open neither follows a link nor reuses a file.
  ::unlink(log.c_str());
  const int log_fd =
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  BATON_CHECK_OR_RETURN(log_fd >= 0, IoError, "cannot create '{}': {}", log, std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  std::vector<std::string> argv_text = {python, script, model, (fs::path(dir) / "").string()};
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(log_fd);
  BATON_CHECK_OR_RETURN(spawned == 0, NotSupported,
                        "baton compare runs onnxruntime through Python, and '{}' cannot be run: "
                        "{}. Set BATON_PYTHON to an interpreter with numpy, onnx and onnxruntime "
                        "(scripts/setup.sh makes one in .venv/)",
                        python, std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  Result<std::string> logged = read_text(log, "onnxruntime log");
  std::string said = logged.ok() ? *logged : logged.status().message();
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  if (said.size() > 2000) said = "..." + said.substr(said.size() - 2000);
  BATON_CHECK_OR_RETURN(
      code != 3, NotSupported,
      "baton compare runs onnxruntime through Python: {}. Install numpy, onnx and "
      "onnxruntime for it (pip install onnxruntime onnx numpy), or set "
      "BATON_PYTHON to an interpreter that has them",
      said);
  if (code == 4) return false;
  BATON_CHECK_OR_RETURN(
      code == 0, Internal, "the reference run (onnxruntime through {}) failed{}: {}", python,
      code < 0 ? " (killed by a signal)" : fmt::format(" with exit status {}", code),
      said.empty() ? std::string("no output") : said);
  return true;
}

// "'a', 'b'" (names from models are shown with their control bytes escaped).
std::string names_text(const json& names) {
  std::string out;
  for (const auto& n : names) {
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ",
                       printable_text(n.is_string() ? n.get<std::string>() : n.dump()));
  }
  return out.empty() ? "none" : out;
}

json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json comparison_json(const Comparison& c, bool intermediate) {
  json j = {{"name", escape_invalid_utf8(c.name)},
            {"node", escape_invalid_utf8(c.node)},
            {"op", c.op},
            {"intermediate", intermediate},
            {"in_model", c.in_model},
            {"match", c.in_model ? json(c.match()) : json()}};
  if (!c.in_model) return j;
  j["atol"] = c.tolerance.atol;
  j["rtol"] = c.tolerance.rtol;
  j["dtype"] = c.dtype;
  j["shape"] = c.shape;
  j["reference_dtype"] = c.reference_dtype;
  j["reference_shape"] = c.reference_shape;
  if (!c.shapes_match) return j;
  j["elements"] = c.elements;
  j["mismatches"] = c.mismatches;
  j["max_abs_error"] = c.max_abs;
  j["max_rel_error"] = c.max_rel;
  j["rel_l2_error"] = c.rel_l2;
  if (c.worst >= 0) {
    j["worst"] = {{"index", unflatten(c.worst, c.shape)},
                  {"baton", number(c.worst_baton)},
                  {"reference", number(c.worst_reference)},
                  {"abs_error", number(std::fabs(c.worst_baton - c.worst_reference))}};
  }
  return j;
}

std::string comparison_text(const Comparison& c) {
  const std::string where = c.node.empty() && c.op.empty()
                                ? std::string()
                                : fmt::format(" ({} node '{}')", c.op, printable_text(c.node));
  if (!c.in_model) {
    return fmt::format(
        "'{}': not compared (made by Baton's optimizer; the model has no such value)",
        printable_text(c.name));
  }
  const std::string head =
      fmt::format("'{}'{} {} {}", printable_text(c.name), where, c.dtype, shape_to_string(c.shape));
  if (!c.shapes_match) {
    return fmt::format("{}: MISMATCH: onnxruntime's is {} {}", head, c.reference_dtype,
                       shape_to_string(c.reference_shape));
  }
  const std::string errors =
      fmt::format("max abs {:.3g}  max rel {:.3g}  rel L2 {:.3g}", c.max_abs, c.max_rel, c.rel_l2);
  if (c.mismatches == 0) {
    return fmt::format("{}: ok  {}  (0 of {} outside)", head, errors, c.elements);
  }
  return fmt::format(
      "{}: MISMATCH  {} of {} outside; worst at {}: baton {:.6g}, onnxruntime {:.6g}\n      {}",
      head, c.mismatches, c.elements, index_text(unflatten(c.worst, c.shape)), c.worst_baton,
      c.worst_reference, errors);
}

// --- Which --shape flags are run shapes ---
//
// The ONNX dim_params of each graph input of `model`, by input name; empty when the file cannot
// be read (the compiler then says what is wrong with it).
std::map<std::string, std::vector<std::string>> input_dim_params(const std::string& model) {
  std::map<std::string, std::vector<std::string>> out;
  Result<std::vector<compiler::ModelInput>> inputs = compiler::read_model_inputs(model);
  if (!inputs.ok()) return out;
  for (compiler::ModelInput& in : *inputs) out[in.name] = std::move(in.dim_params);
  return out;
}

// compare's --shape flags, split: `compile` go to the compiler and fix an input's symbolic
// dimensions; `run` set the shapes of a dynamic program's random inputs, run by run. Given to the
// compiler, a run shape would fix its input, and the program would no longer be dynamic there.
struct ShapeFlags {
  std::vector<std::string> compile;
  std::vector<std::string> run;
};

Result<ShapeFlags> split_shape_flags(const CompareArgs& args) {
  ShapeFlags out;
  // A given program has nothing to compile: every --shape is for running it (and refused if the
  // program turns out to be static).
  if (!args.program.empty()) {
    out.run = args.compile.shapes;
    return out;
  }
  if (args.compile.dims.empty() || args.compile.shapes.empty()) {
    out.compile = args.compile.shapes;
    return out;
  }
  std::vector<std::string> dynamic;  // the dimensions --dim keeps dynamic
  for (const std::string& d : args.compile.dims) {
    BATON_ASSIGN_OR_RETURN(const compiler::DimRange range, compiler::parse_dim_range(d));
    dynamic.push_back(range.name);
  }
  const auto params = input_dim_params(args.compile.model);
  for (const std::string& s : args.compile.shapes) {
    BATON_ASSIGN_OR_RETURN(const auto shape, parse_shape_flag(s, "--shape"));
    const auto it = params.find(shape.first);
    const bool has_dynamic_dim =
        it != params.end() && std::any_of(it->second.begin(), it->second.end(), [&](auto& p) {
          return std::find(dynamic.begin(), dynamic.end(), p) != dynamic.end();
        });
    (has_dynamic_dim ? out.run : out.compile).push_back(s);
  }
  return out;
}

bool is_dynamic_input(const runtime::Method& method, size_t index) {
  const std::vector<runtime::Method::Dim> dims = method.input_dims(index);
  return std::any_of(dims.begin(), dims.end(),
                     [](const runtime::Method::Dim& d) { return !d.expr.empty(); });
}

// The --shape flags of each run: run k takes the k-th --shape of every dynamic input (an input
// with none takes its largest shape). No run shapes: one run, with none.
Result<std::vector<std::vector<std::string>>> plan_runs(const runtime::Method& method,
                                                        const std::string& program,
                                                        const std::vector<std::string>& shapes) {
  if (shapes.empty()) return std::vector<std::vector<std::string>>(1);
  const size_t n = method.num_inputs();
  std::vector<std::vector<std::string>> per_input(n);
  for (const std::string& s : shapes) {
    BATON_ASSIGN_OR_RETURN(const auto shape, parse_shape_flag(s, "--shape"));
    const size_t index = input_index(method, shape.first);
    if (index == n) {
      return BATON_ERROR(InvalidArgument,
                         "--shape {}: the program has no input named '{}' (its inputs: {})",
                         printable_text(s), printable_text(shape.first), input_names(method));
    }
    BATON_CHECK_OR_RETURN(
        is_dynamic_input(method, index), InvalidArgument,
        "--shape {}: input '{}' of {} is static ({}); with PROGRAM given, --shape sets the shapes "
        "of the random values of its dynamic inputs, run by run",
        printable_text(s), printable_text(shape.first), program, input_shape_text(method, index));
    per_input[index].push_back(s);
  }
  size_t runs = 0, widest = 0;
  for (size_t i = 0; i < n; ++i) {
    if (per_input[i].size() > runs) widest = i;
    runs = std::max(runs, per_input[i].size());
  }
  for (size_t i = 0; i < n; ++i) {
    BATON_CHECK_OR_RETURN(
        per_input[i].empty() || per_input[i].size() == runs, InvalidArgument,
        "--shape: input '{}' has {} shape{} and input '{}' has {}; run k takes the k-th --shape of "
        "every dynamic input, so give each the same number (or none: it then takes its largest "
        "shape)",
        printable_text(method.input_info(widest).name), runs, runs == 1 ? "" : "s",
        printable_text(method.input_info(i).name), per_input[i].size());
  }
  std::vector<std::vector<std::string>> out(runs);
  for (size_t k = 0; k < runs; ++k) {
    for (size_t i = 0; i < n; ++i) {
      if (!per_input[i].empty()) out[k].push_back(per_input[i][k]);
    }
  }
  return out;
}

// "input_ids=2x9 attention_mask=2x9": the sizes of a run's dynamic inputs.
std::string run_shape_text(const runtime::Method& method, const std::vector<Tensor>& inputs) {
  std::string out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_dynamic_input(method, i)) continue;
    std::string sizes;
    for (const int64_t d : inputs[i].sizes())
      sizes += (sizes.empty() ? "" : "x") + std::to_string(d);
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", printable_text(method.input_info(i).name),
                       sizes);
  }
  return out;
}

// --- One comparison ---

// One set of inputs through both sides, every value compared.
struct RunResult {
  unsigned seed = 0;
  std::vector<Tensor> inputs;
  // The model's outputs (the first `model_outputs`), then with --per-node the intermediate
  // values in the order the program computes them.
  std::vector<Comparison> values;
  size_t model_outputs = 0;
  size_t bad_outputs = 0, bad_values = 0;
  int first_bad = -1;       // --per-node: the value that differs first in the model's node order
  std::string onnxruntime;  // the reference's version
  double seconds = 0;
  bool match() const { return bad_outputs == 0 && bad_values == 0; }
};

// What every run of one `baton compare` shares.
struct Comparer {
  const CompareArgs& args;
  runtime::Method& method;
  std::string program_path;
  std::string precision;

  // The tolerance a value is held to: --atol/--rtol, else the program precision's defaults,
  // loosened for fp16 and bf16 tensors (a model exported in fp16 rounds every value to 11 bits,
  // on any backend).
  Tolerance tolerance_for(DType dtype) const {
    const std::string_view p = dtype == DType::Float16    ? looser(precision, "fp16")
                               : dtype == DType::BFloat16 ? looser(precision, "bf16")
                                                          : std::string_view(precision);
    return Tolerance{args.atol >= 0 ? args.atol : default_tolerance(p).atol,
                     args.rtol >= 0 ? args.rtol : default_tolerance(p).rtol,
                     default_tolerance(p).largest};
  }

  // Runs `inputs` through Baton and onnxruntime; `dir` holds the files both sides read and
  // write.
  Result<RunResult> run(std::vector<Tensor> inputs, unsigned seed, const std::string& dir) const {
    const auto start = std::chrono::steady_clock::now();
    const auto file = [&](const std::string& name) { return (fs::path(dir) / name).string(); };
    RunResult r;
    r.seed = seed;
    r.inputs = std::move(inputs);

    // Baton's side.
    json request_inputs = json::array();
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      BATON_TRY(method.set_input(i, r.inputs[i].view()));
      const std::string npy = file(fmt::format("input_{}.npy", i));
      BATON_TRY(extension::write_npy(npy, r.inputs[i].view()));
      request_inputs.push_back({{"name", model_name(method.input_info(i).name)}, {"file", npy}});
    }
    BATON_TRY(method.execute());
    std::vector<Tensor> outputs;
    json request_outputs = json::array();
    for (size_t i = 0; i < method.num_outputs(); ++i) {
      BATON_ASSIGN_OR_RETURN(Tensor host, output_to_host(method, i));
      if (!args.save_dir.empty()) {
        BATON_TRY(extension::write_npy(file(fmt::format("baton_{}.npy", i)), host.view()));
      }
      outputs.push_back(std::move(host));
      request_outputs.push_back(model_name(method.output_info(i).name));
    }

    // The reference's side.
    json request = {{"inputs", request_inputs}, {"outputs", request_outputs}};
    if (args.threads > 0) request["threads"] = args.threads;
    BATON_TRY(write_text_file(file("request.json"), json_text(request, 1)));
    BATON_ASSIGN_OR_RETURN(const bool ran, run_reference(args.compile.model, dir));
    BATON_ASSIGN_OR_RETURN(const std::string report,
                           read_text(file("reference.json"), "onnxruntime report"));
    const json reference = json::parse(report, nullptr, /*allow_exceptions=*/false);
    BATON_CHECK_OR_RETURN(reference.is_object(), Internal, "the reference run wrote no readable {}",
                          file("reference.json"));
    if (!ran) {
      json ours_in = json::array();
      for (size_t i = 0; i < method.num_inputs(); ++i)
        ours_in.push_back(std::string(method.input_info(i).name));
      return BATON_ERROR(InvalidArgument,
                         "{} takes inputs {} and gives outputs {}, and {} takes {} and gives {}: "
                         "was the program compiled from {}?",
                         args.compile.model, names_text(reference.value("graph_inputs", json())),
                         names_text(reference.value("graph_outputs", json())), program_path,
                         names_text(ours_in), names_text(request_outputs), args.compile.model);
    }
    BATON_CHECK_OR_RETURN(reference.contains("outputs"), Internal,
                          "the reference run wrote no outputs in {}", file("reference.json"));
    r.onnxruntime = reference.value("onnxruntime", "?");

    // Both sides, value by value. The model's own outputs come first; the rest are intermediate
    // values the program was compiled to expose (--expose-intermediates, or --per-node).
    const json graph_outputs = reference.value("graph_outputs", json::array());
    while (r.model_outputs < method.num_outputs() &&
           std::find(graph_outputs.begin(), graph_outputs.end(),
                     model_name(method.output_info(r.model_outputs).name)) != graph_outputs.end()) {
      ++r.model_outputs;
    }
    if (r.model_outputs != graph_outputs.size()) {
      std::string ours, theirs;
      for (size_t i = 0; i < method.num_outputs(); ++i)
        ours += fmt::format("{}'{}'", i ? ", " : "", printable_text(method.output_info(i).name));
      for (const auto& g : graph_outputs)
        theirs +=
            fmt::format("{}'{}'", theirs.empty() ? "" : ", ", printable_text(g.get<std::string>()));
      return BATON_ERROR(InvalidArgument,
                         "the program's outputs ({}) do not begin with the model's ({}): was {} "
                         "compiled from {}?",
                         ours, theirs, program_path, args.compile.model);
    }
    // A program compiled here with nothing left to expose (one node, or all fused) has none.
    BATON_CHECK_OR_RETURN(
        !args.per_node || args.program.empty() || r.model_outputs < method.num_outputs(),
        InvalidArgument,
        "--per-node: {} has only the model's outputs. Compile it with "
        "--expose-intermediates, or drop PROGRAM and let compare compile MODEL",
        args.program);
    const size_t compared = args.per_node ? method.num_outputs() : r.model_outputs;
    std::vector<int64_t> node_order;  // per value: its node's position in the model (-1: none)
    for (size_t i = 0; i < compared; ++i) {
      const std::string name = model_name(method.output_info(i).name);
      json entry;
      for (const auto& o : reference["outputs"]) {
        if (o.value("name", "") == name) entry = o;
      }
      Comparison c;
      int64_t node_index = -1;
      if (entry.is_null()) {
        c.in_model = false;
      } else {
        BATON_ASSIGN_OR_RETURN(Tensor ref, extension::read_npy(entry.value("file", "")));
        c = compare_values(outputs[i].view(), ref.view(), tolerance_for(outputs[i].dtype()));
        c.node = entry.value("node", "");
        c.op = entry.value("op", "");
        node_index = entry.value("node_index", int64_t{-1});
      }
      c.name = name;
      r.values.push_back(std::move(c));
      node_order.push_back(node_index);
    }
    for (size_t i = 0; i < r.values.size(); ++i) {
      if (r.values[i].match() || !r.values[i].in_model) continue;
      (i < r.model_outputs ? r.bad_outputs : r.bad_values) += 1;
    }
    // The first value that differs in the model's node order (topological: what a node reads is
    // computed before it), model outputs and intermediates alike; a graph input counts first.
    if (args.per_node) {
      for (size_t i = 0; i < r.values.size(); ++i) {
        if (r.values[i].match() || !r.values[i].in_model) continue;
        if (r.first_bad < 0 || node_order[i] < node_order[r.first_bad])
          r.first_bad = static_cast<int>(i);
      }
    }
    r.seconds = Millis(std::chrono::steady_clock::now() - start).count() / 1000.0;
    return r;
  }
};

// --- Reports ---

// A run's inputs, outputs and verdict, as the JSON document has them.
json run_json(const CompareArgs& args, const runtime::Method& method, const RunResult& r) {
  json in = json::array();
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const runtime::TensorInfo info = method.input_info(i);
    in.push_back({{"name", escape_invalid_utf8(info.name)},
                  {"dtype", std::string(dtype_name(info.dtype))},
                  {"shape", r.inputs[i].sizes()},
                  {"source", args.inputs.empty() ? "random" : "file"}});
  }
  json outs = json::array(), values = json::array();
  for (size_t i = 0; i < r.values.size(); ++i) {
    (i < r.model_outputs ? outs : values)
        .push_back(comparison_json(r.values[i], i >= r.model_outputs));
  }
  json j = {{"inputs", in}, {"outputs", outs}, {"match", r.match()}};
  if (args.per_node) {
    j["values"] = values;
    j["first_mismatch"] = r.first_bad < 0 ? json()
                                          : comparison_json(r.values[r.first_bad],
                                                            r.first_bad >= int(r.model_outputs));
  }
  return j;
}

void print_inputs(const CompareArgs& args, const runtime::Method& method, const RunResult& r) {
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const runtime::TensorInfo info = method.input_info(i);
    std::printf(
        "input  %zu '%s' %s %s %s\n", i, printable_text(info.name).c_str(),
        std::string(dtype_name(info.dtype)).c_str(), shape_to_string(r.inputs[i].sizes()).c_str(),
        args.inputs.empty() ? fmt::format("random (seed {})", r.seed).c_str() : "from file");
  }
}

void print_values(const CompareArgs& args, const RunResult& r) {
  for (size_t i = 0; i < r.model_outputs; ++i) {
    std::printf("output %zu %s\n", i, comparison_text(r.values[i]).c_str());
  }
  if (args.per_node) {
    std::printf("%zu intermediate values, in the order the program computes them:\n",
                r.values.size() - r.model_outputs);
    for (size_t i = r.model_outputs; i < r.values.size(); ++i) {
      std::printf("  %s%s\n", static_cast<int>(i) == r.first_bad ? "FIRST " : "",
                  comparison_text(r.values[i]).c_str());
    }
  }
}

// "match: 1 output within tolerance (0.3 s)", or what differs.
std::string verdict_text(const CompareArgs& args, const RunResult& r, double seconds) {
  if (r.match()) {
    return fmt::format("match: {} output{}{} within tolerance ({:.1f} s)", r.model_outputs,
                       r.model_outputs == 1 ? "" : "s",
                       args.per_node ? fmt::format(" and {} intermediate values",
                                                   r.values.size() - r.model_outputs)
                                     : "",
                       seconds);
  }
  return fmt::format(
      "MISMATCH: {} of {} outputs{} outside tolerance{}", r.bad_outputs, r.model_outputs,
      args.per_node ? fmt::format(", {} intermediate values", r.bad_values) : "",
      r.first_bad >= 0
          ? fmt::format("; the first value that differs is '{}' of {} node '{}'",
                        printable_text(r.values[r.first_bad].name), r.values[r.first_bad].op,
                        printable_text(r.values[r.first_bad].node))
          : "");
}

}  // namespace

Result<int> run_compare(const CompareArgs& args) {
  // (--shape is not among compile_options_given: with PROGRAM it may be a run shape, checked
  // once the program is loaded.)
  BATON_CHECK_OR_RETURN(args.program.empty() || !args.compile_options_given, InvalidArgument,
                        "the compile options (--device, --precision, --dim, ...) say how "
                        "compare compiles MODEL; with PROGRAM given there is nothing to compile. "
                        "Drop them, or drop PROGRAM");
  const auto start = std::chrono::steady_clock::now();
  BATON_ASSIGN_OR_RETURN(const ShapeFlags shapes, split_shape_flags(args));
  BATON_ASSIGN_OR_RETURN(WorkDir work, WorkDir::create(args.save_dir));

  // The program: given, or compiled now (with the intermediates as extra outputs for --per-node).
  std::string program_path = args.program;
  if (program_path.empty()) {
    CompileArgs compile = args.compile;
    compile.shapes = shapes.compile;
    BATON_ASSIGN_OR_RETURN(compiler::CompileSetup setup, make_compile_setup(compile));
    setup.options.expose_intermediates = setup.options.expose_intermediates || args.per_node;
    Result<compiler::CompiledProgram> compiled =
        compiler::compile_file(args.compile.model, setup.options);
    if (!compiled.ok() && !shapes.run.empty()) {
      // The importer's advice may be a --shape the user gave: say why it did not reach it.
      std::string run;
      for (const std::string& s : shapes.run) run += " --shape " + printable_text(s);
      return Status(compiled.code(),
                    fmt::format("{}\n(compare gave the compiler --dim but not{}: those name inputs "
                                "with a --dim dimension and set their shapes run by run; give "
                                "each of their symbolic dimensions a --dim range)",
                                compiled.status().message(), run));
    }
    BATON_TRY(compiled);
    program_path = work.file("program.baton");
    BATON_TRY(compiled->write(program_path));
  }
  runtime::LoadOptions load;
  load.verify_checksums = !args.no_checksums;
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(program_path, load));
  runtime::MethodOptions method_options;
  method_options.threads = args.threads;
  BATON_ASSIGN_OR_RETURN(method_options.backend_options, parse_load_options(args.load_options));
  Result<std::unique_ptr<runtime::Method>> loaded = program->load_method("forward", method_options);
  if (!loaded.ok()) return explain_load_failure(*program, gpus_needed(*program), loaded.status());
  std::unique_ptr<runtime::Method> method = std::move(loaded).value();
  BATON_CHECK_OR_RETURN(
      shapes.run.empty() || method->num_symbols() > 0, InvalidArgument,
      "--shape {}: {} is static, so --shape could only fix an input's symbolic dimensions when "
      "compare compiles MODEL; with PROGRAM given there is nothing to compile. Drop it, or drop "
      "PROGRAM",
      shapes.run.empty() ? "" : printable_text(shapes.run[0]), program_path);

  // Every run's inputs are made and set first, so that a shape the program does not take is
  // refused (by the runtime, naming the axis and its range) before any run spends time.
  BATON_ASSIGN_OR_RETURN(const auto runs, plan_runs(*method, program_path, shapes.run));
  const bool several = !shapes.run.empty();
  std::vector<std::vector<Tensor>> inputs;
  // An error of one run of several says which.
  const auto in_run = [&](size_t k, const std::string& shape, Status s) {
    if (!several) return s;
    return Status(s.code(),
                  fmt::format("shape {} of {} ({}): {}", k + 1, runs.size(), shape, s.message()));
  };
  for (size_t k = 0; k < runs.size(); ++k) {
    // Each run its own seed, so that two runs of one shape differ too.
    const unsigned seed = args.seed + static_cast<unsigned>(k);
    BATON_ASSIGN_OR_RETURN(std::vector<Tensor> run_inputs,
                           load_inputs(args.inputs, seed, *method, runs[k]));
    inputs.push_back(std::move(run_inputs));
    for (size_t i = 0; i < inputs[k].size(); ++i) {
      if (Status s = method->set_input(i, inputs[k][i].view()); !s.ok()) {
        return in_run(k, run_shape_text(*method, inputs[k]), std::move(s));
      }
    }
  }

  const Comparer comparer{args, *method, program_path, program_precision(*program)};
  std::vector<RunResult> results;
  for (size_t k = 0; k < runs.size(); ++k) {
    // Several runs keep their files apart (in --save-dir too): run_1/, run_2/, ...
    std::string dir = work.file("");
    if (several) {
      BATON_ASSIGN_OR_RETURN(dir, work.folder(fmt::format("run_{}", k + 1)));
    }
    const std::string shape = run_shape_text(*method, inputs[k]);
    Result<RunResult> r =
        comparer.run(std::move(inputs[k]), args.seed + static_cast<unsigned>(k), dir);
    if (!r.ok()) return in_run(k, shape, std::move(r).status());
    results.push_back(std::move(r).value());
  }
  const double seconds = Millis(std::chrono::steady_clock::now() - start).count() / 1000.0;
  const size_t failed = static_cast<size_t>(
      std::count_if(results.begin(), results.end(), [](const RunResult& r) { return !r.match(); }));
  const int exit_code = failed == 0 ? 0 : kMismatchExit;
  const Tolerance tol = comparer.tolerance_for(DType::Float32);  // fp16/bf16 tensors differ

  if (args.json) {
    json doc = {{"model", args.compile.model},
                {"program", args.program.empty() ? json() : json(args.program)},
                {"reference", fmt::format("onnxruntime {} (CPU)", results[0].onnxruntime)},
                {"precision", comparer.precision},
                {"atol", tol.atol},
                {"rtol", tol.rtol},
                {"seed", args.seed},
                {"match", failed == 0},
                {"seconds", seconds}};
    if (several) {
      // One entry per shape; the top level has no "inputs" or "outputs" of its own.
      doc["runs"] = json::array();
      for (const RunResult& r : results) {
        json j = run_json(args, *method, r);
        j["shape"] = run_shape_text(*method, r.inputs);
        j["seed"] = r.seed;
        j["seconds"] = r.seconds;
        doc["runs"].push_back(std::move(j));
      }
    } else {
      doc.update(run_json(args, *method, results[0]));
    }
    std::printf("%s\n", json_text(doc, 2).c_str());
    return exit_code;
  }

  if (!args.quiet) {
    std::string devices;
    for (const Device& d : gpus_needed(*program))
      devices += (devices.empty() ? "" : ",") + d.to_string();
    std::printf("baton compare: %s on onnxruntime %s (CPU) against %s (%s, %s)\n",
                args.compile.model.c_str(), results[0].onnxruntime.c_str(),
                args.program.empty() ? "the program compiled now" : args.program.c_str(),
                devices.empty() ? "cpu" : devices.c_str(), comparer.precision.c_str());
    if (!several) print_inputs(args, *method, results[0]);
    std::printf(
        "tolerance: |baton - onnxruntime| <= %g + %g * |onnxruntime|%s\n", tol.atol, tol.rtol,
        args.atol < 0 || args.rtol < 0
            ? fmt::format(" ({} defaults; fp16 and bf16 tensors get theirs)", comparer.precision)
                  .c_str()
            : "");
  }
  if (!several) {
    if (!args.quiet) print_values(args, results[0]);
    std::printf("%s\n", verdict_text(args, results[0], seconds).c_str());
    return exit_code;
  }
  std::string failures;
  for (size_t k = 0; k < results.size(); ++k) {
    const std::string shape = run_shape_text(*method, results[k].inputs);
    if (!results[k].match()) {
      failures += fmt::format("{}shape {} ({})", failures.empty() ? "" : ", ", k + 1, shape);
    }
    if (args.quiet) continue;
    std::printf("shape %zu of %zu: %s\n", k + 1, results.size(), shape.c_str());
    print_inputs(args, *method, results[k]);
    print_values(args, results[k]);
    std::printf("%s\n", verdict_text(args, results[k], results[k].seconds).c_str());
  }
  if (failed == 0) {
    std::printf("%zu shape%s: all match (%.1f s)\n", results.size(), results.size() == 1 ? "" : "s",
                seconds);
  } else {
    std::printf("%zu shape%s: %zu MISMATCH: %s (%.1f s)\n", results.size(),
                results.size() == 1 ? "" : "s", failed, failures.c_str(), seconds);
  }
  return exit_code;
}

}  // namespace baton::tool
