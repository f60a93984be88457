#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "baton/core/check.h"
#include "baton/extension/inspect.h"
#include "baton/extension/npy.h"
#include "baton/runtime/device_allocator.h"
#include "baton/runtime/program.h"
#include "commands.h"
#include "gpu_run.h"

namespace baton::tool {
namespace {

using Millis = std::chrono::duration<double, std::milli>;

// Value at quantile q (nearest rank) of sorted samples.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

Result<Tensor> random_input(const runtime::TensorInfo& info, std::mt19937& rng) {
  BATON_ASSIGN_OR_RETURN(Tensor t,
                         Tensor::empty(info.dtype, {info.sizes.begin(), info.sizes.end()}));
  const int64_t n = t.numel();
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> integer(0, 9);
  for (int64_t i = 0; i < n; ++i) {
    switch (info.dtype) {
      case DType::Float32:
        t.data_as<float>()[i] = real(rng);
        break;
      case DType::Float64:
        t.data_as<double>()[i] = real(rng);
        break;
      case DType::Float16:
        t.data_as<uint16_t>()[i] = float_to_half(real(rng));
        break;
      case DType::BFloat16:
        t.data_as<uint16_t>()[i] = float_to_bfloat16(real(rng));
        break;
      case DType::Int64:
        t.data_as<int64_t>()[i] = integer(rng);
        break;
      case DType::Int32:
        t.data_as<int32_t>()[i] = integer(rng);
        break;
      case DType::Int16:
        t.data_as<int16_t>()[i] = static_cast<int16_t>(integer(rng));
        break;
      case DType::Int8:
        t.data_as<int8_t>()[i] = static_cast<int8_t>(integer(rng));
        break;
      case DType::UInt8:
        t.data_as<uint8_t>()[i] = static_cast<uint8_t>(integer(rng));
        break;
      case DType::Bool:
        t.data_as<uint8_t>()[i] = static_cast<uint8_t>(integer(rng) & 1);
        break;
    }
  }
  return t;
}

double element_as_double(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::Float32:
      return t.data_as<const float>()[i];
    case DType::Float64:
      return t.data_as<const double>()[i];
    case DType::Float16:
      return half_to_float(t.data_as<const uint16_t>()[i]);
    case DType::BFloat16:
      return bfloat16_to_float(t.data_as<const uint16_t>()[i]);
    case DType::Int64:
      return static_cast<double>(t.data_as<const int64_t>()[i]);
    case DType::Int32:
      return t.data_as<const int32_t>()[i];
    case DType::Int16:
      return t.data_as<const int16_t>()[i];
    case DType::Int8:
      return t.data_as<const int8_t>()[i];
    case DType::UInt8:
      return t.data_as<const uint8_t>()[i];
    case DType::Bool:
      return t.data_as<const uint8_t>()[i];
  }
  return 0.0;
}

std::string summarize(const TensorView& t) {
  const int64_t n = t.numel();
  if (n == 0) return "empty";
  double lo = INFINITY, hi = -INFINITY, sum = 0.0;
  int64_t nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = element_as_double(t, i);
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  std::string head;
  for (int64_t i = 0; i < std::min<int64_t>(n, 4); ++i) {
    head += fmt::format("{}{:.6g}", i ? ", " : "", element_as_double(t, i));
  }
  std::string out = fmt::format("min {:.6g}  max {:.6g}  mean {:.6g}  first [{}{}]", lo, hi,
                                sum / static_cast<double>(n - nan), head, n > 4 ? ", ..." : "");
  if (nan) out += fmt::format("  ({} NaN)", nan);
  return out;
}

// Resolves --input arguments: NAME=FILE binds by name when NAME is an input's name; anything
// else is the next input in order.
Result<std::vector<Tensor>> load_inputs(const RunArgs& args, runtime::Method& method) {
  const size_t n = method.num_inputs();
  std::vector<Tensor> inputs(n);
  std::vector<std::string> source(n);
  size_t next_positional = 0;
  for (const std::string& arg : args.inputs) {
    size_t index = n;
    std::string file = arg;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      const std::string name = arg.substr(0, eq);
      for (size_t i = 0; i < n; ++i) {
        if (method.input_info(i).name == name) index = i;
      }
      if (index < n) {
        file = arg.substr(eq + 1);
      } else if (std::error_code ec; !std::filesystem::exists(arg, ec)) {
        // Not an input name, and not a file whose name happens to contain '='.
        std::string names;
        for (size_t i = 0; i < n; ++i) {
          names += fmt::format("{}'{}'", i ? ", " : "", method.input_info(i).name);
        }
        return BATON_ERROR(InvalidArgument,
                           "--input {}: the program has no input named '{}' "
                           "(its inputs: {})",
                           arg, name, names);
      }
    }
    if (index == n) {
      while (next_positional < n && !source[next_positional].empty()) ++next_positional;
      BATON_CHECK_OR_RETURN(next_positional < n, InvalidArgument,
                            "--input {}: the program takes only {} input(s) and all are given "
                            "already (or '{}' is not an input name)",
                            arg, n, arg.substr(0, arg.find('=')));
      index = next_positional;
    }
    const runtime::TensorInfo info = method.input_info(index);
    BATON_CHECK_OR_RETURN(source[index].empty(), InvalidArgument,
                          "input '{}' is given twice (--input {} and --input {})", info.name,
                          source[index], arg);
    BATON_ASSIGN_OR_RETURN(Tensor t, extension::read_npy(file));
    const bool same = t.dtype() == info.dtype && std::equal(t.sizes().begin(), t.sizes().end(),
                                                            info.sizes.begin(), info.sizes.end());
    BATON_CHECK_OR_RETURN(same, InvalidArgument,
                          "--input {}: input {} ('{}') expects {} {}, but '{}' holds {} {}", arg,
                          index, info.name, dtype_name(info.dtype), shape_to_string(info.sizes),
                          file, dtype_name(t.dtype()), shape_to_string(t.sizes()));
    inputs[index] = std::move(t);
    source[index] = arg;
  }
  std::mt19937 rng(args.seed);
  std::string missing;
  for (size_t i = 0; i < n; ++i) {
    if (!source[i].empty()) continue;
    const runtime::TensorInfo info = method.input_info(i);
    if (!args.inputs.empty()) {
      missing += fmt::format("{}'{}' {} {}", missing.empty() ? "" : ", ", info.name,
                             dtype_name(info.dtype), shape_to_string(info.sizes));
      continue;
    }
    BATON_ASSIGN_OR_RETURN(inputs[i], random_input(info, rng));
  }
  BATON_CHECK_OR_RETURN(missing.empty(), InvalidArgument,
                        "missing --input for {} (give every input, or none for random inputs)",
                        missing);
  return inputs;
}

