// The CUDA backend on a real GPU: every engine step and the end-to-end models against Baton's CPU
// path on fresh random inputs, in every precision. Without a GPU each test reports itself
// skipped (label `gpu`); on a GPU host the same binary runs them.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "baton/extension/module.h"
#include "baton/extension/npy.h"
#include "baton/runtime/device_allocator.h"
#include "dense_block_model.h"
#include "testing/model_cases.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"
#include "testing/random.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using testing::OnnxBuilder;

const char* const kPrecisions[] = {"fp32", "tf32", "fp16", "bf16"};

// The bounds: 1e-5 in fp32 (TF32 off), 3e-3 for TF32, fp16 and bf16. For bf16 the bound
// is applied on top of the model's own bf16 floor (see bf16_floor): bf16 has an 8-bit mantissa,
// and merely rounding an MLP's weights to bf16 already moves its output 2.4-2.9e-3 from fp32,
// which no bf16 engine can undo.
double tolerance(std::string_view precision) { return precision == "fp32" ? 1e-5 : 3e-3; }

float round_bf16(float x) { return bfloat16_to_float(float_to_bfloat16(x)); }

// What the model computes, in fp32 on the CPU, once the values a bf16 engine feeds to its tensor
// cores (the GEMM operands that are weights or model inputs) are rounded to bf16. Its distance from
// the fp32 result is the floor of any bf16 execution.
std::pair<std::vector<uint8_t>, std::vector<Tensor>> round_gemm_operands_to_bf16(
    const std::vector<uint8_t>& onnx_bytes, const std::vector<Tensor>& inputs) {
  onnx::ModelProto model;
  model.ParseFromArray(onnx_bytes.data(), static_cast<int>(onnx_bytes.size()));
  std::set<std::string> operands;
  for (const auto& n : model.graph().node()) {
    if (n.op_type() == "Conv") {
      // cuDNN convolutions (group 1) read X and W in bf16; the depthwise kernel reads X in bf16
      // (stored so when only convolutions read it) and W in fp32.
      int64_t group = 1;
      for (const auto& a : n.attribute())
        if (a.name() == "group") group = a.i();
      operands.insert(n.input(0));
      if (group == 1) operands.insert(n.input(1));
      continue;
    }
    if (n.op_type() != "MatMul" && n.op_type() != "Gemm") continue;
    for (int i = 0; i < 2 && i < n.input_size(); ++i) operands.insert(n.input(i));
  }
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    if (!operands.count(init.name())) continue;
    if (init.data_type() == onnx::TensorProto::FLOAT16) {
      // A float16 model's weights: rounded to bfloat16, stored back as float16 (exact for the
      // weights' range).
      auto round16 = [](uint16_t h) { return float_to_half(round_bf16(half_to_float(h))); };
      if (init.has_raw_data()) {
        std::string raw = init.raw_data();
        for (size_t i = 0; i + 2 <= raw.size(); i += 2) {
          uint16_t h;
          std::memcpy(&h, raw.data() + i, 2);
          h = round16(h);
          std::memcpy(raw.data() + i, &h, 2);
        }
        init.set_raw_data(raw);
      } else {
        for (auto& v : *init.mutable_int32_data()) v = round16(static_cast<uint16_t>(v));
      }
      continue;
    }
    if (init.data_type() != onnx::TensorProto::FLOAT) continue;
    if (init.has_raw_data()) {
      std::string raw = init.raw_data();
      for (size_t i = 0; i + 4 <= raw.size(); i += 4) {
        float f;
        std::memcpy(&f, raw.data() + i, 4);
        f = round_bf16(f);
        std::memcpy(raw.data() + i, &f, 4);
      }
      init.set_raw_data(raw);
    } else {
      for (auto& f : *init.mutable_float_data()) f = round_bf16(f);
    }
  }
  std::vector<Tensor> rounded;
  int k = 0;
  for (const auto& in : model.graph().input()) {
    bool is_init = false;
    for (const auto& init : model.graph().initializer())
      is_init = is_init || init.name() == in.name();
    if (is_init) continue;
    const Tensor& t = inputs[k++];
    Tensor copy = Tensor::empty(t.dtype(), t.sizes()).value();
    std::memcpy(copy.data(), t.data(), t.nbytes());
    if (operands.count(in.name()) && copy.dtype() == DType::Float32) {
      for (int64_t i = 0; i < copy.numel(); ++i)
        copy.data_as<float>()[i] = round_bf16(copy.data_as<float>()[i]);
    }
    if (operands.count(in.name()) && copy.dtype() == DType::Float16) {
      for (int64_t i = 0; i < copy.numel(); ++i) {
        uint16_t& h = copy.data_as<uint16_t>()[i];
        h = float_to_half(round_bf16(half_to_float(h)));
      }
    }
    rounded.push_back(std::move(copy));
  }
  std::string out;
  model.SerializeToString(&out);
  return {std::vector<uint8_t>(out.begin(), out.end()), std::move(rounded)};
}

struct Compiled {
  std::shared_ptr<const runtime::Program> program;
  compiler::CompileSummary summary;
};

class GpuTest : public ::testing::Test {
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

  static Compiled compile(const std::vector<uint8_t>& onnx, const std::string& device,
                          const std::string& precision,
                          std::vector<compiler::InputShape> shapes = {},
                          const std::string& arch = "", size_t max_partition_nodes = 0,
                          std::vector<std::string> cuda_options = {}) {
    compiler::CompileOptions options;
    options.max_partition_nodes = max_partition_nodes;
    options.input_shapes = std::move(shapes);
    std::unique_ptr<compiler::BackendCompiler> backend;
    if (device != "cpu") {
      auto b = compiler::make_backend_compiler(
          {*Device::parse(device), arch, precision, std::move(cuda_options)});
      EXPECT_TRUE(b.ok()) << b.status().to_string();
      if (!b.ok()) return {};
      backend = std::move(b).value();
      options.backends.push_back(backend.get());
    }
    auto compiled = compiler::compile_bytes(onnx, options);
    EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
    if (!compiled.ok()) return {};
    auto bytes = compiled->serialize();
    auto program = runtime::Program::load_bytes(*bytes);
    EXPECT_TRUE(program.ok()) << program.status().to_string();
    if (!program.ok()) return {};
    return {*program, compiled->summary()};
  }

