#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/core/text.h"
#include "commands.h"
#include "run_common.h"

namespace baton::tool {
namespace {

Result<compiler::InputShape> parse_shape(const std::string& text) {
  const size_t eq = text.rfind('=');
  BATON_CHECK_OR_RETURN(eq != std::string::npos && eq > 0 && eq + 1 < text.size(), InvalidArgument,
                        "--shape '{}' must look like NAME=D0xD1x... (e.g. input=8x16)", text);
  compiler::InputShape shape;
  shape.name = text.substr(0, eq);
  std::string dims = text.substr(eq + 1);
  size_t start = 0;
  while (start <= dims.size()) {
    const size_t end = std::min(dims.find('x', start), dims.size());
    const std::string part = dims.substr(start, end - start);
    char* stop = nullptr;
    const long long v = std::strtoll(part.c_str(), &stop, 10);
    BATON_CHECK_OR_RETURN(!part.empty() && *stop == '\0' && v >= 0, InvalidArgument,
                          "--shape '{}': '{}' is not a non-negative dimension", text, part);
    shape.sizes.push_back(v);
    start = end + 1;
  }
  return shape;
}

}  // namespace

Result<CompileSetup> make_compile_setup(const CompileArgs& args) {
  CompileSetup setup;
  compiler::CompileOptions& options = setup.options;
  options.io = args.io == "device" ? compiler::MethodIo::Device : compiler::MethodIo::Host;
  options.max_partition_nodes = args.max_partition_nodes;
  options.optimize = !args.no_optimize;
  options.disabled_passes = args.disabled_passes;
  options.expose_intermediates = args.expose_intermediates;
  options.max_fold_bytes = args.max_fold_bytes;
  options.max_total_fold_bytes = args.max_total_fold_bytes;
  options.max_fold_work = args.max_fold_work;
  options.max_arena_bytes = args.max_arena_bytes;
  if (!args.target_device.empty()) options.target_device = args.target_device;
  if (args.strict_staging) options.delegate_specs.emplace_back("strict_staging", "1");
  Result<compiler::TargetDevices> targets = compiler::parse_target_devices(args.device);
  BATON_CHECK_OR_RETURN(targets.ok(), InvalidArgument, "--device: {}", targets.status().message());
  options.targets = std::move(targets).value();
  const std::vector<Device> devices = compiler::distinct_devices(options.targets);
  const bool gpu = !devices.empty();
  BATON_CHECK_OR_RETURN(
      gpu || (args.arch.empty() && args.precision.empty() && args.target_device.empty() &&
              args.io == "host" && !args.strict_staging && args.max_partition_nodes == 0),
      InvalidArgument,
      "--arch, --precision, --target-device, --io device, --strict-staging and "
      "--max-partition-nodes apply to GPU targets: add --device cuda:N");
  // One engine builder per GPU; the compiler places each partition on one of them.
  for (const Device& d : devices) {
    BATON_ASSIGN_OR_RETURN(auto b, compiler::make_backend_compiler(
                                       compiler::TargetSpec{d, args.arch, args.precision}));
    options.backends.push_back(b.get());
    setup.builders.push_back(std::move(b));
  }
  for (const std::string& s : args.shapes) {
    BATON_ASSIGN_OR_RETURN(auto shape, parse_shape(s));
    options.input_shapes.push_back(std::move(shape));
  }
  return setup;
}

Status run_compile(const CompileArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  BATON_TRY(compiler::check_output_path(args.output));  // before any time is spent
  BATON_ASSIGN_OR_RETURN(CompileSetup setup, make_compile_setup(args));
  compiler::CompileOptions& options = setup.options;
  if (!args.quiet) {
    std::fprintf(stderr, "compiling %s for %s\n", args.model.c_str(), args.device.c_str());
    options.progress = [](const compiler::Progress& p) {
      std::fprintf(stderr, "  %-9s %10s  %s\n", std::string(p.phase).c_str(),
                   duration_text(p.elapsed.count()).c_str(), p.detail.c_str());
    };
  }
  BATON_ASSIGN_OR_RETURN(compiler::CompiledProgram program,
                         compiler::compile_file(args.model, options));
  const auto emit_start = std::chrono::steady_clock::now();
  BATON_TRY(program.write(args.output));
  const auto end = std::chrono::steady_clock::now();
  if (!args.quiet) {
    const auto& s = program.summary();
    for (const auto& [name, label] : s.partitions) {
      std::fprintf(stderr, "  partition %s: target_device %s\n", name.c_str(), label.c_str());
    }
    std::fprintf(
        stderr, "  %-9s %10s  %s\n", "emit",
        duration_text(std::chrono::duration<double, std::milli>(end - emit_start).count()).c_str(),
        args.output.c_str());
    std::fprintf(
        stderr,
        "wrote %s (%s) in %s: %zu kernel calls, %zu delegate calls, %zu copies, "
        "%s of constants\n",
        args.output.c_str(), size_text(std::filesystem::file_size(args.output)).c_str(),
        duration_text(std::chrono::duration<double, std::milli>(end - start).count()).c_str(),
        s.kernel_calls, s.delegate_calls, s.copies, size_text(s.constant_bytes).c_str());
  }
  return Status();
}

}  // namespace baton::tool
