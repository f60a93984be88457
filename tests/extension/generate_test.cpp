// extension::generate (docs/generate.md) on the CPU with the committed small decoders
// (tests/e2e/models/decode): it produces the tokens a hand-written loop of calls over the same
// program produces (tests/python/test_state.py checks that loop against onnxruntime), continues a
// sequence without a reset, stops at an end token, and refuses by name what it cannot drive.
#include "baton/extension/generate.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/dtype.h"
#include "baton/runtime/program.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  std::shared_ptr<const runtime::Program> program;
  std::unique_ptr<runtime::Method> method;
};

Loaded load_decoder(const std::string& name, bool state, int64_t max_new = 64,
                    const std::string& sample = "", int64_t max_batch = 8) {
  register_builtins();
  compiler::CompileOptions options;
  options.state_auto = state;
  options.sample = sample;
  options.dims = {{"batch", 1, max_batch, 0, {}}, {"new_tokens", 1, max_new, 0, {}}};
  const std::string path =
      (fs::path(testing::source_dir()) / "tests/e2e/models/decode" / (name + ".onnx")).string();
  auto compiled = compiler::compile_file(path, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  if (!compiled.ok()) return {};
  auto program = runtime::Program::load_bytes(*compiled->serialize());
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  Loaded l;
  l.program = *program;
  auto method = l.program->load_method();
  EXPECT_TRUE(method.ok()) << method.status().to_string();
  if (method.ok()) l.method = std::move(method).value();
  return l;
}

// The loop generate() runs, written out over the method's inputs by name: the whole prompt in
// one call, then one token per call, the argmax of the last position's logits each time.
std::vector<int64_t> by_hand(runtime::Method& m, const std::vector<int64_t>& prompt, int64_t n) {
  EXPECT_TRUE(m.reset_state().ok());
  std::vector<int64_t> out;
  std::vector<int64_t> feed = prompt;
  int64_t pos = 0;
  const int64_t length = m.input_info(2).sizes[1];  // attention_mask [batch, max length]
  while (static_cast<int64_t>(out.size()) < n) {
    const auto t = static_cast<int64_t>(feed.size());
    std::vector<int64_t> positions(static_cast<size_t>(t)), mask(static_cast<size_t>(length));
    for (int64_t i = 0; i < t; ++i) positions[static_cast<size_t>(i)] = pos + i;
    for (int64_t j = 0; j < length; ++j) mask[static_cast<size_t>(j)] = j < pos + t;
    const std::vector<int64_t> ids_sizes{1, t}, pos_sizes{t}, mask_sizes{1, length};
    EXPECT_EQ(m.input_info(0).name, "input_ids");
    EXPECT_EQ(m.input_info(1).name, "cache_position");
    EXPECT_EQ(m.input_info(2).name, "attention_mask");
    EXPECT_TRUE(m.set_input(0, {feed.data(), DType::Int64, ids_sizes}).ok());
    EXPECT_TRUE(m.set_input(1, {positions.data(), DType::Int64, pos_sizes}).ok());
    EXPECT_TRUE(m.set_input(2, {mask.data(), DType::Int64, mask_sizes}).ok());
    const Status st = m.execute();
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return out;
    const TensorView logits = m.output(0);
    const int64_t vocab = logits.sizes[2];
    const float* last = logits.data_as<float>() + (t - 1) * vocab;
    out.push_back(std::max_element(last, last + vocab) - last);
    pos += t;
    feed = {out.back()};
  }
  return out;
}

TEST(GenerateTest, GreedyTokensAreTheHandWrittenLoops) {
  for (const std::string name :
       {"gpt2_index_put_full_dynamo", "gpt2_scatter_dynamo", "llama_index_put_full_dynamo"}) {
    SCOPED_TRACE(name);
    Loaded d = load_decoder(name, true);
    ASSERT_NE(d.method, nullptr);
    const std::vector<int64_t> prompt = {5, 17, 42, 3, 99, 0, 61, 8};
    const std::vector<int64_t> want = by_hand(*d.method, prompt, 40);
    ASSERT_EQ(want.size(), 40u);
    auto got = extension::generate(*d.method, {prompt, 40});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->tokens, want);
    EXPECT_EQ(got->prefill_calls, 1u);
    EXPECT_EQ(got->token_ms.size(), 39u);
    // Not degenerate: a random model that always said the same token would test little.
    std::vector<int64_t> distinct = want;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    EXPECT_GE(distinct.size(), 4u);
  }
}

