// baton: compile ONNX models to Baton programs, run them, inspect them. The command line is
// parsed and dispatched here (cli_main); baton_main.cpp is the executable's main, and the CLI fuzz
// target (fuzz/fuzz_cli.cpp) calls cli_main in process.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "baton/baton.h"
#include "baton/core/log.h"
#include "baton/cuda/options.h"
#include "commands.h"

namespace {

// trtexec's flags, which deployment engineers type out of habit, and what Baton calls them.
// (--shapes and --verbose mean the same in Baton and are accepted: see translate_trtexec.)
struct ForeignFlag {
  std::string_view name;
  std::string_view instead;
};
constexpr ForeignFlag kTrtexecFlags[] = {
    {"--fp16", "--precision fp16 (baton compile)"},
    {"--bf16", "--precision bf16 (baton compile)"},
    {"--best", "--precision fp16 (baton compile; Baton has no int8)"},
    {"--int8", "--precision fp16 or bf16 (baton compile; Baton has no int8)"},
    {"--noTF32", "--precision fp32 (baton compile's default: TF32 off)"},
    {"--saveEngine", "-o FILE (baton compile writes the program to FILE)"},
    {"--loadEngine", "baton run FILE"},
    {"--onnx", "baton compile MODEL.onnx -o FILE"},
    {"--warmUp", "--warmup N (baton run; N runs, where trtexec's --warmUp is milliseconds)"},
    {"--avgRuns", "-n N (baton run: N timed runs, with min/median/p90/p99)"},
    {"--duration", "-n N (baton run: N timed runs, not seconds)"},
    {"--minShapes", "--dim NAME=MIN..MAX[@OPT] per dynamic dimension, or --shape NAME=D0xD1"},
    {"--optShapes", "--dim NAME=MIN..MAX[@OPT] per dynamic dimension, or --shape NAME=D0xD1"},
    {"--maxShapes", "--dim NAME=MIN..MAX[@OPT] per dynamic dimension, or --shape NAME=D0xD1"},
};

// Rewrites trtexec's --shapes=NAME:D0xD1[,NAME:...] into --shape NAME=D0xD1 ..., and refuses the
// trtexec flags Baton spells differently, saying how. False: an error was printed.
bool translate_trtexec(int argc, char** argv, std::vector<std::string>* out) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (name == "--shapes") {
      std::string list =
          arg.size() > name.size() ? arg.substr(name.size() + 1) : (i + 1 < argc ? argv[++i] : "");
      for (size_t start = 0; start <= list.size();) {
        const size_t end = std::min(list.find(',', start), list.size());
        std::string item = list.substr(start, end - start);
        if (const size_t colon = item.rfind(':'); colon != std::string::npos) item[colon] = '=';
        out->push_back("--shape");
        out->push_back(item);
        start = end + 1;
      }
      continue;
    }
    for (const ForeignFlag& f : kTrtexecFlags) {
      if (name == f.name) {
        std::fprintf(stderr,
                     "baton: error: %s is a trtexec flag; did you mean %s?\nRun with --help for "
                     "more information.\n",
                     name.c_str(), std::string(f.instead).c_str());
        return false;
      }
    }
    out->push_back(std::move(arg));
  }
  return true;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean --warmup?)" for an argument that is not one of the parsed subcommand's options
// but is close to one, else "" (also for the options it has: they are not what went wrong).
std::string suggestion(const CLI::App& app, const std::string& argument) {
  const std::string name = argument.substr(0, argument.find('='));
  if (name.rfind("--", 0) != 0) return "";
  std::string best;
  size_t best_distance = 3;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!sub->parsed()) continue;
    for (const CLI::Option* opt : sub->get_options()) {
      for (const std::string& lname : opt->get_lnames()) {
        if (name.substr(2) == lname) return "";
        const size_t d = edit_distance(name.substr(2), lname);
        if (d < best_distance) {
          best_distance = d;
          best = "--" + lname;
        }
      }
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

}  // namespace

