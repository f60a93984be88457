// ONNX import: ModelProto -> Graph (IR). Initializers and Constant nodes become constants. A
// symbolic input dimension (an ONNX dim_param) is fixed by ImportOptions::input_shapes or becomes
// a symbol of the graph's table with the range ImportOptions::dims gives it; one with neither is
// an error that lists every such dimension at once.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "baton/compiler/compiler.h"
#include "baton/core/error.h"
#include "compiler/ir.h"
#include "compiler/passes.h"

namespace baton::compiler {

struct ImportOptions {
  std::vector<InputShape> input_shapes;
  std::vector<DimRange> dims;
  // What folding a Loop's trip count at import may materialize (the compile's own limits).
  FoldLimits fold_limits{};
};

Result<Graph> import_onnx_file(const std::string& path, const ImportOptions& options);
Result<Graph> import_onnx_bytes(std::span<const uint8_t> bytes, const std::string& source,
                                const std::filesystem::path& base_dir,
                                const ImportOptions& options);

}  // namespace baton::compiler