// Teacher forcing: with the greedy tokens forced, the choices are the greedy tokens; with other
// tokens forced, each choice is the argmax after the prompt and the forced tokens before it, as a
// loop over the whole sequence so far computes it (and an early difference does not carry over).
TEST(GenerateTest, ForcedTokensAreFedAndEveryChoiceIsRecorded) {
  Loaded d = load_decoder("llama_index_put_full_dynamo", true, 64, "greedy");
  ASSERT_NE(d.method, nullptr);
  const std::vector<int64_t> prompt = {5, 17, 42, 3};
  auto greedy = extension::generate(*d.method, {prompt, 20});
  ASSERT_TRUE(greedy.ok()) << greedy.status().to_string();
  extension::GenerateOptions forced_options;
  forced_options.prompt = prompt;
  forced_options.max_new_tokens = 20;
  forced_options.forced.assign(greedy->tokens.begin(), greedy->tokens.end() - 1);
  auto same = extension::generate(*d.method, forced_options);
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_EQ(same->tokens, greedy->tokens);

  forced_options.forced = {7, 7, 99, 2, 9, 31, 64, 1};
  auto got = extension::generate(*d.method, forced_options);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->tokens.size(), 9u) << "one choice after the prompt and one per forced token";
  for (size_t k = 0; k < got->tokens.size(); ++k) {
    // The choice after prompt + forced[0..k): the first greedy token of that sequence.
    std::vector<int64_t> seq = prompt;
    seq.insert(seq.end(), forced_options.forced.begin(), forced_options.forced.begin() + k);
    auto one = extension::generate(*d.method, {seq, 1});
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    EXPECT_EQ(got->tokens[k], one->tokens[0]) << "position " << k;
  }
  forced_options.forced = {3, -1};
  auto refused = extension::generate(*d.method, forced_options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("forced token -1 is negative"), std::string::npos);
}

// A batch range of one size (--dim batch=1..1) is a static batch of 1: the caches' inputs and
// updates keep one shape, so --state auto binds them (it refused them when batch stayed a
// symbol on the inputs and shape inference folded the updates to 1), and the tokens are the
// dynamic-batch program's.
TEST(GenerateTest, ABatchRangeOfOneSizeIsStatic) {
  Loaded fixed = load_decoder("gpt2_scatter_dynamo", true, 64, "greedy", 1);
  Loaded ranged = load_decoder("gpt2_scatter_dynamo", true, 64, "greedy", 8);
  ASSERT_NE(fixed.method, nullptr);
  ASSERT_NE(ranged.method, nullptr);
  EXPECT_EQ(fixed.method->num_states(), 4u);
  EXPECT_EQ(fixed.method->input_dims(0)[0].expr, "") << "the batch is static";
  EXPECT_EQ(fixed.method->input_info(0).sizes[0], 1);
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  auto want = extension::generate(*ranged.method, {prompt, 24});
  auto got = extension::generate(*fixed.method, {prompt, 24});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->tokens, want->tokens);
}

// --sample greedy: the program's output is next_tokens (its ArgMax), and generation reads one
// int64 per call; the tokens are the ones chosen on the host from the logits.
TEST(GenerateTest, GreedySamplingInsideTheProgramGivesTheSameTokens) {
  for (const std::string name : {"gpt2_index_put_full_dynamo", "llama_index_put_full_dynamo"}) {
    SCOPED_TRACE(name);
    Loaded logits = load_decoder(name, true);
    Loaded sampled = load_decoder(name, true, 64, "greedy");
    ASSERT_NE(logits.method, nullptr);
    ASSERT_NE(sampled.method, nullptr);
    ASSERT_EQ(sampled.method->num_outputs(), 1u);
    EXPECT_EQ(sampled.method->output_info(0).name, "next_tokens");
    EXPECT_EQ(sampled.method->output_info(0).dtype, DType::Int64);
    auto sig = extension::decoder_signature(*sampled.method);
    ASSERT_TRUE(sig.ok()) << sig.status().to_string();
    EXPECT_EQ(sig->next_tokens, 0);
    EXPECT_EQ(sig->logits, -1);
    const std::vector<int64_t> prompt = {9, 8, 7, 6, 5};
    auto want = extension::generate(*logits.method, {prompt, 40});
    auto got = extension::generate(*sampled.method, {prompt, 40});
    ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
    EXPECT_EQ(got->tokens, want->tokens);
  }
}

