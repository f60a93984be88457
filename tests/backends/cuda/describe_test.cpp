// `baton inspect` of GPU programs without a GPU: engines built for sm_90 are described by the cuda
// backend's describe_blob hook through the extension library (include/baton/extension/inspect.h),
// and a damaged engine is described as its error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "baton/extension/inspect.h"
#include "baton/runtime/backend.h"
#include "testing/onnx_builder.h"
#include "testing/program_builder.h"

namespace baton {
namespace {

using nlohmann::json;

// x[8, 64] -> MatMul + Add + Relu -> MatMul -> y[8, 10], compiled for cuda:DEVICE on sm_90.
std::vector<uint8_t> gpu_program(int device) {
  testing::OnnxBuilder b(20);
  b.input("x", {8, 64});
  b.initializer("w", {64, 96}, std::vector<float>(64 * 96, 0.01f));
  b.initializer("bias", {96}, std::vector<float>(96, 0.1f));
  b.initializer("w2", {96, 10}, std::vector<float>(96 * 10, 0.02f));
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Add", {"h", "bias"}, {"hb"}, "bias");
  b.node("Relu", {"hb"}, {"a"}, "act");
  b.node("MatMul", {"a", "w2"}, {"y"}, "mm2");
  b.output("y", {8, 10});
  register_builtins();
  cuda::register_compiler();
  auto backend = compiler::make_backend_compiler(
      {Device::cuda(static_cast<int16_t>(device)), "sm_90", "fp32"});
  EXPECT_TRUE(backend.ok()) << backend.status().to_string();
  if (!backend.ok()) return {};
  compiler::CompileOptions options;
  options.backends.push_back(backend->get());
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  if (!compiled.ok()) return {};
  return compiled->serialize().value();
}

json describe(const std::vector<uint8_t>& bytes) {
  auto program = runtime::Program::load_bytes(bytes);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  if (!program.ok()) return json();
  auto text = extension::describe_program_json(**program);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? json::parse(*text) : json();
}

TEST(CudaDescribeTest, EnginesBuiltForSm90AreDescribedWithoutAGpu) {
  cuda::register_backend();  // registers the hook; no GPU is touched
  for (int device : {0, 1}) {
    const std::vector<uint8_t> bytes = gpu_program(device);
    ASSERT_FALSE(bytes.empty());
    const json j = describe(bytes);
    const json& delegates = j["methods"][0]["delegates"];
    ASSERT_EQ(delegates.size(), 1u) << j.dump(2);
    const json& d = delegates[0];
    const std::string label = fmt::format("cuda:{}", device);
    EXPECT_EQ(d["backend"], "cuda");
    EXPECT_EQ(d["target_device"], label);
    EXPECT_EQ(d["engine_device"], label);
    EXPECT_EQ(d["sm_arch"], "sm_90");
    const json& e = d["engine"];
    ASSERT_TRUE(e.is_object()) << d.dump(2);
    EXPECT_FALSE(e.contains("error")) << e.dump(2);
    EXPECT_EQ(e["device"], label);
    EXPECT_EQ(e["sm_arch"], "sm_90");
    EXPECT_EQ(e["precision"], "fp32");
    for (const char* key : {"cuda_version", "cublaslt_version", "cudnn_version", "nvrtc_version",
                            "scratch_bytes", "workspace_bytes", "weights_bytes", "cubin_bytes"}) {
      EXPECT_TRUE(e.contains(key)) << key;
    }
    // The weights of both MatMuls and the bias live in the engine.
    EXPECT_GE(e["weights_bytes"].get<uint64_t>(), (64u * 96 + 96 + 96 * 10) * 4);
    ASSERT_EQ(e["bindings"].size(), 2u);
    EXPECT_EQ(e["bindings"][0]["io"], "input");
    EXPECT_EQ(e["bindings"][0]["shape"], json::parse("[8, 64]"));
    EXPECT_EQ(e["bindings"][1]["io"], "output");
    EXPECT_EQ(e["bindings"][1]["shape"], json::parse("[8, 10]"));
    ASSERT_GE(e["steps"].size(), 2u);
    int gemms = 0;
    for (const json& s : e["steps"]) {
      ASSERT_TRUE(s.contains("kind") && s.contains("what")) << s.dump();
      if (s["kind"] == "gemm") {
        ++gemms;
        EXPECT_NE(s["what"].get<std::string>().find("cuBLASLt m="), std::string::npos);
      }
    }
    EXPECT_EQ(gemms, 2) << e["steps"].dump(2);
  }
}

// The hook sees the blob alone: a damaged engine is described as the parser's error (inspect must
// still show the rest of the program), and the labels it would have given are null.
TEST(CudaDescribeTest, ADamagedEngineIsDescribedAsItsError) {
  cuda::register_backend();
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {4});
  const int y = b.tensor("y", DType::Float32, {4});
  const int d =
      b.delegate("cuda", {{"target_device", "cuda:0"}}, std::vector<uint8_t>(64, 0x5a), "cuda_0");
  b.delegate_call(d, {x}, {y});
  b.inputs({x});
  b.outputs({y});
  const json j = describe(b.bytes());
  const json& del = j["methods"][0]["delegates"][0];
  ASSERT_TRUE(del.contains("engine")) << del.dump(2);
  ASSERT_TRUE(del["engine"].contains("error")) << del.dump(2);
  EXPECT_NE(del["engine"]["error"].get<std::string>().find("InvalidProgram"), std::string::npos)
      << del.dump(2);
  EXPECT_TRUE(del["engine_device"].is_null());
  EXPECT_TRUE(del["sm_arch"].is_null());
  EXPECT_EQ(del["target_device"], "cuda:0");
}

}  // namespace
}  // namespace baton
