#include "testing/model_cases.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "baton/core/check.h"
#include "baton/extension/npy.h"

namespace baton::testing {

Result<Tensor> ModelCase::reference(size_t o) const {
  return extension::read_npy((dir / fmt::format("{}.output_{}.npy", name, o)).string());
}

Result<std::vector<ModelCase>> read_model_cases(const std::filesystem::path& dir) {
  std::ifstream in(dir / "manifest.json");
  BATON_CHECK_OR_RETURN(in.good(), IoError,
                        "missing {} (run tests/e2e/make_models.py DIR and set "
                        "BATON_E2E_MODELS_DIR)",
                        (dir / "manifest.json").string());
  const nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  BATON_CHECK_OR_RETURN(manifest.is_object() && manifest.contains("cases"), InvalidArgument,
                        "{} is not a case manifest", (dir / "manifest.json").string());
  std::vector<ModelCase> cases;
  for (const auto& c : manifest["cases"]) {
    ModelCase m;
    m.name = c["name"];
    m.model = dir / c["model"].get<std::string>();
    m.dir = dir;
    for (const auto& [input, sizes] : c["shapes"].items()) {
      m.shapes.push_back({input, sizes.get<std::vector<int64_t>>()});
    }
    for (size_t i = 0; i < c["inputs"].size(); ++i) {
      BATON_ASSIGN_OR_RETURN(
          Tensor t,
          extension::read_npy((dir / fmt::format("{}.input_{}.npy", m.name, i)).string()));
      m.inputs.push_back(std::move(t));
    }
    m.outputs = c["outputs"];
    m.tolerance = c["tolerance"];
    cases.push_back(std::move(m));
  }
  return cases;
}

}  // namespace baton::testing
