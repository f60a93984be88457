// A Triton Inference Server model repository for a Baton program (`baton triton-repo`,
// docs/serving.md): config.pbtxt from the program's inputs and outputs, the program itself, and
// a Python-backend model.py that loads it once per instance (on the instance's GPU, through a
// device map) and runs each dynamic batch in one call.
//
// Reads the program's description only: no GPU is needed to write a repository for one.
// Allocates; writes files under `out_dir`. Thread-safe for distinct output directories.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::extension {

struct TritonRepoOptions {
  // The model's name in Triton (its directory under out_dir): the program file's stem if empty.
  std::string name;
  // Triton's max_batch_size: 0 takes the largest batch the program's leading dynamic dimension
  // allows. A program without one is served without batching (max_batch_size 0), and asking for
  // a batch then is an error naming what to compile with.
  int64_t max_batch = 0;
  // Triton's preferred batch sizes (empty: powers of two up to max_batch, and max_batch) and how
  // long a request may wait for others to join its batch.
  std::vector<int64_t> preferred_batch_sizes;
  int64_t queue_delay_us = 100;
  // Instances per GPU (or of the CPU model).
  int instances = 1;
  // GPUs to run instances on (KIND_GPU); empty: the program's own GPU for a GPU program, the CPU
  // (KIND_CPU) for a CPU one. A CPU program cannot be given GPUs.
  std::vector<int64_t> gpus;
  // Directories model.py puts first on sys.path: where the baton package and NumPy are. Triton's
  // Python stub runs the system's interpreter and ignores PYTHONPATH.
  std::vector<std::string> python_path;
  // CPU threads each instance's program uses (0: Baton's default, one per CPU).
  unsigned threads = 0;
  // Replace an existing model directory of that name (otherwise its presence is an error).
  bool overwrite = false;
};

struct TritonRepoResult {
  std::string model_dir;  // out_dir/name
  int64_t max_batch_size = 0;
  std::string batch_symbol;        // the program's batch dimension ("" without batching)
  std::vector<std::string> files;  // what was written, relative to out_dir
};

// Errors: IoError (cannot read the program, cannot write under out_dir), InvalidArgument (a
// program with state, a batch the program cannot take, GPUs for a CPU program, a name Triton
// cannot use, an existing model directory without `overwrite`), each naming what and how to fix.
Result<TritonRepoResult> write_triton_repo(const std::string& program_path,
                                           const std::string& out_dir,
                                           const TritonRepoOptions& options);

}  // namespace baton::extension