namespace {

// The options that say how a model is compiled (compile's, and compare's when it compiles).
std::vector<CLI::Option*> add_compile_options(CLI::App* c, baton::tool::CompileArgs& args) {
  std::vector<CLI::Option*> flags;
  flags.push_back(
      c->add_option("--device", args.request.device,
                    "Where to run: cpu; cuda:N (GPU partitions built for GPU N); cuda:0,cuda:1 "
                    "(partitions assigned round robin); or 0=cuda:1,1=cuda:0 (partition index to "
                    "device)")
          ->capture_default_str());
  flags.push_back(
      c->add_option("--target-device", args.request.target_device,
                    "Label every GPU partition with this device verbatim (default: the device its "
                    "engine is built for)"));
  flags.push_back(
      c->add_option("--io", args.request.io,
                    "Method inputs and outputs: host (default), or device (on the GPU of the "
                    "partition that reads or writes them)")
          ->check(CLI::IsMember({"host", "device"}))
          ->capture_default_str());
  // Counts are range-checked as numbers: CLI11 would read "-5" into an unsigned count as 2^64 - 5.
  flags.push_back(c->add_option("--max-partition-nodes", args.request.max_partition_nodes,
                                "Split GPU partitions after this many nodes (0: no limit)")
                      ->check(CLI::Range(0.0, 1e9)));
  flags.push_back(
      c->add_flag("--strict-staging", args.request.strict_staging,
                  "GPU partitions refuse host memory at run time instead of staging it"));
  flags.push_back(
      c->add_option("--fallback", args.request.fallback,
                    "Nodes no GPU backend takes, which then run on the CPU: allow (listed by "
                    "inspect), warn (also a warning naming each, by reason), or error (refuse "
                    "the model)")
          ->check(CLI::IsMember({"allow", "warn", "error"}))
          ->capture_default_str());
  flags.push_back(
      c->add_option("--state", args.request.state,
                    "Keep a model input and the output that updates it as one tensor across "
                    "calls (a KV cache): INPUT=OUTPUT, or auto to find every output that is a "
                    "ScatterND or ScatterElements of an input (repeatable; docs/state.md)"));
  flags.push_back(c->add_option("--sample", args.request.sample,
                                "Choose the next token inside the program: greedy (the ArgMax of "
                                "the logits) or top-k=K (drawn from the K most likely, temperature "
                                "and top-p given per call); the logits output becomes next_tokens "
                                "(docs/generate.md)"));
  flags.push_back(c->add_option(
      "--arch", args.request.arch,
      "GPU architecture to build for (sm_90, sm_80, ...); default: read from the GPU"));
  flags.push_back(c->add_option("--precision", args.request.precision,
                                "GPU precision: fp32 (TF32 off), tf32, fp16, bf16 (default fp32)"));
  static const std::string cuda_option_help =
      "A build option of the GPU engines, KEY=VALUE (repeatable; recorded in each engine, shown "
      "by inspect):\n" +
      baton::cuda::build_options_help();
  flags.push_back(c->add_option("--cuda-option", args.request.cuda_options, cuda_option_help));
  flags.push_back(
      c->add_option("--shape", args.shapes,
                    "Fix a graph input's symbolic dimensions: NAME=D0xD1x... (repeatable)"));
  flags.push_back(c->add_option(
      "--dim", args.dims,
      "Keep a symbolic dimension (an ONNX dim_param) dynamic over a range: NAME=MIN..MAX, or "
      "NAME=MIN..MAX@OPT with the size to tune for, or NAME=OTHER: the same dimension as OTHER "
      "(torch.export names each input's dimensions separately) (repeatable; see "
      "docs/dynamic_shapes.md)"));
  flags.push_back(
      c->add_flag("--no-optimize", args.no_optimize,
                  "Run no optimizer pass (shape inference and constant folding still run)"));
  flags.push_back(
      c->add_option("--disable-pass", args.request.disabled_passes,
                    "Skip one optimizer pass: cse, bn-conv, gelu, attention, matmul-add, qkv, "
                    "add-layernorm, identity, fuse-linear, fuse-conv (repeatable)"));
  flags.push_back(
      c->add_flag("--expose-intermediates", args.request.expose_intermediates,
                  "Make every intermediate value an output too, after the model's own (for baton "
                  "compare --per-node; it can keep a backend from fusing)"));
  flags.push_back(
      c->add_option(
           "--max-fold-bytes", args.request.max_fold_bytes,
           "Fold a constant subgraph node only if its outputs take at most this many bytes "
           "(e.g. 256MiB); larger ones run at run time")
          ->transform(CLI::AsSizeValue(false))
          ->capture_default_str());
  flags.push_back(
      c->add_option("--max-total-fold-bytes", args.request.max_total_fold_bytes,
                    "Stop folding once all folded outputs together take this many bytes")
          ->transform(CLI::AsSizeValue(false))
          ->capture_default_str());
  flags.push_back(
      c->add_option("--max-fold-work", args.request.max_fold_work,
                    "Fold a constant node only if computing it takes at most this many operations "
                    "(multiply-adds or elements, estimated from shapes); larger ones run at run "
                    "time")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1e30)));
  flags.push_back(
      c->add_option("--max-arena-bytes", args.request.max_arena_bytes,
                    "Refuse a model whose memory arena on one device would exceed this many bytes")
          ->transform(CLI::AsSizeValue(false))
          ->capture_default_str());
  return flags;
}

}  // namespace

