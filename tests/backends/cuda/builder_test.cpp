// The engine builder needs no GPU: these tests build engines for sm_90 in CI and check what the
// builder decided (fusion, epilogues, views, casts) by reading the blobs back, and that NVRTC
// compiles every generated kernel in every precision.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>

#include "backends/cuda/builder/codegen.h"
#include "backends/cuda/builder/engine_builder.h"
#include "backends/cuda/builder/lowering.h"
#include "backends/cuda/builder/nvrtc_compile.h"
#include "backends/cuda/builder/ops/registry.h"
#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/competing_workload.h"
#include "baton/cuda/compiler.h"
#include "compiler/onnx_import.h"
#include "compiler/passes.h"
#include "dense_block_model.h"
#include "format/program_file.h"
#include "testing/aligned_bytes.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"

namespace baton {
namespace {

using testing::OnnxBuilder;

struct Built {
  std::vector<uint8_t> program;
  compiler::CompileSummary summary;
  std::vector<std::vector<uint8_t>> blobs;  // one per delegate, 64-byte aligned copies
  std::vector<std::map<std::string, std::string>> specs;
};

Result<Built> build_bytes(const std::vector<uint8_t>& model, const std::string& precision,
                          int device = 0, std::vector<compiler::InputShape> shapes = {},
                          std::vector<std::string> disabled_passes = {},
                          std::vector<std::string> cuda_options = {}) {
  register_builtins();
  cuda::register_compiler();
  auto backend = compiler::make_backend_compiler(
      {Device::cuda(static_cast<int16_t>(device)), "sm_90", precision, std::move(cuda_options)});
  if (!backend.ok()) return backend.status();
  compiler::CompileOptions options;
  options.backends.push_back(backend->get());
  options.input_shapes = std::move(shapes);
  options.disabled_passes = std::move(disabled_passes);
  BATON_ASSIGN_OR_RETURN(auto compiled, compiler::compile_bytes(model, options));
  Built b;
  BATON_ASSIGN_OR_RETURN(b.program, compiled.serialize());
  b.summary = compiled.summary();
  BATON_ASSIGN_OR_RETURN(auto file, format::ProgramFile::parse(b.program));
  const auto* m = file.program().methods()->Get(0);
  for (uint32_t d = 0; m->delegates() && d < m->delegates()->size(); ++d) {
    const auto blob = file.segment(m->delegates()->Get(d)->blob_segment());
    b.blobs.emplace_back(blob.begin(), blob.end());
    std::map<std::string, std::string> specs;
    for (const auto* cs : *m->delegates()->Get(d)->compile_specs()) {
      specs[cs->key()->str()] = std::string(cs->value()->begin(), cs->value()->end());
    }
    b.specs.push_back(specs);
  }
  return b;
}

Result<Built> build(const OnnxBuilder& model, const std::string& precision, int device = 0,
                    std::vector<std::string> cuda_options = {}) {
  return build_bytes(model.bytes(), precision, device, {}, {}, std::move(cuda_options));
}

cuda::EngineBlob parse_blob(const std::vector<uint8_t>& bytes) {
  // The blob views the bytes it parses: keep the aligned copies for the whole test.
  static std::vector<std::unique_ptr<testing::AlignedBytes>> keep;
  keep.push_back(std::make_unique<testing::AlignedBytes>(bytes));
  return cuda::EngineBlob::parse(keep.back()->span()).value();
}

OnnxBuilder mlp(bool relu) {
  OnnxBuilder b(20);
  b.input("x", {8, 64});
  std::vector<float> w(64 * 96, 0.01f), bias(96, 0.1f), w2(96 * 10, 0.02f);
  b.initializer("w", {64, 96}, w);
  b.initializer("bias", {96}, bias);
  b.initializer("w2", {96, 10}, w2);
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Add", {"h", "bias"}, {"hb"}, "bias");
  b.node(relu ? "Relu" : "Gelu", {"hb"}, {"a"}, "act");
  b.node("MatMul", {"a", "w2"}, {"y"}, "mm2");
  b.output("y", {8, 10});
  return b;
}

TEST(EngineBuilderTest, BiasAndReluFuseIntoOneGemm) {
  auto built = build(mlp(/*relu=*/true), "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  ASSERT_EQ(built->blobs.size(), 1u);
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.steps().size(), 2u);  // GEMM(bias+relu), GEMM
  EXPECT_EQ(blob.steps()[0].kind, static_cast<uint32_t>(cuda::StepKind::Gemm));
  EXPECT_EQ(blob.steps()[0].gemm.epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::BiasRelu));
  EXPECT_EQ(blob.steps()[1].gemm.epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::None));
  // The last GEMM writes the engine's output binding directly.
  EXPECT_EQ(blob.steps()[1].gemm.d.space, static_cast<uint32_t>(cuda::Space::Binding));
  EXPECT_TRUE(blob.cubin().empty());  // nothing left for a generated kernel
}

// A MatMul's bias Add is fused in one place, the optimizer's matmul-add pass (a Linear with its
// bias, cuBLASLt's bias epilogue): with the pass disabled the lowering leaves the Add to an
// elementwise kernel instead of absorbing it a second way.
TEST(EngineBuilderTest, MatMulBiasIsFusedByThePassOnly) {
  auto fused = build(mlp(/*relu=*/true), "fp32");
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  const cuda::EngineBlob with_pass = parse_blob(fused->blobs[0]);
  ASSERT_EQ(with_pass.steps().size(), 2u);
  EXPECT_EQ(with_pass.steps()[0].gemm.epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::BiasRelu));

  auto unfused = build_bytes(mlp(/*relu=*/true).bytes(), "fp32", 0, {}, {"matmul-add"});
  ASSERT_TRUE(unfused.ok()) << unfused.status().to_string();
  const cuda::EngineBlob without = parse_blob(unfused->blobs[0]);
  size_t gemms = 0, kernels = 0;
  for (const cuda::StepRecord& r : without.steps()) {
    if (r.kind == static_cast<uint32_t>(cuda::StepKind::Gemm)) {
      ++gemms;
      EXPECT_EQ(r.gemm.epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::None));
    }
    kernels += r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel);
  }
  EXPECT_EQ(gemms, 2u);
  EXPECT_EQ(kernels, 1u) << "the bias Add and the Relu, one fused kernel";
}

// In fp32 and tf32 engines (and in fp16 with the build option gemm_gelu=kernel), the erf-GELU of
// the Linear (the fuse-linear pass folds it in) is a generated epilogue kernel after cuBLASLt's
// bias epilogue: cuBLASLt's GELU is the tanh form.
TEST(EngineBuilderTest, ErfGeluBecomesOneFusedKernelAfterTheBiasEpilogue) {
  for (const char* precision : {"fp32", "tf32", "fp16"}) {
    SCOPED_TRACE(precision);
    const bool fp16 = std::string_view(precision) == "fp16";
    auto built =
        build(mlp(/*relu=*/false), precision, 0,
              fp16 ? std::vector<std::string>{"gemm_gelu=kernel"} : std::vector<std::string>{});
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    const auto steps = blob.steps();
    // fp16: a cast of the float32 input first.
    const size_t first = fp16 ? 1 : 0;
    ASSERT_EQ(steps.size(), first + 3);
    EXPECT_EQ(steps[first].kind, static_cast<uint32_t>(cuda::StepKind::Gemm));
    EXPECT_EQ(steps[first].gemm.epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::Bias));
    EXPECT_EQ(steps[first + 1].kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
    EXPECT_NE(std::string(blob.kernel_name(steps[first + 1].kernel.kernel)).find("epilogue"),
              std::string::npos);
    EXPECT_FALSE(blob.cubin().empty());
  }
}

// In fp16 and bf16 engines the GEMM, its bias and the erf-GELU after it are one cuDNN matmul step
// (StepKind::Matmul, epilogue bias+gelu) writing the GELU's output, read by the next GEMM; no
// GELU kernel is left. fp32 engines keep the kernel.
TEST(EngineBuilderTest, ErfGeluIsTheEpilogueOfACudnnMatmulIn16BitEngines) {
  auto fp32 = build(mlp(/*relu=*/false), "fp32");
  ASSERT_TRUE(fp32.ok()) << fp32.status().to_string();
  for (const cuda::StepRecord& r : parse_blob(fp32->blobs[0]).steps())
    EXPECT_NE(r.kind, static_cast<uint32_t>(cuda::StepKind::Matmul));
  for (const char* precision : {"fp16", "bf16"}) {
    SCOPED_TRACE(precision);
    auto built = build(mlp(/*relu=*/false), precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    const auto steps = blob.steps();
    size_t matmuls = 0, fused = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const cuda::StepRecord& r = steps[i];
      if (r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel)) {
        fused += std::string(blob.kernel_name(r.kernel.kernel)).find("fused") != std::string::npos;
      }
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Matmul)) continue;
      ++matmuls;
      EXPECT_EQ(r.gemm.epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::BiasGeluErf));
      EXPECT_EQ(r.gemm.m, 96);  // the hidden width
      EXPECT_EQ(r.gemm.n, 8);   // the rows
      EXPECT_EQ(r.gemm.k, 64);
      ASSERT_LT(i + 1, steps.size());
      ASSERT_EQ(steps[i + 1].kind, static_cast<uint32_t>(cuda::StepKind::Gemm));
      EXPECT_EQ(steps[i + 1].gemm.b.offset, r.gemm.d.offset) << "the next GEMM reads the GELU";
      EXPECT_EQ(steps[i + 1].gemm.b.space, r.gemm.d.space);
    }
    EXPECT_EQ(matmuls, 1u);
    EXPECT_EQ(fused, 0u);
  }
}

// A model exported in fp16: MatMul(A, B) + bias, erf-GELU, MatMul. When A or B is the caller's
// fp16 buffer, read in place, the GEMM stays on cuBLASLt with a GELU kernel after it (cuDNN's
// plans have no fallback for a caller's unaligned memory); when both come from inside the engine
// it is a cuDNN matmul.
TEST(EngineBuilderTest, ErfGeluMatmulNeverReadsTheCallersBufferInPlace) {
  constexpr int kFloat16 = 10;
  auto model = [](bool a_in_place, bool b_in_place) {
    OnnxBuilder b(20);
    b.input("x", {8, 64}, kFloat16);
    b.input("w", {64, 96}, kFloat16);
    b.initializer("bias32", {96}, std::vector<float>(96, 0.1f));
    b.initializer("w2_32", {96, 10}, std::vector<float>(96 * 10, 0.02f));
    for (const char* c : {"bias", "w2"}) {
      auto& cast = b.node("Cast", {std::string(c) + (c[0] == 'b' ? "32" : "_32")}, {c});
      OnnxBuilder::attr_int(cast, "to", kFloat16);  // folded: fp16 constants
    }
    b.node("Tanh", {"x"}, {"xt"}, "x_inside");
    b.node("Tanh", {"w"}, {"wt"}, "w_inside");
    b.node("MatMul", {a_in_place ? "x" : "xt", b_in_place ? "w" : "wt"}, {"h"}, "mm");
    b.node("Add", {"h", "bias"}, {"hb"}, "bias_add");
    b.node("Gelu", {"hb"}, {"g"}, "gelu");
    b.node("MatMul", {"g", "w2"}, {"y"}, "mm2");
    b.output("y", {8, 10}, kFloat16);
    return b;
  };
  for (const auto& [a_in_place, b_in_place] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(fmt::format("A in place {}, B in place {}", a_in_place, b_in_place));
    auto built = build(model(a_in_place, b_in_place), "fp16");
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    size_t matmuls = 0;
    for (const cuda::StepRecord& r : parse_blob(built->blobs[0]).steps())
      matmuls += r.kind == static_cast<uint32_t>(cuda::StepKind::Matmul);
    EXPECT_EQ(matmuls, a_in_place || b_in_place ? 0u : 1u);
  }
}

// From sm_90 on, every generated kernel waits for the grid before it as its first statement and
// says so in its step (programmatic dependent launch may then start it early); for older GPUs
// neither.
TEST(EngineBuilderTest, KernelsForSm90WaitForTheirPredecessorFirst) {
  const std::string dir = ::testing::TempDir() + "/baton_pdl_source";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* arch : {"sm_90", "sm_80"}) {
    SCOPED_TRACE(arch);
    register_builtins();
    cuda::register_compiler();
    // The GELU as a kernel of ours, and the generated source written out to be read below.
    auto backend = compiler::make_backend_compiler(
        {Device::cuda(0), arch, "fp16", {"gemm_gelu=kernel", "dump_kernel_source=" + dir}});
    ASSERT_TRUE(backend.ok()) << backend.status().to_string();
    compiler::CompileOptions options;
    options.backends.push_back(backend->get());
    auto compiled = compiler::compile_bytes(mlp(/*relu=*/false).bytes(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
    auto bytes = compiled->serialize();
    ASSERT_TRUE(bytes.ok());
    auto file = format::ProgramFile::parse(*bytes);
    ASSERT_TRUE(file.ok());
    const auto* m = file->program().methods()->Get(0);
    const auto seg = file->segment(m->delegates()->Get(0)->blob_segment());
    const cuda::EngineBlob blob = parse_blob(std::vector<uint8_t>(seg.begin(), seg.end()));
    const bool sm90 = std::string(arch) == "sm_90";
    int kernels = 0;
    for (const cuda::StepRecord& r : blob.steps()) {
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel)) continue;
      ++kernels;
      EXPECT_EQ(r.kernel.flags & cuda::kKernelWaitsForPredecessor, sm90 ? 1u : 0u);
    }
    EXPECT_GE(kernels, 2);  // the input cast and the GELU at least
    std::string source;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(f.path());
      source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    size_t waits = 0;
    for (size_t at = 0;
         (at = source.find(") {\n  baton_wait_for_predecessor();\n", at)) != std::string::npos;
         ++at) {
      ++waits;
    }
    EXPECT_EQ(waits, sm90 ? static_cast<size_t>(kernels) : 0u) << source;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
}