// What --sample top-k=K computes, written out on the host from the logits program's last row:
// the K largest logits (ties by the lower index), softmax(logits / temperature), the prefix whose
// probability before it is below top_p, and the first kept token whose cumulative probability
// exceeds u * the kept mass. `u` comes from the generator generate() seeds: mt19937_64(seed),
// one uniform float per new position, the last position's used.
int64_t draw(const float* row, int64_t vocab, int64_t k, float temperature, float top_p, float u) {
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  std::vector<float> p(static_cast<size_t>(k));
  float top = row[order[0]] / temperature, sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += (p[j] = std::exp(row[order[j]] / temperature - top));
  float cdf = 0, mass = 0;
  int64_t kept = 0;
  for (int64_t j = 0; j < k; ++j) {
    p[j] /= sum;
    if (cdf < top_p) {
      mass += p[j];
      ++kept;
    }
    cdf += p[j];
  }
  float kcdf = 0;
  for (int64_t j = 0; j < kept; ++j) {
    kcdf += p[j];
    if (kcdf > u * mass) return order[j];
  }
  return order[kept - 1];
}

// Top-k sampling inside the program against draw() over the logits program, fed the same tokens:
// every token equal, for several temperatures, top-p values and seeds; top-k=1 and a tiny
// temperature are greedy; one seed gives one sequence, another seed another.
TEST(GenerateTest, TopKSamplingDrawsWhatTheLogitsSay) {
  const std::string name = "gpt2_index_put_full_dynamo";
  Loaded logits = load_decoder(name, true);
  Loaded sampled = load_decoder(name, true, 64, "top-k=8");
  ASSERT_NE(logits.method, nullptr);
  ASSERT_NE(sampled.method, nullptr);
  auto sig = extension::decoder_signature(*sampled.method);
  ASSERT_TRUE(sig.ok()) << sig.status().to_string();
  EXPECT_GE(sig->sample_uniform, 0);
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5, 9};
  struct Setting {
    float temperature, top_p;
    uint64_t seed;
  };
  for (const Setting& st : {Setting{1.0f, 1.0f, 1}, Setting{0.7f, 0.9f, 2}, Setting{2.0f, 0.5f, 3},
                            Setting{1.3f, 1.0f, 4}}) {
    SCOPED_TRACE(fmt::format("temperature {} top_p {} seed {}", st.temperature, st.top_p, st.seed));
    extension::GenerateOptions o;
    o.prompt = prompt;
    o.max_new_tokens = 30;
    o.temperature = st.temperature;
    o.top_p = st.top_p;
    o.seed = st.seed;
    auto got = extension::generate(*sampled.method, o);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    // Replay: the logits program fed the sampled tokens, each draw from its logits.
    runtime::Method& m = *logits.method;
    ASSERT_TRUE(m.reset_state().ok());
    std::mt19937_64 rng(st.seed);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    std::vector<int64_t> feed = prompt, want;
    int64_t pos = 0;
    while (want.size() < got->tokens.size()) {
      const auto t = static_cast<int64_t>(feed.size());
      std::vector<int64_t> positions(static_cast<size_t>(t)), mask(64);
      for (int64_t i = 0; i < t; ++i) positions[static_cast<size_t>(i)] = pos + i;
      for (int64_t j = 0; j < 64; ++j) mask[static_cast<size_t>(j)] = j < pos + t;
      float u = 0;
      for (int64_t i = 0; i < t; ++i) u = uniform(rng);
      const std::vector<int64_t> ids_sizes{1, t}, pos_sizes{t}, mask_sizes{1, 64};
      ASSERT_TRUE(m.set_input(0, {feed.data(), DType::Int64, ids_sizes}).ok());
      ASSERT_TRUE(m.set_input(1, {positions.data(), DType::Int64, pos_sizes}).ok());
      ASSERT_TRUE(m.set_input(2, {mask.data(), DType::Int64, mask_sizes}).ok());
      ASSERT_TRUE(m.execute().ok());
      const TensorView l = m.output(0);
      const int64_t vocab = l.sizes[2];
      want.push_back(
          draw(l.data_as<float>() + (t - 1) * vocab, vocab, 8, st.temperature, st.top_p, u));
      pos += t;
      feed = {got->tokens[want.size() - 1]};
    }
    EXPECT_EQ(got->tokens, want);
  }
  // Different seeds, different sequences; the same seed, the same one.
  extension::GenerateOptions a;
  a.prompt = prompt;
  a.max_new_tokens = 30;
  a.temperature = 1.5f;
  a.seed = 10;
  extension::GenerateOptions b = a;
  b.seed = 11;
  auto ra = extension::generate(*sampled.method, a);
  auto ra2 = extension::generate(*sampled.method, a);
  auto rb = extension::generate(*sampled.method, b);
  ASSERT_TRUE(ra.ok() && ra2.ok() && rb.ok());
  EXPECT_EQ(ra->tokens, ra2->tokens);
  EXPECT_NE(ra->tokens, rb->tokens);
  // A vanishing temperature is greedy.
  auto greedy = extension::generate(*logits.method, {prompt, 30});
  extension::GenerateOptions cold = a;
  cold.temperature = 1e-4f;
  auto rc = extension::generate(*sampled.method, cold);
  ASSERT_TRUE(greedy.ok() && rc.ok());
  EXPECT_EQ(rc->tokens, greedy->tokens);
  // Bad settings are refused by name.
  extension::GenerateOptions bad = a;
  bad.temperature = 0;
  auto refused = extension::generate(*sampled.method, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("temperature must be > 0"), std::string::npos);
}

