// The CUDA delegate's device contract (docs/device-contract.md) on a real GPU: zero-copy I/O,
// visible staging, strict staging, caller streams and the completion event, device guards, green
// contexts, threads. Every test skips visibly without a GPU; the two-GPU tests skip with fewer.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/log.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/competing_workload.h"
#include "baton/cuda/compiler.h"
#include "baton/cuda/green_context.h"
#include "baton/cuda/stream_guard.h"
#include "baton/extension/module.h"
#include "baton/runtime/device_allocator.h"
#include "test_kernels.h"
#include "testing/onnx_builder.h"
#include "testing/random.h"
#include "testing/sanitizer.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;
using testing::OnnxBuilder;

constexpr int64_t kSpinCycles = 300'000'000;  // ~150 ms at ~2 GHz

// x[64, 512] -> MatMul 512x512 -> Relu -> MatMul 512x256 -> y[64, 256]
std::vector<uint8_t> model_bytes() {
  static const std::vector<uint8_t> bytes = [] {
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 0.05f);
    auto w = [&](size_t n) {
      std::vector<float> v(n);
      for (float& f : v) f = d(rng);
      return v;
    };
    OnnxBuilder b;
    b.input("x", {64, 512});
    b.initializer("w1", {512, 512}, w(512 * 512));
    b.initializer("w2", {512, 256}, w(512 * 256));
    b.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
    b.node("Relu", {"h"}, {"r"}, "relu");
    b.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
    b.output("y", {64, 256});
    return b.bytes();
  }();
  return bytes;
}

std::shared_ptr<const runtime::Program> compile(const std::string& device, bool io_device,
                                                bool strict = false) {
  compiler::CompileOptions options;
  options.io = io_device ? compiler::MethodIo::Device : compiler::MethodIo::Host;
  std::unique_ptr<compiler::BackendCompiler> backend;
  if (device != "cpu") {
    backend =
        std::move(compiler::make_backend_compiler({*Device::parse(device), "", "fp32"})).value();
    options.backends.push_back(backend.get());
  }
  if (strict) options.delegate_specs.emplace_back("strict_staging", "1");
  auto compiled = compiler::compile_bytes(model_bytes(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto program = runtime::Program::load_bytes(*compiled->serialize());
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  return *program;
}

// Host copy of device (or host) memory, read on a stream of its own so it does not wait for
// anyone else's work.
std::vector<float> read_now(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.device.is_cpu()) {
    std::memcpy(out.data(), t.data, t.nbytes());
    return out;
  }
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemcpyAsync(out.data(), t.data, t.nbytes(), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return out;
}

bool all_poisoned(const std::vector<float>& v) {
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (bits != 0xFFFFFFFFu) return false;
  }
  return true;
}

uint64_t counter(const runtime::Method& m, const char* name) {
  for (const auto& [key, value] : m.delegate_counters(0)) {
    if (key == name) return value;
  }
  return ~uint64_t{0};
}

class ContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    cuda::register_backend();
    cuda::register_compiler();
    gpus_ = static_cast<int>(cuda::devices().size());
    if (gpus_ == 0) GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  }

  // GTEST_SKIP only returns from the function it is written in, so each
  // two-GPU test writes `if (!two_gpus()) GTEST_SKIP() << ...` in its own body.
  bool two_gpus() const { return gpus_ >= 2; }

  Tensor host_input() { return testing::random_tensor(rng_, {64, 512}); }
  Tensor device_tensor(std::vector<int64_t> sizes, int device = 0) {
    return runtime::allocate_tensor(DType::Float32, std::move(sizes),
                                    Device::cuda(static_cast<int16_t>(device)))
        .value();
  }
  Tensor device_copy(const Tensor& host, int device = 0) {
    Tensor t = device_tensor(host.sizes(), device);
    EXPECT_TRUE(runtime::copy_tensor(t.view(), host.view()).ok());
    return t;
  }
  void poison(const Tensor& t) { ASSERT_EQ(cudaMemset(t.data(), 0xFF, t.nbytes()), cudaSuccess); }

  // CPU-path result of the model for `x`.
  std::vector<float> reference(const Tensor& x) {
    static std::shared_ptr<const runtime::Program> cpu = compile("cpu", false);
    auto module = extension::Module::from_program(cpu).value();
    auto out = module.run({x}).value();
    return std::vector<float>(out[0].data_as<float>(), out[0].data_as<float>() + out[0].numel());
  }

  static double error(const std::vector<float>& got, const std::vector<float>& want) {
    return testing::relative_error(got.data(), want.data(), static_cast<int64_t>(want.size()));
  }

  // Inputs (host and device copies) and device outputs of two calls, ready on the device.
  struct TwoCalls {
    Tensor x1, x2, d1, d2, y1, y2;
  };
  TwoCalls two_calls() {
    TwoCalls c;
    c.x1 = host_input();
    c.x2 = host_input();
    c.d1 = device_copy(c.x1);
    c.d2 = device_copy(c.x2);
    c.y1 = device_tensor({64, 256});
    c.y2 = device_tensor({64, 256});
    cudaDeviceSynchronize();
    return c;
  }

  int gpus_ = 0;
  std::mt19937 rng_{77};
};

