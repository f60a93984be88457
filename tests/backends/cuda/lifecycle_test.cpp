// Robustness of a GPU program over its lifetime: many load -> execute -> unload cycles in one
// process leave device memory and host RSS flat (and the detector sees a deliberate leak); many
// threads on separate method instances agree bit for bit; an out-of-memory at load names the
// device and the bytes, and the process loads again afterwards. Skipped without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <regex>
#include <thread>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "baton/extension/module.h"
#include "baton/runtime/device_allocator.h"
#include "testing/onnx_builder.h"
#include "testing/random.h"
#include "testing/sanitizer.h"

namespace baton {
namespace {

// x [rows, 256] -> MatMul -> Add -> Gelu -> Softmax -> y on cuda:0 (host I/O unless `device_io`).
std::vector<uint8_t> program_bytes(int64_t rows, bool device_io) {
  testing::OnnxBuilder b(20);
  b.input("x", {rows, 256});
  std::vector<float> w(256 * 256), bias(256);
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.05f);
  for (float& v : w) v = d(rng);
  for (float& v : bias) v = d(rng);
  b.initializer("w", {256, 256}, w);
  b.initializer("bias", {256}, bias);
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Add", {"h", "bias"}, {"hb"}, "bias");
  b.node("Gelu", {"hb"}, {"g"}, "gelu");
  b.node("Softmax", {"g"}, {"y"}, "softmax");
  b.output("y", {rows, 256});
  auto backend = std::move(compiler::make_backend_compiler({Device::cuda(0), "", "fp32"})).value();
  compiler::CompileOptions options;
  options.backends.push_back(backend.get());
  options.io = device_io ? compiler::MethodIo::Device : compiler::MethodIo::Host;
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  return *compiled->serialize();
}

size_t device_free() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return free;
}

// Resident set size in bytes (/proc/self/statm, field 2, in pages).
size_t host_rss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * 4096;
}

// Where the deliberate host leaks go (never freed).
std::vector<void*>& leaked_host_blocks() {
  static std::vector<void*>* blocks = new std::vector<void*>();
  return *blocks;
}

struct Drift {
  int64_t device_bytes = 0;  // device memory lost (free before - free after)
  int64_t host_bytes = 0;    // RSS gained
};

// `cycles` times: load the program, load its method, execute it once, unload everything. The
// first 20 cycles warm up (lazy library state, allocator pools) before the baseline is taken.
// `leak_device` / `leak_host` bytes are deliberately leaked per cycle, to prove the detector.
Drift run_cycles(const std::vector<uint8_t>& bytes, int cycles, size_t leak_device = 0,
                 size_t leak_host = 0) {
  std::mt19937 rng(3);
  const Tensor x = testing::random_tensor(rng, {8, 256});
  auto cycle = [&]() {
    auto program = runtime::Program::load_bytes(bytes);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    auto module = extension::Module::from_program(*program);
    ASSERT_TRUE(module.ok()) << module.status().to_string();
    auto out = module->run({x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    if (leak_device != 0) {
      void* p = nullptr;
      cudaMalloc(&p, leak_device);  // deliberately never freed
    }
    if (leak_host != 0) {
      auto* p = static_cast<char*>(std::malloc(leak_host));  // deliberately never freed
      std::memset(p, 1, leak_host);
      // Escapes, so the compiler cannot drop the malloc and memset of a pointer nobody reads
      // (GCC did at -O2: the first H100 runs saw no drift at all).
      leaked_host_blocks().push_back(p);
    }
  };
  for (int i = 0; i < 20; ++i) cycle();
  cudaDeviceSynchronize();
  const size_t free_before = device_free();
  const size_t rss_before = host_rss();
  for (int i = 0; i < cycles; ++i) cycle();
  cudaDeviceSynchronize();
  Drift d;
  d.device_bytes = static_cast<int64_t>(free_before) - static_cast<int64_t>(device_free());
  d.host_bytes = static_cast<int64_t>(host_rss()) - static_cast<int64_t>(rss_before);
  return d;
}

// What "flat" allows: allocator granularity and lazily grown pools, far below what a leak of one
// small buffer per cycle adds up to over the cycles run.
constexpr int64_t kDeviceSlack = int64_t{4} << 20;
constexpr int64_t kHostSlack = int64_t{8} << 20;

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    cuda::register_backend();
    cuda::register_compiler();
    if (cuda::devices().empty()) GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  }
};

