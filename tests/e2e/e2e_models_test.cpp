// End to end: ONNX models (onnx.helper models in both torch exporter styles, and real
// torch.onnx.export outputs) compiled by Baton and run on the CPU agree with onnxruntime.
//
// Each case directory holds manifest.json plus CASE.onnx, CASE.input_<i>.npy and
// CASE.output_<i>.npy (onnxruntime's outputs), written by make_models.py or
// export_torch_models.py.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/extension/module.h"
#include "baton/extension/npy.h"
#include "testing/alloc/counting_allocator.h"
#include "testing/model_cases.h"
#include "testing/paths.h"
#include "testing/random.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

struct CaseResult {
  std::string name;
  double worst_error = 0.0;
};

// Compiles and runs every case in `dir`, once per entry of `threads` (MethodOptions::threads; 0:
// every CPU); returns the cases it ran, with the worst error over the runs.
std::vector<CaseResult> run_cases(const fs::path& dir, std::vector<unsigned> threads = {0}) {
  std::vector<CaseResult> results;
  auto cases = testing::read_model_cases(dir);
  EXPECT_TRUE(cases.ok()) << cases.status().to_string();
  if (!cases.ok()) return results;
  for (const testing::ModelCase& c : *cases) {
    SCOPED_TRACE(c.name);
    compiler::CompileOptions options;
    options.input_shapes = c.shapes;
    auto compiled = compiler::compile_file(c.model.string(), options);
    EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
    if (!compiled.ok()) continue;
    auto bytes = compiled->serialize();
    auto program = runtime::Program::load_bytes(*bytes);
    EXPECT_TRUE(program.ok()) << program.status().to_string();
    if (!program.ok()) continue;
    CaseResult result{c.name, 0.0};
    bool ran = true;
    for (unsigned t : threads) {
      SCOPED_TRACE(fmt::format("{} threads", t));
      runtime::MethodOptions method_options;
      method_options.threads = t;
      auto module = extension::Module::from_program(*program, "forward", method_options);
      EXPECT_TRUE(module.ok()) << module.status().to_string();
      if (!module.ok()) {
        ran = false;
        continue;
      }
      auto outputs = module->run(c.inputs);
      EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
      if (!outputs.ok()) {
        ran = false;
        continue;
      }
      EXPECT_EQ(outputs->size(), c.outputs);
      for (size_t o = 0; o < std::min(c.outputs, outputs->size()); ++o) {
        auto ref = c.reference(o);
        EXPECT_TRUE(ref.ok()) << ref.status().to_string();
        const Tensor& got = (*outputs)[o];
        if (!ref.ok() || got.sizes() != ref->sizes()) {
          ADD_FAILURE() << "output " << o << ": got " << dtype_name(got.dtype()) << " "
                        << shape_to_string(got.sizes());
          continue;
        }
        const double err = testing::relative_error(got, *ref);
        EXPECT_LE(err, c.tolerance) << "output " << o;
        result.worst_error = std::max(result.worst_error, err);
      }
    }
    if (ran) results.push_back(result);
  }
  return results;
}

TEST(EndToEndTest, GeneratedModelsMatchOnnxRuntime) {
  register_builtins();
  const auto results = run_cases(testing::e2e_models_dir());
  EXPECT_GE(results.size(), 6u);
  for (const auto& r : results) {
    RecordProperty(r.name, fmt::format("{:.3g}", r.worst_error));
    std::printf("  %-28s relative error %.3g\n", r.name.c_str(), r.worst_error);
  }
}

// References: onnxruntime's outputs for float32 exports; PyTorch's float32 outputs on the same
// weights for exports made after model.half() (onnxruntime's CPU provider has no float16 MatMul),
// within twice PyTorch's own float16 error.
TEST(EndToEndTest, TorchExportedModelsMatchTheirReferences) {
  register_builtins();
  const fs::path dir = fs::path(testing::source_dir()) / "tests/e2e/models";
  const auto results = run_cases(dir);
  // Both exporters, several sizes: see tests/e2e/models/manifest.json.
  EXPECT_GE(results.size(), 2u);
  bool torchscript = false, dynamo = false;
  for (const auto& r : results) {
    torchscript = torchscript || r.name.find("torchscript") != std::string::npos;
    dynamo = dynamo || r.name.find("dynamo") != std::string::npos;
    std::printf("  %-28s relative error %.3g\n", r.name.c_str(), r.worst_error);
  }
  EXPECT_TRUE(torchscript);
  EXPECT_TRUE(dynamo);
}

