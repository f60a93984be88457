#include "baton/extension/generate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>

#include "baton/core/check.h"
#include "baton/core/dtype.h"
#include "baton/extension/inspect.h"
#include "baton/runtime/device_allocator.h"

namespace baton::extension {
namespace {

bool is_index_type(DType t) { return t == DType::Int64 || t == DType::Int32; }

// Host memory for one integer input at its largest sizes, written per call.
struct IndexInput {
  int index = -1;
  DType dtype = DType::Int64;
  std::vector<int64_t> sizes;
  std::vector<int64_t> wide;    // int64 values
  std::vector<int32_t> narrow;  // the same as int32
  std::vector<uint8_t> flags;   // the same as bool

  void resize(size_t n) {
    wide.resize(n);
    if (dtype == DType::Int32) narrow.resize(n);
    if (dtype == DType::Bool) flags.resize(n);
  }
  TensorView view() {
    void* data = wide.data();
    if (dtype == DType::Int32) {
      for (size_t i = 0; i < wide.size(); ++i) narrow[i] = static_cast<int32_t>(wide[i]);
      data = narrow.data();
    } else if (dtype == DType::Bool) {
      for (size_t i = 0; i < wide.size(); ++i) flags[i] = wide[i] != 0;
      data = flags.data();
    }
    return TensorView{data, dtype, sizes, Device::cpu()};
  }
};

float to_float(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::Float32:
      return static_cast<const float*>(data)[i];
    case DType::Float16:
      return half_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::BFloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<float>(static_cast<const double*>(data)[i]);
  }
}

}  // namespace