// Scaled-dot-product attention as the exporters write it (K through a Transpose), then an output
// projection.
OnnxBuilder attention_block() {
  OnnxBuilder b(17);
  b.input("q", {2, 4, 8});
  b.input("k", {2, 4, 8});
  b.input("v", {2, 4, 8});
  std::vector<float> w(8 * 8, 0.05f), bias(8, 0.1f);
  b.initializer("w", {8, 8}, w);
  b.initializer("bias", {8}, bias);
  auto& t = b.node("Transpose", {"k"}, {"kt"}, "kt");
  OnnxBuilder::attr_ints(t, "perm", {0, 2, 1});
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  auto& sm = b.node("Softmax", {"s"}, {"p"}, "softmax");
  OnnxBuilder::attr_int(sm, "axis", -1);
  b.node("MatMul", {"p", "v"}, {"a"}, "pv");
  b.node("MatMul", {"a", "w"}, {"h"}, "proj");
  b.node("Add", {"h", "bias"}, {"y"}, "proj_bias");
  b.output("y", {2, 4, 8});
  return b;
}

// Every pass runs when compiling for the GPU: each writes an op the GPU lowers (pipeline_test has
// a target that does not lower one). The block's one Linear and attention are rewritten.
TEST(EngineBuilderTest, EveryPassRunsForTheGpu) {
  auto built = build(attention_block(), "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  EXPECT_EQ(built->summary.kernel_calls, 0u) << "a node was left to the CPU";
  for (const auto& [name, changed] : built->summary.passes) {
    EXPECT_GE(changed, 0) << name << " did not run";
    if (name == "attention" || name == "matmul-add") {
      EXPECT_EQ(changed, 1) << name;
    }
  }
}

// Without cuDNN's fused attention (fp32 and tf32 engines), attention is three steps: a batched
// GEMM into float32 scores, one masked-softmax kernel, a batched GEMM P V.
TEST(EngineBuilderTest, AttentionIsTwoBatchedGemmsAroundOneSoftmaxKernelInFp32AndTf32) {
  for (const char* precision : {"fp32", "tf32"}) {
    SCOPED_TRACE(precision);
    auto built = build(attention_block(), precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    ASSERT_EQ(blob.steps().size(), 4u);  // S GEMM, softmax, P V GEMM, projection
    const cuda::GemmStep& qk = blob.steps()[0].gemm;
    EXPECT_EQ(blob.steps()[0].kind, static_cast<uint32_t>(cuda::StepKind::Gemm));
    EXPECT_EQ(qk.batch, 2u);
    EXPECT_EQ(qk.trans_a, 1);  // K [Sk, D] read transposed, no Transpose kernel
    EXPECT_EQ(qk.d_dtype, static_cast<uint8_t>(DType::Float32));
    const auto& softmax = blob.steps()[1];
    ASSERT_EQ(softmax.kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
    EXPECT_NE(blob.kernel_name(softmax.kernel.kernel).find("attention_softmax"), std::string::npos);
    EXPECT_EQ(blob.steps()[2].kind, static_cast<uint32_t>(cuda::StepKind::Gemm));
    EXPECT_EQ(blob.steps()[2].gemm.batch, 2u);
  }
}

// fp16 and bf16 engines run attention as one cuDNN fused attention step.
TEST(EngineBuilderTest, AttentionIsOneCudnnStepInFp16AndBf16) {
  for (auto [precision, dtype] : {std::pair{"fp16", DType::Float16}, {"bf16", DType::BFloat16}}) {
    SCOPED_TRACE(precision);
    auto built = build(attention_block(), precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    // q, k and v converted to the operand dtype, the attention, the projection.
    ASSERT_EQ(blob.steps().size(), 5u);
    const cuda::StepRecord& r = blob.steps()[3];
    ASSERT_EQ(r.kind, static_cast<uint32_t>(cuda::StepKind::Sdpa));
    const cuda::SdpaStep& a = r.sdpa;
    EXPECT_EQ(a.dtype, static_cast<uint8_t>(dtype));
    EXPECT_EQ(a.mask, static_cast<uint8_t>(cuda::SdpaMask::None));
    EXPECT_EQ(a.b, 2u);
    EXPECT_EQ(a.h, 1u);  // rank 3: one head
    EXPECT_EQ(a.sq, 4u);
    EXPECT_EQ(a.sk, 4u);
    EXPECT_EQ(a.d, 8u);
    EXPECT_EQ(a.q_strides[2], 8);  // row-major [2, 4, 8]
    EXPECT_FLOAT_EQ(a.scale, 1.0f);
    EXPECT_EQ(blob.steps()[4].kind, static_cast<uint32_t>(cuda::StepKind::Gemm));
    EXPECT_EQ(built->blobs.size(), 1u);
  }
}

// Whether byte range `inner` lies inside `outer` (the same buffer).
bool inside(const cuda::BufferRef& inner, const cuda::BufferRef& outer) {
  return inner.space == outer.space && inner.index == outer.index && inner.offset >= outer.offset &&
         inner.offset + inner.bytes <= outer.offset + outer.bytes;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A committed small real model (tests/e2e/models/real), e.g. "dynamo18_mobilenet".
std::string real_model(const std::string& name) {
  return fmt::format("{}/tests/e2e/models/real/{}.onnx", testing::source_dir(), name);
}

// Its graph as Baton imports it (before optimization).
Result<compiler::Graph> import_model(const std::string& path) {
  register_builtins();
  return compiler::import_onnx_file(path, {});
}

// How many nodes of the imported model at `path` are `op_type` (0 when it does not import).
size_t count_nodes(const std::string& path, std::string_view op_type) {
  auto graph = import_model(path);
  EXPECT_TRUE(graph.ok()) << graph.status().to_string();
  if (!graph.ok()) return 0;
  size_t count = 0;
  for (const compiler::IrNode& n : graph->nodes) count += n.op_type == op_type;
  return count;
}

// ViT, BERT and GPT-2 as the dynamo exporter writes them (small configurations): in fp16, each
// attention is one cuDNN step that reads Q, K and V where the one projection GEMM wrote them (the
// Split, Gather, Reshape and Transpose nodes in between are views) and writes its output where
// the output projection reads it (the Transpose after it costs nothing). In fp32 none is.
TEST(EngineBuilderTest, AttentionOfRealFamiliesReadsTheProjectionsThroughViews) {
  for (const char* family : {"vit", "bert", "gpt2"}) {
    for (const char* precision : {"fp16", "fp32"}) {
      SCOPED_TRACE(fmt::format("{} {}", family, precision));
      const std::vector<uint8_t> model = read_file(real_model(fmt::format("dynamo18_{}", family)));
      ASSERT_FALSE(model.empty());
      auto built = build_bytes(model, precision);
      ASSERT_TRUE(built.ok()) << built.status().to_string();
      ASSERT_EQ(built->blobs.size(), 1u);
      const cuda::EngineBlob parsed = parse_blob(built->blobs[0]);
      const cuda::EngineBlob* blob = &parsed;
      const auto steps = blob->steps();
      size_t attentions = 0;
      for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].kind != static_cast<uint32_t>(cuda::StepKind::Sdpa)) continue;
        ++attentions;
        const cuda::SdpaStep& a = steps[i].sdpa;
        // Q, K and V are one GEMM's result (ViT's and GPT-2's own fused projection, BERT's
        // three fused by the qkv pass).
        bool from_one_gemm = false;
        for (size_t j = 0; j < i; ++j) {
          from_one_gemm |= steps[j].kind == static_cast<uint32_t>(cuda::StepKind::Gemm) &&
                           inside(a.q, steps[j].gemm.d) && inside(a.k, steps[j].gemm.d) &&
                           inside(a.v, steps[j].gemm.d);
        }
        EXPECT_TRUE(from_one_gemm) << "step " << i << " reads a copy or several GEMMs";
        // Between the last GEMM and the attention: at most the mask's bias kernel.
        for (size_t j = i;
             j-- > 0 && steps[j].kind != static_cast<uint32_t>(cuda::StepKind::Gemm);) {
          ASSERT_EQ(steps[j].kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
          EXPECT_NE(blob->kernel_name(steps[j].kernel.kernel).find("attention_bias"),
                    std::string::npos)
              << blob->kernel_name(steps[j].kernel.kernel);
        }
        ASSERT_LT(i + 1, steps.size());
        ASSERT_EQ(steps[i + 1].kind, static_cast<uint32_t>(cuda::StepKind::Gemm))
            << "the output projection reads the attention's output as it is";
        EXPECT_TRUE(inside(a.o, steps[i + 1].gemm.b) || inside(steps[i + 1].gemm.b, a.o));
      }
      EXPECT_EQ(attentions, std::string(precision) == "fp16" ? 2u : 0u);
    }
  }
}

// Kernels of an engine whose name contains `what` ("where", "concat").
size_t kernels_named(const cuda::EngineBlob& blob, std::string_view what) {
  size_t count = 0;
  for (const cuda::StepRecord& r : blob.steps()) {
    count += r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
             std::string_view(blob.kernel_name(r.kernel.kernel)).find(what) != std::string::npos;
  }
  return count;
}

// BERT and GPT-2 as the TorchScript exporter writes them (small configurations, two layers) repeat
// work in every layer that the engine does once or not at all: BERT's mask becomes an additive
// bias through a Where with each layer's own constants (the cse pass merges them, so one where
// kernel makes the bias of both layers, and cuDNN reads it where the Where wrote it: no
// attention_bias copy); the chain before it has a Cast of a bool to bool, an Expand to the same
// shape and a Gather of every position in order, which the identity pass makes views (without
// it, one more gather kernel and an expand kernel); GPT-2 writes a Concat of the key and of
// the value alone in every layer (views: no kernel), and a Reshape between each GEMM and its GELU
// and between each attention and its Transpose (seen through: no GELU or gather kernel).
TEST(EngineBuilderTest, TorchScriptTransformersRepeatNoPerLayerWork) {
  const std::vector<compiler::InputShape> shapes = {{"input_ids", {1, 16}},
                                                    {"attention_mask", {1, 16}}};
  const std::vector<uint8_t> bert = read_file(real_model("torchscript17_bert"));
  ASSERT_FALSE(bert.empty());
  for (const char* disabled : {"", "cse", "identity"}) {
    SCOPED_TRACE(fmt::format("bert, disabled: '{}'", disabled));
    const bool cse = std::string_view(disabled) != "cse";
    const bool identity = std::string_view(disabled) != "identity";
    auto built =
        build_bytes(bert, "fp16", 0, shapes,
                    *disabled ? std::vector<std::string>{disabled} : std::vector<std::string>{});
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    ASSERT_EQ(built->blobs.size(), 1u);
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    EXPECT_EQ(kernels_named(blob, "where"), cse ? 1u : 2u);
    EXPECT_EQ(kernels_named(blob, "attention_bias"), 0u);
    EXPECT_EQ(kernels_named(blob, "gather"), identity ? 1u : 2u);  // the word embeddings'
    EXPECT_EQ(kernels_named(blob, "expand"), identity ? 0u : 1u);
    EXPECT_EQ(kernels_named(blob, "cast"), identity ? 1u : 2u);  // the int64 mask to bool
  }

  const std::string gpt2_path = real_model("torchscript17_gpt2");
  auto graph = compiler::import_onnx_file(gpt2_path, compiler::ImportOptions{shapes, {}});
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  size_t lone_concats = 0;
  for (const compiler::IrNode& n : graph->nodes) {
    lone_concats += n.op_type == "Concat" && n.inputs.size() == 1;
  }
  ASSERT_GE(lone_concats, 4u) << "the model no longer has what this test is about";
  auto built = build_bytes(read_file(gpt2_path), "fp16", 0, shapes);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  ASSERT_EQ(built->blobs.size(), 1u);
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  EXPECT_EQ(kernels_named(blob, "concat"), 0u);
  // Its MLP's Gemm, Reshape, tanh-Gelu: the GELU is the GEMM's epilogue (no elementwise kernel).
  size_t gelu_epilogues = 0;
  for (const cuda::StepRecord& r : blob.steps()) {
    gelu_epilogues += r.kind == static_cast<uint32_t>(cuda::StepKind::Gemm) &&
                      r.gemm.epilogue == static_cast<uint8_t>(cuda::GemmEpilogue::BiasGeluTanh);
  }
  EXPECT_EQ(gelu_epilogues, 2u);
  EXPECT_EQ(kernels_named(blob, "fused"), 0u);
  // The attention, Reshape (same shape), Transpose: the attention writes the transposed layout,
  // and the output projection reads it with no gather in between.
  const auto steps = blob.steps();
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    if (steps[i].kind != static_cast<uint32_t>(cuda::StepKind::Sdpa)) continue;
    EXPECT_EQ(steps[i + 1].kind, static_cast<uint32_t>(cuda::StepKind::Gemm)) << "step " << i + 1;
  }
}

// MobileNetV3 (small configuration, dynamo export): every HardSwish and HardSigmoid that follows an
// ungrouped convolution (its only reader) is fused into that convolution's cuDNN step, with
// ONNX's alpha and beta, in every precision but strict fp32, which fuses nothing into cuDNN
// (conv.cpp: such graphs can have no fp32 plan) and runs them in an epilogue kernel.
TEST(EngineBuilderTest, HardSwishAndHardSigmoidAfterAConvolutionAreItsEpilogue) {
  const std::string path = real_model("dynamo18_mobilenet");
  auto graph = import_model(path);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  std::map<int, int> producer, readers;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    for (int o : graph->nodes[i].outputs) producer[o] = static_cast<int>(i);
    for (int in : graph->nodes[i].inputs) ++readers[in];
  }
  size_t want_swish = 0, want_sigmoid = 0;
  for (const compiler::IrNode& n : graph->nodes) {
    if (n.op_type != "HardSwish" && n.op_type != "HardSigmoid") continue;
    const auto p = producer.find(n.inputs[0]);
    if (p == producer.end() || readers[n.inputs[0]] != 1) continue;
    const compiler::IrNode& conv = graph->nodes[static_cast<size_t>(p->second)];
    if (conv.op_type != "Conv" || conv.attr_int("group") != 1) continue;
    ++(n.op_type == "HardSwish" ? want_swish : want_sigmoid);
  }
  ASSERT_GT(want_swish, 0u);
  ASSERT_GT(want_sigmoid, 0u);
  // Every HardSigmoid here follows a squeeze-excite layer, which is a row kernel by default
  // (SqueezeExciteLayersAreRowKernels): on cuDNN they show its epilogue.
  for (const char* precision : {"tf32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto built = build_bytes(read_file(path), precision, 0, {}, {}, {"conv_rows=cudnn"});
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    ASSERT_EQ(built->blobs.size(), 1u);
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    size_t swish = 0, sigmoid = 0;
    for (const cuda::StepRecord& r : blob.steps()) {
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Conv)) continue;
      const cuda::ConvStep& c = r.conv;
      if (c.activation == static_cast<uint8_t>(cuda::ConvActivation::HardSwish)) {
        ++swish;
        EXPECT_FLOAT_EQ(c.act_alpha, 1.0f / 6.0f);
        EXPECT_FLOAT_EQ(c.act_beta, 0.5f);
      } else if (c.activation == static_cast<uint8_t>(cuda::ConvActivation::HardSigmoid)) {
        ++sigmoid;
        EXPECT_NEAR(c.act_alpha, 1.0 / 6.0, 1e-6);  // PyTorch's hardsigmoid
        EXPECT_FLOAT_EQ(c.act_beta, 0.5f);
      }
    }
    EXPECT_EQ(swish, want_swish);
    EXPECT_EQ(sigmoid, want_sigmoid);
  }
  // Strict fp32: plain cuDNN convolutions, each followed by the epilogue kernel that applies
  // its bias and activation.
  auto fp32 = build_bytes(read_file(path), "fp32", 0, {}, {}, {"conv_rows=cudnn"});
  ASSERT_TRUE(fp32.ok()) << fp32.status().to_string();
  const cuda::EngineBlob fp32_blob = parse_blob(fp32->blobs[0]);
  const auto fp32_steps = fp32_blob.steps();
  size_t plain = 0;
  for (size_t i = 0; i < fp32_steps.size(); ++i) {
    const cuda::StepRecord& r = fp32_steps[i];
    if (r.kind != static_cast<uint32_t>(cuda::StepKind::Conv)) continue;
    EXPECT_EQ(r.conv.activation, static_cast<uint8_t>(cuda::ConvActivation::None)) << i;
    EXPECT_EQ(r.conv.has_bias, 0) << i;
    EXPECT_EQ(r.conv.has_residual, 0) << i;
    ASSERT_LT(i + 1, fp32_steps.size());
    const cuda::StepRecord& next = fp32_steps[i + 1];
    EXPECT_TRUE(next.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
                std::string(fp32_blob.kernel_name(next.kernel.kernel)).find("epilogue") !=
                    std::string::npos)
        << "step " << i + 1 << " is not the convolution's epilogue";
    ++plain;
  }
  EXPECT_GE(plain, want_swish + want_sigmoid);
  // The build option conv_hard_activations=unfused leaves them to the elementwise kernels.
  auto unfused = build_bytes(read_file(path), "fp16", 0, {}, {}, {"conv_hard_activations=unfused"});
  ASSERT_TRUE(unfused.ok()) << unfused.status().to_string();
  size_t relu = 0;
  for (const cuda::StepRecord& r : parse_blob(unfused->blobs[0]).steps()) {
    if (r.kind != static_cast<uint32_t>(cuda::StepKind::Conv)) continue;
    EXPECT_LE(r.conv.activation, static_cast<uint8_t>(cuda::ConvActivation::Relu));
    relu += r.conv.activation == static_cast<uint8_t>(cuda::ConvActivation::Relu);
  }
  EXPECT_GT(relu, 0u);
}

