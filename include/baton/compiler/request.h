// A compile request as a person gives it to a front end (the `baton` CLI's flags, the Python
// package's keyword arguments): device lists and precisions as text, switches and budgets. One
// function turns it into CompileOptions with the backend compilers those need, so that both front
// ends take the same options, check them the same way and say the same thing about a mistake,
// naming each option as that front end spells it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/core/error.h"

namespace baton::compiler {

struct CompileRequest {
  // How messages name an option: the CLI's `--max-partition-nodes`, Python's
  // `max_partition_nodes=`.
  enum class Spelling { Cli, Python };
  Spelling spelling = Spelling::Cli;

  std::string device = "cpu";  // cpu | cuda:N | cuda:0,cuda:1 (round robin) | 0=cuda:1,1=cuda:0
  std::string arch;            // sm_XY, for GPU targets without the GPU present
  std::string precision;       // fp32 | tf32 | fp16 | bf16 (GPU partitions)
  std::string io = "host";     // host | device
  std::string target_device;   // a verbatim device label for every partition
  size_t max_partition_nodes = 0;
  bool strict_staging = false;
  bool optimize = true;
  std::vector<std::string> disabled_passes;
  bool expose_intermediates = false;
  std::string fallback = "warn";  // allow | warn | error (FallbackPolicy)
  // State (CompileOptions::state): "INPUT=OUTPUT" pairs, or "auto" to find them.
  std::vector<std::string> state;
  std::string sample;  // CompileOptions::sample: "" or "greedy"
  uint64_t max_fold_bytes = CompileOptions{}.max_fold_bytes;
  uint64_t max_total_fold_bytes = CompileOptions{}.max_total_fold_bytes;
  double max_fold_work = CompileOptions{}.max_fold_work;
  uint64_t max_arena_bytes = CompileOptions{}.max_arena_bytes;
  std::vector<InputShape> input_shapes;
  std::vector<DimRange> dims;
  // Build options of the CUDA engine builder, KEY=VALUE (include/baton/cuda/options.h).
  std::vector<std::string> cuda_options;
};

// CompileOptions point at their backend compilers; the setup owns them.
struct CompileSetup {
  CompileOptions options;
  std::vector<std::unique_ptr<BackendCompiler>> builders;
};

// InvalidArgument naming the option (as `request.spelling` spells it) for a value that is not
// valid: an unknown io, a device list that does not parse, GPU-only options without a GPU target;
// the backend's error when it cannot build for a device (no such GPU and no arch, say).
Result<CompileSetup> make_compile_setup(const CompileRequest& request);

}  // namespace baton::compiler
