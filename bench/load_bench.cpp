// Times loading a Baton program with and without checksum verification (docs/format.md records
// the results). Runs alternate between the two settings so both see the same machine; each run
// loads the file afresh (a new mapping: its pages are faulted in again, from the page cache once
// the first run has read the file). Three figures per run:
//   load     Program::load_file (map + verify; with checksums this reads every byte)
//   method   load + Program::load_method("forward") (arenas, kernels, delegates)
//   execute  load + load_method + set the inputs (zeros) + the first execute (reads the weights)
// Prints one JSON object with the median of each, per setting, and the ratios.
//
//   baton_load_bench PROGRAM.baton [--runs N (21)] [--threads N (0: automatic)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/runtime/program.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Samples {
  std::vector<double> load, method, execute;
};

// One run; false (after printing why) when the program cannot be loaded or run.
bool run_once(const char* path, bool checksums, unsigned threads, Samples& out) {
  baton::runtime::LoadOptions options;
  options.verify_checksums = checksums;
  options.checksum_threads = threads;
  const Clock::time_point start = Clock::now();
  auto program = baton::runtime::Program::load_file(path, options);
  if (!program.ok()) {
    std::fprintf(stderr, "error: %s\n", program.status().to_string().c_str());
    return false;
  }
  out.load.push_back(ms_since(start));
  auto method = (*program)->load_method("forward");
  if (!method.ok()) {
    std::fprintf(stderr, "error: %s\n", method.status().to_string().c_str());
    return false;
  }
  out.method.push_back(ms_since(start));
  baton::runtime::Method& m = **method;
  std::vector<std::vector<uint8_t>> inputs(m.num_inputs());
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    const auto info = m.input_info(i);
    baton::TensorView view{nullptr, info.dtype, info.sizes, baton::Device::cpu()};
    inputs[i].assign(view.nbytes(), 0);
    view.data = inputs[i].data();
    if (auto s = m.set_input(i, view); !s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return false;
    }
  }
  if (auto s = m.execute(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
    return false;
  }
  out.execute.push_back(ms_since(start));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROGRAM.baton [--runs N]\n", argv[0]);
    return 2;
  }
  int runs = 21;
  unsigned threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  baton::register_builtins();
  Samples with, without;
  // One untimed run of each first: the file is then in the page cache for every timed run.
  if (!run_once(argv[1], true, threads, with) || !run_once(argv[1], false, threads, without)) {
    return 1;
  }
  with = {};
  without = {};
  for (int r = 0; r < runs; ++r) {
    if (!run_once(argv[1], r % 2 == 0, threads, r % 2 == 0 ? with : without)) return 1;
    if (!run_once(argv[1], r % 2 != 0, threads, r % 2 != 0 ? with : without)) return 1;
  }
  const double lw = median(with.load), lo = median(without.load);
  const double mw = median(with.method), mo = median(without.method);
  const double ew = median(with.execute), eo = median(without.execute);
  std::printf(
      "{\"program\": \"%s\", \"runs\": %d, \"checksum_threads\": %u,\n"
      " \"checksums\":    {\"load_ms\": %.2f, \"load_method_ms\": %.2f, \"first_execute_ms\": "
      "%.2f},\n"
      " \"no_checksums\": {\"load_ms\": %.2f, \"load_method_ms\": %.2f, \"first_execute_ms\": "
      "%.2f},\n"
      " \"ratio\":        {\"load\": %.3f, \"load_method\": %.3f, \"first_execute\": %.3f}}\n",
      argv[1], runs, threads, lw, mw, ew, lo, mo, eo, lw / lo, mw / mo, ew / eo);
  return 0;
}