Result<DecoderSignature> decoder_signature(const runtime::Method& m) {
  DecoderSignature s;
  BATON_CHECK_OR_RETURN(m.num_states() > 0, InvalidArgument,
                        "method '{}' keeps no state, so every call would start from an empty "
                        "key/value cache; compile the decoder with --state auto "
                        "(docs/generate.md)",
                        m.name());
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    const runtime::TensorInfo info = m.input_info(i);
    const std::string_view name = info.name;
    int* sample = name == "sample_temperature" ? &s.sample_temperature
                  : name == "sample_top_p"     ? &s.sample_top_p
                  : name == "sample_uniform"   ? &s.sample_uniform
                                               : nullptr;
    if (sample != nullptr) {
      BATON_CHECK_OR_RETURN(info.dtype == DType::Float32, InvalidArgument,
                            "method '{}' input '{}' is {}; --sample top-k makes it float32",
                            m.name(), name, dtype_name(info.dtype));
      *sample = static_cast<int>(i);
      continue;
    }
    int* slot = name == "input_ids"        ? &s.input_ids
                : name == "cache_position" ? &s.cache_position
                : name == "position_ids"   ? &s.position_ids
                : name == "attention_mask" ? &s.attention_mask
                                           : nullptr;
    BATON_CHECK_OR_RETURN(slot != nullptr, InvalidArgument,
                          "method '{}' has input '{}', which generation does not know how to "
                          "feed (it feeds input_ids, cache_position, position_ids and "
                          "attention_mask); if it is a key/value cache, compile with --state "
                          "auto or --state {}=OUTPUT",
                          m.name(), name, name);
    const bool mask = slot == &s.attention_mask;
    const bool rank_ok = slot == &s.cache_position ? info.sizes.size() == 1
                         : slot == &s.position_ids ? info.sizes.size() <= 2
                                                   : info.sizes.size() == 2;
    BATON_CHECK_OR_RETURN(
        rank_ok && (is_index_type(info.dtype) || (mask && info.dtype == DType::Bool)),
        InvalidArgument,
        "method '{}' input '{}' is {} of rank {}; generation feeds it as {} (docs/generate.md)",
        m.name(), name, dtype_name(info.dtype), info.sizes.size(),
        slot == &s.cache_position ? "int64 or int32 [new_tokens]"
        : slot == &s.position_ids ? "int64 or int32 [batch, new_tokens] or [new_tokens]"
        : mask                    ? "int64, int32 or bool [batch, max_length]"
                                  : "int64 or int32 [batch, new_tokens]");
    *slot = static_cast<int>(i);
  }
  BATON_CHECK_OR_RETURN(s.input_ids >= 0, InvalidArgument,
                        "method '{}' has no input named input_ids, the new tokens a decoder "
                        "takes (docs/generate.md names the inputs generation feeds)",
                        m.name());
  for (size_t o = 0; o < m.num_outputs(); ++o) {
    // A GPU program compiled with --io host names the host copy of an output NAME@cpu.
    const std::string name = model_name(m.output_info(o).name);
    if (name == "logits") s.logits = static_cast<int>(o);
    if (name == "next_tokens") s.next_tokens = static_cast<int>(o);
  }
  if (s.next_tokens >= 0) {
    const runtime::TensorInfo next = m.output_info(static_cast<size_t>(s.next_tokens));
    BATON_CHECK_OR_RETURN(next.dtype == DType::Int64 && next.sizes.size() == 2, InvalidArgument,
                          "method '{}' output 'next_tokens' is {} of rank {}; generation reads "
                          "int64 [batch, new_tokens] (what --sample greedy writes)",
                          m.name(), dtype_name(next.dtype), next.sizes.size());
    s.logits = -1;
  }
  if (s.next_tokens < 0 && s.logits < 0 && m.num_outputs() == 1) s.logits = 0;
  if (s.next_tokens < 0) {
    BATON_CHECK_OR_RETURN(s.logits >= 0, InvalidArgument,
                          "method '{}' has {} outputs and none is named logits; generation reads "
                          "the logits [batch, new_tokens, vocab]",
                          m.name(), m.num_outputs());
    const runtime::TensorInfo logits = m.output_info(static_cast<size_t>(s.logits));
    BATON_CHECK_OR_RETURN(logits.sizes.size() == 3 &&
                              (logits.dtype == DType::Float32 || logits.dtype == DType::Float16 ||
                               logits.dtype == DType::BFloat16),
                          InvalidArgument,
                          "method '{}' output '{}' is {} of rank {}; generation reads float logits "
                          "[batch, new_tokens, vocab]",
                          m.name(), logits.name, dtype_name(logits.dtype), logits.sizes.size());
  }
  const std::vector<runtime::Method::Dim> ids = m.input_dims(static_cast<size_t>(s.input_ids));
  BATON_CHECK_OR_RETURN(ids[0].min <= 1 && ids[0].max >= 1, InvalidArgument,
                        "method '{}' input_ids takes a batch of {}..{}; generation runs batch 1",
                        m.name(), ids[0].min, ids[0].max);
  s.min_new_tokens_per_call = ids[1].min;
  s.max_new_tokens_per_call = ids[1].max;
  BATON_CHECK_OR_RETURN(s.min_new_tokens_per_call <= 1, InvalidArgument,
                        "method '{}' input_ids takes {}..{} new tokens per call, so it cannot "
                        "decode one token at a time; compile with --dim {}=1..N",
                        m.name(), ids[1].min, ids[1].max,
                        ids[1].expr.empty() ? std::string("new_tokens") : ids[1].expr);
  if (s.attention_mask >= 0) {
    const std::vector<runtime::Method::Dim> mask =
        m.input_dims(static_cast<size_t>(s.attention_mask));
    BATON_CHECK_OR_RETURN(mask[1].expr.empty(), InvalidArgument,
                          "method '{}' attention_mask's length is dynamic ({}); generation "
                          "feeds a mask over the whole static cache [batch, max_length]",
                          m.name(), mask[1].expr);
    s.max_length = mask[1].max;
  } else {
    // No mask to bound the sequence: the caches' length, where they have the usual
    // [batch, heads, length, head_dim] shape (a GPU scatter drops positions past it silently).
    for (size_t i = 0; i < m.num_states(); ++i) {
      const runtime::TensorInfo st = m.state_info(i);
      if (st.sizes.size() != 4) continue;
      s.max_length = s.max_length == 0 ? st.sizes[2] : std::min(s.max_length, st.sizes[2]);
    }
  }
  return s;
}

