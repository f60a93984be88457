// baton run: load a program, run it untimed (warm-up), timed (no profiling: the latency), then
// profiled in a separate pass (per instruction, and per GPU engine step), and report it as text
// or JSON, with per-iteration times, a profile and a Chrome trace as files on request.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>

#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/core/text.h"
#include "baton/extension/npy.h"
#include "baton/runtime/program.h"
#include "commands.h"
#include "gpu_run.h"
#include "kernels/cpu/blas.h"
#include "report_file.h"
#include "run_common.h"

namespace baton::tool {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::duration<double, std::milli>;
using nlohmann::json;

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile(v, 0.5);
}

// What the profiled pass measured, per instruction.
struct InstructionProfile {
  runtime::InstructionInfo info;
  std::vector<double> host_ms;    // per profiled run
  std::vector<double> device_ms;  // delegates: per profiled run (graph replayed as when timed)
  struct Step {
    runtime::StepTime first;  // kind, name, what
    std::vector<double> ms;   // per step-profiled run
  };
  std::vector<Step> steps;  // delegates whose backend times steps
};

// Runs `runs` profiled executes: instruction times and each delegate's device time (as it runs when
// timed), then `runs` more with each GPU engine's steps timed one by one. The trace (if any) gets
// every execute, its instructions, and the engine steps on a GPU row.
Status profile(runtime::Method& method, const std::function<Status()>& call, int runs,
               std::vector<InstructionProfile>* out, ChromeTrace* trace) {
  const size_t n = method.num_instructions();
  out->assign(n, InstructionProfile{});
  for (size_t i = 0; i < n; ++i) (*out)[i].info = method.instruction_info(i);
  auto record = [&](const char* pass, int run) {
    const auto starts = method.instruction_start_times();
    const auto times = method.instruction_times();
    if (trace == nullptr || n == 0) return;
    const double total = Millis(starts[n - 1] + times[n - 1] - starts[0]).count();
    trace->span(fmt::format("execute ({} {})", pass, run), "execute", 1, starts[0], total);
    for (size_t i = 0; i < n; ++i) {
      trace->span(escape_invalid_utf8((*out)[i].info.description), "instruction", 1, starts[i],
                  Millis(times[i]).count(), {{"device", (*out)[i].info.device.to_string()}});
    }
  };
  method.set_profiling(runtime::Method::Profiling{true, true, false});
  for (int r = 0; r < runs; ++r) {
    BATON_TRY(call());
    const auto times = method.instruction_times();
    for (size_t i = 0; i < n; ++i) {
      (*out)[i].host_ms.push_back(Millis(times[i]).count());
      if (auto d = method.instruction_device_time_ms(i)) (*out)[i].device_ms.push_back(*d);
    }
    record("profiled", r);
  }
  bool any_delegate = false;
  for (size_t i = 0; i < n; ++i)
    any_delegate = any_delegate || (*out)[i].info.kind == runtime::InstructionKind::Delegate;
  if (any_delegate) {
    method.set_profiling(runtime::Method::Profiling{true, false, true});
    for (int r = 0; r < runs; ++r) {
      BATON_TRY(call());
      record("steps timed", r);
      const auto starts = method.instruction_start_times();
      for (size_t i = 0; i < n; ++i) {
        const std::vector<runtime::StepTime> steps = method.instruction_step_times(i);
        auto& mine = (*out)[i].steps;
        if (mine.empty()) {
          for (const runtime::StepTime& t : steps) mine.push_back({t, {}});
        }
        for (size_t s = 0; s < std::min(steps.size(), mine.size()); ++s) {
          mine[s].ms.push_back(steps[s].ms);
          // On the GPU's row from the delegate call's host start: durations are the device's
          // own (CUDA events); the offset of the first step from the call is not measured.
          if (trace != nullptr) {
            trace->span_us(fmt::format("{} {}", steps[s].kind, steps[s].name), "gpu step",
                           2 + static_cast<int>(i),
                           trace->micros(starts[i]) + steps[s].start_ms * 1000.0,
                           steps[s].ms * 1000.0, {{"step", s}, {"what", steps[s].what}});
          }
        }
      }
    }
  }
  method.set_profiling(runtime::Method::Profiling{});
  return Status();
}

