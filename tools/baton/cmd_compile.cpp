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
  BATON_ASSIGN_OR_RETURN(auto shape, parse_shape_flag(text, "--shape"));
  return compiler::InputShape{std::move(shape.first), std::move(shape.second)};
}

}  // namespace

Result<compiler::CompileSetup> make_compile_setup(const CompileArgs& args) {
  compiler::CompileRequest r = args.request;
  r.spelling = compiler::CompileRequest::Spelling::Cli;
  r.optimize = !args.no_optimize;
  for (const std::string& s : args.shapes) {
    BATON_ASSIGN_OR_RETURN(auto shape, parse_shape(s));
    r.input_shapes.push_back(std::move(shape));
  }
  for (const std::string& d : args.dims) {
    BATON_ASSIGN_OR_RETURN(auto dim, compiler::parse_dim_range(d));
    r.dims.push_back(std::move(dim));
  }
  return compiler::make_compile_setup(r);
}

Status run_compile(const CompileArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  BATON_TRY(compiler::check_output_path(args.output));  // before any time is spent
  BATON_ASSIGN_OR_RETURN(compiler::CompileSetup setup, make_compile_setup(args));
  compiler::CompileOptions& options = setup.options;
  if (!args.quiet) {
    std::fprintf(stderr, "compiling %s for %s\n", args.model.c_str(), args.request.device.c_str());
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
    // State is a change of the method's signature (these inputs and outputs are gone), so the
    // compile says so whenever it has any.
    for (const auto& pair : s.state) {
      std::fprintf(stderr,
                   "  state '%s', updated in place as '%s' (no longer an input or output)\n",
                   pair.input.c_str(), pair.output.c_str());
    }
  }
  return Status();
}

}  // namespace baton::tool
