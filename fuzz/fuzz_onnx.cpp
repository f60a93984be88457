// An ONNX model as an attacker writes it, through the whole CPU compile: compile_bytes (protobuf
// parse, import binding every attribute through the op definitions, shape inference, constant
// folding with the CPU kernels, partition, memory planning, emit), then the program it wrote is
// serialized, loaded, described and executed (fuzz_common.h). Whatever the compiler accepts it
// must also be able to load: a program it writes that the verifier or the loader refuses aborts.
//
// External data is looked up in a folder that does not exist, so no input reads the disk.
#include <cstdint>
#include <span>

#include "baton/compiler/compiler.h"
#include "baton/runtime/program.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace compiler = baton::compiler;
  const compiler::CompileOptions options;  // the CPU: no backend compilers
  auto compiled = compiler::compile_bytes(std::span<const uint8_t>(data, size), options,
                                          "/nonexistent/baton-fuzz-onnx");
  baton::fuzz::check_not_internal("compile_bytes", compiled.status());
  if (!compiled.ok()) return 0;
  auto bytes = compiled->serialize();
  if (!bytes.ok()) baton::fuzz::fail("serializing a compiled program", bytes.status());
  auto program = baton::runtime::Program::load_bytes(*bytes);
  if (!program.ok()) baton::fuzz::fail("loading a program the compiler wrote", program.status());
  baton::fuzz::exercise_program(**program, /*must_load=*/true);
  return 0;
}
