// fuzz_onnx through the CUDA engine builder: the model is compiled for cuda:0 (--arch sm_90, so no
// GPU is needed), which adds the GPU partitioner, every op's lowering, code generation and NVRTC,
// cuBLASLt/cuDNN step descriptions and the engine blob writer to what fuzz_onnx reaches. The
// precision (fp32, fp16, bf16) follows the input's size, so one corpus covers all three.
//
// Oracles: no crash or sanitizer report; no Internal error from the compiler; every engine blob the
// builder wrote parses (cuda::EngineBlob::parse, the loader's validator); the program verifies and
// its CPU methods load (fuzz_common.h). Nothing runs on a GPU: the CUDA runtime backend is not
// registered, so a method with an engine does not load (NotSupported), even on a GPU host.
#include <cstdint>
#include <memory>
#include <span>

#include "backends/cuda/engine_format.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/compiler.h"
#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "fuzz_common.h"

namespace {

// One builder per precision, made once: making one is not what is being fuzzed.
std::unique_ptr<baton::compiler::BackendCompiler> g_builders[3];

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::fuzz::init();
  baton::cuda::register_compiler();
  const char* const precisions[] = {"fp32", "fp16", "bf16"};
  for (int i = 0; i < 3; ++i) {
    auto made = baton::compiler::make_backend_compiler(
        baton::compiler::TargetSpec{baton::Device::cuda(0), "sm_90", precisions[i]});
    if (!made.ok()) baton::fuzz::fail("making the CUDA backend compiler", made.status());
    g_builders[i] = std::move(made).value();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace compiler = baton::compiler;
  compiler::CompileOptions options;
  options.backends.push_back(g_builders[size % 3].get());
  options.targets.round_robin.push_back(baton::Device::cuda(0));
  auto compiled = compiler::compile_bytes(std::span<const uint8_t>(data, size), options,
                                          "/nonexistent/baton-fuzz-onnx");
  baton::fuzz::check_not_internal("compile_bytes for cuda:0", compiled.status());
  if (!compiled.ok()) return 0;
  auto bytes = compiled->serialize();
  if (!bytes.ok()) baton::fuzz::fail("serializing a compiled program", bytes.status());
  auto file = baton::format::ProgramFile::parse(*bytes);
  if (!file.ok()) baton::fuzz::fail("parsing a program the compiler wrote", file.status());
  for (const auto* method : *file->program().methods()) {
    if (method->delegates() == nullptr) continue;
    for (const auto* delegate : *method->delegates()) {
      // A dynamic partition may be a bucketed engine: each of its engines must parse.
      const auto segment = file->segment(delegate->blob_segment());
      auto buckets = baton::cuda::engine_buckets(segment);
      if (!buckets.ok()) {
        baton::fuzz::fail("splitting an engine blob the builder wrote", buckets.status());
      }
      for (const auto& bucket : *buckets) {
        auto blob =
            baton::cuda::EngineBlob::parse(bucket, baton::cuda::shared_bucket_weights(segment));
        if (!blob.ok())
          baton::fuzz::fail("parsing an engine blob the builder wrote", blob.status());
      }
    }
  }
  auto program = baton::runtime::Program::load_bytes(*bytes);
  if (!program.ok()) baton::fuzz::fail("loading a program the compiler wrote", program.status());
  baton::fuzz::exercise_program(**program, /*must_load=*/false);
  return 0;
}