// The GPUs a program's method "forward" runs on: its device arenas and its delegates' devices
// (read from the program's description, which needs no GPU).
std::vector<Device> gpus_needed(const runtime::Program& program) {
  std::vector<Device> out;
  Result<std::string> text = extension::describe_program_json(program);
  if (!text.ok()) return out;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("methods")) return out;
  auto add = [&](const nlohmann::json& v) {
    if (!v.is_string()) return;
    const std::optional<Device> d = Device::parse(v.get<std::string>());
    if (d && d->is_cuda() && std::find(out.begin(), out.end(), *d) == out.end()) out.push_back(*d);
  };
  for (const auto& m : j["methods"]) {
    if (m.value("name", "") != "forward") continue;
    for (const auto& a : m.value("arenas", nlohmann::json::array()))
      add(a.value("device", nlohmann::json()));
    for (const auto& d : m.value("delegates", nlohmann::json::array()))
      add(d.value("target_device", nlohmann::json()));
  }
  return out;
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
  runtime::LoadOptions load;
  load.verify_checksums = !args.no_checksums;
  // Load time is reported: a program whose GPU choices were not recorded when it was compiled
  // (no GPU then) times them here.
  const auto load_start = std::chrono::steady_clock::now();
  BATON_TRY(check_gpu_options(args));
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_file(args.program, load));
  const auto program_loaded = std::chrono::steady_clock::now();
  runtime::MethodOptions method_options;
  method_options.threads = args.threads;
  Result<std::unique_ptr<runtime::Method>> loaded = program->load_method("forward", method_options);
  if (!loaded.ok()) return explain_load_failure(*program, gpus_needed(*program), loaded.status());
  std::unique_ptr<runtime::Method> method = std::move(loaded).value();
  const auto method_loaded = std::chrono::steady_clock::now();
  BATON_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, load_inputs(args, *method));
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<GpuRun> gpu, make_gpu_run(args, *method));
  if (args.device_io) {
    BATON_TRY(gpu->bind_device_io(*method, inputs));
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) BATON_TRY(method->set_input(i, inputs[i].view()));
  }
  int returned_early = 0;
  auto call = [&]() -> Status {
    if (!gpu) return method->execute();
    bool early = false;
    BATON_TRY(gpu->execute(*method, &early));
    returned_early += early ? 1 : 0;
    return Status();
  };

  if (!args.quiet) {
    std::printf("program %s: %s\n", args.program.c_str(), std::string(program->producer()).c_str());
    std::printf("loaded in %.1f ms (program %.1f ms, method %.1f ms)\n",
                Millis(method_loaded - load_start).count(),
                Millis(program_loaded - load_start).count(),
                Millis(method_loaded - program_loaded).count());
    std::printf("cpu threads %u\n", method->cpu_threads());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const runtime::TensorInfo info = method->input_info(i);
      std::printf("input  %zu '%.*s' %s %s%s\n", i, static_cast<int>(info.name.size()),
                  info.name.data(), std::string(dtype_name(info.dtype)).c_str(),
                  shape_to_string(info.sizes).c_str(), args.inputs.empty() ? " (random)" : "");
    }
  }

  method->set_profiling(true);
  const size_t steps = method->num_instructions();
  for (int i = 0; i < args.warmup; ++i) BATON_TRY(call());
  returned_early = 0;
  std::vector<double> latency;
  std::vector<std::vector<double>> per_step(steps), per_step_device(steps);
  if (gpu) BATON_TRY(gpu->begin_timed_runs());
  for (int i = 0; i < args.iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    BATON_TRY(call());
    latency.push_back(Millis(std::chrono::steady_clock::now() - start).count());
    const auto times = method->instruction_times();
    for (size_t s = 0; s < steps; ++s) {
      per_step[s].push_back(Millis(times[s]).count());
      if (auto device = method->instruction_device_time_ms(s))
        per_step_device[s].push_back(*device);
    }
  }
  if (gpu) BATON_TRY(gpu->end_timed_runs());

  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    BATON_CHECK_OR_RETURN(!ec, IoError, "cannot create --output-dir '{}': {}", args.output_dir,
                          ec.message());
  }
  std::vector<Tensor> host_outputs;
  for (size_t i = 0; i < method->num_outputs(); ++i) {
    const TensorView device_out = method->output(i);
    BATON_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(device_out.dtype, {device_out.sizes.begin(),
                                                                         device_out.sizes.end()}));
    BATON_TRY(runtime::copy_tensor(host.view(), device_out));
    host_outputs.push_back(std::move(host));
    const TensorView out = host_outputs.back().view();
    const runtime::TensorInfo info = method->output_info(i);
    if (!args.quiet) {
      std::printf("output %zu '%.*s' %s %s  %s\n", i, static_cast<int>(info.name.size()),
                  info.name.data(), std::string(dtype_name(out.dtype)).c_str(),
                  shape_to_string(out.sizes).c_str(), summarize(out).c_str());
    }
    if (!args.output_dir.empty()) {
      const std::string path =
          (std::filesystem::path(args.output_dir) / fmt::format("output_{}.npy", i)).string();
      BATON_TRY(extension::write_npy(path, out));
      if (!args.quiet) std::printf("  wrote %s\n", path.c_str());
    }
  }

  if (!args.quiet) {
    std::printf("where it ran (median per run):\n");
    for (size_t s = 0; s < steps; ++s) {
      std::sort(per_step[s].begin(), per_step[s].end());
      std::sort(per_step_device[s].begin(), per_step_device[s].end());
      const runtime::InstructionInfo info = method->instruction_info(s);
      const std::string gpu =
          per_step_device[s].empty()
              ? std::string()
              : fmt::format("  (GPU {:.3f} ms)", quantile(per_step_device[s], 0.5));
      std::printf("  %5s %-8s %-48s %8.3f ms%s\n", fmt::format("[{}]", s).c_str(),
                  info.device.to_string().c_str(), info.description.c_str(),
                  quantile(per_step[s], 0.5), gpu.c_str());
    }
  }
  if (!args.quiet && gpu) {
    std::printf("%s; execute() returned before the GPU finished in %d of %d timed calls\n",
                gpu->describe().c_str(), returned_early, args.iterations);
  }
  if (!args.quiet) {
    for (size_t d = 0; d < method->num_delegates(); ++d) {
      std::string counters;
      for (const auto& [key, value] : method->delegate_counters(d)) {
        counters += fmt::format("{}{}={}", counters.empty() ? "" : ", ", key, value);
      }
      if (!counters.empty()) std::printf("delegate %zu: %s\n", d, counters.c_str());
    }
  }
  std::sort(latency.begin(), latency.end());
  std::printf(
      "latency over %d runs (after %d warm-up): min %.3f ms  median %.3f ms  p90 %.3f ms  "
      "p99 %.3f ms\n",
      args.iterations, args.warmup, latency.front(), quantile(latency, 0.5), quantile(latency, 0.9),
      quantile(latency, 0.99));
  return Status();
}

}  // namespace baton::tool
