// State on the GPU (issue 39, docs/state.md): a key/value cache compiled with --state for cuda:0
// lives in the device arena, is updated in place by the engine's scatter (no copy of it, no
// staging) and accumulates across calls exactly as a plain loop over the same updates does; small
// GPT-2 and LLaMA-style decoders generate on the GPU the tokens the CPU program generates (which
// tests/python/test_state.py checks against onnxruntime), on the default stream and on a green
// context of 16 SMs. Skipped without a GPU (label `gpu`).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "baton/cuda/green_context.h"
#include "baton/cuda/stream_guard.h"
#include "baton/extension/generate.h"
#include "baton/runtime/device_allocator.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

class StateGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    cuda::register_backend();
    cuda::register_compiler();
    if (cuda::devices().empty()) {
      GTEST_SKIP() << "no CUDA device here: GPU test skipped (run the bundle on a GPU host, see "
                      "docs/testing.md)";
    }
  }
};

constexpr int64_t kMax = 16;  // cache positions
constexpr int64_t kDim = 8;   // features per position

// present = ScatterND(past [kMax, kDim], pos [n, 1], rows [n, kDim]); y = 2 * present; n dynamic.
testing::OnnxBuilder cache_model() {
  testing::OnnxBuilder b(18);
  b.input("past", {kMax, kDim});
  b.input_named("pos", {-1, 1}, {"n"}, 7);
  b.input_named("rows", {-1, kDim}, {"n"}, 1);
  b.initializer("two", {1}, {2.0f});
  b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
  b.node("Mul", {"present", "two"}, {"y"}, "double");
  b.output("y", {kMax, kDim});
  b.output("present", {kMax, kDim});
  return b;
}

struct Compiled {
  std::shared_ptr<const runtime::Program> program;
  std::unique_ptr<runtime::Method> method;
};

Compiled compile_for(const std::vector<uint8_t>& onnx, const std::string& device,
                     std::vector<compiler::StatePair> state, bool state_auto,
                     std::vector<compiler::DimRange> dims, const std::string& precision = "fp32",
                     const std::string& path = "", const std::string& sample = "") {
  compiler::CompileOptions options;
  options.sample = sample;
  options.state = std::move(state);
  options.state_auto = state_auto;
  options.dims = std::move(dims);
  std::unique_ptr<compiler::BackendCompiler> backend;
  if (device != "cpu") {
    auto b = compiler::make_backend_compiler({*Device::parse(device), "", precision, {}});
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (!b.ok()) return {};
    backend = std::move(b).value();
    options.backends.push_back(backend.get());
  }
  auto compiled =
      path.empty() ? compiler::compile_bytes(onnx, options) : compiler::compile_file(path, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  if (!compiled.ok()) return {};
  auto program = runtime::Program::load_bytes(*compiled->serialize());
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  if (!program.ok()) return {};
  Compiled c;
  c.program = *program;
  auto method = c.program->load_method();
  EXPECT_TRUE(method.ok()) << method.status().to_string();
  if (method.ok()) c.method = std::move(method).value();
  return c;
}

uint64_t counter(const runtime::Method& m, const std::string& name) {
  uint64_t total = 0;
  for (size_t d = 0; d < m.num_delegates(); ++d) {
    for (const auto& [key, value] : m.delegate_counters(d)) total += key == name ? value : 0;
  }
  return total;
}

std::vector<float> to_host(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  EXPECT_TRUE(runtime::copy_tensor({out.data(), DType::Float32, t.sizes, Device::cpu()}, t).ok());
  return out;
}

TEST_F(StateGpuTest, ACacheOnTheGpuAccumulatesInPlaceAcrossCallsAndShapes) {
  Compiled c = compile_for(cache_model().bytes(), "cuda:0", {{"past", "present"}}, false,
                           {{"n", 1, 4, 0, {}}});
  ASSERT_NE(c.method, nullptr);
  runtime::Method& m = *c.method;
  ASSERT_EQ(m.num_states(), 1u);
  EXPECT_EQ(m.state_info(0).device, Device::cuda(0));
  EXPECT_EQ(m.state(0).device, Device::cuda(0));
  std::vector<float> cache(kMax * kDim, 0.0f);
  // Calls of 3, 1, 4 and 1 new rows at positions that wrap around the cache, some negative.
  const std::vector<std::vector<int64_t>> calls = {{0, 1, 2}, {3}, {4, 5, -1, 7}, {-3}};
  float base = 1.0f;
  for (const std::vector<int64_t>& positions : calls) {
    const auto n = static_cast<int64_t>(positions.size());
    std::vector<float> rows(static_cast<size_t>(n * kDim));
    for (float& v : rows) v = (base += 0.5f);
    const std::vector<int64_t> pos_sizes{n, 1}, row_sizes{n, kDim};
    ASSERT_TRUE(
        m.set_input(0, {const_cast<int64_t*>(positions.data()), DType::Int64, pos_sizes}).ok());
    ASSERT_TRUE(m.set_input(1, {rows.data(), DType::Float32, row_sizes}).ok());
    const Status st = m.execute();
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = positions[static_cast<size_t>(i)] < 0
                            ? positions[static_cast<size_t>(i)] + kMax
                            : positions[static_cast<size_t>(i)];
      std::memcpy(&cache[static_cast<size_t>(p * kDim)], &rows[static_cast<size_t>(i * kDim)],
                  kDim * sizeof(float));
    }
    EXPECT_EQ(to_host(m.state(0)), cache);
    std::vector<float> y = to_host(m.output(0));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 2.0f * cache[i]) << "element " << i;
  }
  EXPECT_EQ(counter(m, "staged_bytes"), 0u);
  ASSERT_TRUE(m.reset_state().ok());
  for (float v : to_host(m.state(0))) ASSERT_EQ(v, 0.0f);
}

