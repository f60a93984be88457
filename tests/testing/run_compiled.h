// Running what the compiler wrote as a user would: serialized, loaded and run through Module.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/extension/module.h"

namespace baton::testing {

// The outputs of `compiled`'s method on `inputs`; a test failure, and no outputs, when serializing,
// loading or running fails.
inline std::vector<Tensor> run_compiled(const compiler::CompiledProgram& compiled,
                                        const std::vector<Tensor>& inputs) {
  auto bytes = compiled.serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  if (!bytes.ok()) return {};
  auto program = runtime::Program::load_bytes(*bytes);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  if (!program.ok()) return {};
  auto module = extension::Module::from_program(*program);
  EXPECT_TRUE(module.ok()) << module.status().to_string();
  if (!module.ok()) return {};
  auto out = module->run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

}  // namespace baton::testing