// The summed mean GPU time of an instruction's engine steps (0 when it has none).
double steps_ms(const InstructionProfile& p) {
  double total = 0;
  for (const auto& s : p.steps) total += mean(s.ms);
  return total;
}

json profile_json(const std::vector<InstructionProfile>& profile, int runs) {
  double total_host = 0;
  for (const InstructionProfile& p : profile) total_host += mean(p.host_ms);
  json instructions = json::array();
  for (size_t i = 0; i < profile.size(); ++i) {
    const InstructionProfile& p = profile[i];
    const char* kind = p.info.kind == runtime::InstructionKind::Kernel     ? "kernel"
                       : p.info.kind == runtime::InstructionKind::Delegate ? "delegate"
                                                                           : "copy";
    json x = {{"index", i},
              {"kind", kind},
              {"op", escape_invalid_utf8(p.info.op)},
              {"name", escape_invalid_utf8(p.info.name)},
              {"description", escape_invalid_utf8(p.info.description)},
              {"device", p.info.device.to_string()},
              {"host_ms_mean", mean(p.host_ms)},
              {"host_ms_median", median(p.host_ms)},
              {"share", total_host > 0 ? mean(p.host_ms) / total_host : 0.0},
              {"gpu_ms_mean", p.device_ms.empty() ? json() : json(mean(p.device_ms))},
              {"gpu_ms_median", p.device_ms.empty() ? json() : json(median(p.device_ms))}};
    if (!p.steps.empty()) {
      const double total = steps_ms(p);
      json steps = json::array();
      for (size_t s = 0; s < p.steps.size(); ++s) {
        const double m = mean(p.steps[s].ms);
        steps.push_back({{"index", s},
                         {"op", p.steps[s].first.kind},
                         {"kernel", escape_invalid_utf8(p.steps[s].first.name)},
                         {"what", escape_invalid_utf8(p.steps[s].first.what)},
                         {"gpu_ms_mean", m},
                         {"share", total > 0 ? m / total : 0.0}});
      }
      x["steps"] = std::move(steps);
      x["steps_gpu_ms_mean"] = total;
    }
    instructions.push_back(std::move(x));
  }
  return {{"runs", runs}, {"instructions", std::move(instructions)}};
}

// The profile as the "where it ran" table: each instruction's median host time (and GPU time),
// and under each GPU partition its engine's steps with their mean GPU time and share.
void print_profile(const std::vector<InstructionProfile>& profile, int runs) {
  std::printf("where it ran (median of %d profiled runs, made after the timed ones):\n", runs);
  for (size_t i = 0; i < profile.size(); ++i) {
    const InstructionProfile& p = profile[i];
    const std::string gpu = p.device_ms.empty()
                                ? std::string()
                                : fmt::format("  (GPU {})", duration_text(median(p.device_ms)));
    std::printf("  %5s %-8s %-48s %10s%s\n", fmt::format("[{}]", i).c_str(),
                p.info.device.to_string().c_str(), printable_text(p.info.description).c_str(),
                duration_text(median(p.host_ms)).c_str(), gpu.c_str());
    if (p.steps.empty()) continue;
    const double total = steps_ms(p);
    std::printf(
        "          %zu engine steps, launched one by one with events between them: %s of "
        "GPU time (mean)\n",
        p.steps.size(), duration_text(total).c_str());
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const double m = mean(p.steps[s].ms);
      std::string what = printable_text(p.steps[s].first.what);
      if (what.size() > 60) what = what.substr(0, 57) + "...";
      std::printf("          step %-3zu %-6s %-28s %10s %5.1f%%  %s\n", s,
                  p.steps[s].first.kind.c_str(),
                  printable_text(p.steps[s].first.name).substr(0, 28).c_str(),
                  duration_text(m).c_str(), total > 0 ? 100.0 * m / total : 0.0, what.c_str());
    }
  }
}

