// Shared by the compiler robustness tests (issue 9): compiling hand-built models from memory or
// files, and loading what the compiler wrote.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/runtime/program.h"
#include "testing/onnx_builder.h"

namespace baton::testing {

class RobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    dir_ = std::filesystem::temp_directory_path() / fmt::format("baton_robustness_{}", ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static Result<compiler::CompiledProgram> compile(const OnnxBuilder& b,
                                                   const compiler::CompileOptions& options = {}) {
    return compiler::compile_bytes(b.bytes(), options);
  }
  static Result<compiler::CompiledProgram> compile(const std::vector<uint8_t>& bytes) {
    return compiler::compile_bytes(bytes, {});
  }
  static void expect_error(const Status& s, Error code, const std::string& needle) {
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  }
  // Loads what the compiler wrote: the program (verification) and its method (kernel creation,
  // inference again at load).
  static Status load(const compiler::CompiledProgram& compiled) {
    BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, compiled.serialize());
    BATON_ASSIGN_OR_RETURN(auto program, runtime::Program::load_bytes(bytes));
    BATON_ASSIGN_OR_RETURN(auto method, program->load_method());
    return Status();
  }

  // Compiles the model `build` makes, then loads the program: the compile error, or the load
  // error marked as such.
  static Status compile_and_load(const std::function<void(OnnxBuilder&)>& build) {
    OnnxBuilder b;
    build(b);
    BATON_ASSIGN_OR_RETURN(auto compiled, compile(b));
    const Status loaded = load(compiled);
    if (loaded.ok()) return loaded;
    return Status(loaded.code(), "compiled, but does not load: " + loaded.message());
  }

  std::filesystem::path dir_;
};

inline OnnxBuilder relu_model() {
  OnnxBuilder b;
  b.input("x", {2, 3});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", {2, 3});
  return b;
}

}  // namespace baton::testing
