// The GPU hot path allocates nothing: a warm execute() of a device-resident program under a
// caller stream (zero-copy, graph replay, completion event) makes no heap allocation anywhere in
// the process — Baton's code, the CUDA runtime, cuBLASLt.
#include <gtest/gtest.h>

#include <random>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "baton/cuda/stream_guard.h"
#include "baton/runtime/device_allocator.h"
#include "baton/runtime/module.h"
#include "compiler/backend_compiler.h"
#include "testing/alloc/counting_allocator.h"
#include "testing/onnx_builder.h"
#include "testing/random.h"

namespace baton {
namespace {

TEST(GpuNoAllocTest, WarmExecuteOnACallerStreamAllocatesNothing) {
  if (!testing::counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  register_builtins();
  cuda::register_backend();
  cuda::register_compiler();
  if (cuda::devices().empty()) GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  testing::OnnxBuilder b(20);
  b.input("x", {8, 256});
  std::vector<float> w(256 * 256, 0.01f), bias(256, 0.1f);
  b.initializer("w", {256, 256}, w);
  b.initializer("bias", {256}, bias);
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Add", {"h", "bias"}, {"hb"}, "bias");
  b.node("Gelu", {"hb"}, {"g"}, "gelu");
  b.node("Softmax", {"g"}, {"y"}, "softmax");
  b.output("y", {8, 256});
  auto backend = std::move(compiler::make_backend_compiler({Device::cuda(0), "", "fp16"})).value();
  compiler::CompileOptions options;
  options.backends.push_back(backend.get());
  options.io = compiler::MethodIo::Device;
  auto compiled = compiler::compile_bytes(b.bytes(), options).value();
  auto program = runtime::Program::load_bytes(*compiled.serialize()).value();
  auto module = runtime::Module::from_program(program).value();
  std::mt19937 rng(1);
  const Tensor x = testing::random_tensor(rng, {8, 256});
  Tensor dx = runtime::allocate_tensor(DType::Float32, {8, 256}, Device::cuda(0)).value();
  Tensor dy = runtime::allocate_tensor(DType::Float32, {8, 256}, Device::cuda(0)).value();
  ASSERT_TRUE(runtime::copy_tensor(dx.view(), x.view()).ok());
  runtime::Method& m = module.method();
  ASSERT_TRUE(m.bind_input(0, dx.view()).ok());
  ASSERT_TRUE(m.bind_output(0, dy.view()).ok());
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  int64_t allocations = -1;
  {
    cuda::StreamGuard guard(stream);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(m.execute().ok());  // captures the graph
    cudaStreamSynchronize(stream);
    testing::CountAllocations count;
    for (int i = 0; i < 50; ++i) {
      if (!m.execute().ok()) break;
    }
    allocations = count.count();
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  EXPECT_EQ(allocations, 0);
}

}  // namespace
}  // namespace baton