// Each Fire module's Concat is one kernel that reads the two convolutions' channels-last outputs
// where cuDNN (or, in strict fp32, the convolution's epilogue kernel) wrote them, and the next
// convolution reads the Concat's output as it is (stored channels-last): no layout conversion
// around any Concat.
TEST(EngineBuilderTest, ConcatKernelOfChannelsLastConvolutionsStaysChannelsLast) {
  const std::string path = real_model("dynamo18_squeezenet");
  const size_t concats = count_nodes(path, "Concat");
  ASSERT_GT(concats, 0u);
  auto same = [](const cuda::BufferRef& a, const cuda::BufferRef& b) {
    return a.space == b.space && a.index == b.index && a.offset == b.offset;
  };
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto built = build_bytes(read_file(path), precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    ASSERT_EQ(built->blobs.size(), 1u);
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    const auto steps = blob.steps();
    size_t seen = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const cuda::StepRecord& r = steps[i];
      if (r.kind == static_cast<uint32_t>(cuda::StepKind::Conv)) {
        EXPECT_EQ(r.conv.y_channel_stride, 0) << "step " << i;
      }
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel) ||
          std::string(blob.kernel_name(r.kernel.kernel)).find("concat") == std::string::npos)
        continue;
      ++seen;
      const uint32_t n = r.kernel.num_operands;
      ASSERT_EQ(n, 3u);
      for (uint32_t k = 0; k + 1 < n; ++k) {
        bool from_conv = false;
        for (size_t j = 0; j < i; ++j) {
          const cuda::StepRecord& p = steps[j];
          from_conv |= p.kind == static_cast<uint32_t>(cuda::StepKind::Conv) &&
                       same(p.conv.y, r.kernel.operands[k]);
          from_conv |= p.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
                       std::string(blob.kernel_name(p.kernel.kernel)).find("epilogue") !=
                           std::string::npos &&
                       same(p.kernel.operands[p.kernel.num_operands - 1], r.kernel.operands[k]);
        }
        EXPECT_TRUE(from_conv) << "step " << i << " input " << k << " is a copy";
      }
      ASSERT_LT(i + 1, steps.size());
      // The next step (a convolution or a max-pool, both reading channels-last) reads it.
      const cuda::StepRecord& next = steps[i + 1];
      const cuda::BufferRef& y = r.kernel.operands[n - 1];
      const bool reads = next.kind == static_cast<uint32_t>(cuda::StepKind::Conv)
                             ? same(next.conv.x, y)
                             : next.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
                                   std::string(blob.kernel_name(next.kernel.kernel)).find("pool") !=
                                       std::string::npos &&
                                   same(next.kernel.operands[0], y);
      EXPECT_TRUE(reads) << "step " << i + 1 << " does not read the Concat's output as it is";
    }
    EXPECT_EQ(seen, concats);
  }
}

// A dense block's Concats are read by elementwise kernels (the normalization's Mul and Add and a
// ReLU) only: each such kernel reads the convolutions' outputs where cuDNN wrote them, and the
// Concat has no kernel, except those whose inputs, with the kernel's other pointers, pass 16
// (layer 14's of 14 inputs and the block end's of 15). concat=kernel gives each its kernel.
TEST(EngineBuilderTest, DenseBlockConcatsAreReadInPlaceByTheirElementwiseReaders) {
  auto same = [](const cuda::BufferRef& a, const cuda::BufferRef& b) {
    return a.space == b.space && a.index == b.index && a.offset == b.offset;
  };
  const OnnxBuilder model = testing::dense_block(1, 14, 8);
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    size_t kernel_steps[2] = {0, 0};
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE(in_place ? "in place" : "concat=kernel");
      auto built = build_bytes(
          model.bytes(), precision, 0, {}, {},
          in_place ? std::vector<std::string>{} : std::vector<std::string>{"concat=kernel"});
      ASSERT_TRUE(built.ok()) << built.status().to_string();
      ASSERT_EQ(built->blobs.size(), 1u);
      const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
      const auto steps = blob.steps();
      size_t concats = 0, widest = 0;
      for (size_t i = 0; i < steps.size(); ++i) {
        const cuda::StepRecord& r = steps[i];
        if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel)) continue;
        ++kernel_steps[in_place ? 0 : 1];
        const std::string name(blob.kernel_name(r.kernel.kernel));
        concats += name.find("concat") != std::string::npos;
        if (name.find("fused") == std::string::npos) continue;
        // How many of the kernel's inputs are convolutions' outputs, read where they were written.
        size_t from_conv = 0;
        for (uint32_t k = 0; k < r.kernel.num_operands; ++k) {
          for (size_t j = 0; j < i; ++j) {
            if (steps[j].kind == static_cast<uint32_t>(cuda::StepKind::Conv) &&
                same(steps[j].conv.y, r.kernel.operands[k])) {
              ++from_conv;
              break;
            }
          }
        }
        widest = std::max(widest, from_conv);
      }
      // Layers 2..14 and the end concatenate: 14 Concats, one kernel each (none has more than 15
      // inputs); read in place, the two widest keep theirs.
      EXPECT_EQ(concats, in_place ? 2u : 14u);
      // Layer 13's kernel reads its Concat's 13 inputs in place; with concat=kernel every
      // elementwise kernel reads one Concat output (or the first convolution's).
      EXPECT_EQ(widest, in_place ? 13u : 1u);
    }
    EXPECT_EQ(kernel_steps[0] + 12, kernel_steps[1]);
  }
}

// A channels-last Concat of two convolutions' channels: at 2M elements (a UNet decoder's) its
// kernel moves 16 bytes a thread (a thread per 8 halves or 4 floats); at 32K elements (below
// kVectorConcatElements, where DenseNet's measured slower so) a thread per element.
TEST(EngineBuilderTest, LargeChannelsLastConcatsMoveSixteenBytesAThread) {
  auto model = [](int64_t side) {
    OnnxBuilder b(17);
    b.input("x", {1, 3, side, side});
    b.initializer("wa", {64, 3, 3, 3}, std::vector<float>(64 * 27, 0.1f));
    b.initializer("wb", {64, 3, 3, 3}, std::vector<float>(64 * 27, -0.1f));
    b.initializer("wc", {8, 128, 3, 3}, std::vector<float>(8 * 128 * 9, 0.05f));
    for (const char* name : {"a", "b"}) {
      auto& c = b.node("Conv", {"x", std::string("w") + name}, {name}, std::string("conv_") + name);
      OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
    }
    auto& cat = b.node("Concat", {"a", "b"}, {"c"}, "cat");
    OnnxBuilder::attr_int(cat, "axis", 1);
    auto& y = b.node("Conv", {"c", "wc"}, {"y"}, "conv_c");
    OnnxBuilder::attr_ints(y, "pads", {1, 1, 1, 1});
    b.output("y", {1, 8, side, side});
    return b;
  };
  for (const char* precision : {"fp32", "fp16"}) {
    for (int64_t side : {128, 16}) {
      SCOPED_TRACE(fmt::format("{} {}x{}", precision, side, side));
      auto built = build(model(side), precision);
      ASSERT_TRUE(built.ok()) << built.status().to_string();
      const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
      size_t concats = 0;
      for (const cuda::StepRecord& r : blob.steps()) {
        if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel) ||
            std::string(blob.kernel_name(r.kernel.kernel)).find("concat") == std::string::npos)
          continue;
        ++concats;
        const uint64_t elements = uint64_t{128} * side * side;
        const uint64_t threads = uint64_t{r.kernel.grid[0]} * r.kernel.block[0];
        const uint64_t per_vector = precision == std::string("fp16") ? 8 : 4;
        if (side == 128) {
          EXPECT_GE(threads * per_vector, elements);
          EXPECT_LT(threads, elements / 2) << "a thread per element";
        } else {
          EXPECT_GE(threads, elements) << "fewer threads than elements";
        }
      }
      EXPECT_EQ(concats, 1u);
    }
  }
}

