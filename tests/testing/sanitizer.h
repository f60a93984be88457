// Whether the test runs under a tool that slows it by orders of magnitude (compute-sanitizer:
// run_gpu_suite.sh --sanitize sets BATON_UNDER_SANITIZER=1). Tests skip their timing assertions
// then, and only those.
#pragma once

#include <cstdlib>
#include <cstring>

namespace baton::testing {

inline bool under_sanitizer() {
  const char* v = std::getenv("BATON_UNDER_SANITIZER");
  return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
}

// Whether the compute-sanitizer tool named `tool` runs the test (run_gpu_suite.sh sets the
// variable to the tool's name).
inline bool under_sanitizer_tool(const char* tool) {
  const char* v = std::getenv("BATON_UNDER_SANITIZER");
  return v != nullptr && std::strcmp(v, tool) == 0;
}

}  // namespace baton::testing