Result<GenerateResult> generate(runtime::Method& m, const GenerateOptions& options) {
  BATON_ASSIGN_OR_RETURN(const DecoderSignature sig, decoder_signature(m));
  BATON_CHECK_OR_RETURN(!options.prompt.empty(), InvalidArgument,
                        "the prompt is empty; give at least one token id");
  BATON_CHECK_OR_RETURN(options.max_new_tokens >= 0 && options.start_position >= 0, InvalidArgument,
                        "max_new_tokens ({}) and start_position ({}) must be >= 0",
                        options.max_new_tokens, options.start_position);
  for (int64_t t : options.prompt) {
    BATON_CHECK_OR_RETURN(t >= 0, InvalidArgument, "prompt token {} is negative", t);
  }
  for (int64_t t : options.forced) {
    BATON_CHECK_OR_RETURN(t >= 0, InvalidArgument, "forced token {} is negative", t);
  }
  const int64_t start = options.reset ? 0 : options.start_position;
  // The last token generated is never fed back, so the cache holds prompt + new - 1 positions.
  const int64_t length = start + static_cast<int64_t>(options.prompt.size()) +
                         std::max<int64_t>(options.max_new_tokens - 1, 0);
  BATON_CHECK_OR_RETURN(sig.max_length == 0 || length <= sig.max_length, InvalidArgument,
                        "{} positions ({} prompt tokens{} and {} new) do not fit the model's "
                        "cache of {}; export it with a longer maximum length or generate fewer "
                        "tokens",
                        length, options.prompt.size(),
                        start > 0 ? fmt::format(" after {} cached", start) : std::string(),
                        options.max_new_tokens, sig.max_length);
  const bool sampled = sig.sample_uniform >= 0;
  BATON_CHECK_OR_RETURN(
      !sampled || (sig.sample_temperature >= 0 && sig.sample_top_p >= 0 && sig.next_tokens >= 0),
      InvalidArgument,
      "method '{}' has sample_uniform but not sample_temperature, sample_top_p "
      "and next_tokens: was it compiled with --sample top-k=K?",
      m.name());
  BATON_CHECK_OR_RETURN(
      !sampled || (options.temperature > 0 && options.top_p > 0 && options.top_p <= 1),
      InvalidArgument,
      "temperature {} and top_p {}: the temperature must be > 0 and top_p in "
      "(0, 1] (greedy is --sample greedy)",
      options.temperature, options.top_p);
  if (options.reset) BATON_TRY(m.reset_state());
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> uniforms;
  const std::vector<int64_t> one{1};
  if (sampled) {
    BATON_TRY(m.set_input(
        static_cast<size_t>(sig.sample_temperature),
        TensorView{const_cast<float*>(&options.temperature), DType::Float32, one, Device::cpu()}));
    BATON_TRY(m.set_input(
        static_cast<size_t>(sig.sample_top_p),
        TensorView{const_cast<float*>(&options.top_p), DType::Float32, one, Device::cpu()}));
  }

  const int64_t chunk_max = sig.max_new_tokens_per_call;
  IndexInput ids, cache_pos, pos_ids, mask;
  ids.index = sig.input_ids;
  cache_pos.index = sig.cache_position;
  pos_ids.index = sig.position_ids;
  mask.index = sig.attention_mask;
  for (IndexInput* in : {&ids, &cache_pos, &pos_ids, &mask}) {
    if (in->index < 0) continue;
    const runtime::TensorInfo info = m.input_info(static_cast<size_t>(in->index));
    in->dtype = info.dtype;
    in->sizes.assign(info.sizes.begin(), info.sizes.end());
  }
  if (mask.index >= 0) {
    mask.sizes = {1, sig.max_length};
    mask.resize(static_cast<size_t>(sig.max_length));
  }
  std::vector<uint8_t> last_row;  // the last position's logits, on the host

  GenerateResult result;
  // One call over `tokens` at positions [pos, pos + tokens.size()); returns the next token.
  auto call = [&](std::span<const int64_t> tokens, int64_t pos) -> Result<int64_t> {
    const auto t = static_cast<int64_t>(tokens.size());
    ids.sizes = {1, t};
    ids.resize(tokens.size());
    std::copy(tokens.begin(), tokens.end(), ids.wide.begin());
    const TensorView ids_view = ids.view();
    BATON_TRY(m.set_input(static_cast<size_t>(ids.index), ids_view));
    result.bytes_in += ids_view.nbytes();
    for (IndexInput* in : {&cache_pos, &pos_ids}) {
      if (in->index < 0) continue;
      if (in->sizes.size() == 2) {
        in->sizes = {1, t};
      } else {
        in->sizes = {t};
      }
      in->resize(tokens.size());
      for (int64_t i = 0; i < t; ++i) in->wide[static_cast<size_t>(i)] = pos + i;
      const TensorView view = in->view();
      BATON_TRY(m.set_input(static_cast<size_t>(in->index), view));
      result.bytes_in += view.nbytes();
    }
    if (sampled) {
      // One uniform number per position (only the last position's token is used).
      uniforms.resize(tokens.size());
      for (float& u : uniforms) u = uniform(rng);
      const std::vector<int64_t> sizes{1, t};
      BATON_TRY(m.set_input(static_cast<size_t>(sig.sample_uniform),
                            TensorView{uniforms.data(), DType::Float32, sizes, Device::cpu()}));
      result.bytes_in += uniforms.size() * sizeof(float);
    }
    if (mask.index >= 0) {
      for (int64_t j = 0; j < sig.max_length; ++j) mask.wide[static_cast<size_t>(j)] = j < pos + t;
      const TensorView view = mask.view();
      BATON_TRY(m.set_input(static_cast<size_t>(mask.index), view));
      result.bytes_in += view.nbytes();
    }
    BATON_TRY(m.execute());
    if (sig.next_tokens >= 0) {
      // The program chose: read its last position's token (8 bytes).
      const TensorView next = m.output(static_cast<size_t>(sig.next_tokens));
      BATON_CHECK_OR_RETURN(next.rank() == 2 && next.sizes[0] == 1 && next.sizes[1] == t,
                            InvalidArgument, "next_tokens is [{}], not [1, {}]",
                            fmt::join(next.sizes, ", "), t);
      int64_t token = 0;
      const std::vector<int64_t> one_token{1};
      BATON_TRY(runtime::copy_tensor(
          {&token, DType::Int64, one_token, Device::cpu()},
          {static_cast<int64_t*>(next.data) + (t - 1), DType::Int64, one_token, next.device}));
      result.bytes_out += sizeof(token);
      return token;
    }
    const TensorView logits = m.output(static_cast<size_t>(sig.logits));
    BATON_CHECK_OR_RETURN(
        logits.rank() == 3 && logits.sizes[0] == 1 && logits.sizes[1] == t, InvalidArgument,
        "the logits are [{}], not [1, {}, vocab]: is '{}' the logits of every "
        "new token?",
        fmt::join(logits.sizes, ", "), t, m.output_info(static_cast<size_t>(sig.logits)).name);
    const int64_t vocab = logits.sizes[2];
    const size_t row = static_cast<size_t>(vocab) * dtype_size(logits.dtype);
    last_row.resize(row);
    result.bytes_out += row;
    const std::vector<int64_t> row_sizes{vocab};
    BATON_TRY(
        runtime::copy_tensor({last_row.data(), logits.dtype, row_sizes, Device::cpu()},
                             {static_cast<uint8_t*>(logits.data) + static_cast<size_t>(t - 1) * row,
                              logits.dtype, row_sizes, logits.device}));
    // Greedy: the first of the largest logits, NaN counting as the largest (as torch.argmax,
    // transformers and the program's own ArgMax with --sample greedy pick).
    int64_t best = 0;
    float best_value = to_float(last_row.data(), logits.dtype, 0);
    for (int64_t v = 1; v < vocab && best_value == best_value; ++v) {
      const float x = to_float(last_row.data(), logits.dtype, v);
      if (x > best_value || x != x) {
        best_value = x;
        best = v;
      }
    }
    return best;
  };

  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  if (options.max_new_tokens == 0) return result;
  const Clock::time_point t0 = Clock::now();
  int64_t pos = start, next = 0;
  const auto prompt_len = static_cast<int64_t>(options.prompt.size());
  for (int64_t done = 0; done < prompt_len;) {
    const int64_t n = std::min(chunk_max, prompt_len - done);
    BATON_ASSIGN_OR_RETURN(next,
                           call(std::span<const int64_t>(options.prompt)
                                    .subspan(static_cast<size_t>(done), static_cast<size_t>(n)),
                                pos));
    ++result.prefill_calls;
    done += n;
    pos += n;
  }
  result.first_token_ms = ms_since(t0);
  result.tokens.push_back(next);
  const bool forcing = !options.forced.empty();
  const int64_t choices = forcing
                              ? std::min<int64_t>(options.max_new_tokens,
                                                  static_cast<int64_t>(options.forced.size()) + 1)
                              : options.max_new_tokens;
  while (static_cast<int64_t>(result.tokens.size()) < choices &&
         (forcing || next != options.eos_token)) {
    const Clock::time_point t1 = Clock::now();
    const int64_t fed = forcing ? options.forced[result.tokens.size() - 1] : next;
    BATON_ASSIGN_OR_RETURN(next, call(std::span<const int64_t>(&fed, 1), pos));
    ++pos;
    result.token_ms.push_back(ms_since(t1));
    result.tokens.push_back(next);
  }
  return result;
}

}  // namespace baton::extension