namespace baton::tool {

int cli_main(int argc, char** argv) {
  CLI::App app{"baton: compile ONNX models ahead of time into one program file and run it"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "baton 0.1.0");

  baton::tool::CompileArgs compile;
  CLI::App* c = app.add_subcommand("compile", "Compile an ONNX model into a Baton program");
  c->add_option("model", compile.model, "ONNX model (.onnx)")->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", compile.output, "Program file to write (.baton)")->required();
  add_compile_options(c, compile);
  c->add_flag("-q,--quiet", compile.quiet, "No progress output");
  bool verbose = false;
  constexpr const char* kVerboseHelp =
      "Log everything Baton says (debug level; as BATON_LOG_LEVEL=debug)";
  c->add_flag("-v,--verbose", verbose, kVerboseHelp);

  baton::tool::RunArgs run;
  CLI::App* r = app.add_subcommand("run", "Run a Baton program and report outputs and latency");
  r->add_option("program", run.program, "Program file (.baton)")
      ->required()
      ->check(CLI::ExistingFile);
  r->add_option("-i,--input", run.inputs,
                "Input as NAME=FILE.npy, or FILE.npy in input order (repeatable); random inputs "
                "when none are given");
  r->add_option("--shape", run.shapes,
                "The shape of a random input of a dynamic program, NAME=D0xD1x... (repeatable; "
                "default: the largest the program takes)");
  r->add_option("-o,--output-dir", run.output_dir,
                "Write output i to DIR/output_<i>_<name>.npy, and DIR/outputs.json naming them");
  r->add_option("-n,--iterations", run.iterations, "Timed runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  r->add_option("--warmup", run.warmup, "Untimed runs first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  r->add_option("--seed", run.seed, "Seed for random inputs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 4294967295.0));
  r->add_flag("-q,--quiet", run.quiet, "Print only the latency line");
  r->add_option("--threads", run.threads,
                "Threads for the CPU kernels (GEMM, convolution, attention), made at load "
                "(default: one per CPU this process may use)")
      ->check(CLI::Range(1, 4096));
  r->add_option("--prepare-shape", run.prepare_shapes,
                "Prepare a dynamic program's calls at a shape before the first call, "
                "NAME=SIZE,... over its symbols (repeatable; e.g. batch=1,sequence=16): GPU "
                "choices timed for it and its CUDA graph captured with the bound memory "
                "(Method::prepare_shape). The declared OPT shape is prepared at load anyway");
  r->add_flag("--device-io", run.device_io,
              "Keep inputs and outputs in GPU memory and bind them zero-copy (compile with --io "
              "device)");
  r->add_option("--stream", run.stream,
                "default: cudaStreamPerThread, synchronized by execute; caller: a stream of "
                "baton run's own, selected with a StreamGuard")
      ->check(CLI::IsMember({"default", "caller"}))
      ->capture_default_str();
  r->add_option("--sms", run.sms, "Run on a green context of N SMs (implies a caller stream)")
      ->check(CLI::Range(1, 100000));
  r->add_flag("--saturate-rest", run.saturate_rest,
              "With --sms N: keep the GPU's other SMs busy with a competing kernel for the whole "
              "timed loop (to measure the green context's isolation)");
  constexpr const char* kNoChecksumsHelp =
      "Load without verifying the file's checksums (every other check still runs; a damaged "
      "weight then goes unnoticed)";
  r->add_flag("--no-checksums", run.no_checksums, kNoChecksumsHelp);
  r->add_flag("--json", run.json,
              "Print one JSON object (inputs, outputs, latency, load time, counters, profile) "
              "instead of text");
  r->add_option("--export-times", run.export_times,
                "Write every timed run's wall time and GPU time to FILE (JSON)");
  r->add_option("--export-profile", run.export_profile,
                "Write the profiled runs per instruction and per GPU engine step to FILE (JSON)");
  r->add_option("--trace", run.trace,
                "Write a Chrome trace (Perfetto, chrome://tracing) of load, every execute, each "
                "instruction and each GPU engine step to FILE");
  r->add_option("--profile-runs", run.profile_runs,
                "Profiled runs after the timed ones (per instruction and engine step; 0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  static const std::string load_option_help =
      "A load option, KEY=VALUE (repeatable; an unknown key or value is refused):\n" +
      baton::cuda::load_options_help();
  r->add_option("--load-option", run.load_options, load_option_help);
  static const std::string device_map_help =
      "Run what the program built for one GPU on another: FROM=TO[,FROM=TO...] (e.g. "
      "cuda:0=cuda:1); the target GPU must have the architecture the engines were built for";
  r->add_option("--device-map", run.device_map, device_map_help);
  r->add_flag("-v,--verbose", verbose, kVerboseHelp);

  baton::tool::CompareArgs compare;
  CLI::App* m = app.add_subcommand(
      "compare", "Run a model on onnxruntime (CPU) and on Baton with the same inputs and compare");
  m->add_option("model", compare.compile.model, "ONNX model (.onnx): the reference")
      ->required()
      ->check(CLI::ExistingFile);
  m->add_option("program", compare.program,
                "Baton program compiled from it (.baton); without one, MODEL is compiled with the "
                "compile options given")
      ->check(CLI::ExistingFile);
  const std::vector<CLI::Option*> compare_compile_flags = add_compile_options(m, compare.compile);
  m->get_option("--shape")->description(
      "NAME=D0xD1x... (repeatable). For a dynamic program (--dim, or a dynamic PROGRAM) and an "
      "input it keeps dynamic: the shape of its random values in one run; the k-th --shape of "
      "each dynamic input makes run k, compared shape by shape. Otherwise: fix the input's "
      "symbolic dimensions when compiling MODEL");
  m->add_option("-i,--input", compare.inputs,
                "Input as NAME=FILE.npy, or FILE.npy in input order (repeatable); random inputs "
                "when none are given");
  m->add_option("--seed", compare.seed, "Seed for random inputs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 4294967295.0));
  m->add_option("--atol", compare.atol,
                "Absolute tolerance (default by precision: fp32 1e-5, tf32 1e-3, fp16 1e-2, "
                "bf16 5e-2)")
      ->check(CLI::NonNegativeNumber);
  m->add_option("--rtol", compare.rtol,
                "Relative tolerance (default by precision: fp32 1e-4, tf32 1e-2, fp16 1e-2, "
                "bf16 5e-2)")
      ->check(CLI::NonNegativeNumber);
  m->add_flag("--per-node", compare.per_node,
              "Compare every intermediate value too (compiled as extra outputs) and name the "
              "first node whose value differs");
  m->add_flag("--json", compare.json, "Print one JSON object instead of text");
  m->add_option("--threads", compare.threads, "Threads for Baton's CPU kernels and onnxruntime")
      ->check(CLI::Range(1, 4096));
  m->add_option("--save-dir", compare.save_dir,
                "Keep the inputs, Baton's values and the reference's in DIR (as .npy)");
  m->add_flag("--no-checksums", compare.no_checksums, kNoChecksumsHelp);
  m->add_flag("-q,--quiet", compare.quiet, "Print only the result line");
  m->add_option("--load-option", compare.load_options, load_option_help);
  m->add_flag("-v,--verbose", verbose, kVerboseHelp);

  baton::tool::InspectArgs inspect;
  CLI::App* s = app.add_subcommand("inspect", "Show everything inside a Baton program");
  s->add_option("program", inspect.program, "Program file (.baton)")
      ->required()
      ->check(CLI::ExistingFile);
  s->add_flag("--json", inspect.json, "One JSON object on stdout");
  s->add_flag("--no-checksums", inspect.no_checksums, kNoChecksumsHelp);
  s->add_flag("--load", inspect.load,
              "Also load each method as `baton run` would and show what loading sizes: the CPU "
              "kernels' scratch, per kernel and in all");
  s->add_option("--threads", inspect.threads,
                "With --load: threads for the CPU kernels (scratch grows with them; default: one "
                "per CPU this process may use)")
      ->check(CLI::Range(1, 4096));
  s->add_option("--load-option", inspect.load_options,
                "With --load: a load option, KEY=VALUE (repeatable; as baton run's)");
  s->add_option("--device-map", inspect.device_map, "With --load: as baton run's");
  s->add_flag("-v,--verbose", verbose, kVerboseHelp);

  baton::tool::GenerateArgs generate;
  CLI::App* g = app.add_subcommand(
      "generate", "Generate tokens with a decoder compiled with --state (its KV cache inside)");
  g->add_option("program", generate.program, "Program file (.baton)")
      ->required()
      ->check(CLI::ExistingFile);
  g->add_option("--prompt-ids", generate.prompt_ids,
                "The prompt's token ids, comma-separated (\"15496,11,995\")")
      ->required();
  g->add_option("--force-ids", generate.force_ids,
                "Teacher forcing: feed these token ids after the prompt instead of the chosen "
                "ones, and print what was chosen at each position (judges a precision position "
                "by position)");
  g->add_option("--max-new-tokens", generate.max_new_tokens, "Tokens to generate (default 32)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  g->add_option("--eos", generate.eos, "Stop after generating this token id")
      ->check(CLI::NonNegativeNumber);
  g->add_option("--temperature", generate.temperature,
                "With a program compiled with --sample top-k=K: the temperature (default 1)")
      ->check(CLI::PositiveNumber);
  g->add_option("--top-p", generate.top_p,
                "With --sample top-k=K: draw from the smallest set of the K candidates whose "
                "probability reaches this (default 1: all K)")
      ->check(CLI::Range(0.0f, 1.0f));
  g->add_option("--seed", generate.seed,
                "With --sample top-k=K: the seed of the uniform numbers (the same seed, the same "
                "tokens; default 0)");
  g->add_option("--warmup", generate.warmup,
                "Whole generations before the timed one (default 1: the first call at each "
                "shape prepares it)")
      ->check(CLI::Range(0, 1000));
  g->add_option("--threads", generate.threads, "Threads for Baton's CPU kernels")
      ->check(CLI::Range(1, 4096));
  g->add_flag("--json", generate.json, "One JSON object on stdout");
  g->add_flag("-q,--quiet", generate.quiet, "Print only the tokens");
  g->add_flag("--no-checksums", generate.no_checksums, kNoChecksumsHelp);
  g->add_option("--load-option", generate.load_options, load_option_help);
  g->add_option("--device-map", generate.device_map, device_map_help);
  g->add_flag("-v,--verbose", verbose, kVerboseHelp);

  baton::tool::TritonRepoArgs triton;
  CLI::App* t = app.add_subcommand(
      "triton-repo",
      "Write a Triton Inference Server model repository serving a program (docs/serving.md)");
  t->add_option("program", triton.program, "Program file (.baton)")
      ->required()
      ->check(CLI::ExistingFile);
  t->add_option("outdir", triton.out_dir, "The model repository (created if missing)")->required();
  t->add_option("--name", triton.name, "The model's name (default: the program file's stem)");
  t->add_option("--max-batch", triton.max_batch,
                "Triton's max_batch_size (default: the largest batch the program's dynamic batch "
                "dimension takes)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  t->add_option("--preferred-batch", triton.preferred,
                "Preferred batch sizes, comma-separated (default: powers of two up to the max)");
  t->add_option("--queue-delay-us", triton.queue_delay_us,
                "How long a request waits for others to batch with (default 100)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  t->add_option("--instances", triton.instances, "Instances per GPU (or of the CPU model)")
      ->check(CLI::Range(1, 64));
  t->add_option("--gpus", triton.gpus,
                "GPUs to run instances on, comma-separated (default: the program's GPU; each "
                "instance loads the program there through a device map)");
  t->add_option("--baton-python", triton.python_path,
                "A directory model.py puts on sys.path (repeatable): where the baton package and "
                "NumPy are installed; Triton's Python stub ignores PYTHONPATH");
  t->add_option("--threads", triton.threads, "CPU threads per instance (default: one per CPU)")
      ->check(CLI::Range(1, 4096));
  t->add_flag("--overwrite", triton.overwrite, "Replace the model's directory if it exists");
  t->add_flag("-q,--quiet", triton.quiet, "Print nothing on success");
  t->add_flag("-v,--verbose", verbose, kVerboseHelp);

  CLI::App* ops_cmd = app.add_subcommand(
      "ops", "List the operators this build runs: opsets, CPU element types, CUDA lowering");

  std::vector<std::string> args;
  if (!translate_trtexec(argc, argv, &args)) return 2;
  try {
    // CLI11 takes the arguments in reverse order, without the program name.
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here too (exit 0); a command line that does not parse exits 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string hint;
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      for (const std::string& a : args) {
        if (hint.empty() && a.rfind("--", 0) == 0) hint = suggestion(app, a);
      }
    }
    std::fprintf(stderr, "baton: error: %s%s\nRun with --help for more information.\n", e.what(),
                 hint.c_str());
    return 2;
  }
  if (verbose) baton::set_log_level(baton::LogLevel::Debug);
  // -q: no progress, and no info lines either (a dynamic GPU compile writes several); warnings
  // and errors stay. BATON_LOG_LEVEL, when set to a level, wins.
  const bool quiet = (*c && compile.quiet) || (*r && run.quiet) || (*m && compare.quiet) ||
                     (*g && (generate.quiet || generate.json));
  if (quiet && !verbose && !baton::log_level_from_environment()) {
    baton::set_log_level(baton::LogLevel::Warn);
  }
  baton::register_builtins();
  baton::tool::register_backends();

  baton::Status status;
  int exit_code = 0;
  if (*c) status = baton::tool::run_compile(compile);
  if (*r) status = baton::tool::run_run(run);
  if (*s) status = baton::tool::run_inspect(inspect);
  if (*g) status = baton::tool::run_generate(generate);
  if (*t) status = baton::tool::run_triton_repo(triton);
  if (*ops_cmd) status = baton::tool::run_ops();
  if (*m) {
    for (const CLI::Option* o : compare_compile_flags) {
      // --shape with PROGRAM can be a run shape (a dynamic program's): run_compare decides.
      if (o->check_lname("shape")) continue;
      compare.compile_options_given = compare.compile_options_given || o->count() > 0;
    }
    baton::Result<int> compared = baton::tool::run_compare(compare);
    if (compared.ok()) exit_code = *compared;
    status = compared.status();
  }
  if (!status.ok()) {
    std::fprintf(stderr, "baton: error: %s\n", status.to_string().c_str());
    return 1;
  }
  return exit_code;
}

}  // namespace baton::tool