  static std::vector<Tensor> run(const Compiled& c, const std::vector<Tensor>& inputs,
                                 const runtime::MethodOptions& options = {}) {
    if (!c.program) return {};
    auto module = extension::Module::from_program(c.program, "forward", options);
    EXPECT_TRUE(module.ok()) << module.status().to_string();
    if (!module.ok()) return {};
    auto out = module->run(inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? *out : std::vector<Tensor>{};
  }

  // Runs the model on the CPU and, in each precision, on cuda:0 (all nodes on the GPU unless
  // `gpu_kernel_calls` says how many stay on the CPU); returns the worst relative error seen.
  static double compare(const OnnxBuilder& model, const std::vector<Tensor>& inputs,
                        size_t gpu_kernel_calls = 0) {
    return compare_model(model.bytes(), inputs, {}, gpu_kernel_calls);
  }

  // `untimed`: each engine takes the heuristics' first cuBLASLt algorithm and cuDNN plan, when
  // built and when loaded (the build and load options tune_candidates=1).
  // `build`: more build options (docs/options.md) for the engines.
  static double compare_model(const std::vector<uint8_t>& onnx, const std::vector<Tensor>& inputs,
                              const std::vector<compiler::InputShape>& shapes,
                              size_t gpu_kernel_calls = 0, bool untimed = false,
                              const std::vector<std::string>& build_options = {}) {
    const auto reference = run(compile(onnx, "cpu", "", shapes), inputs);
    const auto [bf16_model, bf16_inputs] = round_gemm_operands_to_bf16(onnx, inputs);
    const auto bf16_reference = run(compile(bf16_model, "cpu", "", shapes), bf16_inputs);
    double worst = 0.0;
    for (const char* precision : kPrecisions) {
      SCOPED_TRACE(precision);
      std::vector<std::string> build = build_options;
      if (untimed) build.push_back("tune_candidates=1");
      const Compiled gpu = compile(onnx, "cuda:0", precision, shapes, "", 0, build);
      EXPECT_GE(gpu.summary.delegate_calls, 1u) << "nothing ran on the GPU";
      EXPECT_EQ(gpu.summary.kernel_calls, gpu_kernel_calls);
      runtime::MethodOptions load;
      if (untimed) load.backend_options = {{"tune_candidates", "1"}};
      const auto out = run(gpu, inputs, load);
      EXPECT_EQ(out.size(), reference.size());
      for (size_t o = 0; o < std::min(out.size(), reference.size()); ++o) {
        EXPECT_EQ(out[o].sizes(), reference[o].sizes());
        if (out[o].sizes() != reference[o].sizes()) continue;
        const double err = testing::relative_error(out[o], reference[o]);
        // A float16 output (a model exported in float16) also carries float16's rounding, which
        // the CPU path and the engine apply at different steps.
        double bound = out[o].dtype() == DType::Float16 ? std::max(tolerance(precision), 2e-3)
                                                        : tolerance(precision);
        if (std::string_view(precision) == "bf16") {
          const double floor = testing::relative_error(bf16_reference[o], reference[o]);
          bound += floor;
          std::printf("    bf16 output %zu: error %.3g, floor %.3g\n", o, err, floor);
        }
        EXPECT_LE(err, bound) << "output " << o;
        worst = std::max(worst, err);
      }
    }
    return worst;
  }

  // Every case of a model directory, compiled for the GPU in each precision, against the CPU path.
  static int compare_cases(const fs::path& dir, bool untimed = false) {
    auto cases = testing::read_model_cases(dir);
    EXPECT_TRUE(cases.ok()) << cases.status().to_string();
    if (!cases.ok()) return 0;
    for (const testing::ModelCase& c : *cases) {
      SCOPED_TRACE(c.name);
      std::ifstream model(c.model, std::ios::binary);
      const std::vector<uint8_t> onnx((std::istreambuf_iterator<char>(model)),
                                      std::istreambuf_iterator<char>());
      const double worst = compare_model(onnx, c.inputs, c.shapes, 0, untimed);
      std::printf("  %-24s worst relative error over precisions %.3g\n", c.name.c_str(), worst);
    }
    return static_cast<int>(cases->size());
  }

  std::mt19937 rng_{20261122};
  Tensor random(std::vector<int64_t> sizes, float lo = -1.0f, float hi = 1.0f) {
    return testing::random_tensor(rng_, std::move(sizes), lo, hi);
  }
  std::vector<float> floats(size_t n, float scale = 0.2f) {
    return testing::random_normal(rng_, n, scale);
  }
};

// --- every step kind -------------------------------------------------------------------------

TEST_F(GpuTest, GemmVariants) {
  struct Case {
    int64_t m, k, n;
    bool ta, tb;
    float alpha, beta;
    int c;  // 0 none, 1 row-vector bias, 2 full constant matrix, 3 scalar, 4 runtime matrix
  };
  for (const Case& c :
       {Case{5, 37, 19, false, true, 1.0f, 1.0f, 1}, Case{8, 64, 33, false, false, 1.0f, 1.0f, 0},
        Case{3, 17, 9, true, false, 0.5f, 2.0f, 2}, Case{7, 13, 11, true, true, 1.5f, 0.25f, 3},
        Case{6, 29, 10, false, true, 1.0f, 0.5f, 4},
        Case{1, 1000, 3, false, true, 1.0f, 1.0f, 1}}) {
    SCOPED_TRACE(fmt::format("m={} k={} n={} ta={} tb={} c={}", c.m, c.k, c.n, c.ta, c.tb, c.c));
    OnnxBuilder b;
    b.input("a", c.ta ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k});
    b.initializer("w", c.tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n},
                  floats(static_cast<size_t>(c.k * c.n)));
    std::vector<std::string> ins = {"a", "w"};
    std::vector<Tensor> inputs = {
        random(c.ta ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k})};
    if (c.c == 1) b.initializer("c", {c.n}, floats(static_cast<size_t>(c.n)));
    if (c.c == 2) b.initializer("c", {c.m, c.n}, floats(static_cast<size_t>(c.m * c.n)));
    if (c.c == 3) b.initializer("c", {1}, floats(1));
    if (c.c == 4) {
      b.input("c", {c.m, c.n});
      inputs.push_back(random({c.m, c.n}));
    }
    if (c.c) ins.push_back("c");
    auto& n = b.node("Gemm", ins, {"y"}, "gemm");
    OnnxBuilder::attr_int(n, "transA", c.ta);
    OnnxBuilder::attr_int(n, "transB", c.tb);
    OnnxBuilder::attr_float(n, "alpha", c.alpha);
    OnnxBuilder::attr_float(n, "beta", c.beta);
    b.output("y", {c.m, c.n});
    compare(b, inputs);
  }
}

TEST_F(GpuTest, MatMulShapesAndBatching) {
  struct Case {
    std::vector<int64_t> a, b, y;
    bool b_constant;
  };
  for (const Case& c :
       {Case{{5, 37}, {37, 19}, {5, 19}, true}, Case{{2, 7, 13}, {13, 11}, {2, 7, 11}, true},
        Case{{3, 5, 9}, {3, 9, 6}, {3, 5, 6}, false}, Case{{5, 9}, {4, 9, 7}, {4, 5, 7}, false},
        Case{{2, 3, 4, 5}, {2, 3, 5, 3}, {2, 3, 4, 3}, false}, Case{{17}, {17, 3}, {3}, true},
        Case{{4, 17}, {17}, {4}, false}}) {
    SCOPED_TRACE(fmt::format("{} x {}", shape_to_string(c.a), shape_to_string(c.b)));
    OnnxBuilder b;
    b.input("a", c.a);
    std::vector<Tensor> inputs = {random(c.a)};
    if (c.b_constant) {
      int64_t n = 1;
      for (int64_t s : c.b) n *= s;
      b.initializer("b", c.b, floats(static_cast<size_t>(n)));
    } else {
      b.input("b", c.b);
      inputs.push_back(random(c.b));
    }
    b.node("MatMul", {"a", "b"}, {"y"}, "mm");
    b.output("y", c.y);
    compare(b, inputs);
  }
}