// Reads a committed small decoder (tests/e2e/models/decode) as a path: its weights are external.
std::string decoder_path(const std::string& name) {
  return (fs::path(testing::source_dir()) / "tests/e2e/models/decode" / (name + ".onnx")).string();
}

// The decoders of tests/python/test_state.py with their caches as state: the GPU program, fp32,
// generates the CPU program's tokens for two prompts (after a reset), on the default stream and on
// a green context of 16 SMs, without staging anything.
TEST_F(StateGpuTest, SmallDecodersGenerateTheCpuTokens) {
  const std::vector<compiler::DimRange> dims = {{"batch", 1, 8, 0, {}},
                                                {"new_tokens", 1, 64, 0, {}}};
  auto green = cuda::GreenContext::create(0, 16);
  ASSERT_TRUE(green.ok()) << green.status().to_string();
  for (const std::string name :
       {"gpt2_index_put_full_dynamo", "gpt2_scatter_dynamo", "llama_index_put_full_dynamo"}) {
    SCOPED_TRACE(name);
    Compiled cpu = compile_for({}, "cpu", {}, true, dims, "fp32", decoder_path(name));
    Compiled gpu = compile_for({}, "cuda:0", {}, true, dims, "fp32", decoder_path(name));
    ASSERT_NE(cpu.method, nullptr);
    ASSERT_NE(gpu.method, nullptr);
    ASSERT_EQ(gpu.method->num_states(), 4u);  // two layers, keys and values
    for (size_t i = 0; i < gpu.method->num_states(); ++i) {
      EXPECT_EQ(gpu.method->state_info(i).device, Device::cuda(0));
    }
    for (const std::vector<int64_t>& prompt :
         {std::vector<int64_t>{5, 17, 42, 3, 99, 0, 61, 8}, std::vector<int64_t>{7}}) {
      extension::GenerateOptions options;
      options.prompt = prompt;
      options.max_new_tokens = 40;
      auto want = extension::generate(*cpu.method, options);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      auto got = extension::generate(*gpu.method, options);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->tokens, want->tokens);
      {
        cuda::StreamGuard guard(green->stream());
        auto on_green = extension::generate(*gpu.method, options);
        ASSERT_TRUE(on_green.ok()) << on_green.status().to_string();
        EXPECT_EQ(on_green->tokens, want->tokens) << "on a green context of 16 SMs";
      }
    }
    EXPECT_EQ(counter(*gpu.method, "staged_bytes"), 0u);
    EXPECT_EQ(counter(*gpu.method, "staged_calls"), 0u);
  }
}

