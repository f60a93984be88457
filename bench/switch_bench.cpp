// What changing shape costs a dynamic GPU program (issue 37): one process loads a dynamic program
// and, per shape, the static program compiled at that shape, then reports per shape
//   first_ms     the dynamic program's first call at the shape (in the order given: the first
//                shape's is the program's first call; the others' capture a new CUDA graph),
//   repeated     the dynamic program called at that shape call after call,
//   static       the static program at that shape, called in turn with `repeated` (A B, B A, ...),
//   alternating  the dynamic program called at each shape in turn (s1 s2 s3 s1 s2 s3 ...),
// as median and p90 wall milliseconds of execute() (host inputs and outputs: execute returns
// with the results on the host), and the ratios dynamic / static and alternating / repeated.
//
//   baton_switch_bench DYNAMIC.baton --shape LABEL=IN0.npy[,IN1.npy...][@STATIC.baton] ...
//                      [--iterations N] [--warmup N] [--threads N] [--load-option KEY=VALUE]...
// Inputs are set before each call, outside the timed region, on both sides alike.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/cuda/backend.h"
#include "baton/extension/npy.h"
#include "baton/runtime/program.h"
#include "quantile.h"

namespace {

using baton::bench::quantile;
using Clock = std::chrono::steady_clock;

struct Shape {
  std::string label;
  std::vector<baton::Tensor> inputs;
  std::string static_path;
  std::shared_ptr<const baton::runtime::Program> static_program;
  std::unique_ptr<baton::runtime::Method> static_method;
  double first_ms = 0;
  std::vector<double> repeated, alternating, statics;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}

void check(const baton::Status& s, const std::string& where) {
  if (!s.ok()) fail(where + ": " + s.to_string());
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
    out.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  out.push_back(text.substr(start));
  return out;
}

// Sets `inputs` and times one execute().
double timed_call(baton::runtime::Method& m, const std::vector<baton::Tensor>& inputs,
                  const std::string& where) {
  for (size_t i = 0; i < inputs.size(); ++i) check(m.set_input(i, inputs[i].view()), where);
  const auto start = Clock::now();
  check(m.execute(), where);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string stats(const std::vector<double>& v) {
  if (v.empty()) return "null";
  char buf[128];
  std::snprintf(buf, sizeof buf, "{\"median_ms\": %.5f, \"p90_ms\": %.5f}", quantile(v, 0.5),
                quantile(v, 0.9));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s DYNAMIC.baton --shape LABEL=IN0.npy[,IN1.npy...][@STATIC.baton] ... "
                 "[--iterations N] [--warmup N] [--threads N] [--load-option KEY=VALUE]...\n",
                 argv[0]);
    return 2;
  }
  int iterations = 100, warmup = 10;
  baton::runtime::MethodOptions options;
  std::vector<Shape> shapes;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--iterations") {
      iterations = std::max(1, std::atoi(value.c_str()));
    } else if (key == "--warmup") {
      warmup = std::max(0, std::atoi(value.c_str()));
    } else if (key == "--threads") {
      options.threads = std::atoi(value.c_str());
    } else if (key == "--load-option") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0)
        fail("--load-option '" + value + "' is not KEY=VALUE");
      options.backend_options.push_back({value.substr(0, eq), value.substr(eq + 1)});
    } else if (key == "--shape") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0) fail("--shape '" + value + "' is not LABEL=FILES");
      Shape s;
      s.label = value.substr(0, eq);
      std::string files = value.substr(eq + 1);
      if (const size_t at = files.find('@'); at != std::string::npos) {
        s.static_path = files.substr(at + 1);
        files = files.substr(0, at);
      }
      for (const std::string& f : split(files, ',')) {
        auto t = baton::extension::read_npy(f);
        if (!t.ok()) fail(f + ": " + t.status().to_string());
        s.inputs.push_back(std::move(*t));
      }
      shapes.push_back(std::move(s));
    } else {
      fail("unknown option " + key);
    }
  }
  if (shapes.empty()) fail("give at least one --shape");
  baton::register_builtins();
  baton::cuda::register_backend();
  const auto load_start = Clock::now();
  auto program = baton::runtime::Program::load_file(argv[1]);
  if (!program.ok()) fail(std::string(argv[1]) + ": " + program.status().to_string());
  auto method = (*program)->load_method("forward", options);
  if (!method.ok()) fail(std::string(argv[1]) + ": " + method.status().to_string());
  const double load_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();
  baton::runtime::Method& dyn = **method;
  for (Shape& s : shapes) {
    if (s.static_path.empty()) continue;
    auto p = baton::runtime::Program::load_file(s.static_path);
    if (!p.ok()) fail(s.static_path + ": " + p.status().to_string());
    s.static_program = *p;
    auto m = s.static_program->load_method("forward", options);
    if (!m.ok()) fail(s.static_path + ": " + m.status().to_string());
    s.static_method = std::move(*m);
  }
  // First calls, in the order given.
  for (Shape& s : shapes) s.first_ms = timed_call(dyn, s.inputs, s.label);
  // Each shape repeated, in turn with its static program.
  for (Shape& s : shapes) {
    for (int i = 0; i < warmup; ++i) {
      timed_call(dyn, s.inputs, s.label);
      if (s.static_method) timed_call(*s.static_method, s.inputs, s.static_path);
    }
    for (int i = 0; i < iterations; ++i) {
      const bool dynamic_first = i % 2 == 0;
      if (dynamic_first) s.repeated.push_back(timed_call(dyn, s.inputs, s.label));
      if (s.static_method)
        s.statics.push_back(timed_call(*s.static_method, s.inputs, s.static_path));
      if (!dynamic_first) s.repeated.push_back(timed_call(dyn, s.inputs, s.label));
    }
  }
  // The shapes in turn, call by call.
  for (int i = 0; i < warmup + iterations; ++i) {
    for (Shape& s : shapes) {
      const double ms = timed_call(dyn, s.inputs, s.label);
      if (i >= warmup) s.alternating.push_back(ms);
    }
  }
  std::string out = "{\"load_ms\": " + std::to_string(load_ms) + ", \"shapes\": [";
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = shapes[k];
    const double rep = quantile(s.repeated, 0.5);
    char ratios[160];
    std::snprintf(
        ratios, sizeof ratios, "\"switch_ratio\": %.4f, \"static_ratio\": %s",
        quantile(s.alternating, 0.5) / rep,
        s.statics.empty() ? "null" : std::to_string(rep / quantile(s.statics, 0.5)).c_str());
    out += (k ? ", " : "") + std::string("{\"label\": \"") + s.label +
           "\", \"first_ms\": " + std::to_string(s.first_ms) +
           ", \"repeated\": " + stats(s.repeated) + ", \"alternating\": " + stats(s.alternating) +
           ", \"static\": " + stats(s.statics) + ", " + ratios + "}";
  }
  out += "], \"counters\": {";
  bool first = true;
  for (size_t d = 0; d < dyn.num_delegates(); ++d) {
    for (const auto& [key, value] : dyn.delegate_counters(d)) {
      out +=
          (first ? "\"" : ", \"") + std::to_string(d) + "." + key + "\": " + std::to_string(value);
      first = false;
    }
  }
  out += "}, \"iterations\": " + std::to_string(iterations) + "}";
  std::printf("%s\n", out.c_str());
  return 0;
}
