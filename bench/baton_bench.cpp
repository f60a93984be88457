// Times Method::execute of a Baton program: warm-up runs, then timed runs, wall clock around
// each execute (which returns with results ready, so the time includes the GPU). Prints one JSON
// object: the median, p90, min and the device time of each delegate.
//
//   baton_bench PROGRAM.baton [--iterations N] [--warmup N] [--threads N] [--input FILE.npy]...
//               [--load-option KEY=VALUE]... [--samples]
// --threads: MethodOptions::threads, the CPU kernels' threads (default 0: one per CPU).
// --load-option: a load option (docs/options.md), e.g. cuda_graphs=0.
// --samples: add "samples_ms", every timed call's wall ms in order (bench/cpu_bench.py pools the
// samples of interleaved rounds).
// Inputs are the given .npy files in input order, else uniform in [-1, 1) (float inputs only).
// --versus OTHER.baton: a second program of the same model (another build, or the static program
// at the shape a dynamic one is given), loaded in the same process with the same options and
// inputs. The two are then called in turn (A B, then B A, ...) with a 2 ms pause before every
// call, so that the other program's idle threads have stopped spinning; drift of the machine
// falls on both alike, and neither gets another process's placement of threads or memory. Adds
// "versus": {median_ms, p90_ms, min_ms, device_median_ms} and "ratio" (median of A / median of B)
// to the JSON. Random inputs take A's largest sizes; to compare a dynamic A with a static B at a
// smaller shape, give the inputs at that shape with --input. Both sides run with instruction
// profiling on (a clock read per instruction), and the pause means every call wakes sleeping
// threads, so these medians compare with each other, not with runs without --versus.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "baton/baton.h"
#include "baton/cuda/backend.h"
#include "baton/extension/npy.h"
#include "baton/runtime/program.h"
#include "quantile.h"