// Prefill and decode share one dynamic method (docs/generate.md): each token count keeps its own
// CUDA graph, and the position is device data, so after the first sequence has captured the
// prompt's and the token's graphs, a whole second generation (a reset, a prompt of the same length,
// 48 tokens) captures nothing. The program also samples on the GPU: `--sample top-k=K` draws the
// CPU program's tokens from the same uniform numbers, and `--sample greedy` gives the host
// argmax's.
TEST_F(StateGpuTest, DecodeReplaysItsGraphAndSamplesOnTheGpu) {
  const std::vector<compiler::DimRange> dims = {{"batch", 1, 8, 0, {}},
                                                {"new_tokens", 1, 64, 0, {}}};
  for (const std::string name : {"gpt2_scatter_dynamo", "llama_index_put_full_dynamo"}) {
    SCOPED_TRACE(name);
    Compiled logits = compile_for({}, "cuda:0", {}, true, dims, "fp32", decoder_path(name));
    Compiled greedy =
        compile_for({}, "cuda:0", {}, true, dims, "fp32", decoder_path(name), "greedy");
    Compiled cpu_topk =
        compile_for({}, "cpu", {}, true, dims, "fp32", decoder_path(name), "top-k=20");
    Compiled gpu_topk =
        compile_for({}, "cuda:0", {}, true, dims, "fp32", decoder_path(name), "top-k=20");
    for (const Compiled* c : {&logits, &greedy, &cpu_topk, &gpu_topk})
      ASSERT_NE(c->method, nullptr);

    extension::GenerateOptions options;
    options.prompt = {5, 17, 42, 3, 99, 0, 61, 8};
    options.max_new_tokens = 48;
    auto host_argmax = extension::generate(*logits.method, options);
    ASSERT_TRUE(host_argmax.ok()) << host_argmax.status().to_string();
    auto first = extension::generate(*greedy.method, options);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    EXPECT_EQ(first->tokens, host_argmax->tokens) << "--sample greedy on the GPU";
    const uint64_t captures = counter(*greedy.method, "graph_captures");
    EXPECT_GT(captures, 0u) << "the engine replays CUDA graphs";
    auto second = extension::generate(*greedy.method, options);
    ASSERT_TRUE(second.ok()) << second.status().to_string();
    EXPECT_EQ(second->tokens, first->tokens);
    EXPECT_EQ(counter(*greedy.method, "graph_captures"), captures)
        << "a second sequence replays the prompt's and the token's graphs";

    for (const auto& [temperature, top_p, seed] :
         std::vector<std::tuple<float, float, uint64_t>>{{1.0f, 1.0f, 1}, {0.7f, 0.9f, 2}}) {
      options.temperature = temperature;
      options.top_p = top_p;
      options.seed = seed;
      auto want = extension::generate(*cpu_topk.method, options);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      auto got = extension::generate(*gpu_topk.method, options);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->tokens, want->tokens) << "temperature " << temperature << ", top-p " << top_p;
      EXPECT_NE(got->tokens, host_argmax->tokens) << "sampling is not greedy here";
    }
    EXPECT_EQ(counter(*gpu_topk.method, "staged_bytes"), 0u);
  }
}

}  // namespace
}  // namespace baton