TEST_F(LifecycleTest, AThousandLoadExecuteUnloadCyclesLeaveMemoryFlat) {
  const int cycles = testing::under_sanitizer() ? 50 : 1000;
  const Drift d = run_cycles(program_bytes(8, false), cycles);
  std::printf("  %d cycles: device memory drift %lld bytes, host RSS drift %lld bytes\n", cycles,
              static_cast<long long>(d.device_bytes), static_cast<long long>(d.host_bytes));
  if (!testing::under_sanitizer()) {
    EXPECT_LE(d.host_bytes, kHostSlack);
  }
  // Under initcheck free device memory falls by 4 MiB per cycle, in 64 MiB steps (192 MiB over
  // 50 cycles, with or without CUDA graphs), and not under the plain run or the other three tools.
  // Probes of allocation, module-load and cuBLASLt-handle cycles stay flat under initcheck too
  // (tests/backends/cuda/probes/tma_initcheck.cu): the tool's own bookkeeping is the suspect, not
  // found. The device drift is asserted everywhere else.
  if (testing::under_sanitizer_tool("initcheck")) {
    GTEST_SKIP() << "device drift not asserted under initcheck (measured " << d.device_bytes
                 << " bytes)";
  }
  EXPECT_LE(d.device_bytes, kDeviceSlack)
      << "cudaMemGetInfo counts the whole GPU: another process allocating beside this test shows "
         "here as drift (577 MB with four other GPU processes, issue 12's ninth pass). Rerun it "
         "alone before taking this for a leak";
}

// The detector itself: the same cycles leaking 64 KiB of device memory and 1 MiB of host memory
// (touched) each are caught. (Smaller host leaks land in heap pages the cycles freed, and RSS
// does not move until those are used up: the first H100 run saw 0 bytes of drift for 64 KiB.)
TEST_F(LifecycleTest, TheDriftCheckCatchesADeliberateLeak) {
  const Drift d = run_cycles(program_bytes(8, false), 200, 64 << 10, 1 << 20);
  std::printf("  200 leaking cycles: device drift %lld bytes, host RSS drift %lld bytes\n",
              static_cast<long long>(d.device_bytes), static_cast<long long>(d.host_bytes));
  EXPECT_GT(d.device_bytes, kDeviceSlack);
  EXPECT_GT(d.host_bytes, kHostSlack);
}

TEST_F(LifecycleTest, EightThreadsOnSeparateMethodsAreBitIdentical) {
  const int calls = testing::under_sanitizer() ? 20 : 1000;
  auto program = runtime::Program::load_bytes(program_bytes(16, false)).value();
  std::mt19937 rng(11);
  const Tensor x = testing::random_tensor(rng, {16, 256});
  auto reference_module = extension::Module::from_program(program).value();
  const Tensor reference = reference_module.run({x}).value()[0];
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&]() {
      auto method = program->load_method("forward");
      if (!method.ok()) {
        ++failures;
        return;
      }
      if (!(*method)->set_input(0, x.view()).ok()) ++failures;
      for (int i = 0; i < calls; ++i) {
        if (!(*method)->execute().ok()) {
          ++failures;
          return;
        }
        const TensorView y = (*method)->output(0);
        if (std::memcmp(y.data, reference.data(), reference.nbytes()) != 0) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "outputs differ from the single-thread result";
  std::printf("  8 threads x %d executions: %d mismatches\n", calls, mismatches.load());
}

// A program whose device arena cannot fit: ~200 GB of activations (a [50000, 1] x [1, 1000000]
// product kept on the device), more than any current GPU has.
TEST_F(LifecycleTest, OutOfMemoryAtLoadNamesTheDeviceAndBytesAndLoadingWorksAfterwards) {
  testing::OnnxBuilder b;
  b.input("x", {50000, 1});
  b.initializer("w", {1, 1000000}, std::vector<float>(1000000, 0.5f));
  b.node("MatMul", {"x", "w"}, {"y"}, "huge");
  b.output("y", {50000, 1000000});
  auto backend = std::move(compiler::make_backend_compiler({Device::cuda(0), "", "fp32"})).value();
  compiler::CompileOptions options;
  options.backends.push_back(backend.get());
  options.io = compiler::MethodIo::Device;
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto program = runtime::Program::load_bytes(*compiled->serialize()).value();
  const size_t free_before = device_free();
  auto method = program->load_method("forward");
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.code(), Error::OutOfMemory) << method.status().to_string();
  const std::string& m = method.status().message();
  EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
  // The arena holds the 200 GB tensor and the others: its size is named, at least 200 GB.
  std::smatch bytes;
  ASSERT_TRUE(std::regex_search(m, bytes, std::regex(R"((\d{12,}) bytes)"))) << m;
  EXPECT_GE(std::stoull(bytes[1].str()), 200000000000ull) << m;
  EXPECT_GE(device_free() + kDeviceSlack, free_before) << "the failed load left memory behind";
  // The process is fine: a normal program loads and runs.
  const Drift d = run_cycles(program_bytes(8, false), 5);
  if (!testing::under_sanitizer_tool("initcheck")) {
    EXPECT_LE(d.device_bytes, kDeviceSlack);
  }
}

}  // namespace
}  // namespace baton