// ViT's patch embedding (a Conv with kernel == stride), both exporters: a "patches" kernel
// gathers the input's windows into [patches, C*KH*KW] and one GEMM multiplies them by the filters
// as they are (k = C*KH*KW, n = the patches, m = the output channels), writing what the patches
// kernel's output is read by; no cuDNN convolution is left. conv_patches=cudnn keeps it on
// cuDNN.
TEST(EngineBuilderTest, PatchConvolutionsAreOneGatherAndOneGemm) {
  auto same = [](const cuda::BufferRef& a, const cuda::BufferRef& b) {
    return a.space == b.space && a.index == b.index && a.offset == b.offset;
  };
  register_builtins();
  // The TorchScript export's batch is symbolic.
  const std::vector<compiler::InputShape> shapes = {{"input", {1, 3, 32, 32}}};
  for (const char* model : {"torchscript17_vit", "dynamo18_vit"}) {
    const std::string path = real_model(model);
    auto graph = compiler::import_onnx_file(path, {shapes, {}});
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    const compiler::IrNode* conv = nullptr;
    for (const compiler::IrNode& n : graph->nodes) {
      if (n.op_type == "Conv") conv = &n;
    }
    ASSERT_NE(conv, nullptr) << model;
    const std::vector<int64_t>& w = graph->values[conv->inputs[1]].sizes;  // K, C, KH, KW
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(fmt::format("{} {}", model, precision));
      auto built = build_bytes(read_file(path), precision, 0, shapes);
      ASSERT_TRUE(built.ok()) << built.status().to_string();
      ASSERT_EQ(built->blobs.size(), 1u);
      const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
      const auto steps = blob.steps();
      size_t patches = 0;
      for (size_t i = 0; i < steps.size(); ++i) {
        const cuda::StepRecord& r = steps[i];
        EXPECT_NE(r.kind, static_cast<uint32_t>(cuda::StepKind::Conv)) << "step " << i;
        if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel) ||
            std::string(blob.kernel_name(r.kernel.kernel)).find("patches") == std::string::npos)
          continue;
        ++patches;
        ASSERT_LT(i + 1, steps.size());
        const cuda::StepRecord& g = steps[i + 1];
        ASSERT_EQ(g.kind, static_cast<uint32_t>(cuda::StepKind::Gemm)) << "step " << i + 1;
        EXPECT_EQ(g.gemm.k, w[1] * w[2] * w[3]);
        EXPECT_EQ(g.gemm.m, w[0]);
        // The filters [K, C*KH*KW] row-major, read transposed; the result [patches, K].
        EXPECT_EQ(g.gemm.trans_a, 1u);
        EXPECT_EQ(g.gemm.trans_b, 0u);
        EXPECT_EQ(g.gemm.lda, g.gemm.k);
        EXPECT_EQ(g.gemm.ldb, g.gemm.k);
        EXPECT_EQ(g.gemm.ldd, g.gemm.m);
        EXPECT_EQ(g.gemm.n * g.gemm.k * (precision == std::string("fp16") ? 2 : 4),
                  static_cast<int64_t>(r.kernel.operands[1].bytes));
        EXPECT_TRUE(same(g.gemm.b, r.kernel.operands[1])) << "the GEMM does not read the patches";
      }
      EXPECT_EQ(patches, 1u);
    }
    auto on_cudnn = build_bytes(read_file(path), "fp16", 0, shapes, {}, {"conv_patches=cudnn"});
    ASSERT_TRUE(on_cudnn.ok()) << on_cudnn.status().to_string();
    size_t convs = 0;
    for (const cuda::StepRecord& r : parse_blob(on_cudnn->blobs[0]).steps())
      convs += r.kind == static_cast<uint32_t>(cuda::StepKind::Conv);
    EXPECT_EQ(convs, 1u) << model;
  }
}

// Squeeze-excite's fully connected layers (1x1 convolutions of a 1x1 input, batch 1) are one
// generated row kernel each, with the bias and the Relu or HardSigmoid after them, in every
// precision and from both exporters (GlobalAveragePool or ReduceMean before them); every other
// convolution stays on cuDNN or the depthwise kernel. conv_rows=cudnn puts them back on
// cuDNN.
TEST(EngineBuilderTest, SqueezeExciteLayersAreRowKernels) {
  register_builtins();
  const std::vector<compiler::InputShape> shapes = {{"input", {1, 3, 64, 64}}};
  for (const char* model : {"torchscript17_mobilenet", "dynamo18_mobilenet"}) {
    const std::string path = real_model(model);
    auto graph = compiler::import_onnx_file(path, {shapes, {}});
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    ASSERT_TRUE(compiler::infer_and_fold(*graph).ok());
    size_t rows = 0, depthwise = 0, others = 0;
    for (const compiler::IrNode& n : graph->nodes) {
      if (n.dead || n.op_type != "Conv") continue;
      ASSERT_EQ(graph->values[n.inputs[0]].sizes.size(), 4u) << n.describe();
      const std::vector<int64_t>& x = graph->values[n.inputs[0]].sizes;
      const std::vector<int64_t>& w = graph->values[n.inputs[1]].sizes;
      if (n.attr_int("group") != 1) {
        ++depthwise;
      } else if (x[2] == 1 && x[3] == 1 && w[2] == 1 && w[3] == 1) {
        ++rows;
      } else {
        ++others;
      }
    }
    ASSERT_GT(rows, 0u) << model;
    ASSERT_EQ(rows % 2, 0u) << model << ": squeeze-excite layers come in pairs";
    for (const char* precision : {"fp32", "fp16", "bf16"}) {
      SCOPED_TRACE(fmt::format("{} {}", model, precision));
      auto built = build_bytes(read_file(path), precision, 0, shapes);  // NVRTC compiles them
      ASSERT_TRUE(built.ok()) << built.status().to_string();
      ASSERT_EQ(built->blobs.size(), 1u);
      const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
      size_t gemv = 0, convs = 0, dw = 0, elementwise = 0;
      for (const cuda::StepRecord& r : blob.steps()) {
        if (r.kind == static_cast<uint32_t>(cuda::StepKind::Conv)) ++convs;
        if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel)) continue;
        const std::string name(blob.kernel_name(r.kernel.kernel));
        gemv += name.find("_gemv") != std::string::npos;
        dw += name.find("_depthwise") != std::string::npos;
        elementwise += name.find("_fused") != std::string::npos;
      }
      EXPECT_EQ(gemv, rows);
      EXPECT_EQ(dw, depthwise);
      EXPECT_EQ(convs, others);
      // The Relu after the first layer and the HardSigmoid after the second are in the row
      // kernels: what is left elementwise is the scale (Mul) of each block and the classifier's
      // HardSwish, none of them a lone activation of a squeeze-excite layer.
      EXPECT_LE(elementwise, rows / 2 + 1);
    }
    auto on_cudnn = build_bytes(read_file(path), "fp16", 0, shapes, {}, {"conv_rows=cudnn"});
    ASSERT_TRUE(on_cudnn.ok()) << on_cudnn.status().to_string();
    size_t convs = 0, gemv = 0;
    const cuda::EngineBlob blob = parse_blob(on_cudnn->blobs[0]);
    for (const cuda::StepRecord& r : blob.steps()) {
      convs += r.kind == static_cast<uint32_t>(cuda::StepKind::Conv);
      gemv += r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
              std::string(blob.kernel_name(r.kernel.kernel)).find("_gemv") != std::string::npos;
    }
    EXPECT_EQ(convs, others + rows) << model;
    EXPECT_EQ(gemv, 0u) << model;
  }
}