// The sampler on float16 logits (a model exported in fp16) computes in float32, and a tiny
// temperature (1e-30, which would overflow logits / temperature) still picks each row's largest.
TEST(GenerateTest, SamplingTakesHalfLogitsAndTinyTemperatures) {
  register_builtins();
  testing::OnnxBuilder b(18);
  b.input("x", {2, 3, 16}, 10);  // float16
  b.node("Identity", {"x"}, {"logits"}, "head");
  b.output("logits", {2, 3, 16});
  compiler::CompileOptions options;
  options.sample = "top-k=4";
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto program = runtime::Program::load_bytes(*compiled->serialize());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method();
  ASSERT_TRUE(method.ok());
  runtime::Method& m = **method;
  ASSERT_EQ(m.num_inputs(), 4u);  // x, sample_temperature, sample_top_p, sample_uniform
  std::mt19937 rng(3);
  std::vector<uint16_t> x(2 * 3 * 16);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xf[i] = half_to_float(float_to_half(std::uniform_real_distribution<float>(-4, 4)(rng)));
    x[i] = float_to_half(xf[i]);
  }
  const std::vector<int64_t> xs{2, 3, 16}, one{1}, us{2, 3};
  float temperature = 1e-30f, top_p = 1.0f;
  std::vector<float> u(6, 0.5f);
  ASSERT_TRUE(m.set_input(0, {x.data(), DType::Float16, xs}).ok());
  ASSERT_TRUE(m.set_input(1, {&temperature, DType::Float32, one}).ok());
  ASSERT_TRUE(m.set_input(2, {&top_p, DType::Float32, one}).ok());
  ASSERT_TRUE(m.set_input(3, {u.data(), DType::Float32, us}).ok());
  const Status st = m.execute();
  ASSERT_TRUE(st.ok()) << st.to_string();
  const TensorView next = m.output(0);
  ASSERT_EQ(next.numel(), 6);
  for (int64_t r = 0; r < 6; ++r) {
    const float* row = xf.data() + r * 16;
    EXPECT_EQ(next.data_as<int64_t>()[r], std::max_element(row, row + 16) - row) << "row " << r;
  }
}