// The model families of issue 10 in small configurations with random weights
// (tests/e2e/export_real_models.py), each through both exporters (TorchScript opset 17, dynamo
// opsets 18 and 20), against PyTorch's outputs (onnxruntime agrees with them to ~1e-7, recorded
// in the manifest): ResNet, MobileNetV3, SqueezeNet 1.1, ViT, BERT and GPT-2. Each runs on one
// thread and on three (convolutions, GEMMs and attention split over MethodOptions::threads).
TEST(EndToEndTest, RealModelFamiliesMatchPyTorch) {
  register_builtins();
  const fs::path dir = fs::path(testing::source_dir()) / "tests/e2e/models/real";
  const auto results = run_cases(dir, {1, 3});
  std::set<std::string> seen;
  for (const auto& r : results) {
    seen.insert(r.name);
    std::printf("  %-28s relative error %.3g\n", r.name.c_str(), r.worst_error);
  }
  for (const char* family : {"resnet", "mobilenet", "squeezenet", "vit", "bert", "gpt2"}) {
    for (const char* exporter : {"torchscript17", "dynamo18", "dynamo20"}) {
      EXPECT_TRUE(seen.count(std::string(exporter) + "_" + family)) << exporter << " " << family;
    }
  }
}

// Issue 38's LSTM tagger (embedding, a two-layer bidirectional LSTM, Linear) and ESPCN (tanh
// convolutions, PixelShuffle as DepthToSpace), a small Swin (windowed attention over a padded
// grid: the MatMul whose batches needed scratch their sum did not, which segfaulted before
// 1522b86), and issue 41's small T5 encoder (Pow(x, 2) RMS norm, relative position buckets) and
// LLaMA-style stack (RMSNorm, rotary embeddings, grouped queries, SiLU gate), a small Whisper
// encoder (1-D convolutions) and a small UNet (ConvTranspose, bilinear Resize), exported from
// PyTorch through both exporters (tests/e2e/models/zoo; the dynamo exporter fails on T5),
// against PyTorch's outputs on one thread and three;
// tests/python/test_zoo_cpu.py runs them against onnxruntime too.
TEST(EndToEndTest, ZooModelsMatchPyTorch) {
  register_builtins();
  const fs::path dir = fs::path(testing::source_dir()) / "tests/e2e/models/zoo";
  const auto results = run_cases(dir, {1, 3});
  std::set<std::string> seen;
  for (const auto& r : results) {
    seen.insert(r.name);
    std::printf("  %-28s relative error %.3g\n", r.name.c_str(), r.worst_error);
  }
  for (const char* model : {"lstm_tagger", "espcn", "swin", "llama", "whisper", "unet"}) {
    for (const char* exporter : {"torchscript17", "dynamo18", "dynamo20"}) {
      EXPECT_TRUE(seen.count(std::string(exporter) + "_" + model)) << exporter << " " << model;
    }
  }
  EXPECT_TRUE(seen.count("torchscript17_t5"));
}

TEST(EndToEndTest, CompiledMlpExecutesWithoutAllocating) {
  if (!testing::counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  register_builtins();
  const fs::path dir = testing::e2e_models_dir();
  compiler::CompileOptions options;
  options.input_shapes = {{"input", {8, 64}}};
  auto compiled = compiler::compile_file((dir / "ts17_mlp_gelu.onnx").string(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto program = runtime::Program::load_bytes(*compiled->serialize());
  ASSERT_TRUE(program.ok());
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok());
  auto x = extension::read_npy((dir / "ts17_mlp_gelu.input_0.npy").string());
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE((*method)->set_input(0, x->view()).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*method)->execute().ok());
  int64_t allocations = 0;
  {
    testing::CountAllocations count;
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*method)->execute().ok());
    allocations = count.count();
  }
  EXPECT_EQ(allocations, 0);
}

}  // namespace
}  // namespace baton