// Transpose, Split, Slice and a Gather of one constant index are views: the elementwise kernels
// after them read their inputs through strides, and no data-movement kernel runs.
TEST(EngineBuilderTest, TransposeSplitSliceAndSingleIndexGatherAreViews) {
  OnnxBuilder b(17);
  b.input("x", {4, 6, 8});
  b.initializer_int64("split", {2}, {4, 4});
  b.initializer_int64("starts", {1}, {1});
  b.initializer_int64("ends", {1}, {4});
  b.initializer_int64("axes", {1}, {0});
  b.initializer_int64("index", {}, {2});
  auto& split = b.node("Split", {"x", "split"}, {"a", "c"}, "split");
  OnnxBuilder::attr_int(split, "axis", 2);
  auto& t = b.node("Transpose", {"a"}, {"t"}, "t");
  OnnxBuilder::attr_ints(t, "perm", {1, 0, 2});
  b.node("Relu", {"t"}, {"y1"}, "relu");
  b.node("Slice", {"c", "starts", "ends", "axes"}, {"s"}, "slice");
  b.node("Sigmoid", {"s"}, {"y2"}, "sigmoid");
  auto& g = b.node("Gather", {"x", "index"}, {"g"}, "gather");
  OnnxBuilder::attr_int(g, "axis", 1);
  b.node("Neg", {"g"}, {"y3"}, "neg");
  b.output("y1", {6, 4, 4});
  b.output("y2", {3, 6, 4});
  b.output("y3", {4, 8});
  auto built = build(b, "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  EXPECT_EQ(built->summary.kernel_calls, 0u) << "a node was left to the CPU";
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.steps().size(), 3u);
  for (const cuda::StepRecord& r : blob.steps()) {
    ASSERT_EQ(r.kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
    const std::string_view name = blob.kernel_name(r.kernel.kernel);
    EXPECT_NE(name.find("fused"), std::string::npos) << name;
    // Each reads x (binding 0) at the view's first element.
    EXPECT_EQ(r.kernel.operands[0].space, static_cast<uint32_t>(cuda::Space::Binding));
    EXPECT_EQ(r.kernel.operands[0].index, 0u);
  }
  // Offsets in bytes: the split's second half starts 4 floats in, the slice one row of 6 x 8
  // later; the gather's index 2 of axis 1 is 2 rows of 8 floats in.
  EXPECT_EQ(blob.steps()[0].kernel.operands[0].offset, 0u);
  EXPECT_EQ(blob.steps()[1].kernel.operands[0].offset, (4u + 48u) * 4u);
  EXPECT_EQ(blob.steps()[2].kernel.operands[0].offset, 16u * 4u);
}

// A valid one-element Slice whose step is INT64_MAX: the step is never taken, and the lowering no
// longer multiplies it by the stride (signed overflow at 52eb145, which the sanitizer build
// stops on). The result reads the right element: offset 3 rows of 6 floats, stride of no matter.
TEST(EngineBuilderTest, AOneElementSliceWithAHugeStepIsAView) {
  OnnxBuilder b(17);
  b.input("x", {5, 6});
  b.initializer_int64("starts", {1}, {3});
  b.initializer_int64("ends", {1}, {INT64_MAX});
  b.initializer_int64("axes", {1}, {0});
  b.initializer_int64("steps", {1}, {INT64_MAX});
  b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"}, "slice");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y", {1, 6});
  auto built = build(b, "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.steps().size(), 1u);
  EXPECT_EQ(blob.steps()[0].kernel.operands[0].offset, 3u * 6u * 4u);
}

// Softmax over each of `count` inputs of distinct widths (each its own generated kernel when the
// sizes are in the code, kernel_sizes=code), or over one width `count` times in a chain (the same
// kernel every step).
OnnxBuilder softmaxes(int count, bool distinct) {
  OnnxBuilder b(17);
  if (!distinct) b.input("x0", {4, 24});
  for (int i = 0; i < count; ++i) {
    const std::string in = fmt::format("x{}", i);
    const std::string out = distinct ? fmt::format("y{}", i) : fmt::format("x{}", i + 1);
    if (distinct) b.input(in, {2, 8 + i});
    b.node("Softmax", {in}, {out}, fmt::format("softmax{}", i));
    if (distinct) b.output(out, {2, 8 + i});
  }
  if (!distinct) b.output(fmt::format("x{}", count), {4, 24});
  return b;
}

// A layer repeated 300 times is one kernel compiled once and launched by 300 steps.
TEST(EngineBuilderTest, IdenticalKernelsAreCompiledOnce) {
  auto built = build(softmaxes(300, false), "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.steps().size(), 300u);
  EXPECT_EQ(blob.kernels().size(), 1u);
  for (const cuda::StepRecord& r : blob.steps()) EXPECT_EQ(r.kernel.kernel, 0u);
}

// Kernels take their sizes as arguments: softmaxes of 300 distinct widths are as many kernels as
// block sizes (32 to 512 threads for rows of 8 to 307), each step passing its own row length; with
// the sizes in the code (kernel_sizes=code) each width is a kernel of its own.
TEST(EngineBuilderTest, KernelsOfOneOpAtManyShapesAreCompiledOnce) {
  for (const bool in_code : {false, true}) {
    SCOPED_TRACE(in_code ? "kernel_sizes=code" : "kernel_sizes=arguments");
    auto built = build(softmaxes(300, true), "fp32", 0,
                       {in_code ? "kernel_sizes=code" : "kernel_sizes=arguments"});
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    ASSERT_EQ(blob.steps().size(), 300u);
    EXPECT_EQ(blob.kernels().size(), in_code ? 300u : 5u);
    for (size_t i = 0; i < blob.steps().size(); ++i) {
      const cuda::KernelStep& k = blob.steps()[i].kernel;
      if (in_code) {
        EXPECT_EQ(k.num_args, 0u);
        continue;
      }
      // The row length and the stride between a row's elements.
      const std::span<const int64_t> args = blob.kernel_args(k);
      ASSERT_EQ(args.size(), 2u);
      EXPECT_EQ(args[0], static_cast<int64_t>(8 + i));
      EXPECT_EQ(args[1], 1);
    }
  }
}

// Pools, reductions, concatenations, gathers and layer norms at three shapes each: with the
// sizes as arguments each op is one kernel launched by three steps that pass their own sizes;
// with the sizes in the code (kernel_sizes=code) each shape is a kernel of its own.
TEST(EngineBuilderTest, EveryOpClassServesItsShapesWithOneKernel) {
  OnnxBuilder b(17);
  b.initializer_int64("rows", {3}, {0, 2, 1});
  b.initializer("ln_scale", {16}, std::vector<float>(16, 1.5f));
  for (int i = 0; i < 3; ++i) {
    const int64_t w = 8 + 2 * i;
    const std::string n = std::to_string(i);
    b.input("x" + n, {1, 4, w, w});
    auto& pool = b.node("MaxPool", {"x" + n}, {"p" + n}, "pool" + n);
    OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(pool, "strides", {2, 2});
    OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
    b.output("p" + n, {1, 4, (w + 1) / 2, (w + 1) / 2});
    auto& mean = b.node("ReduceMean", {"x" + n}, {"m" + n}, "mean" + n);
    OnnxBuilder::attr_ints(mean, "axes", {1});
    b.output("m" + n, {1, 1, w, w});
    b.input("c" + n, {3, 5 + i});
    b.input("d" + n, {3, 2});
    auto& cat = b.node("Concat", {"c" + n, "d" + n}, {"cat" + n}, "cat" + n);
    OnnxBuilder::attr_int(cat, "axis", 1);
    b.output("cat" + n, {3, 7 + i});
    b.input("t" + n, {4 + i, 6});
    b.node("Gather", {"t" + n, "rows"}, {"g" + n}, "gather" + n);
    b.output("g" + n, {3, 6});
    b.input("l" + n, {2 + i, 16});
    auto& ln = b.node("LayerNormalization", {"l" + n, "ln_scale"}, {"ln" + n}, "ln" + n);
    OnnxBuilder::attr_int(ln, "axis", -1);
    b.output("ln" + n, {2 + i, 16});
  }
  for (const bool in_code : {false, true}) {
    SCOPED_TRACE(in_code ? "kernel_sizes=code" : "kernel_sizes=arguments");
    auto built = build(b, "fp32", 0, {in_code ? "kernel_sizes=code" : "kernel_sizes=arguments"});
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    std::map<std::string, std::set<uint32_t>> kernels_of;  // op class -> its kernels
    std::map<std::string, int> steps_of;
    for (const cuda::StepRecord& r : blob.steps()) {
      ASSERT_EQ(r.kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
      std::string name(blob.kernel_name(r.kernel.kernel));
      name = name.substr(name.find('_') + 1);  // "k3_maxpool" -> "maxpool"
      kernels_of[name].insert(r.kernel.kernel);
      ++steps_of[name];
      EXPECT_EQ(r.kernel.num_args == 0, in_code) << name;
    }
    for (const char* op : {"maxpool", "reduce", "concat", "gather", "layer_norm"}) {
      SCOPED_TRACE(op);
      EXPECT_EQ(steps_of[op], 3);
      EXPECT_EQ(kernels_of[op].size(), in_code ? 3u : 1u);
    }
  }
}

// A Concat of many strided views would pass more than kMaxKernelArgs arguments (3 per dimension
// of each view): 13 transposed rank-5 inputs take 239 and pass them, 14 would take 257 and keep
// their sizes in the code instead; both build.
TEST(EngineBuilderTest, ConcatsOfManyViewsKeepTheirArgumentsInBounds) {
  for (const int inputs : {13, 14}) {
    SCOPED_TRACE(inputs);
    OnnxBuilder b(17);
    std::vector<std::string> views;
    for (int k = 0; k < inputs; ++k) {
      const std::string x = fmt::format("x{}", k), t = fmt::format("t{}", k);
      b.input(x, {1, 2, 3, 4, 5});
      auto& tr = b.node("Transpose", {x}, {t}, t);
      OnnxBuilder::attr_ints(tr, "perm", {0, 4, 3, 2, 1});  // [1, 5, 4, 3, 2], strided
      views.push_back(t);
    }
    auto& cat = b.node("Concat", views, {"y"}, "cat");
    OnnxBuilder::attr_int(cat, "axis", 0);
    b.output("y", {inputs, 5, 4, 3, 2});
    auto built = build(b, "fp32");
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    ASSERT_EQ(blob.steps().size(), 1u);
    const cuda::KernelStep& k = blob.steps()[0].kernel;
    EXPECT_EQ(k.num_operands, static_cast<uint32_t>(inputs + 1));
    EXPECT_EQ(k.num_args, inputs == 13 ? 239u : 0u);
  }
}

// More than kKernelsInOneUnit distinct kernels are compiled in units in parallel and linked into
// one cubin that holds every kernel the steps name.
TEST(EngineBuilderTest, ManyDistinctKernelsAreCompiledInUnitsAndLinked) {
  const int count = static_cast<int>(cuda::kKernelsInOneUnit) + 40;
  auto built = build(softmaxes(count, true), "fp32", 0, {"kernel_sizes=code"});
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.kernels().size(), static_cast<size_t>(count));
  const std::string_view cubin(reinterpret_cast<const char*>(blob.cubin().data()),
                               blob.cubin().size());
  for (size_t k = 0; k < blob.kernels().size(); ++k) {
    const std::string name(blob.kernel_name(k));
    EXPECT_NE(cubin.find(name + '\0'), std::string_view::npos) << name << " is not in the cubin";
  }
}

// A Concat of views (a Transpose, a Slice starting one row in, and a Split's second half) reads
// each where it is: the engine is the Concat's kernel alone, every input is binding 0 at the
// view's first element, and no copy runs before it.
TEST(EngineBuilderTest, ConcatReadsViewsInPlace) {
  OnnxBuilder b(17);
  b.input("x", {4, 6, 8});
  b.initializer_int64("split", {2}, {4, 4});
  b.initializer_int64("starts", {1}, {1});
  b.initializer_int64("ends", {1}, {5});
  b.initializer_int64("axes", {1}, {1});
  auto& t = b.node("Transpose", {"x"}, {"t"}, "t");
  OnnxBuilder::attr_ints(t, "perm", {0, 2, 1});  // [4, 8, 6]
  auto& t2 = b.node("Transpose", {"t"}, {"t2"}, "t2");
  OnnxBuilder::attr_ints(t2, "perm", {0, 2, 1});  // [4, 6, 8] through a double view
  b.node("Slice", {"x", "starts", "ends", "axes"}, {"s"}, "slice");    // [4, 4, 8], one row in
  auto& split = b.node("Split", {"x", "split"}, {"a", "c"}, "split");  // [4, 6, 4] each
  OnnxBuilder::attr_int(split, "axis", 2);
  auto& cat = b.node("Concat", {"s", "t2"}, {"y"}, "cat");  // [4, 10, 8]
  OnnxBuilder::attr_int(cat, "axis", 1);
  auto& cat2 = b.node("Concat", {"c", "a"}, {"z"}, "cat2");  // [4, 6, 8], halves swapped
  OnnxBuilder::attr_int(cat2, "axis", 2);
  b.output("y", {4, 10, 8});
  b.output("z", {4, 6, 8});
  auto built = build(b, "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.steps().size(), 2u);
  const std::vector<std::vector<uint64_t>> offsets = {{8u * 4u, 0u}, {4u * 4u, 0u}};
  for (size_t i = 0; i < 2; ++i) {
    const cuda::StepRecord& r = blob.steps()[i];
    ASSERT_EQ(r.kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
    EXPECT_NE(std::string(blob.kernel_name(r.kernel.kernel)).find("concat"), std::string::npos);
    ASSERT_EQ(r.kernel.num_operands, 3u);
    for (uint32_t k = 0; k < 2; ++k) {
      EXPECT_EQ(r.kernel.operands[k].space, static_cast<uint32_t>(cuda::Space::Binding));
      EXPECT_EQ(r.kernel.operands[k].index, 0u);
      EXPECT_EQ(r.kernel.operands[k].offset, offsets[i][k]) << "step " << i << " input " << k;
    }
  }
}

// A large GEMM with N not a multiple of 8 (a vocabulary projection) writes rows padded to a
// multiple of 8 (cuBLASLt's fast kernels need aligned rows): its B and bias are padded with zeros,
// the result is a view of the first N of each row, gathered into the partition output and read in
// place by the elementwise kernel after it. A small one keeps its N.
TEST(EngineBuilderTest, LargeGemmsWithAnOddNWritePaddedRows) {
  OnnxBuilder b(17);
  b.input("x", {2, 64, 256});
  std::vector<float> w(256 * 1001);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 997) * 0.001f + 0.001f;
  b.initializer("w", {256, 1001}, w);
  b.initializer("bias", {1001}, std::vector<float>(1001, 0.5f));
  b.node("MatMul", {"x", "w"}, {"mm"}, "mm");
  b.node("Add", {"mm", "bias"}, {"y"}, "bias");
  b.node("Sigmoid", {"y"}, {"z"}, "sigmoid");
  b.output("y", {2, 64, 1001});
  b.output("z", {2, 64, 1001});
  // A Gemm with transB: B is [N, K], padded with zero rows.
  b.input("g", {128, 256});
  b.initializer("wt", {1001, 256}, w);
  auto& gemm = b.node("Gemm", {"g", "wt"}, {"t"}, "gemm_t");
  OnnxBuilder::attr_int(gemm, "transB", 1);
  b.output("t", {128, 1001});
  b.input("s", {4, 16});
  b.initializer("ws", {16, 13}, std::vector<float>(16 * 13, 0.25f));
  b.node("MatMul", {"s", "ws"}, {"small"}, "small");
  b.output("small", {4, 13});
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto built = build(b, precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    std::vector<cuda::GemmStep> gemms;
    size_t kernels = 0;
    for (const cuda::StepRecord& r : blob.steps()) {
      if (r.kind == static_cast<uint32_t>(cuda::StepKind::Gemm)) gemms.push_back(r.gemm);
      kernels += r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel);
    }
    ASSERT_EQ(gemms.size(), 3u);
    // The MatMul, the Gemm (cuBLASLt's A transposed), the small one.
    std::sort(gemms.begin(), gemms.end(), [](const cuda::GemmStep& l, const cuda::GemmStep& r) {
      return std::make_tuple(-l.n, l.trans_a) < std::make_tuple(-r.n, r.trans_a);
    });
    auto weights = [&](const cuda::GemmStep& g) {
      std::vector<float> values(g.a.bytes / 4);
      EXPECT_EQ(g.a.space, static_cast<uint32_t>(cuda::Space::Weights));
      EXPECT_LE(g.a.offset + g.a.bytes, blob.weights().size());
      std::memcpy(values.data(), blob.weights().data() + g.a.offset, g.a.bytes);
      return values;
    };
    const size_t elem = std::string_view(precision) == "fp32" ? 4 : 2;
    // cuBLASLt's m is our N.
    EXPECT_EQ(gemms[0].m, 1008);
    EXPECT_EQ(gemms[0].n, 128);
    EXPECT_EQ(gemms[0].lda, 1008);
    EXPECT_EQ(gemms[0].ldd, 1008);
    EXPECT_EQ(gemms[0].a.bytes, 256u * 1008u * elem);
    EXPECT_EQ(gemms[0].epilogue, static_cast<uint8_t>(cuda::GemmEpilogue::Bias));
    EXPECT_EQ(gemms[0].bias.bytes, 1008u * 4u);
    EXPECT_EQ(gemms[0].d.space, static_cast<uint32_t>(cuda::Space::Scratch));
    EXPECT_EQ(gemms[1].trans_a, 1);
    EXPECT_EQ(gemms[1].m, 1008);
    EXPECT_EQ(gemms[1].lda, 256);
    EXPECT_EQ(gemms[1].ldd, 1008);
    EXPECT_EQ(gemms[1].a.bytes, 1008u * 256u * elem);
    if (elem == 4) {
      // The padded B: each row of w then 7 zeros; for the Gemm, w's rows then 7 rows of zeros.
      const std::vector<float> padded = weights(gemms[0]), rows = weights(gemms[1]);
      size_t wrong = 0;
      for (size_t i = 0; i < 256; ++i) {
        for (size_t j = 0; j < 1008; ++j) {
          wrong += padded[i * 1008 + j] != (j < 1001 ? w[i * 1001 + j] : 0.0f);
          wrong += rows[j * 256 + i] != (j < 1001 ? w[j * 256 + i] : 0.0f);
        }
      }
      EXPECT_EQ(wrong, 0u);
    }
    // The small one: 4 x 13 x 16 multiply-adds, written straight into its output.
    EXPECT_EQ(gemms[2].m, 13);
    EXPECT_EQ(gemms[2].ldd, 13);
    EXPECT_EQ(gemms[2].d.space, static_cast<uint32_t>(cuda::Space::Binding));
    // The gather into y and the sigmoid reading the padded rows into z (plus casts in fp16).
    EXPECT_GE(kernels, 2u);
  }
}

// A residual Add before a LayerNormalization becomes one AddLayerNorm kernel.
TEST(EngineBuilderTest, AddAndLayerNormBecomeOneKernel) {
  OnnxBuilder b(17);
  b.input("x", {3, 5, 40});
  b.input("r", {3, 5, 40});
  b.initializer("scale", {40}, std::vector<float>(40, 1.5f));
  b.initializer("bias", {40}, std::vector<float>(40, 0.25f));
  b.node("Add", {"x", "r"}, {"s"}, "residual");
  b.node("LayerNormalization", {"s", "scale", "bias"}, {"y"}, "ln");
  b.output("y", {3, 5, 40});
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto built = build(b, precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    EXPECT_EQ(built->summary.kernel_calls, 0u) << "a node was left to the CPU";
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    ASSERT_EQ(blob.steps().size(), 1u);
    EXPECT_NE(blob.kernel_name(blob.steps()[0].kernel.kernel).find("add_layer_norm"),
              std::string::npos);
  }
}

TEST(EngineBuilderTest, Fp16CastsTheInputAndWritesFloatOutputs) {
  auto built = build(mlp(/*relu=*/true), "fp16");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  EXPECT_EQ(blob.precision(), cuda::Precision::FP16);
  ASSERT_EQ(blob.steps().size(), 3u);  // cast x to fp16, GEMM(bias+relu), GEMM
  EXPECT_EQ(blob.steps()[0].kind, static_cast<uint32_t>(cuda::StepKind::Kernel));
  const cuda::GemmStep& g = blob.steps()[2].gemm;
  EXPECT_EQ(g.a_dtype, static_cast<uint8_t>(DType::Float16));
  EXPECT_EQ(g.d_dtype, static_cast<uint8_t>(DType::Float32));
  EXPECT_EQ(blob.bindings()[0].dtype, static_cast<uint8_t>(DType::Float32));
}

TEST(EngineBuilderTest, ViewsCostNothing) {
  OnnxBuilder b;
  b.input("x", {6, 10});
  b.initializer_int64("shape", {3}, {3, 4, 5});
  b.initializer_int64("axes", {1}, {0});
  b.node("Reshape", {"x", "shape"}, {"r"}, "reshape");
  b.node("Unsqueeze", {"r", "axes"}, {"u"}, "unsqueeze");
  b.node("Softmax", {"u"}, {"y"}, "softmax");
  b.output("y", {1, 3, 4, 5});
  auto built = build(b, "fp32");
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  ASSERT_EQ(blob.steps().size(), 1u);  // only the softmax, reading the input binding in place
  EXPECT_EQ(blob.steps()[0].kernel.operands[0].space, static_cast<uint32_t>(cuda::Space::Binding));
}

TEST(EngineBuilderTest, LabelsComeFromTheEngineHeader) {
  auto built = build(mlp(true), "tf32", /*device=*/3);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
  EXPECT_EQ(blob.header().device_id, 3);
  EXPECT_EQ(built->specs[0].at("target_device"), "cuda:3");
  EXPECT_EQ(built->specs[0].at("sm_arch"), "sm_90");
  EXPECT_EQ(built->specs[0].at("precision"), "tf32");
}

TEST(EngineBuilderTest, EveryPrecisionCompilesEveryKernelKind) {
  OnnxBuilder b(20);
  b.input("x", {3, 7, 13});
  b.input("row", {13});
  b.initializer("k", {7, 1}, std::vector<float>(7, 0.5f));
  b.node("Add", {"x", "row"}, {"a"}, "add");
  b.node("Sub", {"a", "k"}, {"s"}, "sub");
  b.node("Erf", {"s"}, {"e"}, "erf");
  b.node("Gelu", {"e"}, {"g"}, "gelu");
  b.node("Sigmoid", {"g"}, {"sg"}, "sigmoid");
  auto& t = b.node("Transpose", {"sg"}, {"t"}, "t");
  OnnxBuilder::attr_ints(t, "perm", {2, 0, 1});
  auto& c = b.node("Concat", {"t", "t"}, {"c"}, "cat");
  OnnxBuilder::attr_int(c, "axis", 0);
  b.node("Softmax", {"c"}, {"sm"}, "softmax");
  b.initializer("w", {7, 5}, std::vector<float>(35, 0.1f));
  b.node("MatMul", {"sm", "w"}, {"y"}, "mm");
  b.output("y", {26, 3, 5});
  // The Concat reads the transposed view in place; a Softmax of it reads a gathered copy.
  b.node("Softmax", {"t"}, {"st"}, "softmax_t");
  b.output("st", {13, 3, 7});
  for (const char* precision : {"fp32", "tf32", "fp16", "bf16"}) {
    SCOPED_TRACE(precision);
    auto built = build(b, precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    EXPECT_GT(blob.cubin().size(), 1000u);
    // The fused elementwise run, the Concat, two Softmaxes and the gather: five kernel steps.
    // The two Softmaxes (rows of 7) may be one kernel: identical kernels are compiled once.
    size_t kernel_steps = 0;
    for (const cuda::StepRecord& r : blob.steps()) {
      kernel_steps += r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel);
    }
    EXPECT_GE(kernel_steps, 5u);
    EXPECT_GE(blob.kernels().size(), 4u);
  }
}

// A fused elementwise kernel reads and writes 16 bytes at a time where every input allows it
// (contiguous, rows contiguous, or broadcast along rows or whole), keeps one element per thread for
// the rest, and compiles either way (the vector loop falls back to the other at run time when a
// pointer is not aligned for it).
TEST(EngineBuilderTest, FusedKernelsReadAndWriteSixteenBytesWhereTheyCan) {
  auto kernel = [](DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> row_strides) {
    cuda::FusedKernel k;
    k.name = "k_test";
    k.sizes = sizes;
    const int64_t cols = sizes.back();
    k.inputs.push_back({dtype, {cols, 1}});  // contiguous
    k.inputs.push_back({dtype, std::move(row_strides)});
    k.inputs.push_back({dtype, {1, 0}});  // one value per row
    k.inputs.push_back({DType::Float32, {}, true, 0.5f});
    k.ops.push_back({"{a} + {b}", 0, 1});
    k.ops.push_back({"{a} * {b}", -1, 2});
    k.ops.push_back({"{a} * {b}", -2, 3});
    k.outputs.push_back({dtype, 2});
    return k;
  };
  struct Case {
    DType dtype;
    std::vector<int64_t> sizes, row_strides;
    std::string expect;  // in the source, or "" for the one-element kernel
  };
  const std::vector<Case> cases = {
      {DType::Float16, {4, 64}, {0, 1}, "baton_vec_load<8>(p1 + baton_offset<2>(i0"},
      {DType::Float32, {4, 64}, {0, 1}, "baton_vec_load<4>(p1 + baton_offset<2>(i0"},
      {DType::BFloat16, {4, 64}, {0, 0}, "const float v1 = to_f(p1[0]);"},
      {DType::Float16, {4, 64}, {64, 1}, "baton_vec_load<8>(p1 + i0, a1)"},
      {DType::Float16, {4, 64}, {1, 4}, ""},  // a transposed read: a gather
      // 21 elements: no vector divides them, which the kernel finds when it runs (a dynamic
      // engine's sizes differ from call to call), taking the one-element loop.
      {DType::Float16, {3, 7}, {0, 1}, "baton_vec_load<8>(p1 + baton_offset<2>(i0"},
  };
  for (const Case& c : cases) {
    for (const bool in_code : {true, false}) {
      SCOPED_TRACE(fmt::format("{} {} strides {}, sizes in the {}", dtype_name(c.dtype),
                               fmt::join(c.sizes, "x"), fmt::join(c.row_strides, ","),
                               in_code ? "code" : "arguments"));
      cuda::LaunchShape launch;
      cuda::KernelArgs args(in_code);
      const std::string source =
          cuda::generate_fused(kernel(c.dtype, c.sizes, c.row_strides), &launch, &args);
      int64_t n = 1;
      for (int64_t s : c.sizes) n *= s;
      // With sizes as arguments, offsets divide by multiplying with the sizes' magics.
      auto expected = [&](std::string text) {
        const std::string from = "baton_offset<2>(i0", to = "baton_offset_fast<2>(i0";
        if (const size_t at = text.find(from); !in_code && at != std::string::npos)
          text.replace(at, from.size(), to);
        return text;
      };
      if (c.expect.empty()) {
        EXPECT_EQ(source.find("baton_vec"), std::string::npos) << source;
        EXPECT_EQ(launch.grid, static_cast<uint32_t>((n + 255) / 256));
      } else {
        EXPECT_NE(source.find(expected(c.expect)), std::string::npos) << source;
        EXPECT_NE(source.find("baton_vec_store<"), std::string::npos) << source;
        // Whether the vector loop applies is checked when the kernel runs: the vector divides
        // the count (and, for reads at an offset, the rows and the read's row stride).
        const int w = c.dtype == DType::Float32 ? 4 : 8;
        EXPECT_NE(source.find(fmt::format("count % {} == 0", w)), std::string::npos) << source;
        if (c.row_strides == std::vector<int64_t>{0, 1}) {
          EXPECT_NE(source.find(fmt::format("strides1[0] % {} == 0", w)), std::string::npos)
              << source;
        }
        // A thread per W elements where W divides them; else a thread per element.
        const int64_t per_thread = n % w == 0 ? w : 1;
        EXPECT_EQ(launch.grid, static_cast<uint32_t>((n / per_thread + 255) / 256));
        EXPECT_NE(
            source.find(in_code ? "to_f(p2[baton_offset<2>(i0, sizes, strides2)])"
                                : "to_f(p2[baton_offset_fast<2>(i0, sizes, magic, strides2)])"),
            std::string::npos)
            << source;
      }
      // The one-element loop is always there, as the kernel or its fallback; its count is a
      // constant or the argument holding n.
      EXPECT_NE(source.find("baton_for_each(count, "), std::string::npos) << source;
      if (in_code) {
        EXPECT_NE(source.find(fmt::format("const long long count = {}LL;", n)), std::string::npos)
            << source;
        EXPECT_TRUE(args.values().empty());
      } else {
        const std::string declared = "const long long count = a.v[";
        const size_t at = source.find(declared);
        ASSERT_NE(at, std::string::npos) << source;
        const size_t index = std::stoul(source.substr(at + declared.size()));
        ASSERT_LT(index, args.values().size());
        EXPECT_EQ(args.values()[index], n);
        EXPECT_EQ(source.find(fmt::format("BatonArgs<{}> a)", args.values().size())),
                  source.find("BatonArgs<"))
            << source;
      }
      auto cubin = cuda::compile_to_cubin(cuda::kernel_prelude() + source, 90, "k_test");
      ASSERT_TRUE(cubin.ok()) << cubin.status().to_string() << "\n" << source;
    }
  }
}

// A one-input typed kernel (a copy or conversion) from a view whose rows are contiguous and at
// least 256 long, one pitch apart (GPT-2's logits padded to 50264 columns gathered into its
// 50257-wide output), runs a row kernel: a block per 1024 columns of a row, the row and column
// from the block index. Other strides keep the element loop. Every variant compiles.
TEST(EngineBuilderTest, CopiesOfRowPitchedViewsRunARowKernel) {
  struct Case {
    DType in, out;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
    uint32_t row_grid;  // rows x blocks per row, or 0 for the element loop
    std::string expect;
  };
  const std::vector<Case> cases = {
      {DType::Float32,
       DType::Float32,
       {1, 128, 50257},
       {128 * 50264, 50264, 1},
       0,
       128 * 50,
       "const long long cols = 50257LL, pitch = 50264LL;"},
      {DType::Float16, DType::Float32, {6, 2400}, {2500, 1}, 3, 6 * 3, "p0 + 3LL + row * pitch"},
      {DType::Bool, DType::Bool, {2, 3, 600}, {2100, 700, 1}, 50, 6, "bool_t v[4];"},
      {DType::Int64, DType::Int64, {5, 1, 256}, {300, 7, 1}, 0, 5, "pitch = 300LL"},
      // Outer dimensions that do not collapse into one run of rows.
      {DType::Float32, DType::Float32, {4, 3, 300}, {1500, 300, 1}, 0, 0, ""},
      {DType::Float32, DType::Float32, {64, 100}, {128, 1}, 0, 0, ""},     // short rows
      {DType::Float32, DType::Float32, {4, 512}, {0, 1}, 0, 0, ""},        // rows broadcast
      {DType::Float16, DType::Float16, {300, 4}, {1, 300}, 0, 0, ""},      // a transpose
      {DType::Float32, DType::Float32, {4, 300}, {300, -1}, 299, 0, ""},   // columns reversed
      {DType::Float32, DType::Float32, {4, 300}, {-400, 1}, 1200, 0, ""},  // rows reversed
      {DType::Float32, DType::Float32, {0, 300}, {400, 1}, 0, 0, ""},      // empty
      {DType::Float32, DType::Float32, {3000}, {2}, 0, 0, ""},             // one dimension
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} -> {} {} strides {}", dtype_name(c.in), dtype_name(c.out),
                             fmt::join(c.sizes, "x"), fmt::join(c.strides, ",")));
    cuda::TypedKernel k;
    k.name = "k_test";
    k.sizes = c.sizes;
    k.out = c.out;
    k.expression = "{0}";
    k.inputs.push_back({c.in, c.strides, c.offset});
    for (const bool in_code : {true, false}) {
      SCOPED_TRACE(in_code ? "sizes in the code" : "sizes as arguments");
      cuda::LaunchShape launch;
      cuda::KernelArgs args(in_code);
      const std::string source = cuda::generate_typed(k, &launch, &args);
      EXPECT_EQ(launch.block, 256u);
      if (c.row_grid != 0) {
        EXPECT_EQ(launch.grid, c.row_grid) << source;
        EXPECT_EQ(source.find("baton_for_each"), std::string::npos) << source;
        if (in_code) {
          EXPECT_NE(source.find(c.expect), std::string::npos) << source;
        } else {
          // cols, pitch, blocks per row and the input's offset, in that order.
          // The pitch is the stride of the innermost dimension before the columns that is not
          // of size 1.
          size_t row_dim = c.sizes.size() - 2;
          while (c.sizes[row_dim] == 1) --row_dim;
          const int64_t cols = c.sizes.back(), pitch = c.strides[row_dim];
          EXPECT_EQ(args.values(),
                    (std::vector<int64_t>{cols, pitch, (cols + 1023) / 1024, c.offset}));
          EXPECT_NE(source.find("cols = a.v[0], pitch = a.v[1];"), std::string::npos) << source;
        }
      } else {
        EXPECT_NE(source.find("baton_for_each("), std::string::npos) << source;
        EXPECT_EQ(source.find("pitch"), std::string::npos) << source;
      }
      auto cubin = cuda::compile_to_cubin(cuda::kernel_prelude() + source, 90, "k_test");
      ASSERT_TRUE(cubin.ok()) << cubin.status().to_string() << "\n" << source;
    }
  }
}

