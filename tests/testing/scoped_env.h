// An environment variable set for one scope and restored (unset, or its old value) when the scope
// ends, also when an assertion returns early: builder switches (BATON_GEMM_GELU=kernel, ...) must
// not leak into the tests that run after.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace baton::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace baton::testing
