// The baton command-line tool's subcommands.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/compiler/request.h"
#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton::tool {

struct CompileArgs {
  std::string model;
  std::string output;
  // Every compile option but the two below, as compiler::make_compile_setup takes them (the
  // Python package fills the same struct).
  compiler::CompileRequest request;
  std::vector<std::string> shapes;  // --shape NAME=D0xD1x..., parsed into request.input_shapes
  std::vector<std::string> dims;    // --dim NAME=MIN..MAX[@OPT], parsed into request.dims
  bool no_optimize = false;         // --no-optimize: request.optimize = false
  bool quiet = false;
};

struct RunArgs {
  std::string program;
  std::vector<std::string> inputs;  // NAME=FILE.npy or FILE.npy
  // --shape NAME=D0xD1x...: the shape of a random input of a dynamic program (default: the
  // largest in its range).
  std::vector<std::string> shapes;
  std::string output_dir;
  int iterations = 10;
  int warmup = 3;
  unsigned seed = 0;
  bool quiet = false;
  unsigned threads = 0;            // MethodOptions::threads (0: one per CPU)
  bool device_io = false;          // inputs and outputs in device memory (zero-copy)
  std::string stream = "default";  // default | caller
  int sms = 0;                     // > 0: run on a green context of this many SMs
  bool saturate_rest = false;      // with sms: keep the other SMs busy during the timed runs
  bool no_checksums = false;       // load without verifying the file's checksums
  bool json = false;               // one JSON object on stdout instead of text
  std::string export_times;        // every timed run's wall and GPU time, as JSON
  std::string export_profile;      // the profiled pass per instruction and engine step, as JSON
  std::string trace;               // a Chrome trace of load, every execute and the profiled pass
  int profile_runs = 10;           // runs of the profiled pass (after the timed runs)
  std::vector<std::string> load_options;  // --load-option KEY=VALUE (MethodOptions)
  std::string device_map;                 // --device-map cuda:0=cuda:1,... (MethodOptions)
  // --prepare-shape NAME=SIZE,...: Method::prepare_shape after the inputs are bound.
  std::vector<std::string> prepare_shapes;
};

struct CompareArgs {
  // The model, and how to compile it when no program is given. compile.shapes (--shape) are
  // split by run_compare: for a dynamic program, those naming an input it keeps dynamic are run
  // shapes (run k takes the k-th of each such input); the others fix inputs when compiling.
  CompileArgs compile;
  std::string program;                 // a compiled program to compare instead
  bool compile_options_given = false;  // any compile option but --shape
  std::vector<std::string> inputs;     // as baton run's
  unsigned seed = 0;
  double atol = -1;  // < 0: the default for the program's precision
  double rtol = -1;
  bool json = false;
  bool per_node = false;  // compare every intermediate value too
  unsigned threads = 0;
  bool no_checksums = false;
  std::string save_dir;  // keep the inputs, Baton's and the reference's values there
  bool quiet = false;
  std::vector<std::string> load_options;  // --load-option KEY=VALUE
};

struct GenerateArgs {
  std::string program;
  std::string prompt_ids;  // "15496,11,995": comma-separated token ids
  std::string force_ids;   // teacher forcing: the tokens fed after the prompt
  int64_t max_new_tokens = 32;
  int64_t eos = -1;
  float temperature = 1.0f;  // --sample top-k programs
  float top_p = 1.0f;
  uint64_t seed = 0;
  int warmup = 1;  // whole generations before the timed one
  unsigned threads = 0;
  bool json = false;
  bool quiet = false;
  bool no_checksums = false;
  std::vector<std::string> load_options;
  std::string device_map;  // --device-map
};

struct TritonRepoArgs {
  std::string program;
  std::string out_dir;
  std::string name;
  int64_t max_batch = 0;
  std::string preferred;  // "4,8,16"
  int64_t queue_delay_us = 100;
  int instances = 1;
  std::string gpus;                      // "0,1"
  std::vector<std::string> python_path;  // --baton-python DIR (repeatable)
  unsigned threads = 0;
  bool overwrite = false;
  bool quiet = false;
};

struct InspectArgs {
  std::string program;
  bool json = false;
  bool no_checksums = false;
  // Also load each method (as `baton run` would, with `threads` CPU threads) and show what the
  // load decides: the CPU kernels' scratch.
  bool load = false;
  unsigned threads = 0;
  std::vector<std::string> load_options;  // --load-option KEY=VALUE, with --load
  std::string device_map;                 // --device-map, with --load
};

// Registers the backends this build has (the CUDA runtime and engine builder when built with a
// CUDA toolkit). Defined by the file CMake picks: register_backends_cuda.cpp or _none.cpp.
void register_backends();
// The ops the GPU backend of this build has a lowering for, with the element types of their data
// it takes; empty without one. Defined next to register_backends.
struct GpuLowering {
  std::string domain, op;
  DTypeSet types;
};
std::vector<GpuLowering> gpu_lowered_ops();

// The compile options `args` ask for (compiler::make_compile_setup, which the Python package
// shares); InvalidArgument naming the flag that is wrong.
Result<compiler::CompileSetup> make_compile_setup(const CompileArgs& args);

Status run_compile(const CompileArgs& args);
Status run_run(const RunArgs& args);
// Exit status: 0 when every output matches, 3 on a mismatch, else an error (1).
Result<int> run_compare(const CompareArgs& args);
Status run_inspect(const InspectArgs& args);
// baton generate: greedy generation with a decoder compiled with state (docs/generate.md).
Status run_generate(const GenerateArgs& args);
Status run_triton_repo(const TritonRepoArgs& args);
// baton ops: the operator support table (docs/operators.md's support matrix is its output).
Status run_ops();

// The whole command line, as `baton` runs it (main.cpp): parses argv, runs the command, prints
// errors; returns the exit code (0 success, 1 a failed command, 2 a usage error). Never exits.
int cli_main(int argc, char** argv);

}  // namespace baton::tool