// division_magic's quotients are exact for every numerator below 2^31 (checked here on the host
// with the device's arithmetic: the high 32 bits of a 32 x 32-bit product, then the shift).
TEST(EngineBuilderTest, DivisionMagicsGiveExactQuotientsBelowTwoToThe31) {
  auto divide = [](uint32_t x, int64_t magic) -> uint32_t {
    if (magic == 0) return x;
    const uint32_t multiplier = static_cast<uint32_t>(magic);
    const uint32_t shift = static_cast<uint32_t>(static_cast<uint64_t>(magic) >> 32);
    return static_cast<uint32_t>((uint64_t{x} * multiplier) >> 32) >> shift;
  };
  std::vector<int64_t> divisors = {
      1, 2, 3, 5, 6, 7, 12, 49, 64, 197, 768, 3072, 50257, 65536, 1000003, (int64_t{1} << 30) - 1,
      int64_t{1} << 30, (int64_t{1} << 30) + 1, (int64_t{1} << 31) - 1,
      // Past every numerator: quotient 0 (no shift past 63 bits).
      int64_t{1} << 31, (int64_t{1} << 31) + 5, int64_t{1} << 40, int64_t{1} << 62};
  std::mt19937_64 rng(37);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<int64_t>(rng() % 0x7fffffffu));
  for (const int64_t d : divisors) {
    const int64_t magic = cuda::division_magic(d);
    std::vector<uint32_t> numerators = {0, 1, 0x7fffffffu, 0x7ffffffeu};
    for (uint32_t m : {1u, 2u, 3u, 1000u}) {
      if (d >= (int64_t{1} << 31)) break;  // no multiple below 2^31 but 0
      const uint64_t multiple = static_cast<uint64_t>(d) * m;
      for (int64_t delta : {-1, 0, 1}) {
        const int64_t x = static_cast<int64_t>(multiple) + delta;
        if (x >= 0 && x < (int64_t{1} << 31)) numerators.push_back(static_cast<uint32_t>(x));
      }
    }
    for (int j = 0; j < 2000; ++j) numerators.push_back(static_cast<uint32_t>(rng() & 0x7fffffffu));
    for (const uint32_t x : numerators) {
      ASSERT_EQ(divide(x, magic), x / static_cast<uint64_t>(d)) << x << " / " << d;
    }
  }
}

