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
#include <limits>
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
Result<bool> run_reference(const std::string& model, const WorkDir& work) {
  const std::string script = work.file("ort_reference.py");
  BATON_TRY(write_text_file(script, kOrtReferenceScript));
  const std::string python = python_interpreter();
  const std::string log = work.file("onnxruntime.log");
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
  std::vector<std::string> argv_text = {python, script, model, work.file("")};
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

}  // namespace

Result<int> run_compare(const CompareArgs& args) {
  BATON_CHECK_OR_RETURN(args.program.empty() || !args.compile_options_given, InvalidArgument,
                        "the compile options (--device, --precision, --shape, ...) say how "
                        "compare compiles MODEL; with PROGRAM given there is nothing to compile. "
                        "Drop them, or drop PROGRAM");
  const auto start = std::chrono::steady_clock::now();
  BATON_ASSIGN_OR_RETURN(WorkDir work, WorkDir::create(args.save_dir));

  // The program: given, or compiled now (with the intermediates as extra outputs for --per-node).
  std::string program_path = args.program;
  if (program_path.empty()) {
    BATON_ASSIGN_OR_RETURN(compiler::CompileSetup setup, make_compile_setup(args.compile));
    setup.options.expose_intermediates = setup.options.expose_intermediates || args.per_node;
    BATON_ASSIGN_OR_RETURN(compiler::CompiledProgram compiled,
                           compiler::compile_file(args.compile.model, setup.options));
    program_path = work.file("program.baton");
    BATON_TRY(compiled.write(program_path));
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
  const std::string precision = program_precision(*program);
  // The tolerance a value is held to: --atol/--rtol, else the program precision's defaults,
  // loosened for fp16 and bf16 tensors (a model exported in fp16 rounds every value to 11 bits,
  // on any backend).
  auto tolerance_for = [&](DType dtype) {
    const std::string_view p = dtype == DType::Float16    ? looser(precision, "fp16")
                               : dtype == DType::BFloat16 ? looser(precision, "bf16")
                                                          : std::string_view(precision);
    return Tolerance{args.atol >= 0 ? args.atol : default_tolerance(p).atol,
                     args.rtol >= 0 ? args.rtol : default_tolerance(p).rtol,
                     default_tolerance(p).largest};
  };
  const Tolerance tol = tolerance_for(DType::Float32);  // the header's; fp16/bf16 tensors differ

  // Baton's side.
  BATON_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, load_inputs(args.inputs, args.seed, *method));
  json request_inputs = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    BATON_TRY(method->set_input(i, inputs[i].view()));
    const std::string file = work.file(fmt::format("input_{}.npy", i));
    BATON_TRY(extension::write_npy(file, inputs[i].view()));
    request_inputs.push_back({{"name", model_name(method->input_info(i).name)}, {"file", file}});
  }
  BATON_TRY(method->execute());
  std::vector<Tensor> outputs;
  json request_outputs = json::array();
  for (size_t i = 0; i < method->num_outputs(); ++i) {
    BATON_ASSIGN_OR_RETURN(Tensor host, output_to_host(*method, i));
    if (!args.save_dir.empty()) {
      BATON_TRY(extension::write_npy(work.file(fmt::format("baton_{}.npy", i)), host.view()));
    }
    outputs.push_back(std::move(host));
    request_outputs.push_back(model_name(method->output_info(i).name));
  }

  // The reference's side.
  json request = {{"inputs", request_inputs}, {"outputs", request_outputs}};
  if (args.threads > 0) request["threads"] = args.threads;
  BATON_TRY(write_text_file(work.file("request.json"), json_text(request, 1)));
  BATON_ASSIGN_OR_RETURN(const bool ran, run_reference(args.compile.model, work));
  BATON_ASSIGN_OR_RETURN(const std::string report,
                         read_text(work.file("reference.json"), "onnxruntime report"));
  const json reference = json::parse(report, nullptr, /*allow_exceptions=*/false);
  BATON_CHECK_OR_RETURN(reference.is_object(), Internal, "the reference run wrote no readable {}",
                        work.file("reference.json"));
  if (!ran) {
    json ours_in = json::array();
    for (size_t i = 0; i < method->num_inputs(); ++i)
      ours_in.push_back(std::string(method->input_info(i).name));
    return BATON_ERROR(InvalidArgument,
                       "{} takes inputs {} and gives outputs {}, and {} takes {} and gives {}: "
                       "was the program compiled from {}?",
                       args.compile.model, names_text(reference.value("graph_inputs", json())),
                       names_text(reference.value("graph_outputs", json())), program_path,
                       names_text(ours_in), names_text(request_outputs), args.compile.model);
  }
  BATON_CHECK_OR_RETURN(reference.contains("outputs"), Internal,
                        "the reference run wrote no outputs in {}", work.file("reference.json"));

  // Both sides, value by value. The model's own outputs come first; the rest are intermediate
  // values the program was compiled to expose (--expose-intermediates, or --per-node).
  const json graph_outputs = reference.value("graph_outputs", json::array());
  size_t model_outputs = 0;
  while (model_outputs < method->num_outputs() &&
         std::find(graph_outputs.begin(), graph_outputs.end(),
                   model_name(method->output_info(model_outputs).name)) != graph_outputs.end()) {
    ++model_outputs;
  }
  if (model_outputs != graph_outputs.size()) {
    std::string ours, theirs;
    for (size_t i = 0; i < method->num_outputs(); ++i)
      ours += fmt::format("{}'{}'", i ? ", " : "", printable_text(method->output_info(i).name));
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
      !args.per_node || args.program.empty() || model_outputs < method->num_outputs(),
      InvalidArgument,
      "--per-node: {} has only the model's outputs. Compile it with "
      "--expose-intermediates, or drop PROGRAM and let compare compile MODEL",
      args.program);
  const size_t compared = args.per_node ? method->num_outputs() : model_outputs;
  std::vector<Comparison> results;
  std::vector<int64_t> node_order;  // per value: its node's position in the model (-1: none)
  for (size_t i = 0; i < compared; ++i) {
    const std::string name = model_name(method->output_info(i).name);
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
    results.push_back(std::move(c));
    node_order.push_back(node_index);
  }

  size_t bad_outputs = 0, bad_values = 0;
  int first_bad = -1;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].match() || !results[i].in_model) continue;
    (i < model_outputs ? bad_outputs : bad_values) += 1;
  }
  // The first value that differs in the model's node order (topological: what a node reads is
  // computed before it), model outputs and intermediates alike; a graph input counts first.
  if (args.per_node) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].match() || !results[i].in_model) continue;
      if (first_bad < 0 || node_order[i] < node_order[first_bad]) first_bad = static_cast<int>(i);
    }
  }
  const bool match = bad_outputs == 0 && bad_values == 0;
  const double seconds = Millis(std::chrono::steady_clock::now() - start).count() / 1000.0;

  if (args.json) {
    json in = json::array();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const runtime::TensorInfo info = method->input_info(i);
      in.push_back({{"name", escape_invalid_utf8(info.name)},
                    {"dtype", std::string(dtype_name(info.dtype))},
                    {"shape", info.sizes},
                    {"source", args.inputs.empty() ? "random" : "file"}});
    }
    json outs = json::array(), values = json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      (i < model_outputs ? outs : values)
          .push_back(comparison_json(results[i], i >= model_outputs));
    }
    json doc = {
        {"model", args.compile.model},
        {"program", args.program.empty() ? json() : json(args.program)},
        {"reference", fmt::format("onnxruntime {} (CPU)", reference.value("onnxruntime", "?"))},
        {"precision", precision},
        {"atol", tol.atol},
        {"rtol", tol.rtol},
        {"seed", args.seed},
        {"inputs", in},
        {"outputs", outs},
        {"match", match},
        {"seconds", seconds}};
    if (args.per_node) {
      doc["values"] = values;
      doc["first_mismatch"] =
          first_bad < 0 ? json()
                        : comparison_json(results[first_bad], first_bad >= int(model_outputs));
    }
    std::printf("%s\n", json_text(doc, 2).c_str());
    return match ? 0 : kMismatchExit;
  }

  if (!args.quiet) {
    std::printf(
        "baton compare: %s on onnxruntime %s (CPU) against %s (%s, %s)\n",
        args.compile.model.c_str(), reference.value("onnxruntime", "?").c_str(),
        args.program.empty() ? "the program compiled now" : args.program.c_str(),
        [&] {
          std::string devices;
          for (const Device& d : gpus_needed(*program))
            devices += (devices.empty() ? "" : ",") + d.to_string();
          return devices.empty() ? std::string("cpu") : devices;
        }()
            .c_str(),
        precision.c_str());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const runtime::TensorInfo info = method->input_info(i);
      std::printf(
          "input  %zu '%s' %s %s %s\n", i, printable_text(info.name).c_str(),
          std::string(dtype_name(info.dtype)).c_str(), shape_to_string(info.sizes).c_str(),
          args.inputs.empty() ? fmt::format("random (seed {})", args.seed).c_str() : "from file");
    }
    std::printf(
        "tolerance: |baton - onnxruntime| <= %g + %g * |onnxruntime|%s\n", tol.atol, tol.rtol,
        args.atol < 0 || args.rtol < 0
            ? fmt::format(" ({} defaults; fp16 and bf16 tensors get theirs)", precision).c_str()
            : "");
    for (size_t i = 0; i < model_outputs; ++i) {
      std::printf("output %zu %s\n", i, comparison_text(results[i]).c_str());
    }
    if (args.per_node) {
      std::printf("%zu intermediate values, in the order the program computes them:\n",
                  results.size() - model_outputs);
      for (size_t i = model_outputs; i < results.size(); ++i) {
        std::printf("  %s%s\n", static_cast<int>(i) == first_bad ? "FIRST " : "",
                    comparison_text(results[i]).c_str());
      }
    }
  }
  if (match) {
    std::printf(
        "match: %zu output%s%s within tolerance (%.1f s)\n", model_outputs,
        model_outputs == 1 ? "" : "s",
        args.per_node
            ? fmt::format(" and {} intermediate values", results.size() - model_outputs).c_str()
            : "",
        seconds);
  } else {
    std::printf("MISMATCH: %zu of %zu outputs%s outside tolerance%s\n", bad_outputs, model_outputs,
                args.per_node ? fmt::format(", {} intermediate values", bad_values).c_str() : "",
                first_bad >= 0
                    ? fmt::format("; the first value that differs is '{}' of {} node '{}'",
                                  printable_text(results[first_bad].name), results[first_bad].op,
                                  printable_text(results[first_bad].node))
                          .c_str()
                    : "");
  }
  return match ? 0 : kMismatchExit;
}

}  // namespace baton::tool