// --- zero copy and staging ----------------------------------------------------------------------

TEST_F(ContractTest, DeviceAndManagedMemoryAreBoundWithoutCopies) {
  auto module = extension::Module::from_program(compile("cuda:0", /*io_device=*/true)).value();
  const Tensor x = host_input();
  const Tensor dx = device_copy(x);
  const Tensor dy = device_tensor({64, 256});
  {
    const Status st_ = module.run({dx.view()}, {dy.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  EXPECT_LE(error(read_now(dy.view()), reference(x)), 1e-5);
  EXPECT_EQ(module.method().output(0).data, dy.data());  // the output landed in our buffer
  EXPECT_EQ(counter(module.method(), "zero_copy_calls"), 1u);
  EXPECT_EQ(counter(module.method(), "staged_bytes"), 0u);

  float *mx = nullptr, *my = nullptr;
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&mx), x.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&my), 64 * 256 * 4), cudaSuccess);
  std::memcpy(mx, x.data(), x.nbytes());
  const std::vector<int64_t> xs = {64, 512}, ys = {64, 256};
  ASSERT_TRUE(module
                  .run({TensorView{mx, DType::Float32, xs, Device::cuda(0)}},
                       {TensorView{my, DType::Float32, ys, Device::cuda(0)}})
                  .ok());
  EXPECT_LE(error(std::vector<float>(my, my + 64 * 256), reference(x)), 1e-5);
  EXPECT_EQ(counter(module.method(), "zero_copy_calls"), 2u);
  EXPECT_EQ(counter(module.method(), "staged_bytes"), 0u);
  cudaFree(mx);
  cudaFree(my);
}

// Captures the backend's info lines while in scope (and always unhooks itself, also when an
// assertion ends the test early).
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> lines;
  LogCapture() { set_log_callback(&LogCapture::callback, this); }
  ~LogCapture() { set_log_callback(nullptr, nullptr); }
  static void callback(LogLevel level, std::string_view component, std::string_view message,
                       void* self) {
    auto* c = static_cast<LogCapture*>(self);
    std::lock_guard<std::mutex> lock(c->mutex);
    if (level == LogLevel::Info && component == "cuda") c->lines.emplace_back(message);
  }
};