// Channels-last values come only from convolutions, which this builder does not lower yet: the
// test stands a layout copy in for one (the Identity's output aliases an NHWC copy of x) and
// lowers the rest through the registered lowerings, as EngineBuilder::lower would.
TEST(EngineBuilderTest, PoolsAndReductionsKeepChannelsLastInputsChannelsLast) {
  register_builtins();
  OnnxBuilder b(18);
  b.input("x", {2, 8, 9, 9});
  b.initializer_int64("hw", {2}, {2, 3});
  b.node("Identity", {"x"}, {"a"}, "conv_stand_in");
  auto& pool = b.node("MaxPool", {"a"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
  b.node("ReduceMean", {"p", "hw"}, {"m"}, "squeeze");
  b.node("GlobalAveragePool", {"p"}, {"g"}, "gap");
  b.node("Add", {"m", "g"}, {"y"}, "add");
  b.output("y", {2, 8, 1, 1});
  const std::vector<uint8_t> bytes = b.bytes();
  auto graph = compiler::import_onnx_bytes(bytes, "<memory>", ".", {});
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  ASSERT_TRUE(compiler::infer_and_fold(*graph).ok());
  compiler::Partition partition;
  partition.name = "cuda_0";
  std::map<std::string, int> node_of, value_of;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (graph->nodes[i].dead) continue;
    partition.nodes.push_back(static_cast<int>(i));
    node_of[graph->nodes[i].name] = static_cast<int>(i);
  }
  for (size_t v = 0; v < graph->values.size(); ++v)
    value_of[graph->values[v].name] = static_cast<int>(v);
  partition.inputs = {value_of.at("x")};
  partition.outputs = {value_of.at("y")};
  cuda::EngineTarget target;
  target.sm_arch = 90;
  cuda::Lowering ctx(*graph, partition, target);
  // The stand-in convolution: `a` is x stored N, H, W, C.
  const auto nhwc = ctx.channels_last_copy(value_of.at("x"), DType::Float32, 8);
  ASSERT_TRUE(nhwc.ok()) << nhwc.status().to_string();
  ctx.alias(value_of.at("a"), *nhwc);
  ASSERT_TRUE(ctx.channels_last(value_of.at("a")));
  for (const char* name : {"pool", "squeeze", "gap"}) {
    const compiler::IrNode& n = graph->nodes[node_of.at(name)];
    const cuda::OpLowering* l = cuda::find_lowering(n.op_type);
    ASSERT_NE(l, nullptr) << n.op_type;
    EXPECT_TRUE(l->layout_aware) << n.op_type;
    EXPECT_TRUE(l->supports(*graph, n)) << n.op_type;
    ASSERT_TRUE(l->lower(ctx, node_of.at(name)).ok()) << n.op_type;
  }
  // The pool reads `a` in place and writes NHWC; the reductions keep the layout.
  EXPECT_TRUE(ctx.channels_last(value_of.at("p")));
  EXPECT_EQ(ctx.strides_of(value_of.at("p")), (std::vector<int64_t>{200, 1, 40, 8}));
  EXPECT_TRUE(ctx.channels_last(value_of.at("m")));
  EXPECT_TRUE(ctx.channels_last(value_of.at("g")));
  ASSERT_TRUE(cuda::lower_fused_group(ctx, {node_of.at("add")}).ok());
  auto lowered = ctx.finish();  // NVRTC compiles the kernels for sm_90
  ASSERT_TRUE(lowered.ok()) << lowered.status().to_string();
  const cuda::EngineBlob blob = parse_blob(lowered->blob);
  // NHWC copy, pool, two reductions, the add: no layout copy back before the pool.
  EXPECT_EQ(blob.steps().size(), 5u);
}

// A squeeze-excite pool at batch 1 (EfficientNet-B0's first: 112x112 positions of 32 channels,
// channels-last after its convolution) is one block of columns: its positions are split over 64
// blocks, whose partial results a second kernel combines (reduce.cuh); the build option
// reduce_columns=whole keeps the one block (of 1024 threads). At batch 8 of 72 channels
// (fp16: two blocks of 64 columns an image, 16 blocks) over 28x28 positions the split takes 12
// parts of at least 64 positions; a pool of 7x7 positions is not split.
TEST(EngineBuilderTest, APoolOfFewColumnBlocksIsSplitOverItsPositions) {
  auto model = [](int64_t n, int64_t c, int64_t hw) {
    OnnxBuilder b(17);
    b.input("x", {n, 3, hw, hw});
    b.initializer("w", {c, 3, 1, 1}, std::vector<float>(static_cast<size_t>(c * 3), 0.1f));
    b.node("Conv", {"x", "w"}, {"f"}, "conv");
    b.node("GlobalAveragePool", {"f"}, {"y"}, "pool");
    b.output("y", {n, c, 1, 1});
    return b;
  };
  struct Case {
    int64_t n, c, hw;
    const char* option;
    uint32_t reduce_grid, reduce_block;  // the reduction's first kernel
    bool split;
  };
  for (const Case& k : {Case{1, 32, 112, "reduce_columns=split", 64, 256, true},
                        Case{1, 32, 112, "reduce_columns=whole", 1, 1024, false},
                        Case{8, 72, 28, "reduce_columns=split", 16 * 12, 256, true},
                        Case{1, 32, 7, "reduce_columns=split", 1, 256, false}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{}x{} {}", k.n, k.c, k.hw, k.hw, k.option));
    auto built = build(model(k.n, k.c, k.hw), "fp16", 0, {k.option});
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    ASSERT_EQ(built->blobs.size(), 1u);
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    std::vector<const cuda::KernelStep*> reduce, finish;
    for (const cuda::StepRecord& r : blob.steps()) {
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel)) continue;
      const std::string name(blob.kernel_name(r.kernel.kernel));
      if (name.find("reduce_finish") != std::string::npos) {
        finish.push_back(&r.kernel);
      } else if (name.find("reduce") != std::string::npos) {
        reduce.push_back(&r.kernel);
      }
    }
    ASSERT_EQ(reduce.size(), 1u);
    EXPECT_EQ(reduce[0]->grid[0], k.reduce_grid);
    EXPECT_EQ(reduce[0]->block[0], k.reduce_block);
    ASSERT_EQ(finish.size(), k.split ? 1u : 0u);
  }
}

