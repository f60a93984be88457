// baton triton-repo: a Triton model repository for a program (docs/serving.md).
#include <cstdio>
#include <string>
#include <vector>

#include "baton/core/check.h"
#include "baton/extension/triton_repo.h"
#include "commands.h"
#include "run_common.h"

namespace baton::tool {

Status run_triton_repo(const TritonRepoArgs& args) {
  extension::TritonRepoOptions options;
  options.name = args.name;
  options.max_batch = args.max_batch;
  BATON_ASSIGN_OR_RETURN(options.preferred_batch_sizes,
                         parse_index_list(args.preferred, "--preferred-batch", "a batch size"));
  options.queue_delay_us = args.queue_delay_us;
  options.instances = args.instances;
  BATON_ASSIGN_OR_RETURN(options.gpus, parse_index_list(args.gpus, "--gpus", "a GPU index"));
  options.python_path = args.python_path;
  options.threads = args.threads;
  options.overwrite = args.overwrite;
  BATON_ASSIGN_OR_RETURN(const extension::TritonRepoResult r,
                         extension::write_triton_repo(args.program, args.out_dir, options));
  if (args.quiet) return Status();
  std::printf("wrote %s (", r.model_dir.c_str());
  for (size_t i = 0; i < r.files.size(); ++i) {
    std::printf("%s%s", i ? ", " : "", r.files[i].c_str());
  }
  if (r.max_batch_size > 0) {
    std::printf(")\nbatching: up to %lld requests' rows per call, along '%s'\n",
                static_cast<long long>(r.max_batch_size), r.batch_symbol.c_str());
  } else {
    std::printf(")\nbatching: none (the program has no dynamic batch dimension)\n");
  }
  std::printf(
      "serve it: tritonserver --model-repository %s --backend-directory DIR "
      "(docs/serving.md: DIR and LD_LIBRARY_PATH)\n",
      args.out_dir.c_str());
  if (args.python_path.empty()) {
    std::printf(
        "note: no --baton-python: model.py imports baton and numpy from the system "
        "Python's own packages\n");
  }
  return Status();
}

}  // namespace baton::tool