json tensor_json(const runtime::TensorInfo& info) {
  return {{"name", escape_invalid_utf8(info.name)},
          {"dtype", std::string(dtype_name(info.dtype))},
          {"shape", info.sizes},
          {"device", info.device.to_string()}};
}

json stats_json(const TensorView& t) {
  const TensorStats s = tensor_stats(t);
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  return {{"min", number(s.min)},
          {"max", number(s.max)},
          {"mean", number(s.mean)},
          {"nan", s.nan},
          {"first", s.first}};
}

json latency_json(std::vector<double> v, int warmup) {
  std::sort(v.begin(), v.end());
  return {{"runs", v.size()},           {"warmup", warmup},
          {"min", v.front()},           {"mean", mean(v)},
          {"median", quantile(v, 0.5)}, {"p90", quantile(v, 0.9)},
          {"p99", quantile(v, 0.99)},   {"max", v.back()}};
}

}  // namespace

std::string rebuild_for_cpu(const runtime::Program& program) {
  std::string model = "MODEL.onnx";
  const std::string_view producer = program.producer();
  if (const size_t at = producer.find(" from "); at != std::string_view::npos) {
    const std::string_view rest = producer.substr(at + 6);
    model = std::string(rest.substr(0, rest.find(" (")));
  }
  return fmt::format("baton compile {} -o {} --device cpu", model, program.origin());
}