using baton::bench::quantile;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s PROGRAM.baton [--iterations N] [--warmup N] [--threads N] "
                 "[--input FILE.npy]... [--load-option KEY=VALUE]... [--versus OTHER.baton]\n",
                 argv[0]);
    return 2;
  }
  int iterations = 200, warmup = 20;
  baton::runtime::MethodOptions options;
  std::vector<std::string> files;
  bool samples = false;
  std::string versus;
  for (int i = 2; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--samples") == 0) {  // the one flag without a value
      samples = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) break;
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) options.threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--input") == 0) files.emplace_back(argv[i + 1]);
    if (std::strcmp(argv[i], "--versus") == 0) versus = argv[i + 1];
    if (std::strcmp(argv[i], "--load-option") == 0) {
      const std::string option = argv[i + 1];
      const size_t eq = option.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "error: --load-option '%s' is not KEY=VALUE\n", option.c_str());
        return 2;
      }
      options.backend_options.push_back({option.substr(0, eq), option.substr(eq + 1)});
    }
  }
  baton::register_builtins();
  baton::cuda::register_backend();
  auto program = baton::runtime::Program::load_file(argv[1]);
  if (!program.ok()) {
    std::fprintf(stderr, "error: %s\n", program.status().to_string().c_str());
    return 1;
  }
  auto method = (*program)->load_method("forward", options);
  if (!method.ok()) {
    std::fprintf(stderr, "error: %s\n", method.status().to_string().c_str());
    return 1;
  }
  baton::runtime::Method& m = **method;
  baton::Result<std::shared_ptr<const baton::runtime::Program>> other_program =
      std::shared_ptr<const baton::runtime::Program>();
  baton::Result<std::unique_ptr<baton::runtime::Method>> other_method =
      std::unique_ptr<baton::runtime::Method>();
  if (!versus.empty()) {
    other_program = baton::runtime::Program::load_file(versus);
    if (other_program.ok()) other_method = (*other_program)->load_method("forward", options);
    const baton::Status st = !other_program.ok() ? other_program.status() : other_method.status();
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", versus.c_str(), st.to_string().c_str());
      return 1;
    }
  }
  baton::runtime::Method* other = versus.empty() ? nullptr : other_method->get();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<baton::Tensor> inputs;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    const auto info = m.input_info(i);
    baton::Tensor t;
    if (i < files.size()) {
      auto read = baton::extension::read_npy(files[i]);
      if (!read.ok()) {
        std::fprintf(stderr, "error: %s\n", read.status().to_string().c_str());
        return 1;
      }
      t = std::move(*read);
    } else if (info.dtype == baton::DType::Float32) {
      t = baton::Tensor::empty(info.dtype, {info.sizes.begin(), info.sizes.end()}).value();
      for (int64_t k = 0; k < t.numel(); ++k) t.data_as<float>()[k] = dist(rng);
    } else {
      std::fprintf(stderr, "error: input %zu is not float32: give it with --input FILE.npy\n", i);
      return 1;
    }
    if (auto s = m.set_input(i, t.view()); !s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return 1;
    }
    if (other != nullptr) {
      if (auto s = other->set_input(i, t.view()); !s.ok()) {
        std::fprintf(stderr, "error: %s: %s\n", versus.c_str(), s.to_string().c_str());
        return 1;
      }
    }
    inputs.push_back(std::move(t));
  }
  m.set_profiling(true);
  if (other != nullptr) other->set_profiling(true);
  // Which program an error came from.
  auto label = [&](const baton::runtime::Method& x) { return &x == &m ? argv[1] : versus.c_str(); };
  for (int i = 0; i < warmup; ++i) {
    for (baton::runtime::Method* x : {&m, other}) {
      if (x == nullptr) continue;
      if (auto s = x->execute(); !s.ok()) {
        std::fprintf(stderr, "error: %s: %s\n", label(*x), s.to_string().c_str());
        return 1;
      }
    }
  }
  // One timed call of x: wall ms, and its delegates' device time.
  auto timed = [&](baton::runtime::Method& x, std::vector<double>& wall,
                   std::vector<double>& device) -> bool {
    if (other != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto start = std::chrono::steady_clock::now();
    const baton::Status s = x.execute();
    const auto stop = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", label(x), s.to_string().c_str());
      return false;
    }
    wall.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    double gpu = 0.0;
    for (size_t k = 0; k < x.num_instructions(); ++k)
      gpu += x.instruction_device_time_ms(k).value_or(0.0);
    device.push_back(gpu);
    return true;
  };
  std::vector<double> wall, device, other_wall, other_device;
  for (int i = 0; i < iterations; ++i) {
    // Alternate which goes first, so that neither always follows the other.
    const bool a_first = other == nullptr || i % 2 == 0;
    if (a_first && !timed(m, wall, device)) return 1;
    if (other != nullptr && !timed(*other, other_wall, other_device)) return 1;
    if (!a_first && !timed(m, wall, device)) return 1;
  }
  std::string versus_json;
  if (other != nullptr) {
    versus_json = "\"versus\": {\"median_ms\": " + std::to_string(quantile(other_wall, 0.5)) +
                  ", \"p90_ms\": " + std::to_string(quantile(other_wall, 0.9)) +
                  ", \"min_ms\": " + std::to_string(quantile(other_wall, 0.0)) +
                  ", \"device_median_ms\": " + std::to_string(quantile(other_device, 0.5)) +
                  "}, \"ratio\": " +
                  (quantile(other_wall, 0.5) > 0
                       ? std::to_string(quantile(wall, 0.5) / quantile(other_wall, 0.5))
                       : std::string("null")) +
                  ", ";
  }
  std::string samples_json;
  if (samples) {
    samples_json = "\"samples_ms\": [";
    for (size_t i = 0; i < wall.size(); ++i) {
      samples_json += (i > 0 ? ", " : "") + std::to_string(wall[i]);
    }
    samples_json += "], ";
  }
  std::printf(
      "{\"median_ms\": %.5f, \"p90_ms\": %.5f, \"min_ms\": %.5f, \"device_median_ms\": %.5f, "
      "%s%s\"iterations\": %d, \"warmup\": %d}\n",
      quantile(wall, 0.5), quantile(wall, 0.9), quantile(wall, 0.0), quantile(device, 0.5),
      versus_json.c_str(), samples_json.c_str(), iterations, warmup);
  return 0;
}
