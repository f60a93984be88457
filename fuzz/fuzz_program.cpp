// The program file as an attacker writes it: Program::load_bytes (header, flatbuffer verifier,
// semantic pass), then every method loaded with the CPU kernels registered, described the way
// `baton inspect` does, and executed when it is small (fuzz_common.h).
//
// Checksums are off for the loads that exercise the verifier: with them on, nearly every mutated
// input would stop at the checksum (format v2 hashes every byte). They are checked on the side:
// a file that passes them must also pass everything else.
//
// The same bytes are loaded a second time from an odd address: the verdict must not depend on
// where the caller's bytes sit, and the verifier itself must refuse misaligned memory with an
// error rather than read through misaligned pointers.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::runtime::Program;
  const std::span<const uint8_t> bytes(data, size);
  baton::runtime::LoadOptions unchecked;
  unchecked.verify_checksums = false;
  auto program = Program::load_bytes(bytes, unchecked);
  baton::fuzz::check_not_internal("Program::load_bytes", program.status());
  auto checked = Program::load_bytes(bytes);
  baton::fuzz::check_not_internal("Program::load_bytes (checksums)", checked.status());
  if (checked.ok() && !program.ok()) {
    baton::fuzz::fail("a file that passes its checksums fails without them", program.status());
  }

  // An odd address: load_bytes copies into aligned storage, so the verdict must be the same.
  std::unique_ptr<uint8_t[]> shifted(new uint8_t[size + 1]);
  if (size != 0) std::memcpy(shifted.get() + 1, data, size);
  const std::span<const uint8_t> odd(shifted.get() + 1, size);
  auto again = Program::load_bytes(odd, unchecked);
  if (again.ok() != program.ok() || again.code() != program.code()) {
    baton::fuzz::fail("the same bytes at an odd address got another verdict", again.status());
  }
  // The verifier on misaligned memory: an error (InvalidArgument, or InvalidProgram for a file
  // shorter than its header), never a misaligned read.
  auto direct = baton::format::ProgramFile::parse(odd);
  if (direct.ok()) {
    baton::fuzz::fail("ProgramFile::parse accepted misaligned bytes", direct.status());
  }

  if (program.ok()) baton::fuzz::exercise_program(**program, /*must_load=*/false);
  return 0;
}
