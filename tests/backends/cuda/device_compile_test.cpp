// Device-aware compilation with the real CUDA engine builder, no GPU needed (engines for sm_90):
// target_device labels come from each engine's header (or verbatim from --target-device), the
// propagation pass puts every delegate-boundary tensor on its partition's device, transfers are
// exactly the copies needed, and arenas are planned per device. Everything is checked in the
// serialized program, the way a runtime sees it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "backends/cuda/engine_format.h"
#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/cuda/compiler.h"
#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "testing/aligned_bytes.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"

namespace baton {
namespace {

using testing::OnnxBuilder;

struct Options {
  std::vector<int> devices = {0};  // round robin
  std::optional<std::string> target_device;
  compiler::MethodIo io = compiler::MethodIo::Host;
  size_t max_partition_nodes = 0;
};

Result<std::vector<uint8_t>> compile(const OnnxBuilder& model, const Options& o) {
  register_builtins();
  cuda::register_compiler();
  std::vector<std::unique_ptr<compiler::BackendCompiler>> builders;
  for (int d : o.devices) {
    BATON_ASSIGN_OR_RETURN(auto b, compiler::make_backend_compiler(
                                       {Device::cuda(static_cast<int16_t>(d)), "sm_90", "fp32"}));
    builders.push_back(std::move(b));
  }
  compiler::CompileOptions options;
  for (const auto& b : builders) {
    options.backends.push_back(b.get());
    options.targets.round_robin.push_back(b->device());
  }
  options.target_device = o.target_device;
  options.io = o.io;
  options.max_partition_nodes = o.max_partition_nodes;
  BATON_ASSIGN_OR_RETURN(auto compiled, compiler::compile_bytes(model.bytes(), options));
  return compiled.serialize();
}

// What the serialized program says about devices.
struct Placement {
  std::vector<std::string> labels;         // per delegate: target_device spec
  std::vector<int> engine_devices;         // per delegate: engine header device_id
  std::vector<std::string> arena_devices;  // per arena
  // Every tensor read or written by a delegate call, with its device.
  std::vector<std::pair<int, std::string>> boundary;        // (delegate, device)
  std::vector<std::pair<std::string, std::string>> copies;  // (from, to)
  std::vector<std::string> input_devices, output_devices;
};

std::string device_of(const fb::Method& m, int value) {
  const fb::Tensor* t = m.values()->Get(value)->value_as_Tensor();
  return format::device_of(*t).to_string();
}

Placement inspect(const std::vector<uint8_t>& bytes) {
  Placement p;
  auto file = format::ProgramFile::parse(bytes);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return p;
  const fb::Method& m = *file->program().methods()->Get(0);
  for (uint32_t d = 0; m.delegates() && d < m.delegates()->size(); ++d) {
    const fb::Delegate* del = m.delegates()->Get(d);
    for (const auto* cs : *del->compile_specs()) {
      if (cs->key()->str() == "target_device")
        p.labels.emplace_back(cs->value()->begin(), cs->value()->end());
    }
    const testing::AlignedBytes blob(file->segment(del->blob_segment()));
    auto engine = cuda::EngineBlob::parse(blob.span());
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    p.engine_devices.push_back(engine.ok() ? engine->header().device_id : -1);
  }
  for (uint32_t a = 0; m.arenas() && a < m.arenas()->size(); ++a) {
    p.arena_devices.push_back(format::device_of(*m.arenas()->Get(a)).to_string());
  }
  for (const fb::Instruction* ins : *m.instructions()) {
    if (const auto* call = ins->instruction_as_DelegateCall()) {
      for (int v : *call->inputs()) p.boundary.emplace_back(call->delegate(), device_of(m, v));
      for (int v : *call->outputs()) p.boundary.emplace_back(call->delegate(), device_of(m, v));
    } else if (const auto* c = ins->instruction_as_DeviceCopy()) {
      p.copies.emplace_back(device_of(m, c->src()), device_of(m, c->dst()));
    }
  }
  for (int v : *m.inputs()) p.input_devices.push_back(device_of(m, v));
  for (int v : *m.outputs()) p.output_devices.push_back(device_of(m, v));
  return p;
}

std::vector<float> weights(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
  return v;
}

// One GPU partition; and GPU, CPU-only op, GPU.
// Three GPU nodes (a Tanh is not folded into the GEMM before it).
OnnxBuilder gpu_model() {
  return testing::two_matmuls(4, 16, 16, 8, testing::Middle::Tanh, weights(256), weights(128));
}
OnnxBuilder split_model() {
  return testing::two_matmuls(4, 16, 16, 8, testing::Middle::CpuOnly, weights(256), weights(128));
}

TEST(DeviceCompileTest, Cuda0IsByteIdenticalWhetherTheLabelIsDerivedOrSpelledOut) {
  auto derived = compile(gpu_model(), {});
  Options spelled;
  spelled.target_device = "cuda:0";
  auto explicit_label = compile(gpu_model(), spelled);
  ASSERT_TRUE(derived.ok()) << derived.status().to_string();
  ASSERT_TRUE(explicit_label.ok()) << explicit_label.status().to_string();
  EXPECT_EQ(*derived, *explicit_label);
  EXPECT_EQ(inspect(*derived).labels, std::vector<std::string>{"cuda:0"});
}

TEST(DeviceCompileTest, BuiltForCuda3EveryBoundaryTensorAndTheHeaderSay3) {
  Options o;
  o.devices = {3};
  auto bytes = compile(gpu_model(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const Placement p = inspect(*bytes);
  EXPECT_EQ(p.labels, std::vector<std::string>{"cuda:3"});
  EXPECT_EQ(p.engine_devices, std::vector<int>{3});
  ASSERT_EQ(p.boundary.size(), 2u);
  for (const auto& [delegate, device] : p.boundary) EXPECT_EQ(device, "cuda:3");
  EXPECT_EQ(p.arena_devices, (std::vector<std::string>{"cpu", "cuda:3"}));
  EXPECT_EQ(p.copies, (std::vector<std::pair<std::string, std::string>>{{"cpu", "cuda:3"},
                                                                        {"cuda:3", "cpu"}}));
}

TEST(DeviceCompileTest, ExplicitTargetDeviceIsUsedVerbatimForEveryPartition) {
  Options o;
  o.devices = {0};
  o.target_device = "cuda:5";
  auto bytes = compile(split_model(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const Placement p = inspect(*bytes);
  EXPECT_EQ(p.labels, (std::vector<std::string>{"cuda:5", "cuda:5"}));
  EXPECT_EQ(p.engine_devices, (std::vector<int>{0, 0}));  // the engines are still for GPU 0
  for (const auto& [delegate, device] : p.boundary) EXPECT_EQ(device, "cuda:5");
  // Loading it cross-checks label and engine and refuses, naming both (when the GPU is there;
  // without one the arena on cuda:5 already cannot be allocated).
}

TEST(DeviceCompileTest, PartitionsOnTwoDevicesCarryTwoLabels) {
  Options o;
  o.devices = {0, 1};
  auto bytes = compile(split_model(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const Placement p = inspect(*bytes);
  EXPECT_EQ(p.labels, (std::vector<std::string>{"cuda:0", "cuda:1"}));
  EXPECT_EQ(p.engine_devices, (std::vector<int>{0, 1}));
  for (const auto& [delegate, device] : p.boundary)
    EXPECT_EQ(device, fmt::format("cuda:{}", delegate));
  EXPECT_EQ(p.arena_devices, (std::vector<std::string>{"cpu", "cuda:0", "cuda:1"}));
}

TEST(DeviceCompileTest, ACpuOpBetweenGpuPartitionsGetsExactlyTheCopiesItNeeds) {
  auto bytes = compile(split_model(), {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(inspect(*bytes).copies,
            (std::vector<std::pair<std::string, std::string>>{{"cpu", "cuda:0"},  // x in
                                                              {"cuda:0", "cpu"},  // h to the CPU op
                                                              {"cpu", "cuda:0"},  // p back
                                                              {"cuda:0", "cpu"}}));  // y out
}

TEST(DeviceCompileTest, AdjacentPartitionsOnOneDeviceHandOverInDeviceMemory) {
  Options o;
  o.max_partition_nodes = 1;  // three partitions in a row on cuda:0
  auto bytes = compile(gpu_model(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const Placement p = inspect(*bytes);
  EXPECT_EQ(p.labels.size(), 3u);
  EXPECT_EQ(p.copies, (std::vector<std::pair<std::string, std::string>>{{"cpu", "cuda:0"},
                                                                        {"cuda:0", "cpu"}}));
}

TEST(DeviceCompileTest, AdjacentPartitionsOnTwoDevicesCopyDeviceToDevice) {
  Options o;
  o.devices = {0, 1};
  o.max_partition_nodes = 2;
  auto bytes = compile(gpu_model(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(inspect(*bytes).copies,
            (std::vector<std::pair<std::string, std::string>>{
                {"cpu", "cuda:0"}, {"cuda:0", "cuda:1"}, {"cuda:1", "cpu"}}));
}

TEST(DeviceCompileTest, EveryOutputOfAMultiOutputCallIsAnnotated) {
  OnnxBuilder b;
  b.input("x", {4, 16});
  b.initializer("w1", {16, 16}, weights(256));
  b.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("Tanh", {"h"}, {"t"}, "tanh");
  b.output("r", {4, 16});
  b.output("t", {4, 16});
  b.output("h", {4, 16});
  Options o;
  o.devices = {2};
  o.io = compiler::MethodIo::Device;
  auto bytes = compile(b, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const Placement p = inspect(*bytes);
  ASSERT_EQ(p.boundary.size(), 4u);  // x in; r, t, h out
  for (const auto& [delegate, device] : p.boundary) EXPECT_EQ(device, "cuda:2");
  EXPECT_EQ(p.output_devices, (std::vector<std::string>{"cuda:2", "cuda:2", "cuda:2"}));
}

TEST(DeviceCompileTest, IoDeviceKeepsMethodInputsAndOutputsOnTheGpu) {
  Options o;
  o.io = compiler::MethodIo::Device;
  auto bytes = compile(gpu_model(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const Placement p = inspect(*bytes);
  EXPECT_TRUE(p.copies.empty());
  EXPECT_EQ(p.input_devices, std::vector<std::string>{"cuda:0"});
  EXPECT_EQ(p.output_devices, std::vector<std::string>{"cuda:0"});
  EXPECT_EQ(p.arena_devices, std::vector<std::string>{"cuda:0"});
}

TEST(DeviceCompileTest, ATargetDeviceThatIsNotADeviceIsRefused) {
  Options o;
  o.target_device = "gpu7";
  auto bytes = compile(gpu_model(), o);
  ASSERT_EQ(bytes.code(), Error::InvalidArgument);
  EXPECT_NE(bytes.status().message().find("'gpu7' is not a device"), std::string::npos);
}

TEST(DeviceCompileTest, AProgramWithItsEngineBlobRemovedIsRejectedAtLoad) {
  auto bytes = compile(gpu_model(), {});
  ASSERT_TRUE(bytes.ok());
  auto file = format::ProgramFile::parse(*bytes);
  ASSERT_TRUE(file.ok());
  fb::ProgramT program;
  file->program().UnPackTo(&program);
  program.methods[0]->delegates[0]->blob_segment = -1;
  std::vector<std::span<const uint8_t>> segments;
  for (uint32_t i = 0; i < file->program().segments()->size(); ++i)
    segments.push_back(file->segment(i));
  auto damaged = format::serialize_program(program, segments);
  ASSERT_TRUE(damaged.ok());
  auto loaded = runtime::Program::load_bytes(*damaged);
  ASSERT_EQ(loaded.code(), Error::InvalidProgram);
  EXPECT_NE(loaded.status().message().find("has no blob"), std::string::npos)
      << loaded.status().to_string();
}

// Issue 38's models that run whole on the GPU, in their small committed configurations
// (tests/e2e/models/zoo, both exporters): a compile for cuda:0 (sm_90, no GPU needed) with device
// I/O is one GPU engine, with no node left on the CPU and no copy, in fp32 and fp16. (The
// full-size DenseNet-121, RegNetY, EfficientNet-B0 and ConvNeXt-T are checked the same way on the
// GPU host, bench/gpu_models.py; their small configurations are too large to commit.) The LSTM
// tagger is not among them: LSTM has no CUDA lowering, by design a named fallback.
TEST(DeviceCompileTest, ZooModelsCompileToOneGpuEngineWithNoCpuKernelAndNoCopy) {
  register_builtins();
  cuda::register_compiler();
  const std::filesystem::path dir =
      std::filesystem::path(testing::source_dir()) / "tests/e2e/models/zoo";
  // Each model's input shape (the manifest's): the TorchScript exports' batch is symbolic.
  const std::map<std::string, std::vector<int64_t>> shapes = {{"whisper", {1, 80, 200}},
                                                              {"unet", {1, 3, 32, 32}},
                                                              {"swin", {1, 3, 64, 64}},
                                                              {"espcn", {1, 3, 16, 16}}};
  for (const auto& [model, shape] : shapes) {
    for (const char* exporter : {"torchscript17", "dynamo18", "dynamo20"}) {
      const std::filesystem::path path = dir / fmt::format("{}_{}.onnx", exporter, model);
      ASSERT_TRUE(std::filesystem::exists(path)) << path;
      for (const char* precision : {"fp32", "fp16"}) {
        SCOPED_TRACE(fmt::format("{} {} {}", exporter, model, precision));
        auto backend =
            compiler::make_backend_compiler({Device::cuda(0), "sm_90", precision}).value();
        compiler::CompileOptions options;
        options.backends.push_back(backend.get());
        options.io = compiler::MethodIo::Device;
        if (std::string_view(exporter) == "torchscript17")
          options.input_shapes = {{"input", shape}};
        auto compiled = compiler::compile_file(path.string(), options);
        ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
        const compiler::CompileSummary& s = compiled->summary();
        EXPECT_EQ(s.delegate_calls, 1u);
        EXPECT_EQ(s.kernel_calls, 0u);
        EXPECT_EQ(s.copies, 0u);
        for (const compiler::CpuFallback& f : s.fallbacks) {
          ADD_FAILURE() << "left on the CPU: " << f.op << " '" << f.node << "': " << f.reason;
        }
      }
    }
  }
}

}  // namespace
}  // namespace baton
