// The host side of a GPU program, measured in C++ (issue 12's host goals): a program compiled
// with --io device, its inputs and outputs bound zero-copy, profiling off. Four numbers, each the
// median and p90 of N timed calls after warm-up, all in one process:
//   default_end_to_end   execute() on the default path (cudaStreamPerThread; execute synchronizes)
//   caller_end_to_end    execute() under a StreamGuard on a caller stream, then
//                        cudaStreamSynchronize on it
//   caller_return        execute() alone under that guard: how long until it returns (the GPU may
//                        still be working)
//   graph_floor          the floor: launching a one-node CUDA graph (a 4-byte memset) on the
//                        caller stream and synchronizing it
// Prints one JSON object (microseconds).
//
//   baton_host_overhead_bench PROGRAM.baton [--iterations N] [--warmup N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/stream.h"
#include "baton/cuda/stream_guard.h"
#include "baton/runtime/device_allocator.h"
#include "baton/runtime/program.h"
#include "quantile.h"

namespace {

using baton::bench::quantile;
using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "baton_host_overhead_bench: error: %s\n", what.c_str());
  std::exit(1);
}

void check(const baton::Status& s) {
  if (!s.ok()) fail(s.to_string());
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Series {
  const char* name;
  std::vector<double> us;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROGRAM.baton [--iterations N] [--warmup N]\n", argv[0]);
    return 2;
  }
  int iterations = 5000, warmup = 500;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0)
      iterations = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--warmup") == 0)
      warmup = std::atoi(argv[i + 1]);
    else
      fail(std::string("unknown option ") + argv[i]);
  }
  if (iterations < 1 || warmup < 0) fail("--iterations must be at least 1, --warmup at least 0");
  baton::register_builtins();
  baton::cuda::register_backend();
  auto program = baton::runtime::Program::load_file(argv[1]);
  if (!program.ok()) fail(program.status().to_string());
  auto method = (*program)->load_method("forward");
  if (!method.ok()) fail(method.status().to_string());
  baton::runtime::Method& m = **method;
  m.set_profiling(false);

  // Inputs and outputs in GPU memory, bound zero-copy; inputs filled with ones.
  const baton::Device gpu = baton::Device::cuda(0);
  std::vector<baton::Tensor> buffers;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    const auto info = m.input_info(i);
    auto host = baton::Tensor::empty(info.dtype, {info.sizes.begin(), info.sizes.end()});
    if (!host.ok()) fail(host.status().to_string());
    if (info.dtype != baton::DType::Float32) fail("this benchmark feeds float32 inputs only");
    for (int64_t k = 0; k < host->numel(); ++k) host->data_as<float>()[k] = 1.0f;
    auto t =
        baton::runtime::allocate_tensor(info.dtype, {info.sizes.begin(), info.sizes.end()}, gpu);
    if (!t.ok()) fail(t.status().to_string());
    check(baton::runtime::copy_tensor(t->view(), host->view()));
    check(m.bind_input(i, t->view()));
    buffers.push_back(std::move(*t));
  }
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    const auto info = m.output_info(i);
    auto t =
        baton::runtime::allocate_tensor(info.dtype, {info.sizes.begin(), info.sizes.end()}, gpu);
    if (!t.ok()) fail(t.status().to_string());
    check(m.bind_output(i, t->view()));
    buffers.push_back(std::move(*t));
  }
  auto stream = baton::cuda::Stream::create(0);
  if (!stream.ok()) fail(stream.status().to_string());
  const cudaStream_t s = stream->get();

  // The floor: a one-node graph on the same stream.
  void* word = nullptr;
  check_cuda(cudaMalloc(&word, 4), "cudaMalloc");
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  cudaMemsetParams memset{};
  memset.dst = word;
  memset.value = 0;
  memset.elementSize = 4;
  memset.width = 1;
  memset.height = 1;
  cudaGraphNode_t node = nullptr;
  check_cuda(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &memset), "cudaGraphAddMemsetNode");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");

  Series default_e2e{"default_end_to_end", {}}, caller_e2e{"caller_end_to_end", {}},
      caller_return{"caller_return", {}}, floor{"graph_floor", {}};
  // Rounds alternate the four measurements so that drift (clocks, other tenants) hits them alike.
  const int rounds = 10;
  for (int round = 0; round < rounds; ++round) {
    const int n = iterations / rounds + (round < iterations % rounds ? 1 : 0);
    const int w = round == 0 ? warmup : warmup / rounds;
    for (int i = 0; i < w + n; ++i) {
      const auto t0 = Clock::now();
      check(m.execute());
      if (i >= w) default_e2e.us.push_back(us_since(t0));
    }
    for (int i = 0; i < w + n; ++i) {
      baton::cuda::StreamGuard guard(s);
      const auto t0 = Clock::now();
      check(m.execute());
      const double returned = us_since(t0);
      check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      const double done = us_since(t0);
      if (i >= w) {
        caller_return.us.push_back(returned);
        caller_e2e.us.push_back(done);
      }
    }
    for (int i = 0; i < w + n; ++i) {
      const auto t0 = Clock::now();
      check_cuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      if (i >= w) floor.us.push_back(us_since(t0));
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(word);

  std::printf("{\"program\": \"%s\", \"iterations\": %d, \"warmup\": %d", argv[1], iterations,
              warmup);
  for (const Series* x : {&default_e2e, &caller_e2e, &caller_return, &floor}) {
    std::printf(", \"%s\": {\"median_us\": %.2f, \"p90_us\": %.2f, \"min_us\": %.2f}", x->name,
                quantile(x->us, 0.5), quantile(x->us, 0.9), quantile(x->us, 0.0));
  }
  std::printf("}\n");
  return 0;
}