// EfficientNet's SiLU, Sigmoid(v) * v after a convolution, is the convolution's activation
// (fuse-conv's "Silu") and takes the GPU path of any activation cuDNN's graph does not have, as
// LeakyRelu does: an epilogue kernel after a cuDNN convolution, inside the depthwise kernel. Both
// programs are the same kernels (unfused, the depthwise convolution's SiLU was a kernel of its
// own: one step more).
TEST(EngineBuilderTest, SiluAfterAConvolutionIsItsActivationAsLeakyReluIs) {
  auto model = [](bool silu) {
    OnnxBuilder b(17);
    b.input("x", {1, 16, 14, 14});
    b.initializer("w1", {32, 16, 3, 3}, std::vector<float>(32 * 16 * 9, 0.02f));
    auto& c1 = b.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
    OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
    b.initializer("w2", {32, 1, 3, 3}, std::vector<float>(32 * 9, 0.1f));
    const auto act = [&](const std::string& v, const std::string& y) {
      if (silu) {
        b.node("Sigmoid", {v}, {v + "_s"}, v + "_sigmoid");
        b.node("Mul", {v, v + "_s"}, {y}, v + "_silu");
      } else {
        b.node("LeakyRelu", {v}, {y}, v + "_leaky");
      }
    };
    act("c1", "a1");
    auto& c2 = b.node("Conv", {"a1", "w2"}, {"c2"}, "depthwise");
    OnnxBuilder::attr_ints(c2, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_int(c2, "group", 32);
    act("c2", "a2");
    b.initializer("w3", {24, 32, 1, 1}, std::vector<float>(24 * 32, 0.1f));
    b.node("Conv", {"a2", "w3"}, {"y"}, "project");
    b.output("y", {1, 24, 14, 14});
    return b;
  };
  for (const char* precision : {"fp16", "fp32"}) {
    SCOPED_TRACE(precision);
    auto silu = build(model(true), precision);
    auto leaky = build(model(false), precision);
    ASSERT_TRUE(silu.ok()) << silu.status().to_string();
    ASSERT_TRUE(leaky.ok()) << leaky.status().to_string();
    ASSERT_EQ(silu->blobs.size(), 1u);
    const cuda::EngineBlob a = parse_blob(silu->blobs[0]), b = parse_blob(leaky->blobs[0]);
    const auto steps = a.steps(), other = b.steps();
    ASSERT_EQ(steps.size(), other.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(steps[i].kind, other[i].kind) << "step " << i;
      if (steps[i].kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
          other[i].kind == steps[i].kind) {
        EXPECT_EQ(std::string(a.kernel_name(steps[i].kernel.kernel)),
                  std::string(b.kernel_name(other[i].kernel.kernel)))
            << "step " << i;
      }
    }
  }
}

// A UNet's bilinear upsampling between two convolutions reads the first's channels-last output
// in place and writes its own channels-last for the second: no conversion to row-major before it
// and none back after (the conversions left are the input's, to NHWC for the first convolution,
// and the second convolution's output, to the row-major output binding). Its output as a
// partition output is written row-major, read the same way.
TEST(EngineBuilderTest, AResizeBetweenConvolutionsKeepsTheirChannelsLastLayout) {
  auto model = [](bool then_conv) {
    OnnxBuilder b(18);
    b.input("x", {1, 8, 10, 12});
    b.initializer("w1", {16, 8, 3, 3}, std::vector<float>(16 * 8 * 9, 0.05f));
    auto& c1 = b.node("Conv", {"x", "w1"}, {"f"}, "conv1");
    OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
    b.initializer("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
    auto& up = b.node("Resize", {"f", "", "scales"}, {"u"}, "upsample");
    OnnxBuilder::attr_string(up, "mode", "linear");
    if (!then_conv) {
      b.output("u", {1, 16, 20, 24});
      return b;
    }
    b.initializer("w2", {8, 16, 3, 3}, std::vector<float>(8 * 16 * 9, 0.05f));
    auto& c2 = b.node("Conv", {"u", "w2"}, {"y"}, "conv2");
    OnnxBuilder::attr_ints(c2, "pads", {1, 1, 1, 1});
    b.output("y", {1, 8, 20, 24});
    return b;
  };
  for (const bool then_conv : {true, false}) {
    SCOPED_TRACE(then_conv ? "into a convolution" : "into the output");
    auto built = build(model(then_conv), "fp16");
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    ASSERT_EQ(built->blobs.size(), 1u);
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    EXPECT_EQ(kernels_named(blob, "resize"), 1u);
    EXPECT_EQ(kernels_named(blob, "to_nchw"), then_conv ? 1u : 0u);
    EXPECT_EQ(kernels_named(blob, "to_nhwc"), 1u);
  }
}

// A pool of a channels-last value takes 16 bytes of channels per thread where the channels allow
// (device/pool.cuh): a 2x2 MaxPool of 64 channels at 32x32 is 16384 outputs, 2048 threads of 8
// in fp16 (8 blocks of 256) and 4096 of 4 in fp32 (16 blocks); 20 channels are one a thread in
// fp16 (20 is not a multiple of 8: 5120 threads, 20 blocks) and four in fp32 (5 blocks).
TEST(EngineBuilderTest, ChannelsLastPoolsTakeSixteenBytesOfChannelsAThread) {
  struct Case {
    int64_t channels;
    const char* precision;
    uint32_t grid;
  };
  for (const Case& k :
       {Case{64, "fp16", 8}, Case{64, "fp32", 16}, Case{20, "fp16", 20}, Case{20, "fp32", 5}}) {
    SCOPED_TRACE(fmt::format("{} channels {}", k.channels, k.precision));
    OnnxBuilder b(18);
    b.input("x", {1, 8, 32, 32});
    b.initializer("w", {k.channels, 8, 1, 1},
                  std::vector<float>(static_cast<size_t>(k.channels * 8), 0.1f));
    b.node("Conv", {"x", "w"}, {"f"}, "conv");
    auto& pool = b.node("MaxPool", {"f"}, {"p"}, "pool");
    OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
    OnnxBuilder::attr_ints(pool, "strides", {2, 2});
    b.initializer("w2", {8, k.channels, 1, 1},
                  std::vector<float>(static_cast<size_t>(k.channels * 8), 0.1f));
    b.node("Conv", {"p", "w2"}, {"y"}, "conv2");
    b.output("y", {1, 8, 16, 16});
    auto built = build(b, k.precision);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    ASSERT_EQ(kernels_named(blob, "maxpool"), 1u);
    for (const cuda::StepRecord& r : blob.steps()) {
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel) ||
          std::string_view(blob.kernel_name(r.kernel.kernel)).find("maxpool") ==
              std::string_view::npos) {
        continue;
      }
      EXPECT_EQ(r.kernel.grid[0], k.grid);
      EXPECT_EQ(r.kernel.block[0], 256u);
    }
  }
}

// MatMuls whose B is a vector: a dot product (a scalar output) and a matrix times a vector (one
// column, padded to 8 when the GEMM is large: 65536 x 256 x 1 is 2^24 multiply-adds). The
// padding's row count once read "every output dimension but the last", which a scalar does not
// have.
TEST(EngineBuilderTest, MatMulsByAVectorBuildWithTheirPadding) {
  for (const int64_t m : {0, 4, 65536}) {
    SCOPED_TRACE(m == 0 ? "dot product" : fmt::format("{} rows", m));
    OnnxBuilder b(17);
    b.input("x", m == 0 ? std::vector<int64_t>{256} : std::vector<int64_t>{m, 256});
    b.initializer("v", {256}, std::vector<float>(256, 0.01f));
    b.node("MatMul", {"x", "v"}, {"y"}, "mm");
    b.output("y", m == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{m});
    auto built = build(b, "fp32");
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    ASSERT_EQ(built->blobs.size(), 1u);
    const cuda::EngineBlob blob = parse_blob(built->blobs[0]);
    // The GEMM, and at 65536 rows the gather of its padded result's one real column.
    EXPECT_EQ(blob.steps().size(), m == 65536 ? 2u : 1u);
  }
}

TEST(EngineBuilderTest, BadTargetsAreExplained) {
  register_builtins();
  cuda::register_compiler();
  auto bad_arch = compiler::make_backend_compiler({Device::cuda(0), "sm9", "fp32"});
  EXPECT_EQ(bad_arch.code(), Error::InvalidArgument);
  EXPECT_NE(bad_arch.status().message().find("expected sm_XY"), std::string::npos);
  auto bad_precision = compiler::make_backend_compiler({Device::cuda(0), "sm_90", "fp8"});
  EXPECT_NE(bad_precision.status().message().find("expected fp32, tf32, fp16 or bf16"),
            std::string::npos);
  if (cuda::devices().empty()) {
    auto no_arch = compiler::make_backend_compiler({Device::cuda(0), "", "fp32"});
    EXPECT_NE(no_arch.status().message().find("Pass --arch sm_XY"), std::string::npos)
        << no_arch.status().to_string();
  }
}

// `baton run --saturate-rest`'s busy kernel (builder/device/competing_workload.cuh) compiles
// without a GPU, so a broken kernel shows here rather than first on the GPU host.
TEST(EngineBuilderTest, TheCompetingWorkloadCompilesForSm90AndSm80) {
  for (uint32_t arch : {90u, 80u}) {
    auto cubin = cuda::CompetingWorkload::cubin(arch);
    ASSERT_TRUE(cubin.ok()) << "sm_" << arch << ": " << cubin.status().to_string();
    EXPECT_GT(cubin->size(), 0u);
  }
  if (cuda::devices().empty()) {
    auto load = cuda::CompetingWorkload::create(0);
    EXPECT_EQ(load.code(), Error::InvalidArgument) << load.status().to_string();
  }
}

// A key/value cache kept as state (docs/state.md): present = ScatterND(past, positions, rows) with
// `past` read first by another node. With --state past=present the method binds the partition's
// input and output to one buffer ("in_place" spec: input 0, output 1) and the engine writes only
// the new rows: no step copies the cache. Without state the output starts as a copy of it.
OnnxBuilder cache_update(DType indices) {
  OnnxBuilder b(18);
  b.input("past", {2, 16, 8});
  b.input("pos", {2, 3, 2}, static_cast<int>(indices));
  b.input("rows", {2, 3, 8});
  b.initializer("two", {1}, {2.0f});
  b.node("Mul", {"past", "two"}, {"before"}, "read_before");
  b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
  b.node("Mul", {"present", "two"}, {"y"}, "read_after");
  b.output("before", {2, 16, 8});
  b.output("y", {2, 16, 8});
  b.output("present", {2, 16, 8});
  return b;
}

TEST(EngineBuilderTest, AStateCacheIsUpdatedInPlaceWithoutACopy) {
  register_builtins();
  cuda::register_compiler();
  for (const std::string precision : {"fp32", "fp16"}) {
    for (const bool state : {false, true}) {
      SCOPED_TRACE(fmt::format("{} state {}", precision, state));
      auto backend = compiler::make_backend_compiler({Device::cuda(0), "sm_90", precision, {}});
      ASSERT_TRUE(backend.ok()) << backend.status().to_string();
      compiler::CompileOptions options;
      options.backends.push_back(backend->get());
      if (state) options.state = {{"past", "present"}};
      auto compiled = compiler::compile_bytes(cache_update(DType::Int64).bytes(), options);
      ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
      auto bytes = compiled->serialize();
      ASSERT_TRUE(bytes.ok());
      auto file = format::ProgramFile::parse(*bytes);
      ASSERT_TRUE(file.ok()) << file.status().to_string();
      const auto* m = file->program().methods()->Get(0);
      ASSERT_EQ(m->delegates()->size(), 1u);
      std::map<std::string, std::string> specs;
      for (const auto* cs : *m->delegates()->Get(0)->compile_specs()) {
        specs[cs->key()->str()] = std::string(cs->value()->begin(), cs->value()->end());
      }
      const auto blob_bytes = file->segment(m->delegates()->Get(0)->blob_segment());
      const cuda::EngineBlob blob =
          parse_blob(std::vector<uint8_t>(blob_bytes.begin(), blob_bytes.end()));
      int copies = 0, scatters = 0;
      for (const cuda::StepRecord& r : blob.steps()) {
        copies += r.kind == static_cast<uint32_t>(cuda::StepKind::Copy);
        if (r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel)) {
          const std::string name(blob.kernel_name(r.kernel.kernel));
          scatters += name.find("scatter_nd") != std::string::npos;
        }
      }
      EXPECT_EQ(scatters, 1);
      if (state) {
        // "INPUT=OUTPUT" over the partition's inputs and outputs: the engine's bindings of past
        // and present.
        unsigned in = 0, out = 0;
        ASSERT_EQ(std::sscanf(specs["in_place"].c_str(), "%u=%u", &in, &out), 2)
            << specs["in_place"];
        EXPECT_EQ(blob.binding_name(in), "past");
        EXPECT_EQ(blob.binding_name(blob.num_inputs() + out), "present");
        EXPECT_EQ(copies, 0) << "the cache is copied although it is updated in place";
        EXPECT_EQ(m->state()->size(), 1u);
      } else {
        EXPECT_EQ(specs.count("in_place"), 0u);
        EXPECT_GE(copies, 1) << "without state the output must start as the data";
      }
    }
  }
}

// A decoder with its caches as state and its tokens chosen inside the program (--sample greedy
// and top-k=8, docs/generate.md) builds for sm_90 as one engine: the scatters, the ArgMax or the
// sampler's TopK, CumSum, reductions and gathers all lower, none falls back to the CPU.
TEST(EngineBuilderTest, ADecoderWithStateAndSamplingIsOneEngine) {
  register_builtins();
  cuda::register_compiler();
  const std::string model = (std::filesystem::path(testing::source_dir()) /
                             "tests/e2e/models/decode/gpt2_index_put_full_dynamo.onnx")
                                .string();
  for (const std::string sample : {"greedy", "top-k=8"}) {
    SCOPED_TRACE(sample);
    auto backend = compiler::make_backend_compiler({Device::cuda(0), "sm_90", "fp16", {}});
    ASSERT_TRUE(backend.ok());
    compiler::CompileOptions options;
    options.backends.push_back(backend->get());
    options.state_auto = true;
    options.sample = sample;
    options.io = compiler::MethodIo::Device;
    options.dims = {{"batch", 1, 8, 0, {}}, {"new_tokens", 1, 64, 0, {}}};
    auto compiled = compiler::compile_file(model, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
    EXPECT_TRUE(compiled->summary().fallbacks.empty())
        << compiled->summary().fallbacks.size() << " nodes on the CPU, the first "
        << compiled->summary().fallbacks.front().op;
    EXPECT_EQ(compiled->summary().partitions.size(), 1u);
    EXPECT_EQ(compiled->summary().state.size(), 4u);
  }
}

TEST(EngineBuilderTest, StateReadAfterItsUpdateInsideAnEngineIsRefused) {
  register_builtins();
  cuda::register_compiler();
  OnnxBuilder b(18);
  b.input("past", {16, 8});
  b.input("pos", {2, 1}, 7);
  b.input("rows", {2, 8});
  b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
  b.node("Add", {"present", "past"}, {"y"}, "late_reader");
  b.output("y", {16, 8});
  b.output("present", {16, 8});
  auto backend = compiler::make_backend_compiler({Device::cuda(0), "sm_90", "fp32", {}});
  ASSERT_TRUE(backend.ok());
  compiler::CompileOptions options;
  options.backends.push_back(backend->get());
  options.state = {{"past", "present"}};
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), Error::InvalidArgument);
  EXPECT_NE(compiled.status().message().find("late_reader"), std::string::npos)
      << compiled.status().message();
  EXPECT_NE(compiled.status().message().find("after its update"), std::string::npos);
}

}  // namespace
}  // namespace baton