TEST_F(ContractTest, HostMemoryIsStagedAndSaidOncePerHandle) {
  const auto program = compile("cuda:0", /*io_device=*/true);
  LogCapture log;
  auto first = extension::Module::from_program(program).value();
  auto second = extension::Module::from_program(program).value();
  const Tensor x = host_input();
  Tensor y = Tensor::empty(DType::Float32, {64, 256}).value();
  for (int i = 0; i < 3; ++i) {
    const Status st_ = first.run({x.view()}, {y.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  EXPECT_LE(error(read_now(y.view()), reference(x)), 1e-5);
  EXPECT_EQ(log.lines.size(), 1u);
  {
    const Status st_ = second.run({x.view()}, {y.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  {
    const Status st_ = second.run({x.view()}, {y.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  ASSERT_EQ(log.lines.size(), 2u);  // one line per handle
  EXPECT_NE(log.lines[0].find("stages host memory"), std::string::npos) << log.lines[0];
  EXPECT_NE(log.lines[0].find("'x' (128.0 KiB in)"), std::string::npos) << log.lines[0];
  EXPECT_NE(log.lines[0].find("'y' (64.0 KiB out)"), std::string::npos) << log.lines[0];
  EXPECT_EQ(counter(first.method(), "staged_calls"), 3u);
  EXPECT_EQ(counter(first.method(), "staged_bytes"), 3u * (128 + 64) * 1024);
  EXPECT_EQ(counter(first.method(), "zero_copy_calls"), 0u);
}

TEST_F(ContractTest, StrictStagingRefusesHostMemory) {
  const Tensor x = host_input();
  Tensor y = Tensor::empty(DType::Float32, {64, 256}).value();
  runtime::MethodOptions strict;
  strict.backend_options.push_back({"strict_staging", "1"});
  for (bool compile_spec : {false, true}) {
    SCOPED_TRACE(compile_spec ? "compile spec" : "load option");
    auto program = compile("cuda:0", true, /*strict=*/compile_spec);
    auto module = extension::Module::from_program(program, "forward",
                                                  compile_spec ? runtime::MethodOptions{} : strict)
                      .value();
    const Status s = module.run({x.view()}, {y.view()});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("strict staging forbids"), std::string::npos) << s.message();
    // Device memory still runs.
    const Tensor dx = device_copy(x);
    const Tensor dy = device_tensor({64, 256});
    {
      const Status st_ = module.run({dx.view()}, {dy.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
}

// A view that says cuda:0 but points at host memory is a caller's mistake: refused, not staged.
TEST_F(ContractTest, HostMemoryDeclaredAsDeviceMemoryIsRefused) {
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor x = host_input();
  const Tensor dy = device_tensor({64, 256});
  const TensorView lying{x.data(), DType::Float32, x.sizes(), Device::cuda(0)};
  const Status s = module.run({lying}, {dy.view()});
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("is declared as memory on cuda:0 but the pointer is host memory: "
                             "pass memory allocated on cuda:0"),
            std::string::npos)
      << s.message();
}

// A partition labelled for another GPU than its engine (a hand-edited or mixed-up program) fails
// at load, saying how to recompile. (Both GPUs must exist for the load to get that far.)
TEST_F(ContractTest, ALabelThatDisagreesWithTheEngineIsRefusedAtLoad) {
  if (!two_gpus())
    GTEST_SKIP() << "needs two GPUs (this host has " << gpus_ << "): run on nvidia-h200-x2";
  compiler::CompileOptions options;
  auto backend = std::move(compiler::make_backend_compiler({Device::cuda(1), "", "fp32"})).value();
  options.backends.push_back(backend.get());
  options.target_device = "cuda:0";
  auto compiled = compiler::compile_bytes(model_bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto program = runtime::Program::load_bytes(*compiled->serialize());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.code(), Error::InvalidProgram);
  EXPECT_NE(method.status().message().find("is labelled target_device=cuda:0 but its engine was "
                                           "built for cuda:1"),
            std::string::npos)
      << method.status().to_string();
}

TEST_F(ContractTest, MemoryOnAnotherGpuIsRefusedNamingBoth) {
  if (!two_gpus())
    GTEST_SKIP() << "needs two GPUs (this host has " << gpus_ << "): run on nvidia-h200-x2";
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor other = device_copy(host_input(), /*device=*/1);
  const Tensor dy = device_tensor({64, 256});
  const Status s = module.run(
      {TensorView{other.data(), DType::Float32, other.sizes(), Device::cuda(0)}}, {dy.view()});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("runs on cuda:0 but binding 'x' is memory on cuda:1"),
            std::string::npos)
      << s.message();
}

// --- caller streams and the completion event -----------------------------------------------------

TEST_F(ContractTest, UnderACallerStreamExecuteReturnsBeforeTheGpuFinishes) {
  auto kernels = testing::TestKernels::load(0).value();
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor x = host_input();
  const Tensor dx = device_copy(x);
  const Tensor dy = device_tensor({64, 256});
  {
    const Status st_ = module.run({dx.view()}, {dy.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }  // warm: capture the graph
  poison(dy);
  cudaDeviceSynchronize();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(kernels.spin(stream, kSpinCycles).ok());  // a long kernel queued first
  const auto start = Clock::now();
  {
    cuda::StreamGuard guard(stream);
    {
      const Status st_ = module.method().execute();
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  EXPECT_TRUE(all_poisoned(read_now(dy.view()))) << "outputs were written before the queued work";
  // Under compute-sanitizer every API call is intercepted: the host time says nothing there.
  if (!testing::under_sanitizer()) {
    EXPECT_LT(ms, 50.0) << "execute blocked the host";
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_LE(error(read_now(dy.view()), reference(x)), 1e-5);
  EXPECT_EQ(counter(module.method(), "async_returns"), 1u);
  std::printf("  execute returned in %.3f ms with %.0f M cycles of work queued before it\n", ms,
              kSpinCycles / 1e6);
  cudaStreamDestroy(stream);
}

TEST_F(ContractTest, RepeatedCallsWithoutSynchronizationAreRight) {
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::vector<Tensor> xs, dxs, dys;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(host_input());
    dxs.push_back(device_copy(xs.back()));
    dys.push_back(device_tensor({64, 256}));
  }
  cudaDeviceSynchronize();
  {
    cuda::StreamGuard guard(stream);
    for (int i = 0; i < 6; ++i) {
      const Status st_ = module.run({dxs[i].view()}, {dys[i].view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
    // and the same buffers again, which replays the graph captured for them
    for (int i = 0; i < 6; ++i) {
      const Status st_ = module.run({dxs[i].view()}, {dys[i].view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  cudaStreamSynchronize(stream);
  for (int i = 0; i < 6; ++i)
    EXPECT_LE(error(read_now(dys[i].view()), reference(xs[i])), 1e-5) << i;
  cudaStreamDestroy(stream);
}

TEST_F(ContractTest, ACallOnAnotherStreamIsOrderedAfterThePreviousOneOnTheDevice) {
  auto kernels = testing::TestKernels::load(0).value();
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const TwoCalls c = two_calls();
  const Tensor &x1 = c.x1, &x2 = c.x2, &d1 = c.d1, &d2 = c.d2, &y1 = c.y1, &y2 = c.y2;
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  ASSERT_TRUE(kernels.spin(a, kSpinCycles).ok());
  {
    cuda::StreamGuard guard(a);
    {
      const Status st_ = module.run({d1.view()}, {y1.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  const auto start = Clock::now();
  {
    cuda::StreamGuard guard(b);
    {
      const Status st_ = module.run({d2.view()}, {y2.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!testing::under_sanitizer()) {
    EXPECT_LT(ms, 50.0) << "the second call waited on the host";
  }
  EXPECT_EQ(cudaStreamQuery(b), cudaErrorNotReady) << "stream b did not wait for the first call";
  cudaStreamSynchronize(b);
  EXPECT_EQ(cudaStreamQuery(a), cudaSuccess) << "b finished before a";
  EXPECT_LE(error(read_now(y1.view()), reference(x1)), 1e-5);
  EXPECT_LE(error(read_now(y2.view()), reference(x2)), 1e-5);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

// A call on the stream of the previous call needs no wait for it; the delegate knows a stream by
// its id, not its handle. A stream destroyed with the previous call still running and a new one
// made after it may share a handle: the call on the new one must still wait.
TEST_F(ContractTest, ANewStreamWithAReusedHandleIsStillOrderedAfterThePreviousCall) {
  auto kernels = testing::TestKernels::load(0).value();
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const TwoCalls c = two_calls();
  const Tensor &x1 = c.x1, &x2 = c.x2, &d1 = c.d1, &d2 = c.d2, &y1 = c.y1, &y2 = c.y2;
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(kernels.spin(a, kSpinCycles).ok());
  cudaEvent_t spun;  // completes with the spin, before the first call starts
  ASSERT_EQ(cudaEventCreate(&spun), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(spun, a), cudaSuccess);
  {
    cuda::StreamGuard guard(a);
    const Status st_ = module.run({d1.view()}, {y1.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  const cudaStream_t old_handle = a;
  ASSERT_EQ(cudaStreamDestroy(a), cudaSuccess);  // its work goes on
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  std::printf("  the new stream %s the destroyed one's handle\n",
              b == old_handle ? "reuses" : "does not reuse");
  {
    cuda::StreamGuard guard(b);
    const Status st_ = module.run({d2.view()}, {y2.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  EXPECT_EQ(cudaStreamQuery(b), cudaErrorNotReady) << "the new stream did not wait for the call";
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  // The second call waited for the first, which came after the spin on the destroyed stream.
  EXPECT_EQ(cudaEventQuery(spun), cudaSuccess) << "the second call finished before the first";
  cudaEventDestroy(spun);
  EXPECT_LE(error(read_now(y1.view()), reference(x1)), 1e-5);
  EXPECT_LE(error(read_now(y2.view()), reference(x2)), 1e-5);
  cudaStreamDestroy(b);
}

// The counters say what a graph replay runs: the two GEMMs (ReLU in the first one's epilogue)
// are at least two kernel nodes, and a method that launches its steps without a graph has none.
TEST_F(ContractTest, TheCountersCountTheGraphsKernels) {
  const auto program = compile("cuda:0", true);
  const Tensor x = host_input();
  const Tensor dx = device_copy(x);
  const Tensor dy = device_tensor({64, 256});
  auto module = extension::Module::from_program(program).value();
  EXPECT_EQ(counter(module.method(), "graph_kernels"), 0u) << "before any call";
  {
    const Status st_ = module.run({dx.view()}, {dy.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  const uint64_t kernels = counter(module.method(), "graph_kernels");
  const uint64_t nodes = counter(module.method(), "graph_nodes");
  EXPECT_GE(kernels, 2u);
  EXPECT_GE(nodes, kernels);
  EXPECT_LE(kernels, 8u) << "two small GEMMs";
  std::printf("  graph: %llu nodes, %llu kernels\n", static_cast<unsigned long long>(nodes),
              static_cast<unsigned long long>(kernels));

  runtime::MethodOptions no_graphs;
  no_graphs.backend_options.push_back({"cuda_graphs", "0"});
  auto plain = extension::Module::from_program(program, "forward", no_graphs).value();
  {
    const Status st_ = plain.run({dx.view()}, {dy.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  EXPECT_EQ(counter(plain.method(), "graph_kernels"), 0u);
  EXPECT_LE(error(read_now(dy.view()), reference(x)), 1e-5);
}

TEST_F(ContractTest, DestroyingAMethodWaitsForItsLastCall) {
  auto kernels = testing::TestKernels::load(0).value();
  const auto program = compile("cuda:0", true);
  const Tensor x = host_input();
  const Tensor dx = device_copy(x);
  const Tensor dy = device_tensor({64, 256});
  poison(dy);
  cudaDeviceSynchronize();
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  {
    auto module = extension::Module::from_program(program).value();
    ASSERT_TRUE(kernels.spin(stream, kSpinCycles).ok());
    cuda::StreamGuard guard(stream);
    {
      const Status st_ = module.run({dx.view()}, {dy.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }  // the method's destructor waits for the completion event
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_LE(error(read_now(dy.view()), reference(x)), 1e-5);
  cudaStreamDestroy(stream);
}

TEST_F(ContractTest, StagingUnderACallerStreamSynchronizes) {
  auto kernels = testing::TestKernels::load(0).value();
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor x = host_input();
  Tensor y = Tensor::empty(DType::Float32, {64, 256}).value();
  std::memset(y.data(), 0xFF, y.nbytes());
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  ASSERT_TRUE(kernels.spin(stream, kSpinCycles / 4).ok());
  {
    cuda::StreamGuard guard(stream);
    {
      const Status st_ = module.run({x.view()}, {y.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_LE(error(read_now(y.view()), reference(x)), 1e-5);  // ready on return, no sync by us
  cudaStreamDestroy(stream);
}

TEST_F(ContractTest, StreamsThatCannotServeThePartitionAreRefused) {
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor dx = device_copy(host_input());
  const Tensor dy = device_tensor({64, 256});
  {
    cuda::StreamGuard guard(nullptr);
    const Status s = module.run({dx.view()}, {dy.view()});
    EXPECT_NE(s.message().find("legacy default stream"), std::string::npos) << s.message();
  }
  if (gpus_ < 2) return;
  cudaSetDevice(1);
  cudaStream_t other;
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  cudaSetDevice(0);
  {
    cuda::StreamGuard guard(other);
    const Status s = module.run({dx.view()}, {dy.view()});
    EXPECT_NE(
        s.message().find("runs on cuda:0 but the caller's stream (StreamGuard) belongs to cuda:1"),
        std::string::npos)
        << s.message();
  }
  cudaStreamDestroy(other);
}

// A graph captured for one output buffer must not write into it once another buffer is bound.
TEST_F(ContractTest, GraphsAreNeverReplayedWithStalePointers) {
  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor x = host_input();
  const Tensor dx = device_copy(x);
  const Tensor first = device_tensor({64, 256}), second = device_tensor({64, 256});
  {
    const Status st_ = module.run({dx.view()}, {first.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  {
    const Status st_ = module.run({dx.view()}, {first.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }  // replayed
  poison(first);
  poison(second);
  cudaDeviceSynchronize();
  {
    const Status st_ = module.run({dx.view()}, {second.view()});
    ASSERT_TRUE(st_.ok()) << st_.to_string();
  }
  EXPECT_LE(error(read_now(second.view()), reference(x)), 1e-5);
  EXPECT_TRUE(all_poisoned(read_now(first.view()))) << "the old buffer was written";
}

// --- device selection ----------------------------------------------------------------------------

TEST_F(ContractTest, TheCallersCurrentDeviceIsRestored) {
  if (!two_gpus())
    GTEST_SKIP() << "needs two GPUs (this host has " << gpus_ << "): run on nvidia-h200-x2";
  cudaSetDevice(1);
  auto program = compile("cuda:0", true);
  auto module = extension::Module::from_program(program);
  ASSERT_TRUE(module.ok());
  int current = -1;
  cudaGetDevice(&current);
  EXPECT_EQ(current, 1) << "after load_method (init)";
  const Tensor dx = device_copy(host_input(), 0);
  const Tensor dy = device_tensor({64, 256}, 0);
  cudaSetDevice(1);
  ASSERT_TRUE(module->run({dx.view()}, {dy.view()}).ok());
  cudaGetDevice(&current);
  EXPECT_EQ(current, 1) << "after execute";
  { auto gone = std::move(module).value(); }
  cudaGetDevice(&current);
  EXPECT_EQ(current, 1) << "after destroy";
  cudaSetDevice(0);
}

TEST_F(ContractTest, AProgramBuiltForCuda1RunsOnGpu1AndLeavesGpu0Alone) {
  if (!two_gpus())
    GTEST_SKIP() << "needs two GPUs (this host has " << gpus_ << "): run on nvidia-h200-x2";
  const Tensor x = host_input();
  std::vector<float> on0;
  {
    auto m0 = extension::Module::from_program(compile("cuda:0", false)).value();
    auto out = m0.run({x}).value();
    on0.assign(out[0].data_as<float>(), out[0].data_as<float>() + out[0].numel());
  }
  cudaSetDevice(0);
  cudaDeviceSynchronize();
  size_t free_before = 0, free_after = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  {
    auto m1 = extension::Module::from_program(compile("cuda:1", false)).value();
    for (int i = 0; i < 3; ++i) {
      auto out = m1.run({x}).value();
      const std::vector<float> on1(out[0].data_as<float>(),
                                   out[0].data_as<float>() + out[0].numel());
      EXPECT_EQ(on1, on0) << "cuda:1 and cuda:0 builds differ";
    }
    cudaSetDevice(0);
    cudaMemGetInfo(&free_after, &total);
    EXPECT_EQ(free_after, free_before) << "GPU 0 lost " << (free_before - free_after) << " bytes";
    int current = -1;
    cudaGetDevice(&current);
    EXPECT_EQ(current, 0);
  }
  cudaMemGetInfo(&free_after, &total);
  EXPECT_EQ(free_after, free_before);
}

TEST_F(ContractTest, PartitionsOnTwoGpusHandOverWithPeerCopies) {
  if (!two_gpus())
    GTEST_SKIP() << "needs two GPUs (this host has " << gpus_ << "): run on nvidia-h200-x2";
  compiler::CompileOptions options;
  auto b0 = std::move(compiler::make_backend_compiler({Device::cuda(0), "", "fp32"})).value();
  auto b1 = std::move(compiler::make_backend_compiler({Device::cuda(1), "", "fp32"})).value();
  options.backends = {b0.get(), b1.get()};
  options.targets.round_robin = {Device::cuda(0), Device::cuda(1)};
  options.max_partition_nodes = 1;
  // Three nodes, three partitions: cuda:0, cuda:1, cuda:0. fuse-linear would make the first
  // MatMul and its Relu one node (and the handover one copy shorter).
  options.disabled_passes = {"fuse-linear"};
  auto compiled = compiler::compile_bytes(model_bytes(), options).value();
  EXPECT_EQ(compiled.summary().delegate_calls, 3u);
  auto program = runtime::Program::load_bytes(*compiled.serialize()).value();
  auto module = extension::Module::from_program(program).value();
  const Tensor x = host_input();
  auto out = module.run({x}).value();
  EXPECT_LE(
      error(std::vector<float>(out[0].data_as<float>(), out[0].data_as<float>() + out[0].numel()),
            reference(x)),
      1e-5);
  const auto copies = module.method().copy_counts();
  EXPECT_EQ(copies.device_to_device, 2u);  // cuda:0 -> cuda:1 -> cuda:0
  EXPECT_EQ(copies.host_to_device, 1u);
  EXPECT_EQ(copies.device_to_host, 1u);
}

// --- green contexts
// --------------------------------------------------------------------------------

TEST_F(ContractTest, AGreenContextConfinesTheMethodAndKeepsTheContract) {
  auto kernels = testing::TestKernels::load(0).value();
  auto split = cuda::GreenContext::split(0, 16);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  cuda::GreenContext& green = split->first;
  cuda::GreenContext& rest = split->second;
  std::printf("  green context: %d SMs (asked 16), remainder %d SMs, device has %d\n",
              green.sm_count(), rest.sm_count(), cuda::devices()[0].multiprocessors);
  EXPECT_GE(green.sm_count(), 16);

  auto module = extension::Module::from_program(compile("cuda:0", true)).value();
  const Tensor x = host_input();
  const Tensor dx = device_copy(x);
  const Tensor dy = device_tensor({64, 256});
  cudaDeviceSynchronize();

  // The SMs work on the green stream may use, before and after running the method there.
  auto before = kernels.probe_sms(green.stream(), 1024);
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  {
    cuda::StreamGuard guard(green.stream());
    for (int i = 0; i < 5; ++i) {
      const Status st_ = module.run({dx.view()}, {dy.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  auto after = kernels.probe_sms(green.stream(), 1024);
  ASSERT_TRUE(after.ok());
  EXPECT_LE(static_cast<int>(before->size()), green.sm_count());
  EXPECT_EQ(*before, *after);
  std::printf("  probe kernels on the green stream ran on %zu distinct SMs\n", before->size());
  EXPECT_LE(error(read_now(dy.view()), reference(x)), 1e-5);

  // Asynchronous return and the completion event under the green context.
  poison(dy);
  cudaDeviceSynchronize();
  ASSERT_TRUE(kernels.spin(green.stream(), kSpinCycles).ok());
  {
    cuda::StreamGuard guard(green.stream());
    {
      const Status st_ = module.run({dx.view()}, {dy.view()});
      ASSERT_TRUE(st_.ok()) << st_.to_string();
    }
  }
  EXPECT_EQ(cudaStreamQuery(green.stream()), cudaErrorNotReady);
  EXPECT_TRUE(all_poisoned(read_now(dy.view())));
  cudaStreamSynchronize(green.stream());
  EXPECT_LE(error(read_now(dy.view()), reference(x)), 1e-5);

  // Latency alone, then with the other SMs saturated by a competing workload on the remainder.
  auto latency = [&]() {
    std::vector<double> ms;
    for (int i = 0; i < 200; ++i) {
      const auto start = Clock::now();
      {
        cuda::StreamGuard guard(green.stream());
        EXPECT_TRUE(module.run({dx.view()}, {dy.view()}).ok());
      }
      cudaStreamSynchronize(green.stream());
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return std::make_pair(ms[ms.size() / 2], ms[ms.size() * 9 / 10]);
  };
  const auto alone = latency();
  ASSERT_TRUE(kernels.busy(rest.stream(), rest.sm_count() * 8, 1024, kSpinCycles * 4).ok());
  const auto contended = latency();
  const bool still_busy = cudaStreamQuery(rest.stream()) == cudaErrorNotReady;
  cudaStreamSynchronize(rest.stream());
  std::printf(
      "  method on %d SMs: median %.4f ms (p90 %.4f) alone, %.4f ms (p90 %.4f) with the other "
      "%d SMs saturated (competitor still running at the end: %s)\n",
      green.sm_count(), alone.first, alone.second, contended.first, contended.second,
      rest.sm_count(), still_busy ? "yes" : "no");
  RecordProperty("green_median_alone_ms", fmt::format("{:.4f}", alone.first));
  RecordProperty("green_median_contended_ms", fmt::format("{:.4f}", contended.first));
  // Timing: under compute-sanitizer the measurement is meaningless (and the competitor may end
  // first); the confinement checks above still run.
  if (!testing::under_sanitizer()) {
    EXPECT_TRUE(still_busy) << "the competing workload ended before the measurement did";
  }
}

// The competing workload of `baton run --saturate-rest`: every block resident on the remainder's
// SMs until stop(), while the green context's SMs stay free. (No probe_sms here while it runs:
// the probe's cudaFree may wait for the whole device.)
TEST_F(ContractTest, TheCompetingWorkloadFillsTheOtherSmsUntilStopped) {
  // compute-sanitizer may run kernels one at a time: the workload then ends by its limit (kept
  // short there) before the green context's kernel runs, and only the concurrency is unchecked.
  const bool sanitized = testing::under_sanitizer();
  const double limit_s = sanitized ? 5.0 : 60.0;
  auto kernels = testing::TestKernels::load(0).value();
  auto split = cuda::GreenContext::split(0, 16);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  cuda::GreenContext& green = split->first;
  cuda::GreenContext& rest = split->second;
  auto load = cuda::CompetingWorkload::create(0);
  ASSERT_TRUE(load.ok()) << load.status().to_string();
  // The spin kernel's first launch on the green context loads it there, which waits for the
  // whole device (H100: 60 s behind the running workload): launch it once before.
  ASSERT_TRUE(kernels.busy(green.stream(), 1, 32, 1000).ok());
  ASSERT_EQ(cudaStreamSynchronize(green.stream()), cudaSuccess);
  {
    const Status started = load->start(rest.stream(), rest.sm_count(), limit_s);
    ASSERT_TRUE(started.ok()) << started.to_string();
  }
  EXPECT_TRUE(load->running());
  EXPECT_EQ(load->blocks(), rest.sm_count() * load->blocks_per_sm());
  EXPECT_EQ(load->start(rest.stream(), rest.sm_count()).code(), Error::InvalidArgument);

  // Work on the green context runs beside it: ~1 ms of spinning on all its SMs ends long before
  // the workload's 60 s limit would free the other SMs.
  const auto t0 = Clock::now();
  ASSERT_TRUE(kernels.busy(green.stream(), green.sm_count() * 2, 256, kSpinCycles / 150).ok());
  ASSERT_EQ(cudaStreamSynchronize(green.stream()), cudaSuccess);
  const double green_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!sanitized) {
    EXPECT_LT(green_ms, 5000.0);
    EXPECT_EQ(cudaStreamQuery(rest.stream()), cudaErrorNotReady) << "the workload ended by itself";
  }

  auto was_running = load->stop();
  ASSERT_TRUE(was_running.ok()) << was_running.status().to_string();
  if (!sanitized) {
    EXPECT_TRUE(*was_running);
  }
  EXPECT_FALSE(load->running());
  EXPECT_EQ(cudaStreamQuery(rest.stream()), cudaSuccess);
  EXPECT_EQ(load->stop().code(), Error::InvalidArgument);
  std::printf(
      "  competing workload: %d blocks x %d threads (%d per SM) on %d SMs; 1 ms of spinning on "
      "the green context's %d SMs took %.2f ms beside it\n",
      load->blocks(), cuda::CompetingWorkload::kThreadsPerBlock, load->blocks_per_sm(),
      rest.sm_count(), green.sm_count(), green_ms);

  // Started again, then left running: the destructor stops it and waits (before the green
  // contexts, declared earlier, go).
  const Status again = load->start(rest.stream(), rest.sm_count(), limit_s);
  EXPECT_TRUE(again.ok()) << again.to_string();
}

// --- threads
// --------------------------------------------------------------------------------------

TEST_F(ContractTest, ConcurrentMethodsShareWeightsAndMatchASingleThread) {
  const auto program = compile("cuda:0", true);
  constexpr int kThreads = 4, kCalls = 20;
  std::vector<Tensor> xs, dxs;
  for (int i = 0; i < kThreads * kCalls; ++i) {
    xs.push_back(host_input());
    dxs.push_back(device_copy(xs.back()));
  }
  // Single-thread results, bit for bit.
  std::vector<std::vector<float>> expected;
  {
    auto module = extension::Module::from_program(program).value();
    const Tensor dy = device_tensor({64, 256});
    for (const Tensor& dx : dxs) {
      {
        const Status st_ = module.run({dx.view()}, {dy.view()});
        ASSERT_TRUE(st_.ok()) << st_.to_string();
      }
      expected.push_back(read_now(dy.view()));
    }
  }
  std::vector<extension::Module> modules;
  for (int t = 0; t < kThreads; ++t)
    modules.push_back(extension::Module::from_program(program).value());
  const cuda::EngineStats stats = cuda::engine_stats();
  EXPECT_EQ(stats.engines, 1u) << "weights must be resident once";
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cudaSetDevice(0);
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      std::vector<Tensor> outs;
      for (int c = 0; c < kCalls; ++c) outs.push_back(device_tensor({64, 256}));
      {
        cuda::StreamGuard guard(stream);
        for (int c = 0; c < kCalls; ++c) {
          if (!modules[t].run({dxs[t * kCalls + c].view()}, {outs[c].view()}).ok()) ++failures;
        }
      }
      cudaStreamSynchronize(stream);
      for (int c = 0; c < kCalls; ++c) {
        if (read_now(outs[c].view()) != expected[t * kCalls + c]) ++mismatches;
      }
      cudaStreamDestroy(stream);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace baton
