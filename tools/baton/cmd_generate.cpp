// baton generate: generation with a decoder compiled with state (docs/generate.md). Loads
// the program, runs `--warmup` whole generations (the first call at each shape prepares it: a
// GEMM choice, a CUDA graph), then a timed one, and reports its tokens, the time to the first
// token, per-token latency and what crossed between host and device while it ran.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/text.h"
#include "baton/extension/generate.h"
#include "baton/runtime/program.h"
#include "commands.h"
#include "gpu_run.h"
#include "run_common.h"

namespace baton::tool {
namespace {

// A delegate counter summed over the method's delegates (staged_bytes, graph_captures).
uint64_t delegate_total(const runtime::Method& m, std::string_view counter) {
  uint64_t total = 0;
  for (size_t d = 0; d < m.num_delegates(); ++d) {
    for (const auto& [name, value] : m.delegate_counters(d)) {
      if (name == counter) total += value;
    }
  }
  return total;
}

}  // namespace

Status run_generate(const GenerateArgs& args) {
  BATON_ASSIGN_OR_RETURN(const std::vector<int64_t> prompt,
                         parse_index_list(args.prompt_ids, "--prompt-ids", "a token id"));
  runtime::LoadOptions load;
  load.verify_checksums = !args.no_checksums;
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(args.program, load));
  runtime::MethodOptions method_options;
  method_options.threads = args.threads;
  BATON_ASSIGN_OR_RETURN(method_options.backend_options, parse_load_options(args.load_options));
  BATON_ASSIGN_OR_RETURN(method_options.device_map, runtime::parse_device_map(args.device_map));
  Result<std::unique_ptr<runtime::Method>> loaded = program->load_method("forward", method_options);
  if (!loaded.ok())
    return explain_load_failure(*program, gpus_needed(*program, method_options.device_map),
                                loaded.status());
  std::unique_ptr<runtime::Method> method = std::move(loaded).value();
  BATON_ASSIGN_OR_RETURN(const extension::DecoderSignature sig,
                         extension::decoder_signature(*method));

  extension::GenerateOptions options;
  options.prompt = prompt;
  options.max_new_tokens = args.max_new_tokens;
  options.eos_token = args.eos;
  options.temperature = args.temperature;
  options.top_p = args.top_p;
  options.seed = args.seed;
  BATON_ASSIGN_OR_RETURN(options.forced,
                         parse_index_list(args.force_ids, "--force-ids", "a token id"));
  for (int w = 0; w < args.warmup; ++w) {
    BATON_ASSIGN_OR_RETURN(const extension::GenerateResult unused,
                           extension::generate(*method, options));
    (void)unused;
  }
  const runtime::Method::CopyCounts copies_before = method->copy_counts();
  const uint64_t staged_before = delegate_total(*method, "staged_bytes");
  const uint64_t captures_before = delegate_total(*method, "graph_captures");
  BATON_ASSIGN_OR_RETURN(const extension::GenerateResult r, extension::generate(*method, options));
  const runtime::Method::CopyCounts copies_after = method->copy_counts();
  const uint64_t staged = delegate_total(*method, "staged_bytes") - staged_before;
  // CUDA graphs captured while generating: 0 once a warm-up has run the prompt's and the token's
  // shapes (the position is an input on the device, not a captured constant).
  const uint64_t captures = delegate_total(*method, "graph_captures") - captures_before;

  std::vector<double> sorted = r.token_ms;
  std::sort(sorted.begin(), sorted.end());
  double decode_total = 0;
  for (double ms : r.token_ms) decode_total += ms;
  const double tokens_per_s =
      decode_total > 0 ? 1000.0 * static_cast<double>(r.token_ms.size()) / decode_total : 0.0;
  uint64_t state_bytes = 0;
  std::string state_device;
  for (size_t i = 0; i < method->num_states(); ++i) {
    state_bytes += method->state(i).nbytes();
    state_device = method->state_info(i).device.to_string();
  }
  const uint64_t h2d = copies_after.host_to_device - copies_before.host_to_device;
  const uint64_t d2h = copies_after.device_to_host - copies_before.device_to_host;
  const uint64_t copied = copies_after.bytes - copies_before.bytes;

  if (args.json) {
    nlohmann::json j;
    j["program"] = args.program;
    j["prompt_tokens"] = prompt.size();
    j["prefill_calls"] = r.prefill_calls;
    j["tokens"] = r.tokens;
    j["first_token_ms"] = r.first_token_ms;
    j["token_ms"] = {{"count", sorted.size()},
                     {"median", quantile(sorted, 0.5)},
                     {"p90", quantile(sorted, 0.9)},
                     {"p99", quantile(sorted, 0.99)},
                     {"min", sorted.empty() ? 0.0 : sorted.front()},
                     {"max", sorted.empty() ? 0.0 : sorted.back()}};
    j["tokens_per_s"] = tokens_per_s;
    j["state"] = {
        {"tensors", method->num_states()}, {"bytes", state_bytes}, {"device", state_device}};
    j["copies"] = {{"host_to_device", h2d}, {"device_to_host", d2h}, {"bytes", copied}};
    j["bytes_in"] = r.bytes_in;
    j["bytes_out"] = r.bytes_out;
    j["staged_bytes"] = staged;
    j["graph_captures"] = captures;
    std::printf("%s\n", j.dump(2).c_str());
    return Status();
  }
  std::string tokens;
  for (int64_t t : r.tokens) tokens += fmt::format("{}{}", tokens.empty() ? "" : " ", t);
  if (args.quiet) {
    std::printf("%s\n", tokens.c_str());
    return Status();
  }
  std::printf("tokens: %s\n", tokens.c_str());
  std::printf("prompt: %zu tokens in %zu call%s (up to %lld per call)\n", prompt.size(),
              r.prefill_calls, r.prefill_calls == 1 ? "" : "s",
              static_cast<long long>(sig.max_new_tokens_per_call));
  std::printf("time to first token: %s\n", duration_text(r.first_token_ms).c_str());
  if (!sorted.empty()) {
    std::printf("per token: median %s, p90 %s, p99 %s over %zu tokens; %.1f tokens/s\n",
                duration_text(quantile(sorted, 0.5)).c_str(),
                duration_text(quantile(sorted, 0.9)).c_str(),
                duration_text(quantile(sorted, 0.99)).c_str(), sorted.size(), tokens_per_s);
  }
  std::printf("state: %zu tensors, %s on %s, updated in place\n", method->num_states(),
              size_text(state_bytes).c_str(), state_device.c_str());
  const double calls = static_cast<double>(r.prefill_calls + r.token_ms.size());
  std::printf(
      "moved per call (mean): %.0f bytes in (token ids, positions, mask), %.0f bytes out (%s); "
      "the cache: none\n",
      static_cast<double>(r.bytes_in) / calls, static_cast<double>(r.bytes_out) / calls,
      sig.next_tokens >= 0 ? "the next token" : "the last position's logits");
  std::printf(
      "copy instructions while generating: %llu host->device, %llu device->host (%llu bytes); "
      "staged by delegates: %llu bytes\n",
      static_cast<unsigned long long>(h2d), static_cast<unsigned long long>(d2h),
      static_cast<unsigned long long>(copied), static_cast<unsigned long long>(staged));
  if (method->num_delegates() > 0) {
    std::printf("CUDA graphs captured while generating: %llu\n",
                static_cast<unsigned long long>(captures));
  }
  return Status();
}

}  // namespace baton::tool
