// Where tests find their data. The compile-time paths can be overridden through the environment,
// so a relocated test bundle (scripts/make_bundle.sh) runs on another machine.
#pragma once

#include <string>

namespace baton::testing {

// BATON_SOURCE_DIR from the environment, else the source tree the tests were built from.
std::string source_dir();
// BATON_E2E_MODELS_DIR from the environment, else the build tree's generated models.
std::string e2e_models_dir();

}  // namespace baton::testing
