// baton: compile ONNX models to Baton programs, run them, inspect them.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "baton/baton.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"baton: compile ONNX models ahead of time into one program file and run it"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "baton 0.1.0");

  baton::tool::CompileArgs compile;
  CLI::App* c = app.add_subcommand("compile", "Compile an ONNX model into a Baton program");
  c->add_option("model", compile.model, "ONNX model (.onnx)")->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", compile.output, "Program file to write (.baton)")->required();
  c->add_option("--device", compile.device,
                "Where to run: cpu; cuda:N (GPU partitions built for GPU N); cuda:0,cuda:1 "
                "(partitions assigned round robin); or 0=cuda:1,1=cuda:0 (partition index to "
                "device)")
      ->capture_default_str();
  c->add_option("--target-device", compile.target_device,
                "Label every GPU partition with this device verbatim (default: the device its "
                "engine is built for)");
  c->add_option("--io", compile.io,
                "Method inputs and outputs: host (default), or device (on the GPU of the "
                "partition that reads or writes them)")
      ->check(CLI::IsMember({"host", "device"}))
      ->capture_default_str();
  c->add_option("--max-partition-nodes", compile.max_partition_nodes,
                "Split GPU partitions after this many nodes (0: no limit)");
  c->add_flag("--strict-staging", compile.strict_staging,
              "GPU partitions refuse host memory at run time instead of staging it");
  c->add_option("--arch", compile.arch,
                "GPU architecture to build for (sm_90, sm_80, ...); default: read from the GPU");
  c->add_option("--precision", compile.precision,
                "GPU precision: fp32 (TF32 off), tf32, fp16, bf16 (default fp32)");
  c->add_option("--shape", compile.shapes,
                "Fix a graph input's symbolic dimensions: NAME=D0xD1x... (repeatable)");
  c->add_flag("--no-optimize", compile.no_optimize,
              "Run no optimizer pass (shape inference and constant folding still run)");
  c->add_option("--disable-pass", compile.disabled_passes,
                "Skip one optimizer pass: gelu, attention, matmul-add, qkv, add-layernorm "
                "(repeatable)");
  c->add_option("--max-fold-bytes", compile.max_fold_bytes,
                "Fold a constant subgraph node only if its outputs take at most this many bytes "
                "(e.g. 256MiB); larger ones run at run time")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c->add_option("--max-total-fold-bytes", compile.max_total_fold_bytes,
                "Stop folding once all folded outputs together take this many bytes")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c->add_option("--max-arena-bytes", compile.max_arena_bytes,
                "Refuse a model whose memory arena on one device would exceed this many bytes")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  c->add_flag("-q,--quiet", compile.quiet, "No progress output");

  baton::tool::RunArgs run;
  CLI::App* r = app.add_subcommand("run", "Run a Baton program and report outputs and latency");
  r->add_option("program", run.program, "Program file (.baton)")
      ->required()
      ->check(CLI::ExistingFile);
  r->add_option("-i,--input", run.inputs,
                "Input as NAME=FILE.npy, or FILE.npy in input order (repeatable); random inputs "
                "when none are given");
  r->add_option("-o,--output-dir", run.output_dir, "Write output i to DIR/output_<i>.npy");
  r->add_option("-n,--iterations", run.iterations, "Timed runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  r->add_option("--warmup", run.warmup, "Untimed runs first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  r->add_option("--seed", run.seed, "Seed for random inputs")->capture_default_str();
  r->add_flag("-q,--quiet", run.quiet, "Print only the latency line");
  r->add_option("--threads", run.threads,
                "Threads for the CPU kernels (GEMM, convolution, attention), made at load "
                "(default: one per CPU this process may use)")
      ->check(CLI::Range(1, 4096));
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

  baton::tool::InspectArgs inspect;
  CLI::App* s = app.add_subcommand("inspect", "Show everything inside a Baton program");
  s->add_option("program", inspect.program, "Program file (.baton)")
      ->required()
      ->check(CLI::ExistingFile);
  s->add_flag("--json", inspect.json, "One JSON object on stdout");
  s->add_flag("--no-checksums", inspect.no_checksums, kNoChecksumsHelp);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here too (exit 0); a command line that does not parse exits 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  baton::register_builtins();
  baton::tool::register_backends();

  baton::Status status;
  if (*c) status = baton::tool::run_compile(compile);
  if (*r) status = baton::tool::run_run(run);
  if (*s) status = baton::tool::run_inspect(inspect);
  if (!status.ok()) {
    std::fprintf(stderr, "baton: error: %s\n", status.to_string().c_str());
    return 1;
  }
  return 0;
}