TEST_F(GpuTest, MatMulBiasReluAndTanhGeluFuseIntoTheEpilogue) {
  for (const char* act : {"Relu", "GeluTanh", "Gelu"}) {
    SCOPED_TRACE(act);
    OnnxBuilder b(20);
    b.input("x", {6, 45});
    b.initializer("w", {45, 27}, floats(45 * 27));
    b.initializer("bias", {27}, floats(27));
    b.node("MatMul", {"x", "w"}, {"h"}, "mm");
    b.node("Add", {"bias", "h"}, {"hb"}, "bias");
    auto& n = b.node(std::string(act) == "Relu" ? "Relu" : "Gelu", {"hb"}, {"y"}, "act");
    if (std::string(act) == "GeluTanh") {
      auto* a = n.add_attribute();
      a->set_name("approximate");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s("tanh");
    }
    b.output("y", {6, 27});
    compare(b, {random({6, 45})});
  }
}

// Convolutions (cuDNN's graph API channels-last, and the generated depthwise kernel) with every
// epilogue the lowering fuses: bias, a residual Add whose other input is ready first, Relu; a
// HardSwish after a depthwise convolution; a 3-channel stem (channels padded to 8); a convolution
// that is a partition output (copied back to NCHW); a residual produced after the convolution
// (not fusible: a separate Add). Nothing runs on the CPU.
// A Gemm with a bias and an erf-GELU read by another GEMM (so the GELU's output stays inside the
// engine): in fp16 and bf16 one cuDNN matmul step, reading A and B through each transpose.
TEST_F(GpuTest, ErfGeluAfterEveryGemmTransposeMatchesTheCpuPath) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(fmt::format("transA={} transB={}", ta, tb));
      const int64_t m = 6, k = 45, n = 27;
      OnnxBuilder b(20);
      const std::vector<int64_t> a_shape =
          ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
      b.input("a", a_shape);
      b.initializer("w", tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                    floats(static_cast<size_t>(k * n)));
      b.initializer("c", {n}, floats(static_cast<size_t>(n)));
      b.initializer("w2", {n, 11}, floats(static_cast<size_t>(n * 11)));
      auto& g = b.node("Gemm", {"a", "w", "c"}, {"h"}, "gemm");
      OnnxBuilder::attr_int(g, "transA", ta);
      OnnxBuilder::attr_int(g, "transB", tb);
      b.node("Gelu", {"h"}, {"gelu"}, "gelu");
      b.node("MatMul", {"gelu", "w2"}, {"y"}, "mm2");
      b.output("y", {m, 11});
      compare(b, {random(a_shape)});
    }
  }
}

// Patch convolutions (kernel == stride) whose input is stored channels-last (another
// convolution's output) or is a transposed view, and whose output another op reads inside the
// engine.
TEST_F(GpuTest, PatchConvolutionsReadEveryInputLayout) {
  OnnxBuilder b(17);
  b.input("x", {2, 3, 12, 8});
  b.initializer("w0", {8, 3, 3, 3}, floats(8 * 3 * 9));
  auto& c0 = b.node("Conv", {"x", "w0"}, {"c0"}, "conv3x3");
  OnnxBuilder::attr_ints(c0, "pads", {1, 1, 1, 1});
  b.initializer("wp", {16, 8, 2, 2}, floats(16 * 8 * 4));
  b.initializer("bp", {16}, floats(16));
  auto& p = b.node("Conv", {"c0", "wp", "bp"}, {"p"}, "patches_of_nhwc");
  OnnxBuilder::attr_ints(p, "strides", {2, 2});
  b.node("Relu", {"p"}, {"r"}, "relu");
  // x transposed to [2, 3, 8, 12] (H and W swapped: a strided view), then 4x4 patches.
  auto& t = b.node("Transpose", {"x"}, {"xt"}, "transpose");
  OnnxBuilder::attr_ints(t, "perm", {0, 1, 3, 2});
  b.initializer("wt", {5, 3, 4, 4}, floats(5 * 3 * 16));
  auto& q = b.node("Conv", {"xt", "wt"}, {"q"}, "patches_of_view");
  OnnxBuilder::attr_ints(q, "strides", {4, 4});
  b.node("Sigmoid", {"q"}, {"qs"}, "sigmoid");
  b.output("r", {2, 16, 6, 4});
  b.output("qs", {2, 5, 2, 3});
  compare(b, {random({2, 3, 12, 8})});
}

