#include "fuzz_common.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "baton/baton.h"
#include "baton/core/log.h"
#include "baton/core/tensor.h"
#include "baton/extension/inspect.h"
#include "format/program_file.h"

namespace baton::fuzz {

void init() {
  set_log_level(LogLevel::Off);
  register_builtins();
}

void fail(std::string_view what, const Status& status) {
  std::fprintf(stderr, "baton fuzz: %.*s: %s: %s\n", static_cast<int>(what.size()), what.data(),
               std::string(error_name(status.code())).c_str(), status.message().c_str());
  std::abort();
}

void check_not_internal(std::string_view what, const Status& status) {
  if (status.code() == Error::Internal) fail(what, status);
}

namespace {

// Planned bytes of method `index` from the (already verified) file; saturates on overflow.
uint64_t planned_bytes(const format::ProgramFile& file, size_t index) {
  const auto* method = file.program().methods()->Get(static_cast<uint32_t>(index));
  uint64_t total = 0;
  if (method->arenas() == nullptr) return 0;
  for (const auto* arena : *method->arenas()) {
    if (__builtin_add_overflow(total, arena->size(), &total)) return UINT64_MAX;
  }
  return total;
}

void exercise_method(runtime::Method& method) {
  for (size_t i = 0; i <= method.num_inputs(); ++i) (void)method.input_info(i);
  for (size_t i = 0; i <= method.num_outputs(); ++i) (void)method.output_info(i);
  for (size_t i = 0; i <= method.num_instructions(); ++i) (void)method.instruction_info(i);
  for (size_t i = 0; i <= method.num_delegates(); ++i) (void)method.delegate_counters(i);
  (void)method.arenas();
  for (size_t i = 0; i <= method.num_inputs(); ++i) (void)method.input_dims(i);
  for (size_t i = 0; i <= method.num_outputs(); ++i) (void)method.output_dims(i);
  // Inputs hold whatever the arena held: the kernels must not care about values.
  const Status run = method.execute();
  check_not_internal("execute", run);
  if (!run.ok()) return;
  for (size_t i = 0; i < method.num_outputs(); ++i) (void)method.output(i);
  if (method.num_symbols() == 0) return;
  // A dynamic method once more at its smallest sizes (every dimension that is a symbol at the
  // symbol's minimum), which resolves every size and resizes every dynamic kernel.
  std::vector<std::vector<int64_t>> sizes(method.num_inputs());
  std::vector<std::vector<uint8_t>> data(method.num_inputs());
  for (size_t i = 0; i < method.num_inputs(); ++i) {
    const runtime::TensorInfo info = method.input_info(i);
    for (const runtime::Method::Dim& d : method.input_dims(i)) {
      sizes[i].push_back(d.expr.empty() ? d.max : d.min);
    }
    const std::optional<uint64_t> bytes = checked_nbytes(info.dtype, sizes[i]);
    if (!bytes || *bytes > kMaxExecuteBytes) return;
    data[i].assign(*bytes, 0);
    const Status set = method.set_input(i, TensorView{data[i].data(), info.dtype, sizes[i]});
    check_not_internal("set_input at the smallest sizes", set);
    if (!set.ok()) return;
  }
  const Status small = method.execute();
  check_not_internal("execute at the smallest sizes", small);
}

}  // namespace

void exercise_program(const runtime::Program& program, bool must_load) {
  (void)program.producer();
  (void)program.origin();
  const auto description = extension::describe_program_json(program);
  check_not_internal("describe_program_json", description.status());
  if (must_load && !description.ok())
    fail("describing a program the compiler wrote", description.status());

  // The program was verified by load_bytes; parsing its bytes again only reads the arena table
  // (without checksums: fuzz_program loads with them off, so mutated segments reach the kernels).
  format::ParseOptions no_checksums;
  no_checksums.verify_checksums = false;
  auto file = format::ProgramFile::parse(program.bytes(), no_checksums);
  if (!file.ok()) fail("re-parsing a verified program", file.status());
  for (size_t i = 0; i < program.num_methods(); ++i) {
    const uint64_t planned = planned_bytes(*file, i);
    if (planned > kMaxLoadBytes) continue;
    auto method = program.load_method(program.method_name(i));
    check_not_internal("load_method", method.status());
    if (!method.ok()) {
      if (must_load) fail("loading a method the compiler wrote", method.status());
      continue;
    }
    if (planned <= kMaxExecuteBytes) exercise_method(**method);
  }
}

}  // namespace baton::fuzz
