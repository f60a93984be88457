// Greedy generation from C++ with a decoder compiled with state (docs/generate.md):
//
//   baton compile decoder.onnx -o decoder.baton --state auto --dim new_tokens=1..128 \
//       [--device cuda:0 --io device --sample greedy]
//   generate decoder.baton 15496,11,995 [max_new_tokens]
//
// The key/value cache stays inside the program for the whole loop; each call passes the new
// token ids, positions and mask and reads the next token. Links only Baton::runtime (and
// Baton::cuda for GPU programs), like run_model.
#include "baton/extension/generate.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/extension/module.h"
#ifdef RUN_MODEL_WITH_CUDA
#include "baton/cuda/backend.h"
#endif

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s decoder.baton ID,ID,... [max_new_tokens]\n", argv[0]);
    return 2;
  }
  baton::register_builtins();
#ifdef RUN_MODEL_WITH_CUDA
  baton::cuda::register_backend();
#endif
  auto module = baton::extension::Module::load(argv[1]);
  if (!module.ok()) {
    std::fprintf(stderr, "error: %s\n", module.status().to_string().c_str());
    return 1;
  }
  baton::extension::GenerateOptions options;
  for (const char* p = argv[2]; *p != '\0';) {
    char* end = nullptr;
    options.prompt.push_back(std::strtoll(p, &end, 10));
    if (end == p) {
      std::fprintf(stderr, "error: '%s' is not a list of token ids\n", argv[2]);
      return 2;
    }
    p = *end == ',' ? end + 1 : end;
  }
  options.max_new_tokens = argc > 3 ? std::atoll(argv[3]) : 32;
  auto result = baton::extension::generate(module->method(), options);
  if (!result.ok()) {
    std::fprintf(stderr, "error: %s\n", result.status().to_string().c_str());
    return 1;
  }
  for (int64_t t : result->tokens) std::printf("%lld ", static_cast<long long>(t));
  double decode_ms = 0;
  for (double ms : result->token_ms) decode_ms += ms;
  std::printf("\nfirst token after %.3f ms; %zu more in %.3f ms\n", result->first_token_ms,
              result->token_ms.size(), decode_ms);
  return 0;
}
