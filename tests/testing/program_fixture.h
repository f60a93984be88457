// A test fixture for tests that load hand-built programs: registers the builtins and the test
// backend, resets its statistics, and loads program bytes.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "baton/baton.h"
#include "baton/runtime/program.h"
#include "testing/test_backend.h"

namespace baton::testing {

class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    register_test_backend();
    test_backend_stats().reset();
  }

  std::shared_ptr<const runtime::Program> load(const std::vector<uint8_t>& bytes) {
    auto p = runtime::Program::load_bytes(bytes);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? *p : nullptr;
  }

  std::vector<int64_t> sizes_ = {2, 3};
};

}  // namespace baton::testing