TEST(GenerateTest, TopOneSamplingIsGreedy) {
  Loaded logits = load_decoder("llama_index_put_full_dynamo", true);
  Loaded top1 = load_decoder("llama_index_put_full_dynamo", true, 64, "top-k=1");
  ASSERT_NE(logits.method, nullptr);
  ASSERT_NE(top1.method, nullptr);
  extension::GenerateOptions o;
  o.prompt = {7, 7, 2};
  o.max_new_tokens = 30;
  o.temperature = 3.0f;
  o.seed = 99;
  auto a = extension::generate(*logits.method, o);
  auto b = extension::generate(*top1.method, o);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().to_string();
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(GenerateTest, SamplingWithoutLogitsIsRefusedByName) {
  register_builtins();
  compiler::CompileOptions options;
  options.sample = "greedy";
  // A classifier: its one output is [batch, classes], not logits per token.
  const std::string path =
      (fs::path(testing::source_dir()) / "tests/e2e/models/real/dynamo18_mobilenet.onnx").string();
  auto compiled = compiler::compile_file(path, options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("--sample greedy chooses tokens from the logits"),
            std::string::npos)
      << compiled.status().message();

  // Logits [1, 2, 16] through a Neg, at an opset: what top-k refuses.
  auto logits_model = [](int opset, const std::string& output) {
    testing::OnnxBuilder b(opset);
    b.input("x", {1, 2, 16});
    b.node("Neg", {"x"}, {output}, "head");
    b.output(output, {1, 2, 16});
    return b.bytes();
  };
  auto refused = [&](int opset, const std::string& output, const std::string& sample,
                     const std::string& message) {
    compiler::CompileOptions o;
    o.sample = sample;
    auto c = compiler::compile_bytes(logits_model(opset, output), o);
    ASSERT_FALSE(c.ok()) << sample;
    EXPECT_EQ(c.status().code(), Error::InvalidArgument);
    EXPECT_NE(c.status().message().find(message), std::string::npos) << c.status().message();
  };
  refused(18, "logits", "top-k=17", "--sample top-k=17: the vocabulary has only 16 tokens");
  refused(18, "logits", "top-k=2x", "--sample top-k=2x: expected top-k=K with K from 1 to 1024");
  refused(12, "logits", "top-k=4", "needs a model of opset 13 or later (it has 12)");
  refused(18, "next_tokens", "greedy", "adds the output 'next_tokens', which the model has");
  compiler::CompileOptions fine;
  fine.sample = "top-k=16";
  EXPECT_TRUE(compiler::compile_bytes(logits_model(18, "logits"), fine).ok());
}

TEST(GenerateTest, APromptLongerThanOneCallIsPrefilledInChunks) {
  // new_tokens up to 4: a prompt of 10 takes three calls and must give the one-call tokens.
  Loaded one = load_decoder("gpt2_index_put_full_dynamo", true);
  Loaded chunked = load_decoder("gpt2_index_put_full_dynamo", true, 4);
  ASSERT_NE(one.method, nullptr);
  ASSERT_NE(chunked.method, nullptr);
  const std::vector<int64_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto a = extension::generate(*one.method, {prompt, 12});
  auto b = extension::generate(*chunked.method, {prompt, 12});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->prefill_calls, 3u);
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(GenerateTest, ContinuesWithoutResetAndStopsAtTheEndToken) {
  Loaded d = load_decoder("llama_index_put_full_dynamo", true);
  ASSERT_NE(d.method, nullptr);
  const std::vector<int64_t> prompt = {11, 22, 33};
  auto whole = extension::generate(*d.method, {prompt, 10});
  ASSERT_TRUE(whole.ok());
  // The same sequence in two parts: 4 tokens, then the 4th fed back from position 6.
  auto first = extension::generate(*d.method, {prompt, 4});
  ASSERT_TRUE(first.ok());
  extension::GenerateOptions more;
  more.prompt = {first->tokens.back()};
  more.max_new_tokens = 6;
  more.reset = false;
  more.start_position = static_cast<int64_t>(prompt.size()) + 3;
  auto second = extension::generate(*d.method, more);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  std::vector<int64_t> joined = first->tokens;
  joined.insert(joined.end(), second->tokens.begin(), second->tokens.end());
  EXPECT_EQ(joined, whole->tokens);
  // Stopping: the end token is the 3rd one generated, so 3 come back.
  extension::GenerateOptions stop;
  stop.prompt = prompt;
  stop.max_new_tokens = 10;
  stop.eos_token = whole->tokens[2];
  auto stopped = extension::generate(*d.method, stop);
  ASSERT_TRUE(stopped.ok());
  const auto first_eos =
      std::find(whole->tokens.begin(), whole->tokens.end(), stop.eos_token) - whole->tokens.begin();
  EXPECT_EQ(stopped->tokens,
            std::vector<int64_t>(whole->tokens.begin(), whole->tokens.begin() + first_eos + 1));
}

TEST(GenerateTest, RefusesWhatItCannotDriveByName) {
  Loaded plain = load_decoder("gpt2_scatter_dynamo", false);
  ASSERT_NE(plain.method, nullptr);
  auto none = extension::generate(*plain.method, {{1, 2}, 4});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--state auto"), std::string::npos)
      << none.status().message();
  Loaded d = load_decoder("gpt2_scatter_dynamo", true);
  ASSERT_NE(d.method, nullptr);
  auto empty = extension::generate(*d.method, {{}, 4});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("prompt is empty"), std::string::npos);
  // The exports' cache holds 64 positions: 3 + 64 - 1 do not fit.
  auto too_long = extension::generate(*d.method, {{1, 2, 3}, 64});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("do not fit the model's cache of 64"),
            std::string::npos)
      << too_long.status().message();
  auto negative = extension::generate(*d.method, {{1, -2}, 4});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("negative"), std::string::npos);
}

}  // namespace
}  // namespace baton
