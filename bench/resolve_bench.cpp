// What changing shape costs a dynamic program's call (issue 36: resolving every size costs at most
// 1 us per call for BERT-base's graph). Resolving happens inside execute(), before the first
// instruction: the symbols are bound from the inputs, every size expression is evaluated, every
// dynamic tensor's sizes written and every dynamic kernel resized. With instruction profiling on,
// the time from calling execute() to the first instruction's start is that work plus a constant
// (the checks execute() makes either way); measured
//   changing   the inputs alternate between two shapes, so every call resolves;
//   same       the inputs keep one shape, so no call resolves;
// and their difference is the cost of resolving, plus one clock read: with profiling, a call that
// resolves reads the clock once more than one that does not, to split the sizes from the kernels.
// That read's own cost is measured too (clock_read_us: the median of back-to-back reads) and
// resolve_less_clock_us is the difference without it. The two shapes are the smallest ones (every
// symbol at its minimum, and at its minimum + 1), so that the instructions themselves are short.
// Prints one JSON object (microseconds, median and p90 of N calls after warm-up).
//
// --flush-mb M writes an M MiB buffer before every call, so that the runtime's own state (kernel
// objects, values, sizes) is out of the caches, as after a full-size model's call has streamed its
// weights through them: a small model then predicts what a large one costs (BERT-base's 440 MB of
// weights leave nothing of the previous resolve in cache; the small BERT's 90 KB leave all of it).
//
//   baton_resolve_bench PROGRAM.baton [--iterations N] [--threads T] [--flush-mb M]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/core/tensor.h"
#include "baton/runtime/program.h"

namespace {

using Clock = std::chrono::steady_clock;

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

int fail(const std::string& what) {
  std::fprintf(stderr, "baton_resolve_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    return fail(
        "usage: baton_resolve_bench PROGRAM.baton [--iterations N] [--threads T] [--flush-mb M]");
  }
  int iterations = 2000;
  unsigned threads = 1;
  size_t flush_mb = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--flush-mb") == 0)
      flush_mb = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--threads") == 0)
      threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  baton::register_builtins();
  auto program = baton::runtime::Program::load_file(argv[1]);
  if (!program.ok()) return fail(program.status().to_string());
  baton::runtime::MethodOptions options;
  options.threads = threads;
  auto method = (*program)->load_method("forward", options);
  if (!method.ok()) return fail(method.status().to_string());
  baton::runtime::Method& m = **method;
  if (m.num_symbols() == 0) return fail("the program has no dynamic dimensions");

  // Inputs at two shapes: every symbol at min, and at min + 1 (when the range allows).
  std::vector<std::vector<baton::Tensor>> shapes(2);
  std::mt19937 rng(1);
  for (int k = 0; k < 2; ++k) {
    std::map<std::string, int64_t> value;
    for (size_t s = 0; s < m.num_symbols(); ++s) {
      const auto sym = m.symbol(s);
      value[std::string(sym.name)] = std::min(sym.max, sym.min + k);
    }
    for (size_t i = 0; i < m.num_inputs(); ++i) {
      std::vector<int64_t> sizes;
      for (const auto& d : m.input_dims(i)) {
        if (d.expr.empty()) {
          sizes.push_back(d.max);
        } else if (value.count(d.expr)) {
          sizes.push_back(value[d.expr]);
        } else {
          return fail("input dimension '" + d.expr + "' is not a symbol; this bench binds symbols");
        }
      }
      auto t = baton::Tensor::empty(m.input_info(i).dtype, sizes);
      if (!t.ok()) return fail(t.status().to_string());
      std::memset(t->data(), 0, t->nbytes());  // token 0, a zero image: values do not matter here
      shapes[k].push_back(std::move(*t));
    }
  }
  std::vector<char> flush(flush_mb << 20);
  m.set_profiling(true);
  std::vector<double> sizes_us, kernels_us;
  // Whole calls too: work a kernel does for a new shape inside its run() shows only there. Both
  // modes run each shape for half the calls ("same" in two blocks), so that the work is equal and
  // the difference of the (trimmed) means is what changing shape costs.
  std::vector<double> call_us[2];
  auto measure = [&](bool changing) -> std::vector<double> {
    std::vector<double> us;
    const int warmup = std::max(10, iterations / 10);
    for (int it = 0; it < warmup + iterations; ++it) {
      const int shape = changing ? it % 2 : (it - warmup < iterations / 2 ? 0 : 1);
      const std::vector<baton::Tensor>& in = shapes[shape];
      for (size_t i = 0; i < in.size(); ++i) {
        if (!m.set_input(i, in[i].view()).ok()) std::abort();
      }
      if (!flush.empty()) {
        // Written, not read: every line of the buffer displaces a line of the runtime's state.
        std::memset(flush.data(), it & 0xff, flush.size());
      }
      const auto start = Clock::now();
      const baton::Status st = m.execute();
      const auto end = Clock::now();
      if (it >= warmup) {
        call_us[changing ? 1 : 0].push_back(
            std::chrono::duration<double, std::micro>(end - start).count());
      }
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.to_string().c_str());
        std::abort();
      }
      if (it >= warmup && changing) {
        const auto r = m.last_resolve_times();
        sizes_us.push_back(std::chrono::duration<double, std::micro>(r.sizes).count());
        kernels_us.push_back(std::chrono::duration<double, std::micro>(r.kernels).count());
      }
      if (it >= warmup) {
        us.push_back(
            std::chrono::duration<double, std::micro>(m.instruction_start_times()[0] - start)
                .count());
      }
    }
    return us;
  };
  auto trimmed_mean = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t cut = v.size() / 10;
    double sum = 0;
    for (size_t i = cut; i < v.size() - cut; ++i) sum += v[i];
    return sum / static_cast<double>(v.size() - 2 * cut);
  };
  const std::vector<double> same = measure(false);
  const std::vector<double> changing = measure(true);
  std::vector<double> clock_us;
  for (int it = 0; it < 1000; ++it) {
    const auto a = Clock::now();
    const auto b = Clock::now();
    clock_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  const double resolve_us = quantile(changing, 0.5) - quantile(same, 0.5);
  std::printf(
      "{\"program\": \"%s\", \"symbols\": %zu, \"instructions\": %zu, \"iterations\": %d, "
      "\"same_us\": {\"median\": %.3f, \"p90\": %.3f}, \"changing_us\": {\"median\": %.3f, "
      "\"p90\": %.3f}, \"resolve_us\": %.3f, \"clock_read_us\": %.3f, "
      "\"resolve_less_clock_us\": %.3f, \"of_which_sizes_us\": %.3f, "
      "\"of_which_kernel_resize_us\": %.3f, \"flush_mb\": %zu, \"call_us\": {\"same\": %.3f, "
      "\"changing\": %.3f}, \"call_difference_us\": %.3f, \"call_p25_difference_us\": %.3f}\n",
      argv[1], m.num_symbols(), m.num_instructions(), iterations, quantile(same, 0.5),
      quantile(same, 0.9), quantile(changing, 0.5), quantile(changing, 0.9), resolve_us,
      quantile(clock_us, 0.5), resolve_us - quantile(clock_us, 0.5), quantile(sizes_us, 0.5),
      quantile(kernels_us, 0.5), flush_mb, trimmed_mean(call_us[0]), trimmed_mean(call_us[1]),
      trimmed_mean(call_us[1]) - trimmed_mean(call_us[0]),
      quantile(call_us[1], 0.25) - quantile(call_us[0], 0.25));
  return 0;
}
