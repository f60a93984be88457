// The CPU kernels' scratch (runtime/scratch.h): reserved at create, one area allocated at load for
// the whole method, as large as the largest kernel's need, and shared by all kernels. Before issue
// 34 every kernel owned its buffers, so a method held their sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "baton/core/dtype.h"
#include "compiler/robustness.h"
#include "testing/run_compiled.h"

namespace baton::testing {
namespace {

// Two float16 MatMuls: each converts its operands and result to float in scratch,
// 64x32 + 32x128 + 64x128 floats (56 KiB) for the first, 64x128 + 128x16 + 64x16 (44 KiB) for
// the second.
OnnxBuilder two_half_matmuls() {
  constexpr int kHalf = 10;  // onnx.TensorProto.FLOAT16
  OnnxBuilder b;
  b.input("x", {64, 32}, kHalf);
  b.input("w1", {32, 128}, kHalf);
  b.input("w2", {128, 16}, kHalf);
  b.node("MatMul", {"x", "w1"}, {"h"}, "first");
  b.node("MatMul", {"h", "w2"}, {"y"}, "second");
  b.output("y", {64, 16}, kHalf);
  return b;
}

Tensor random_half(std::vector<int64_t> sizes, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::Float16, sizes).value();
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto* p = t.data_as<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float_to_half(u(rng));
  return t;
}

// a[m, k] x b[k, n] in float from float16 operands, rounded to float16 as the kernel rounds it.
std::vector<uint16_t> matmul_half(const uint16_t* a, const uint16_t* b, int64_t m, int64_t k,
                                  int64_t n) {
  std::vector<uint16_t> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t r = 0; r < k; ++r) {
        acc += static_cast<double>(half_to_float(a[i * k + r])) * half_to_float(b[r * n + j]);
      }
      y[static_cast<size_t>(i * n + j)] = float_to_half(static_cast<float>(acc));
    }
  }
  return y;
}

TEST_F(RobustnessTest, KernelsShareOneScratchAreaAsLargeAsTheLargestNeed) {
  auto compiled = compile(two_half_matmuls());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto bytes = compiled->serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = runtime::Program::load_bytes(*bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  runtime::MethodOptions options;
  options.threads = 1;
  auto method = (*program)->load_method("forward", options);
  ASSERT_TRUE(method.ok()) << method.status().to_string();

  const std::vector<runtime::Method::KernelScratch> kernels = (*method)->kernel_scratch();
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_NE(kernels[0].kernel.find("MatMul node 'first'"), std::string::npos) << kernels[0].kernel;
  EXPECT_NE(kernels[1].kernel.find("MatMul node 'second'"), std::string::npos) << kernels[1].kernel;
  // At least the float copies, each piece rounded up to 64 bytes.
  EXPECT_GE(kernels[0].bytes, (64u * 32 + 32 * 128 + 64 * 128) * 4);
  EXPECT_GE(kernels[1].bytes, (64u * 128 + 128 * 16 + 64 * 16) * 4);
  EXPECT_GT(kernels[0].bytes, kernels[1].bytes);
  EXPECT_EQ((*method)->scratch_bytes(), std::max(kernels[0].bytes, kernels[1].bytes));

  // Sharing gives the right answer: the second kernel finds the first one's data in the area and
  // writes its own before reading. (tests/kernels fill the scratch with a pattern before every
  // kernel's first run, for each kernel alone.)
  std::mt19937 rng(34);
  const Tensor x = random_half({64, 32}, rng), w1 = random_half({32, 128}, rng),
               w2 = random_half({128, 16}, rng);
  const std::vector<uint16_t> h =
      matmul_half(x.data_as<uint16_t>(), w1.data_as<uint16_t>(), 64, 32, 128);
  const std::vector<uint16_t> want = matmul_half(h.data(), w2.data_as<uint16_t>(), 64, 128, 16);
  {
    const std::vector<Tensor> out = run_compiled(*compiled, {x, w1, w2});
    ASSERT_EQ(out.size(), 1u);
    const auto* got = out[0].data_as<uint16_t>();
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(
          worst, static_cast<double>(std::abs(half_to_float(got[i]) - half_to_float(want[i]))));
    }
    // One float16 rounding of h and of y apart: values are O(1)-O(10), so a few units in the last
    // place of float16.
    EXPECT_LT(worst, 0.05);
  }
}

}  // namespace
}  // namespace baton::testing
