// Failure injection: loading and running a real program (Program::load_bytes, Module, run) while
// the Nth heap allocation fails, for every N the load and the run make. Each attempt must end in
// an ordinary error (OutOfMemory where the failure was seen) or in the reference outputs, never in
// an exception escaping the library or a crash; and the next load, with memory back, must work
// and give the reference outputs. At 52eb145 the first allocation of Program::load_bytes already
// threw std::bad_alloc out of the library. (The test allocator
// replaces malloc, so it does not run under AddressSanitizer, which owns malloc.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/core/file.h"
#include "baton/extension/module.h"
#include "baton/extension/npy.h"
#include "testing/alloc/counting_allocator.h"
#include "testing/paths.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

struct Model {
  std::vector<uint8_t> program;
  std::vector<Tensor> inputs;
};

Model compile_model(const std::string& name, int inputs) {
  const fs::path base = fs::path(source_dir()) / "tests/e2e/models" / name;
  auto onnx = read_regular_file(base.string() + ".onnx", uint64_t{1} << 30, "model");
  EXPECT_TRUE(onnx.ok()) << onnx.status().to_string();
  Model m;
  if (!onnx.ok()) return m;
  auto compiled = compiler::compile_bytes(*onnx, {});
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  if (!compiled.ok()) return m;
  m.program = compiled->serialize().value();
  for (int i = 0; i < inputs; ++i) {
    m.inputs.push_back(
        extension::read_npy(fmt::format("{}.input_{}.npy", base.string(), i)).value());
  }
  return m;
}

// Loads and runs `m` once; the outputs, or the error.
Result<std::vector<Tensor>> load_and_run(const Model& m) {
  BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_bytes(m.program));
  BATON_ASSIGN_OR_RETURN(auto module, extension::Module::from_program(program));
  return module.run(m.inputs);
}

// `scratch`: the program's CPU kernels reserve scratch, so one of the failures is the scratch
// area's allocation, which must be an OutOfMemory naming the area, its size and the kernel.
void expect_every_failure_is_an_error(const std::string& name, int inputs, bool scratch) {
  SCOPED_TRACE(name);
  register_builtins();
  const Model m = compile_model(name, inputs);
  ASSERT_FALSE(m.program.empty());
  const auto reference = load_and_run(m);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  // The outputs of a run are the reference's, bit for bit.
  auto expect_reference = [&](const std::vector<Tensor>& out, const std::string& which) {
    ASSERT_EQ(out.size(), reference->size()) << which;
    for (size_t o = 0; o < out.size(); ++o) {
      ASSERT_EQ(std::memcmp(out[o].data(), (*reference)[o].data(), out[o].nbytes()), 0)
          << "output " << o << " of " << which;
    }
  };
  int attempts = 0, out_of_memory = 0, scratch_area = 0;
  for (int64_t nth = 1;; ++nth) {
    bool fired = false;
    Result<std::vector<Tensor>> out = Status(Error::Internal, "not run");
    try {
      FailAllocation fail(nth);
      out = load_and_run(m);
      fired = fail.fired();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "allocation " << nth << " failed and '" << e.what()
                    << "' escaped the library";
      break;
    }
    if (!fired) break;  // the whole load and run made fewer than nth allocations
    ++attempts;
    const std::string which = fmt::format("the run whose allocation {} failed", nth);
    if (out.ok()) {
      // A failure the library absorbed (a cache it could not grow, say) must not change results.
      expect_reference(*out, which);
    } else {
      out_of_memory += out.code() == Error::OutOfMemory;
      EXPECT_FALSE(out.status().message().empty());
      const std::string& message = out.status().message();
      if (message.find("scratch area") != std::string::npos) {
        ++scratch_area;
        EXPECT_EQ(out.code(), Error::OutOfMemory) << message;
        EXPECT_NE(message.find(" bytes)"), std::string::npos) << message;
        EXPECT_NE(message.find(" node '"), std::string::npos) << message;
      }
    }
    if (nth % 50 == 0 || !out.ok()) {
      // Memory back: the same program loads and gives the reference outputs.
      auto again = load_and_run(m);
      ASSERT_TRUE(again.ok()) << "after " << which << ": " << again.status().to_string();
      expect_reference(*again, "the run after " + which);
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("  %s: %d loads with one allocation failing, %d ended in OutOfMemory\n", name.c_str(),
              attempts, out_of_memory);
  EXPECT_GT(attempts, 10);
  EXPECT_EQ(scratch_area, scratch ? 1 : 0);
}

TEST(LoadFailureInjection, EveryAllocationFailureOfALoadIsAnError) {
  if (!counting_available()) GTEST_SKIP() << "the test allocator is not available under ASan";
  expect_every_failure_is_an_error("dynamo18_mlp_gelu", 1, /*scratch=*/false);
  expect_every_failure_is_an_error("real/dynamo18_bert", 2, /*scratch=*/true);
}

}  // namespace
}  // namespace baton::testing