Status run_run(const RunArgs& args) {
  BATON_CHECK_OR_RETURN(!args.saturate_rest || args.sms > 0, InvalidArgument,
                        "--saturate-rest keeps the SMs outside the green context of --sms N busy: "
                        "give --sms N too");
  // Report files are checked before any time is spent.
  for (const auto& [option, path] :
       {std::pair<const char*, const std::string&>{"--export-times", args.export_times},
        {"--export-profile", args.export_profile},
        {"--trace", args.trace}}) {
    if (path.empty()) continue;
    const Status writable = compiler::check_output_path(path);
    BATON_CHECK_OR_RETURN(writable.ok(), IoError, "{}: {}", option, writable.message());
  }
  BATON_CHECK_OR_RETURN(
      args.profile_runs > 0 || (args.export_profile.empty() && args.trace.empty()), InvalidArgument,
      "--export-profile and --trace report the profiled runs: give "
      "--profile-runs N with N > 0");
  BATON_TRY(check_gpu_options(args));
  // Shapes to prepare are parsed before any time is spent (checked against the method later).
  std::vector<std::vector<runtime::SymbolSize>> prepare_shapes;
  for (const std::string& text : args.prepare_shapes) {
    Result<std::vector<runtime::SymbolSize>> parsed = runtime::parse_symbol_sizes(text);
    BATON_CHECK_OR_RETURN(parsed.ok(), InvalidArgument, "--prepare-shape: {}",
                          parsed.status().message());
    prepare_shapes.push_back(std::move(parsed).value());
  }
  runtime::LoadOptions load;
  load.verify_checksums = !args.no_checksums;
  // Load time is reported: a program whose GPU choices were not recorded when it was compiled
  // (no GPU then) times them here.
  const auto load_start = Clock::now();
  std::unique_ptr<ChromeTrace> trace;
  if (!args.trace.empty()) {
    trace = std::make_unique<ChromeTrace>(load_start);
    trace->thread_name(1, "host: baton run");
  }
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(args.program, load));
  const auto program_loaded = Clock::now();
  runtime::MethodOptions method_options;
  method_options.threads = args.threads;
  BATON_ASSIGN_OR_RETURN(method_options.backend_options, parse_load_options(args.load_options));
  BATON_ASSIGN_OR_RETURN(method_options.device_map, runtime::parse_device_map(args.device_map));
  Result<std::unique_ptr<runtime::Method>> loaded = program->load_method("forward", method_options);
  if (!loaded.ok())
    return explain_load_failure(*program, gpus_needed(*program, method_options.device_map),
                                loaded.status());
  std::unique_ptr<runtime::Method> method = std::move(loaded).value();
  const auto method_loaded = Clock::now();
  if (trace) {
    trace->span("load program", "load", 1, load_start, Millis(program_loaded - load_start).count());
    trace->span("load method 'forward'", "load", 1, program_loaded,
                Millis(method_loaded - program_loaded).count());
  }
  BATON_ASSIGN_OR_RETURN(std::vector<Tensor> inputs,
                         load_inputs(args.inputs, args.seed, *method, args.shapes));
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<GpuRun> gpu, make_gpu_run(args, *method));
  if (args.device_io) {
    BATON_TRY(gpu->bind_device_io(*method, inputs));
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) BATON_TRY(method->set_input(i, inputs[i].view()));
  }
  // Prepared after binding, so that the graphs captured hold the memory the calls use.
  std::vector<double> prepare_ms;
  for (size_t k = 0; k < prepare_shapes.size(); ++k) {
    const auto start = Clock::now();
    if (Status st = method->prepare_shape(prepare_shapes[k]); !st.ok()) {
      return Status(st.code(),
                    fmt::format("--prepare-shape {}: {}", args.prepare_shapes[k], st.message()));
    }
    prepare_ms.push_back(Millis(Clock::now() - start).count());
  }
  int returned_early = 0;
  auto call = [&]() -> Status {
    if (!gpu) return method->execute();
    bool early = false;
    BATON_TRY(gpu->execute(*method, &early));
    returned_early += early ? 1 : 0;
    return Status();
  };
  const bool text = !args.json;
  if (text && !args.quiet) {
    std::printf("program %s: %s\n", args.program.c_str(),
                printable_text(program->producer()).c_str());
    std::printf("loaded in %s (program %s, method %s)\n",
                duration_text(Millis(method_loaded - load_start).count()).c_str(),
                duration_text(Millis(program_loaded - load_start).count()).c_str(),
                duration_text(Millis(method_loaded - program_loaded).count()).c_str());
    for (size_t k = 0; k < prepare_ms.size(); ++k) {
      std::printf("prepared %s in %s\n",
                  args.prepare_shapes[k].empty() ? "the program's one shape"
                                                 : args.prepare_shapes[k].c_str(),
                  duration_text(prepare_ms[k]).c_str());
    }
    std::printf("cpu threads %u\n", method->cpu_threads());
    const kernels::cpu::BlasKernels blas = kernels::cpu::blas_kernels();
    if (!blas.replaced.empty()) {
      std::printf(
          "cpu blas: OpenBLAS's %s kernels (it chose %s for this CPU, whose model it does "
          "not know; OPENBLAS_CORETYPE overrides)\n",
          blas.core.c_str(), blas.replaced.c_str());
    }
    std::printf("cpu kernel scratch %s\n", size_text(method->scratch_bytes()).c_str());
    if (const uint64_t held = method->held_bytes(); held > 0) {
      std::printf(
          "cpu packed weights %s (copies of constant weights made at load for Baton's "
          "own GEMM kernels, %zu kernels)\n",
          size_text(held).c_str(), method->kernel_held().size());
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const runtime::TensorInfo info = method->input_info(i);
      std::printf("input  %zu '%s' %s %s%s\n", i, printable_text(info.name).c_str(),
                  std::string(dtype_name(info.dtype)).c_str(), shape_to_string(info.sizes).c_str(),
                  args.inputs.empty() ? " (random)" : "");
    }
  }

  // Warm-up, then the timed runs with nothing measured inside execute (unless --export-times asks
  // for each run's GPU time: two events per GPU partition call).
  const size_t steps = method->num_instructions();
  // The first call is timed on its own: at a shape not prepared it does the host work of a new
  // shape (a dynamic GPU engine's patching, plans and graph capture).
  const auto warmup_start = Clock::now();
  double first_call_ms = -1;
  for (int i = 0; i < args.warmup; ++i) {
    BATON_TRY(call());
    if (i == 0) first_call_ms = Millis(Clock::now() - warmup_start).count();
  }
  if (trace && args.warmup > 0) {
    trace->span(fmt::format("warm-up ({} runs)", args.warmup), "execute", 1, warmup_start,
                Millis(Clock::now() - warmup_start).count());
  }
  returned_early = 0;
  const bool gpu_times = !args.export_times.empty();
  method->set_profiling(runtime::Method::Profiling{false, gpu_times, false});
  std::vector<double> latency, gpu_ms;
  std::vector<Clock::time_point> run_start;
  latency.reserve(args.iterations);
  run_start.reserve(args.iterations);
  if (gpu) BATON_TRY(gpu->begin_timed_runs());
  for (int i = 0; i < args.iterations; ++i) {
    const auto start = Clock::now();
    BATON_TRY(call());
    latency.push_back(Millis(Clock::now() - start).count());
    run_start.push_back(start);
    if (gpu_times) {
      double sum = 0;
      bool any = false;
      for (size_t s = 0; s < steps; ++s) {
        if (auto d = method->instruction_device_time_ms(s)) {
          sum += *d;
          any = true;
        }
      }
      gpu_ms.push_back(any ? sum : -1.0);
    }
  }
  if (gpu) BATON_TRY(gpu->end_timed_runs());
  method->set_profiling(runtime::Method::Profiling{});
  const int timed_early = returned_early;
  if (trace) {
    for (int i = 0; i < args.iterations; ++i) {
      trace->span(fmt::format("execute (timed {})", i), "execute", 1, run_start[i], latency[i]);
    }
  }

  // The profiled pass, separate from the timed runs.
  std::vector<InstructionProfile> prof;
  const bool want_profile =
      args.profile_runs > 0 && (!args.quiet || args.json || !args.export_profile.empty() || trace);
  if (want_profile) BATON_TRY(profile(*method, call, args.profile_runs, &prof, trace.get()));

  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    BATON_CHECK_OR_RETURN(!ec, IoError, "cannot create --output-dir '{}': {}", args.output_dir,
                          ec.message());
  }
  json outputs = json::array();
  for (size_t i = 0; i < method->num_outputs(); ++i) {
    BATON_ASSIGN_OR_RETURN(Tensor host, output_to_host(*method, i));
    const TensorView out = host.view();
    const runtime::TensorInfo info = method->output_info(i);
    json o = tensor_json(info);
    o["stats"] = stats_json(out);
    if (text && !args.quiet) {
      std::printf("output %zu '%s' %s %s  %s\n", i, printable_text(info.name).c_str(),
                  std::string(dtype_name(out.dtype)).c_str(), shape_to_string(out.sizes).c_str(),
                  summarize(out).c_str());
    }
    if (!args.output_dir.empty()) {
      const std::string path =
          (std::filesystem::path(args.output_dir) / output_file_name(i, info.name)).string();
      BATON_TRY(extension::write_npy(path, out));
      o["file"] = path;
      if (text && !args.quiet) std::printf("  wrote %s\n", path.c_str());
    }
    outputs.push_back(std::move(o));
  }
  if (!args.output_dir.empty()) {
    // Which file holds which output, for scripts (names are free text; file names are not).
    const std::string manifest = (std::filesystem::path(args.output_dir) / "outputs.json").string();
    BATON_TRY(
        write_text_file(manifest, json_text({{"program", args.program}, {"outputs", outputs}}, 2)));
    if (text && !args.quiet) std::printf("  wrote %s\n", manifest.c_str());
  }

  json delegates = json::array();
  uint64_t staged_bytes = 0;
  for (size_t d = 0; d < method->num_delegates(); ++d) {
    json counters = json::object();
    for (const auto& [key, value] : method->delegate_counters(d)) {
      counters[key] = value;
      if (key == "staged_bytes") staged_bytes += value;
    }
    delegates.push_back({{"index", d}, {"counters", counters}});
  }
  std::vector<double> sorted = latency;
  std::sort(sorted.begin(), sorted.end());

  if (text) {
    if (!args.quiet && want_profile) print_profile(prof, args.profile_runs);
    if (!args.quiet && gpu) {
      std::printf("%s; execute() returned before the GPU finished in %d of %d timed calls\n",
                  gpu->describe().c_str(), timed_early, args.iterations);
    }
    if (!args.quiet) {
      for (size_t d = 0; d < delegates.size(); ++d) {
        std::string list;
        for (const auto& [key, value] : delegates[d]["counters"].items()) {
          list += fmt::format("{}{}={}", list.empty() ? "" : ", ", key, value.get<uint64_t>());
        }
        if (!list.empty()) std::printf("delegate %zu: %s\n", d, list.c_str());
      }
    }
    if (!args.quiet && first_call_ms >= 0) {
      std::printf("first call %s (the first warm-up run)\n", duration_text(first_call_ms).c_str());
    }
    std::printf("latency over %d run%s (after %d warm-up): min %s  median %s  p90 %s  p99 %s\n",
                args.iterations, args.iterations == 1 ? "" : "s", args.warmup,
                duration_text(sorted.front()).c_str(), duration_text(quantile(sorted, 0.5)).c_str(),
                duration_text(quantile(sorted, 0.9)).c_str(),
                duration_text(quantile(sorted, 0.99)).c_str());
  } else {
    json devices = json::array();
    for (size_t s = 0; s < steps; ++s) {
      const std::string d = method->instruction_info(s).device.to_string();
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
    }
    json in = json::array();
    for (size_t i = 0; i < method->num_inputs(); ++i) {
      json x = tensor_json(method->input_info(i));
      x["source"] = args.inputs.empty() ? std::string("random") : std::string("file");
      in.push_back(std::move(x));
    }
    const json lat = latency_json(latency, args.warmup);
    json doc = {{"program", args.program},
                {"producer", escape_invalid_utf8(program->producer())},
                {"devices", devices},
                {"cpu_threads", method->cpu_threads()},
                {"cpu_scratch_bytes", method->scratch_bytes()},
                {"cpu_held_bytes", method->held_bytes()},
                {"load_ms",
                 {{"total", Millis(method_loaded - load_start).count()},
                  {"program", Millis(program_loaded - load_start).count()},
                  {"method", Millis(method_loaded - program_loaded).count()}}},
                {"stream", gpu ? json(gpu->describe()) : json()},
                {"returned_early", gpu ? json(timed_early) : json()},
                {"inputs", in},
                {"outputs", outputs},
                {"latency_ms", lat},
                {"first_call_ms", first_call_ms >= 0 ? json(first_call_ms) : json()},
                {"prepare_ms", prepare_ms},
                {"throughput_per_s",
                 lat["mean"].get<double>() > 0 ? 1000.0 / lat["mean"].get<double>() : 0.0},
                {"delegates", delegates},
                {"staged_bytes", staged_bytes},
                {"gpu_contexts", gpu_contexts()},
                {"profile", want_profile ? profile_json(prof, args.profile_runs) : json()}};
    std::printf("%s\n", json_text(doc, 2).c_str());
  }

  if (!args.export_times.empty()) {
    json runs = json::array();
    for (int i = 0; i < args.iterations; ++i) {
      runs.push_back({{"iteration", i},
                      {"start_ms", Millis(run_start[i] - run_start[0]).count()},
                      {"wall_ms", latency[i]},
                      {"gpu_ms", gpu_ms[i] >= 0 ? json(gpu_ms[i]) : json()}});
    }
    BATON_TRY(write_text_file(
        args.export_times,
        json_text({{"program", args.program}, {"warmup", args.warmup}, {"runs", runs}}, 1)));
  }
  if (!args.export_profile.empty()) {
    json doc = profile_json(prof, args.profile_runs);
    doc["program"] = args.program;
    BATON_TRY(write_text_file(args.export_profile, json_text(doc, 1)));
  }
  if (trace) {
    for (size_t s = 0; s < steps; ++s) {
      if (s < prof.size() && !prof[s].steps.empty()) {
        trace->thread_name(2 + static_cast<int>(s),
                           fmt::format("GPU: {}", escape_invalid_utf8(prof[s].info.description)));
      }
    }
    BATON_TRY(trace->write(args.trace, {{"program", args.program},
                                        {"producer", escape_invalid_utf8(program->producer())}}));
  }
  return Status();
}

}  // namespace baton::tool
