// Token generation with a decoder compiled with state (docs/generate.md, docs/state.md): the
// prompt in as few calls as the method's new-token range allows (prefill), then one call per new
// token (decode), each choosing the next token: the most likely one from the last position's
// logits, or the one the program chose itself (--sample greedy or top-k=K).
// The key/value cache stays inside the method (its state) for the whole loop; a call moves only
// the new token ids, positions and mask in and the logits out.
//
// The method is found to be a decoder by its input names, the convention of Hugging Face models
// exported with a static cache (bench/probes/decode_export shows such exports):
//   input_ids       int64 or int32 [batch, new_tokens]   the new tokens (required)
//   cache_position  int64 or int32 [new_tokens]          their absolute positions (optional)
//   position_ids    int64 or int32 [batch, new_tokens] or [new_tokens]           (optional)
//   attention_mask  int64, int32 or bool [batch, max_length]: 1 for every position up to the
//                   last new token, 0 after (optional; its length bounds the sequence)
// and the output `logits` (or else the only output) [batch, new_tokens, vocab] in a float type,
// or `next_tokens` [batch, new_tokens] int64 where the program chooses the tokens itself
// (compiled with --sample greedy or top-k=K: the host then reads one int64 per call and does no
// argmax; with top-k it also sets sample_temperature, sample_top_p and sample_uniform, float32).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/runtime/program.h"

namespace baton::extension {

struct GenerateOptions {
  std::vector<int64_t> prompt;  // token ids, batch 1; at least one
  int64_t max_new_tokens = 32;
  int64_t eos_token = -1;  // stop after producing this token (-1: never)
  // Zero the state first (a new sequence). Without it the prompt continues the cached sequence
  // from `start_position`.
  bool reset = true;
  int64_t start_position = 0;
  // For a program compiled with --sample top-k=K (docs/generate.md): the temperature (> 0), the
  // nucleus (top_p in (0, 1]: the smallest set of the K candidates whose probability reaches it)
  // and the seed of the uniform numbers the program draws with (the same seed, the same tokens).
  float temperature = 1.0f;
  float top_p = 1.0f;
  uint64_t seed = 0;
  // Teacher forcing: after the prompt, feed these tokens one per call instead of the program's
  // choices, which are still recorded (`tokens`: the choice after the prompt, then after each
  // forced token). Judges a precision position by position, without one early disagreement
  // changing every later token (docs/generate.md, "Judging fp16"). Empty: generate. Stops after
  // max_new_tokens choices or forced.size() + 1, whichever is first; eos_token does not stop it.
  std::vector<int64_t> forced;
};

struct GenerateResult {
  std::vector<int64_t> tokens;  // the new tokens, the prompt not included
  // Wall time from the first prefill call to the first new token chosen, and of each later
  // token's call and choice, in milliseconds.
  double first_token_ms = 0;
  std::vector<double> token_ms;
  size_t prefill_calls = 0;
  // What crossed between the caller's memory and the method per generation: the bytes of token
  // ids, positions and mask set (Method::set_input copies them to the inputs' device), and the
  // bytes read back (the last position's logits, or one int64 with --sample greedy). The cache
  // is never among them.
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

// What generate() feeds and reads: input and output indices of `method`, -1 where absent.
struct DecoderSignature {
  int input_ids = -1;
  int cache_position = -1;
  int position_ids = -1;
  int attention_mask = -1;
  int logits = -1;
  int next_tokens = -1;  // --sample's output (then `logits` is -1)
  // --sample top-k=K's inputs (-1 without): the temperature, top-p and uniform numbers.
  int sample_temperature = -1;
  int sample_top_p = -1;
  int sample_uniform = -1;
  int64_t max_new_tokens_per_call = 0;  // the new-token dimension's maximum
  int64_t min_new_tokens_per_call = 0;
  // attention_mask's length; without a mask, the caches' length where they are
  // [batch, heads, length, head_dim] (0: not bounded here)
  int64_t max_length = 0;
};

// InvalidArgument naming what is missing or unknown and how to export or compile the model so
// that it fits: no input_ids, an input generate() does not know how to feed, no logits, no
// state (compile with --state auto), a batch or new-token range that excludes 1.
Result<DecoderSignature> decoder_signature(const runtime::Method& method);

// Generates. InvalidArgument for an empty prompt, a negative token, or a sequence longer
// than the attention mask; the method's own errors otherwise. Allocates host buffers once per
// call of generate(), nothing per token beyond what execute() does (nothing).
Result<GenerateResult> generate(runtime::Method& method, const GenerateOptions& options);

}  // namespace baton::extension