TEST_F(GpuTest, ConvolutionsWithFusedEpiloguesMatchTheCpuPath) {
  OnnxBuilder b(17);
  b.input("x", {2, 3, 17, 15});
  b.initializer("w_stem", {16, 3, 7, 7}, floats(16 * 3 * 49));
  b.initializer("b_stem", {16}, floats(16));
  auto& stem = b.node("Conv", {"x", "w_stem", "b_stem"}, {"s"}, "stem");
  OnnxBuilder::attr_ints(stem, "strides", {2, 2});
  OnnxBuilder::attr_ints(stem, "pads", {3, 3, 3, 3});
  b.node("Relu", {"s"}, {"s_relu"}, "stem_relu");
  // A bottleneck: 1x1 -> 3x3 -> 1x1 (+ residual) -> Relu.
  b.initializer("w1", {8, 16, 1, 1}, floats(8 * 16));
  b.initializer("b1", {8}, floats(8));
  b.node("Conv", {"s_relu", "w1", "b1"}, {"c1"}, "c1");
  b.node("Relu", {"c1"}, {"r1"}, "r1");
  b.initializer("w2", {8, 8, 3, 3}, floats(8 * 8 * 9));
  auto& c2 = b.node("Conv", {"r1", "w2"}, {"c2"}, "c2");
  OnnxBuilder::attr_ints(c2, "pads", {1, 1, 1, 1});
  b.initializer("w3", {16, 8, 1, 1}, floats(16 * 8));
  b.initializer("b3", {16}, floats(16));
  b.node("Conv", {"c2", "w3", "b3"}, {"c3"}, "c3");
  b.node("Add", {"c3", "s_relu"}, {"sum"}, "residual");
  b.node("Relu", {"sum"}, {"block"}, "block_relu");
  // Depthwise 5x5 stride 2 + HardSwish.
  b.initializer("w_dw", {16, 1, 5, 5}, floats(16 * 25));
  b.initializer("b_dw", {16}, floats(16));
  auto& dw = b.node("Conv", {"block", "w_dw", "b_dw"}, {"dw"}, "dw");
  OnnxBuilder::attr_int(dw, "group", 16);
  OnnxBuilder::attr_ints(dw, "strides", {2, 2});
  OnnxBuilder::attr_ints(dw, "pads", {2, 2, 2, 2});
  b.node("HardSwish", {"dw"}, {"hs"}, "hs");
  // Two branches whose Add comes after both: the second conv fuses the first's result.
  b.initializer("w4", {12, 16, 1, 1}, floats(12 * 16));
  b.node("Conv", {"hs", "w4"}, {"c4"}, "c4");
  b.initializer("w5", {12, 16, 3, 3}, floats(12 * 16 * 9));
  auto& c5 = b.node("Conv", {"hs", "w5"}, {"c5"}, "c5");
  OnnxBuilder::attr_ints(c5, "pads", {1, 1, 1, 1});
  b.node("Add", {"c4", "c5"}, {"y"}, "join");
  b.output("y", {2, 12, 5, 4});
  // HardSwish and HardSigmoid (PyTorch's alpha 1/6 and ONNX's default 0.2) fused into cuDNN
  // convolutions; weights and biases large enough that both clips are reached.
  b.initializer("w6", {16, 12, 1, 1}, floats(16 * 12, 1.0f));
  b.initializer("b6", {16}, floats(16, 2.0f));
  b.node("Conv", {"y", "w6", "b6"}, {"c6"}, "c6");
  b.node("HardSwish", {"c6"}, {"hs6"}, "hs6");
  b.initializer("w7", {8, 16, 3, 3}, floats(8 * 16 * 9, 0.5f));
  auto& c7 = b.node("Conv", {"hs6", "w7"}, {"c7"}, "c7");
  OnnxBuilder::attr_ints(c7, "pads", {1, 1, 1, 1});
  auto& sig7 = b.node("HardSigmoid", {"c7"}, {"z"}, "sig7");
  OnnxBuilder::attr_float(sig7, "alpha", 1.0f / 6.0f);
  b.output("z", {2, 8, 5, 4});
  b.initializer("w8", {8, 16, 1, 1}, floats(8 * 16, 1.0f));
  b.node("Conv", {"hs6", "w8"}, {"c8"}, "c8");
  b.node("HardSigmoid", {"c8"}, {"z2"}, "sig8");
  b.output("z2", {2, 8, 5, 4});
  // A convolution straight into a partition output, and one output read through a Relu.
  b.output("c1", {2, 8, 9, 8});
  compare(b, {random({2, 3, 17, 15})});
}

// Squeeze-excite blocks (pool, 1x1 convolution + Relu, 1x1 convolution + HardSigmoid, scale):
// their two convolutions of a 1x1 input run as the generated row kernel up to 8 images
// (device/gemv.cuh), through 16-byte reads where the channels allow them (72, 24) and one element
// at a time where they do not (20, 5); at 9 images they are cuDNN convolutions again. One layer
// has no bias, and one is a partition output.
TEST_F(GpuTest, SqueezeExciteLayersMatchTheCpuPath) {
  for (const int64_t n : {1, 3, 8, 9}) {
    for (const int64_t c : {72, 20}) {
      SCOPED_TRACE(fmt::format("batch {} channels {}", n, c));
      const int64_t h = c == 72 ? 24 : 5;
      OnnxBuilder b(17);
      b.input("x", {n, c, 7, 6});
      b.node("GlobalAveragePool", {"x"}, {"pooled"}, "pool");
      b.initializer("w1", {h, c, 1, 1}, floats(static_cast<size_t>(h * c), 1.0f));
      b.initializer("b1", {h}, floats(static_cast<size_t>(h)));
      b.node("Conv", {"pooled", "w1", "b1"}, {"f1"}, "fc1");
      b.node("Relu", {"f1"}, {"r1"}, "relu");
      b.initializer("w2", {c, h, 1, 1}, floats(static_cast<size_t>(c * h), 1.0f));
      b.node("Conv", {"r1", "w2"}, {"f2"}, "fc2");
      auto& sig = b.node("HardSigmoid", {"f2"}, {"s"}, "hsig");
      OnnxBuilder::attr_float(sig, "alpha", 1.0f / 6.0f);
      b.node("Mul", {"x", "s"}, {"y"}, "scale");
      b.output("y", {n, c, 7, 6});
      b.output("r1", {n, h, 1, 1});
      compare(b, {random({n, c, 7, 6})});
    }
  }
}

// Channels-last pools and reductions with few blocks of columns over many positions (the
// squeeze-excite pools of EfficientNet-B0 and MobileNetV3 at small batches): split over their
// positions with a second kernel combining the parts (reduce_columns=split, the default), and
// whole (one kernel); means, sums and maxima, 16-byte reads (32 and 72 channels) and single ones
// (20), against the CPU path.
TEST_F(GpuTest, PoolsOfFewColumnBlocksMatchTheCpuPathSplitOrWhole) {
  struct Shape {
    int64_t n, c, hw;
  };
  for (const Shape& k : {Shape{1, 32, 112}, Shape{2, 72, 28}, Shape{1, 20, 45}}) {
    for (const char* option : {"reduce_columns=split", "reduce_columns=whole"}) {
      SCOPED_TRACE(fmt::format("{}x{}x{}x{} {}", k.n, k.c, k.hw, k.hw, option));
      OnnxBuilder b(18);
      b.input("x", {k.n, 3, k.hw, k.hw});
      b.initializer("w", {k.c, 3, 3, 3}, floats(static_cast<size_t>(k.c * 27), 0.2f));
      auto& conv = b.node("Conv", {"x", "w"}, {"f"}, "conv");
      OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
      b.node("GlobalAveragePool", {"f"}, {"mean"}, "pool");
      b.initializer_int64("hw", {2}, {2, 3});
      b.node("ReduceMax", {"f", "hw"}, {"max"}, "max");
      b.node("ReduceSum", {"f", "hw"}, {"sum"}, "sum");
      b.output("mean", {k.n, k.c, 1, 1});
      b.output("max", {k.n, k.c, 1, 1});
      b.output("sum", {k.n, k.c, 1, 1});
      compare_model(b.bytes(), {random({k.n, 3, k.hw, k.hw})}, {}, 0, false, {option});
    }
  }
}

