// baton triton-repo: a Triton model repository for a program (docs/serving.md).
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "baton/core/check.h"
#include "baton/extension/triton_repo.h"
#include "commands.h"

namespace baton::tool {
namespace {

// "0,1" -> {0, 1}; `flag` names the option in messages.
template <typename T>
Result<std::vector<T>> parse_list(const std::string& text, std::string_view flag) {
  std::vector<T> out;
  if (text.empty()) return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view part = std::string_view(text).substr(at, comma - at);
    T v{};
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    BATON_CHECK_OR_RETURN(ec == std::errc() && end == part.data() + part.size() && v >= 0,
                          InvalidArgument, "{} {}: '{}' is not a non-negative integer", flag, text,
                          part);
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

}  // namespace

Status run_triton_repo(const TritonRepoArgs& args) {
  extension::TritonRepoOptions options;
  options.name = args.name;
  options.max_batch = args.max_batch;
  BATON_ASSIGN_OR_RETURN(options.preferred_batch_sizes,
                         parse_list<int64_t>(args.preferred, "--preferred-batch"));
  options.queue_delay_us = args.queue_delay_us;
  options.instances = args.instances;
  BATON_ASSIGN_OR_RETURN(options.gpus, parse_list<int>(args.gpus, "--gpus"));
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
