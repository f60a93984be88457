#include "testing/paths.h"

#include <cstdlib>

namespace baton::testing {

std::string source_dir() {
  const char* env = std::getenv("BATON_SOURCE_DIR");
  return env ? env : BATON_TESTING_SOURCE_DIR;
}

std::string e2e_models_dir() {
  const char* env = std::getenv("BATON_E2E_MODELS_DIR");
  return env ? env : BATON_TESTING_BINARY_DIR "/e2e_models";
}

}  // namespace baton::testing