// Resize of a channels-last value (a convolution's output) in every mode, read in place: into a
// convolution (written channels-last) and into the outputs (written row-major), against the CPU
// path. Integer scales and a shrinking size, so both directions and odd sizes are covered.
TEST_F(GpuTest, ResizesOfChannelsLastValuesMatchTheCpuPath) {
  struct Mode {
    const char* mode;
    const char* coordinates;
  };
  for (const Mode& m : {Mode{"nearest", "asymmetric"}, Mode{"linear", "half_pixel"},
                        Mode{"cubic", "pytorch_half_pixel"}, Mode{"linear", "align_corners"}}) {
    SCOPED_TRACE(fmt::format("{} {}", m.mode, m.coordinates));
    OnnxBuilder b(18);
    b.input("x", {2, 5, 9, 11});
    b.initializer("w1", {16, 5, 3, 3}, floats(16 * 5 * 9, 0.2f));
    auto& c1 = b.node("Conv", {"x", "w1"}, {"f"}, "conv1");
    OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
    b.initializer("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
    auto& up = b.node("Resize", {"f", "", "scales"}, {"u"}, "upsample");
    OnnxBuilder::attr_string(up, "mode", m.mode);
    OnnxBuilder::attr_string(up, "coordinate_transformation_mode", m.coordinates);
    b.initializer("w2", {8, 16, 3, 3}, floats(8 * 16 * 9, 0.2f));
    auto& c2 = b.node("Conv", {"u", "w2"}, {"y"}, "conv2");
    OnnxBuilder::attr_ints(c2, "pads", {1, 1, 1, 1});
    b.output("y", {2, 8, 18, 22});
    b.output("u", {2, 16, 18, 22});
    b.initializer_int64("sizes", {4}, {2, 16, 5, 7});
    auto& down = b.node("Resize", {"f", "", "", "sizes"}, {"d"}, "downsample");
    OnnxBuilder::attr_string(down, "mode", m.mode);
    OnnxBuilder::attr_string(down, "coordinate_transformation_mode", m.coordinates);
    b.output("d", {2, 16, 5, 7});
    compare(b, {random({2, 5, 9, 11})});
  }
}

// Pools of channels-last values, 16 bytes of channels a thread where the channels allow (64, 72)
// and one at a time where they do not (20): MaxPool, AveragePool with and without the padding
// counted, padded and ceil_mode windows, against the CPU path in every precision.
TEST_F(GpuTest, ChannelsLastPoolsMatchTheCpuPath) {
  for (const int64_t c : {64, 72, 20}) {
    SCOPED_TRACE(fmt::format("{} channels", c));
    OnnxBuilder b(18);
    b.input("x", {2, 6, 13, 11});
    b.initializer("w", {c, 6, 3, 3}, floats(static_cast<size_t>(c * 54), 0.2f));
    auto& conv = b.node("Conv", {"x", "w"}, {"f"}, "conv");
    OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
    auto& maxpool = b.node("MaxPool", {"f"}, {"m"}, "maxpool");
    OnnxBuilder::attr_ints(maxpool, "kernel_shape", {2, 2});
    OnnxBuilder::attr_ints(maxpool, "strides", {2, 2});
    OnnxBuilder::attr_int(maxpool, "ceil_mode", 1);
    auto& avg = b.node("AveragePool", {"f"}, {"a"}, "avgpool");
    OnnxBuilder::attr_ints(avg, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(avg, "strides", {2, 2});
    OnnxBuilder::attr_ints(avg, "pads", {1, 1, 1, 1});
    auto& avg_pad = b.node("AveragePool", {"f"}, {"ap"}, "avgpool_pad");
    OnnxBuilder::attr_ints(avg_pad, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(avg_pad, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_int(avg_pad, "count_include_pad", 1);
    // Into convolutions (written channels-last, the 16-byte path) and into an output (written
    // row-major, one element a thread).
    b.initializer("w2", {8, c, 1, 1}, floats(static_cast<size_t>(c * 8), 0.2f));
    b.node("Conv", {"m", "w2"}, {"y"}, "conv2");
    b.output("y", {2, 8, 7, 6});
    b.initializer("w3", {8, c, 1, 1}, floats(static_cast<size_t>(c * 8), 0.2f));
    b.node("Conv", {"a", "w3"}, {"y3"}, "conv3");
    b.output("y3", {2, 8, 7, 6});
    b.output("ap", {2, c, 13, 11});
    compare(b, {random({2, 6, 13, 11})});
  }
}

// A Fire module (SqueezeNet): two convolutions joined on the channel axis, read and written
// channels-last, into a third; and the same two joined on H straight into an output (row-major).
TEST_F(GpuTest, FireModuleConcatStaysChannelsLast) {
  OnnxBuilder b(17);
  b.input("x", {2, 16, 5, 4});
  b.initializer("w9", {8, 16, 1, 1}, floats(8 * 16, 0.5f));
  b.node("Conv", {"x", "w9"}, {"c9"}, "c9");
  b.node("Relu", {"c9"}, {"r9"}, "r9");
  b.initializer("w10", {8, 16, 3, 3}, floats(8 * 16 * 9, 0.5f));
  auto& c10 = b.node("Conv", {"x", "w10"}, {"c10"}, "c10");
  OnnxBuilder::attr_ints(c10, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c10"}, {"r10"}, "r10");
  auto& cat = b.node("Concat", {"r9", "r10"}, {"cat"}, "fire_concat");
  OnnxBuilder::attr_int(cat, "axis", 1);
  b.initializer("w11", {8, 16, 1, 1}, floats(8 * 16, 0.5f));
  b.node("Conv", {"cat", "w11"}, {"fire"}, "c11");
  b.output("fire", {2, 8, 5, 4});
  auto& cat_h = b.node("Concat", {"r9", "r10"}, {"cat_h"}, "concat_h");
  OnnxBuilder::attr_int(cat_h, "axis", 2);
  b.output("cat_h", {2, 8, 10, 4});
  compare(b, {random({2, 16, 5, 4})});
}

// Three convolutions joined on channels, read by nothing else, which a convolution and a max-pool
// then read through the Concat kernel, which reads the convolutions' channels-last outputs where
// cuDNN wrote them.
TEST_F(GpuTest, ConvolutionsJoinedOnChannelsAreReadByTheConcatKernel) {
  OnnxBuilder b(17);
  b.input("x", {2, 16, 7, 6});
  b.initializer("w9", {8, 16, 1, 1}, floats(8 * 16, 0.5f));
  b.initializer("b9", {8}, floats(8));
  b.node("Conv", {"x", "w9", "b9"}, {"c9"}, "c9");
  b.node("Relu", {"c9"}, {"r9"}, "r9");
  b.initializer("w10", {8, 16, 3, 3}, floats(8 * 16 * 9, 0.5f));
  auto& c10 = b.node("Conv", {"x", "w10"}, {"c10"}, "c10");
  OnnxBuilder::attr_ints(c10, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c10"}, {"r10"}, "r10");
  b.initializer("w12", {16, 16, 3, 3}, floats(16 * 16 * 9, 0.5f));
  b.initializer("b12", {16}, floats(16));
  auto& c12 = b.node("Conv", {"x", "w12", "b12"}, {"c12"}, "c12");
  OnnxBuilder::attr_ints(c12, "pads", {1, 1, 1, 1});
  auto& cat = b.node("Concat", {"r9", "r10", "c12"}, {"cat"}, "fire_concat");  // 32 channels
  OnnxBuilder::attr_int(cat, "axis", 1);
  b.initializer("w11", {8, 32, 1, 1}, floats(8 * 32, 0.5f));
  b.node("Conv", {"cat", "w11"}, {"fire"}, "c11");
  b.output("fire", {2, 8, 7, 6});
  auto& pool = b.node("MaxPool", {"cat"}, {"pooled"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  b.output("pooled", {2, 32, 3, 3});
  const Tensor x = random({2, 16, 7, 6});
  compare(b, {x});
}

// Concats read only by elementwise ops are read in place: the elementwise kernel reads each input
// where its producer wrote it (builder_test's DenseBlockConcatsAreReadInPlaceByTheirElementwise-
// Readers). A dense block of 3 layers (channels-last convolution outputs; the block's end written
// to the caller's row-major buffer through the pieces' strides) and of 14 (the widest Concats keep
// their kernel); inputs joined along the height, read by two runs (each reads them in place);
// joined along the last axis, 16 bytes at a time where every input's length allows it (8 and 12
// floats) and one element at a time where not (3 and 5).
TEST_F(GpuTest, ConcatsReadByElementwiseKernelsAreReadInPlace) {
  compare(testing::dense_block(2, 3, 8), {random({2, 8, 6, 6})});
  compare(testing::dense_block(1, 14, 8), {random({1, 8, 6, 6})});
  OnnxBuilder b(17);
  b.input("a", {2, 3, 4, 5});
  b.input("c", {2, 3, 2, 5});
  b.node("Sigmoid", {"a"}, {"p"}, "sigmoid");
  auto& cat = b.node("Concat", {"p", "c"}, {"cat"}, "cat_h");
  OnnxBuilder::attr_int(cat, "axis", 2);
  b.node("Tanh", {"cat"}, {"y1"}, "tanh");
  b.initializer("k", {1, 1, 6, 1}, {0.5f, -1.0f, 1.5f, 2.0f, -0.25f, 0.75f});
  b.node("Mul", {"cat", "k"}, {"m"}, "mul");
  b.node("Relu", {"m"}, {"y2"}, "relu");
  b.output("y1", {2, 3, 6, 5});
  b.output("y2", {2, 3, 6, 5});
  b.input("d", {2, 8});
  b.input("e", {2, 12});
  auto& wide = b.node("Concat", {"d", "e"}, {"de"}, "cat_w");
  OnnxBuilder::attr_int(wide, "axis", -1);
  b.node("Abs", {"de"}, {"y3"}, "abs");
  b.output("y3", {2, 20});
  b.input("f", {2, 3});
  b.input("g", {2, 5});
  auto& odd = b.node("Concat", {"f", "g"}, {"fg"}, "cat_odd");
  OnnxBuilder::attr_int(odd, "axis", 1);
  b.node("Neg", {"fg"}, {"y4"}, "neg");
  b.output("y4", {2, 8});
  compare(b, {random({2, 3, 4, 5}), random({2, 3, 2, 5}), random({2, 8}), random({2, 12}),
              random({2, 3}), random({2, 5})});
}

// ConvTranspose with one group is a GEMM and a gather (conv_transpose.cpp); inside the engine its
// output is channels-last and the gather moves 16 bytes of output channels at a time where the
// channel count allows (16 channels here; 6 channels read one at a time in fp16 and fp32). UNet's
// 2x2 stride-2 upsampling (one tap per output) and a 3x3 stride-2 one with pads and an output
// padding (up to four taps), each read by a ReLU, against the CPU in every precision.
TEST_F(GpuTest, ConvTransposeGathersReadSixteenBytesWhereTheChannelsAllow) {
  for (const int64_t k : {16, 6}) {
    SCOPED_TRACE(k);
    OnnxBuilder b(17);
    b.input("x", {2, 8, 5, 7});
    std::vector<float> w1(static_cast<size_t>(8 * k * 4)), w2(static_cast<size_t>(8 * k * 9)),
        bias(static_cast<size_t>(k));
    for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.05f * static_cast<float>(i % 11) - 0.25f;
    for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.04f * static_cast<float>(i % 13) - 0.24f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    b.initializer("w1", {8, k, 2, 2}, w1);
    b.initializer("w2", {8, k, 3, 3}, w2);
    b.initializer("bias", {k}, bias);
    auto& up = b.node("ConvTranspose", {"x", "w1", "bias"}, {"u"}, "up");
    OnnxBuilder::attr_ints(up, "strides", {2, 2});
    b.node("Relu", {"u"}, {"y1"}, "relu1");
    auto& wide = b.node("ConvTranspose", {"x", "w2"}, {"v"}, "up3");
    OnnxBuilder::attr_ints(wide, "strides", {2, 2});
    OnnxBuilder::attr_ints(wide, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_ints(wide, "output_padding", {1, 1});
    b.node("Relu", {"v"}, {"y2"}, "relu2");
    b.output("y1", {2, k, 10, 14});
    b.output("y2", {2, k, 10, 14});
    compare(b, {random({2, 8, 5, 7})});
  }
}

TEST_F(GpuTest, ElementwiseOpsWithBroadcasting) {
  OnnxBuilder b(20);
  b.input("x", {3, 7, 13});
  b.input("row", {13});
  b.input("col", {3, 7, 1});
  b.initializer("k", {7, 1}, floats(7));
  b.node("Add", {"x", "row"}, {"a"}, "add");
  b.node("Mul", {"a", "col"}, {"m"}, "mul");
  b.node("Sub", {"m", "k"}, {"s"}, "sub");
  b.node("Div", {"s", "col"}, {"d"}, "div");
  b.node("Erf", {"d"}, {"e"}, "erf");
  b.node("Tanh", {"e"}, {"t"}, "tanh");
  b.node("Sigmoid", {"d"}, {"g"}, "sigmoid");
  b.node("Add", {"t", "g"}, {"u"}, "add2");
  b.node("Relu", {"u"}, {"r"}, "relu");
  b.node("Gelu", {"d"}, {"gl"}, "gelu");
  b.node("Mul", {"r", "gl"}, {"y"}, "mul2");
  b.output("y", {3, 7, 13});
  b.output("e", {3, 7, 13});  // an intermediate that is also an output
  compare(b, {random({3, 7, 13}), random({13}), random({3, 7, 1}, 0.5f, 2.0f)});
}

TEST_F(GpuTest, PowAndSqrt) {
  OnnxBuilder b;
  b.input("x", {4, 33});
  b.input("p", {33});
  b.node("Pow", {"x", "p"}, {"y"}, "pow");
  b.node("Sqrt", {"y"}, {"z"}, "sqrt");
  b.output("z", {4, 33});
  compare(b, {random({4, 33}, 0.5f, 3.0f), random({33}, -1.5f, 2.5f)});
}

// RMSNorm as LLaMA's export writes it (Pow(x, 2), ReduceMean, Add eps, Sqrt, Reciprocal, Mul)
// over activations near 600: their squares (up to 360000) pass fp16's largest value, 65504. An
// fp16 engine keeps the square and its mean in float32 (as PyTorch computes the variance), so every
// precision matches the CPU path; stored in fp16 the mean was inf and every output 0.
TEST_F(GpuTest, RmsNormOfLargeActivationsKeepsItsVarianceInFloat32) {
  OnnxBuilder b(17);
  b.input("x", {4, 512});
  b.initializer("two", {}, {2.0f});
  b.initializer("eps", {}, {1e-6f});
  b.initializer("one", {}, {1.0f});
  b.initializer("w", {512}, floats(512, 1.0f));
  b.node("Pow", {"x", "two"}, {"sq"}, "square");
  auto& mean = b.node("ReduceMean", {"sq"}, {"var"}, "variance");
  OnnxBuilder::attr_ints(mean, "axes", {-1});
  b.node("Add", {"var", "eps"}, {"ve"}, "plus_eps");
  b.node("Sqrt", {"ve"}, {"rms"}, "sqrt");
  b.node("Div", {"one", "rms"}, {"inv"}, "reciprocal");
  b.node("Mul", {"x", "inv"}, {"n"}, "normalize");
  b.node("Mul", {"n", "w"}, {"y"}, "scale");
  b.output("y", {4, 512});
  compare(b, {random({4, 512}, -600.0f, 600.0f)});
}

TEST_F(GpuTest, SoftmaxOnEveryAxis) {
  for (int64_t axis : {-1, 0, 1}) {
    SCOPED_TRACE(axis);
    OnnxBuilder b;
    b.input("x", {3, 17, 45});
    auto& n = b.node("Softmax", {"x"}, {"y"}, "softmax");
    OnnxBuilder::attr_int(n, "axis", axis);
    b.output("y", {3, 17, 45});
    compare(b, {random({3, 17, 45}, -4.0f, 4.0f)});
  }
  OnnxBuilder wide;
  wide.input("x", {2, 3000});
  wide.node("Softmax", {"x"}, {"y"}, "softmax");
  wide.output("y", {2, 3000});
  compare(wide, {random({2, 3000}, -10.0f, 10.0f)});
}

// Softmaxes of 296 distinct widths. With the sizes in the code (kernel_sizes=code) they are more
// kernels than one NVRTC unit takes (kKernelsInOneUnit), compiled in relocatable units and linked
// by nvJitLink; with the sizes as arguments (the default) they are 5 kernels, each launched by the
// steps of its block size with their own widths. Either way every step matches the CPU path.
TEST_F(GpuTest, KernelsLinkedFromSeveralUnitsMatchTheCpuPath) {
  OnnxBuilder b;
  std::vector<Tensor> inputs;
  const int count = 296;
  for (int i = 0; i < count; ++i) {
    b.input(fmt::format("x{}", i), {2, 8 + i});
    b.node("Softmax", {fmt::format("x{}", i)}, {fmt::format("y{}", i)}, fmt::format("s{}", i));
    b.output(fmt::format("y{}", i), {2, 8 + i});
    inputs.push_back(random({2, 8 + i}, -4.0f, 4.0f));
  }
  for (const char* sizes : {"kernel_sizes=code", "kernel_sizes=arguments"}) {
    SCOPED_TRACE(sizes);
    compare_model(b.bytes(), inputs, {}, 0, false, {sizes});
  }
}

TEST_F(GpuTest, TransposeConcatAndViews) {
  OnnxBuilder b;
  b.input("x", {2, 3, 5, 7});
  b.initializer("k", {2, 7, 5, 1}, floats(70));
  b.initializer_int64("shape", {3}, {2, 7, 15});
  b.initializer_int64("axes", {1}, {1});
  auto& t = b.node("Transpose", {"x"}, {"t"}, "t");
  OnnxBuilder::attr_ints(t, "perm", {0, 3, 2, 1});       // [2, 7, 5, 3]
  auto& c = b.node("Concat", {"t", "k"}, {"c"}, "cat");  // [2, 7, 5, 4]
  OnnxBuilder::attr_int(c, "axis", -1);
  b.node("Relu", {"c"}, {"r"}, "relu");
  auto& f = b.node("Flatten", {"r"}, {"f"}, "flatten");  // [14, 20]
  OnnxBuilder::attr_int(f, "axis", 2);
  b.node("Unsqueeze", {"f", "axes"}, {"u"}, "unsqueeze");  // [14, 1, 20]
  b.node("Squeeze", {"u", "axes"}, {"s"}, "squeeze");      // [14, 20]
  b.node("Identity", {"s"}, {"y"}, "identity");            // an output that is a view: a copy
  b.output("y", {14, 20});
  b.output("t", {2, 7, 5, 3});
  compare(b, {random({2, 3, 5, 7})});
}

// Concat reads views in place: a Slice that starts two elements in (an offset and strides), a
// Transpose (strides) and a Split's halves swapped, against the CPU path. GPT-2's TorchScript
// export concatenates views like these.
TEST_F(GpuTest, ConcatOfViewsReadsThemInPlace) {
  OnnxBuilder b(17);
  b.input("x", {3, 6, 10});
  b.initializer_int64("split", {2}, {3, 7});
  b.initializer_int64("starts", {1}, {2});
  b.initializer_int64("ends", {1}, {5});
  b.initializer_int64("axes", {1}, {2});
  auto& t = b.node("Transpose", {"x"}, {"t"}, "t");
  OnnxBuilder::attr_ints(t, "perm", {0, 2, 1});                      // [3, 10, 6]
  b.node("Slice", {"x", "starts", "ends", "axes"}, {"s"}, "slice");  // [3, 6, 3]
  auto& split = b.node("Split", {"x", "split"}, {"a", "c"}, "split");
  OnnxBuilder::attr_int(split, "axis", 2);                 // [3, 6, 3] and [3, 6, 7]
  auto& cat = b.node("Concat", {"t", "t"}, {"y"}, "cat");  // [3, 20, 6]
  OnnxBuilder::attr_int(cat, "axis", 1);
  auto& cat2 = b.node("Concat", {"c", "s", "a"}, {"z"}, "cat2");  // [3, 6, 13]
  OnnxBuilder::attr_int(cat2, "axis", -1);
  b.output("y", {3, 20, 6});
  b.output("z", {3, 6, 13});
  compare(b, {random({3, 6, 10})});
}

// A large GEMM with N = 1001 writes rows padded to 1008 (cuBLASLt's fast kernels need aligned
// rows): the first 1001 of each row are gathered into the output and read in place by a Sigmoid;
// a Gemm with transB reads its padded B the other way round.
TEST_F(GpuTest, LargeGemmsWithAnOddNMatchTheCpuPath) {
  OnnxBuilder b(17);
  b.input("x", {2, 64, 256});
  b.initializer("w", {256, 1001}, floats(256 * 1001, 0.1f));
  b.initializer("bias", {1001}, floats(1001));
  b.node("MatMul", {"x", "w"}, {"mm"}, "mm");
  b.node("Add", {"mm", "bias"}, {"y"}, "bias");
  b.node("Sigmoid", {"y"}, {"z"}, "sigmoid");
  b.output("y", {2, 64, 1001});
  b.output("z", {2, 64, 1001});
  b.input("g", {128, 256});
  b.initializer("wt", {1001, 256}, floats(1001 * 256, 0.1f));
  b.initializer("c", {1001}, floats(1001));
  auto& gemm = b.node("Gemm", {"g", "wt", "c"}, {"t"}, "gemm_t");
  OnnxBuilder::attr_int(gemm, "transB", 1);
  b.output("t", {128, 1001});
  compare(b, {random({2, 64, 256}), random({128, 256})});
}

TEST_F(GpuTest, ReshapeOfAnInputIsAView) {
  OnnxBuilder b;
  b.input("x", {6, 10});
  b.initializer_int64("shape", {3}, {3, 4, 5});
  b.node("Reshape", {"x", "shape"}, {"r"}, "reshape");
  b.node("Softmax", {"r"}, {"y"}, "softmax");
  b.output("y", {3, 4, 5});
  compare(b, {random({6, 10})});
}

// A node the GPU cannot run (Hardmax: no CUDA lowering) splits the graph: GPU, CPU, GPU, with
// the copies in between, and the result is still the CPU path's.
TEST_F(GpuTest, MixedCpuAndGpuPartitions) {
  const OnnxBuilder b =
      testing::two_matmuls(5, 12, 12, 3, testing::Middle::CpuOnly, floats(144), floats(36));
  compare(b, {random({5, 12})}, /*gpu_kernel_calls=*/1);
  const Compiled gpu = compile(b.bytes(), "cuda:0", "fp32");
  EXPECT_EQ(gpu.summary.delegate_calls, 2u);
  EXPECT_EQ(gpu.summary.copies, 4u);
}

// Issue "device-aware compilation": GPU partitions separated by a CPU op, and adjacent GPU
// partitions on one GPU, both run and match the CPU path; between adjacent partitions no byte
// goes to the host (the runtime's copy counters, not the program text, say so).
TEST_F(GpuTest, SeparatedAndAdjacentPartitionsRunAndAdjacentOnesStayOnTheDevice) {
  auto weights = [&](size_t n) { return floats(n, 0.3f); };
  const OnnxBuilder adjacent =
      testing::two_matmuls(5, 16, 16, 8, testing::Middle::Tanh, weights(256), weights(128));
  const OnnxBuilder separated =
      testing::two_matmuls(5, 16, 16, 8, testing::Middle::CpuOnly, weights(256), weights(128));

  struct Case {
    const OnnxBuilder* model;
    size_t max_nodes, delegates;
    uint64_t h2d, d2h;  // per execute
  };
  for (const Case& c : {Case{&adjacent, 1, 3, 1, 1}, Case{&separated, 0, 2, 2, 2}}) {
    SCOPED_TRACE(c.delegates);
    const Tensor x = random({5, 16});
    const auto reference = run(compile(c.model->bytes(), "cpu", ""), {x});
    const Compiled gpu = compile(c.model->bytes(), "cuda:0", "fp32", {}, "", c.max_nodes);
    ASSERT_EQ(gpu.summary.delegate_calls, c.delegates);
    auto method = gpu.program->load_method("forward");
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    ASSERT_TRUE((*method)->set_input(0, x.view()).ok());
    const auto before = (*method)->copy_counts();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*method)->execute().ok());
    const auto after = (*method)->copy_counts();
    EXPECT_EQ(after.host_to_device - before.host_to_device, 3 * c.h2d);
    EXPECT_EQ(after.device_to_host - before.device_to_host, 3 * c.d2h);
    EXPECT_EQ(after.device_to_device - before.device_to_device, 0u);
    const TensorView y = (*method)->output(0);
    EXPECT_LE(testing::relative_error(y.data_as<float>(), reference[0].data_as<float>(), 40), 1e-5);
  }
}

// --- end-to-end models -----------------------------------------------------------------------

TEST_F(GpuTest, GeneratedModelsMatchTheCpuPath) {
  EXPECT_GE(compare_cases(testing::e2e_models_dir()), 6);
}

TEST_F(GpuTest, TorchExportedModelsMatchTheCpuPath) {
  EXPECT_GE(compare_cases(fs::path(testing::source_dir()) / "tests/e2e/models"), 2);
}

// The six real-model families in small configurations (tests/e2e/models/real: ResNet,
// MobileNetV3, SqueezeNet 1.1, ViT, BERT, GPT-2 through both exporters), entirely on the GPU, in
// every precision, against the CPU path. Each engine takes the heuristics' first cuBLASLt
// algorithm and cuDNN plan: timing the candidates of 72 engines' convolutions and attentions at
// compile time took this test past four minutes on an H100 (timing is tuning_test's, and the
// full-size models of bench/gpu_models.py are timed).
TEST_F(GpuTest, RealModelFamiliesRunEntirelyOnTheGpu) {
  const int cases =
      compare_cases(fs::path(testing::source_dir()) / "tests/e2e/models/real", /*untimed=*/true);
  EXPECT_GE(cases, 18);
}

// --- load-time device checks -------------------------------------------------------------------

OnnxBuilder small_model() {
  OnnxBuilder b;
  b.input("x", {4, 8});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", {4, 8});
  return b;
}

TEST_F(GpuTest, AnAllocationTooBigForTheGpuIsOutOfMemoryNamingTheDevice) {
  auto t = runtime::allocate_tensor(DType::Float32, {int64_t{1} << 48}, Device::cuda(0));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.code(), Error::OutOfMemory) << t.status().to_string();
  EXPECT_NE(t.status().message().find("cannot allocate 1125899906842624 bytes of device memory on "
                                      "cuda:0"),
            std::string::npos)
      << t.status().to_string();
}

TEST_F(GpuTest, ProgramForAMissingGpuFailsAtLoadNamingBoth) {
  const int count = static_cast<int>(cuda::devices().size());
  const std::string arch = fmt::format("sm_{}", cuda::devices()[0].sm_arch);
  const Compiled c =
      compile(small_model().bytes(), fmt::format("cuda:{}", count), "fp32", {}, arch);
  ASSERT_TRUE(c.program);
  auto method = c.program->load_method("forward");
  ASSERT_FALSE(method.ok());
  const std::string& m = method.status().message();
  // Either the arena on the missing GPU or the engine is refused first; both name the device.
  EXPECT_NE(m.find(fmt::format("cuda:{}", count)), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("{} CUDA device", count)), std::string::npos) << m;
}

TEST_F(GpuTest, ProgramForAnotherArchitectureFailsAtLoadWithTheRebuildCommand) {
  const int found = cuda::devices()[0].sm_arch;
  const std::string other = found / 10 == 8 ? "sm_90" : "sm_80";
  const Compiled c = compile(small_model().bytes(), "cuda:0", "fp32", {}, other);
  ASSERT_TRUE(c.program);
  auto method = c.program->load_method("forward");
  ASSERT_EQ(method.code(), Error::NotSupported);
  const std::string& m = method.status().message();
  EXPECT_NE(m.find(fmt::format("was built for {} but cuda:0 is sm_{}", other, found)),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("partition 'cuda_0'"), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("--arch sm_{}", found)), std::string::npos) << m;
}

}  // namespace
}  // namespace baton
