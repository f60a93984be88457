// The end-to-end model cases a directory holds: manifest.json plus CASE.onnx, CASE.input_<i>.npy
// and CASE.output_<i>.npy (onnxruntime's outputs), written by tests/e2e/make_models.py or
// tests/e2e/export_torch_models.py.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/core/tensor.h"

namespace baton::testing {

struct ModelCase {
  std::string name;
  std::filesystem::path model;               // the .onnx file
  std::vector<compiler::InputShape> shapes;  // for inputs with symbolic dimensions
  std::vector<Tensor> inputs;                // CASE.input_<i>.npy
  std::filesystem::path dir;                 // where CASE.output_<i>.npy are
  size_t outputs = 0;
  double tolerance = 0.0;  // vs onnxruntime, on the CPU path

  // onnxruntime's output `o` (CASE.output_<o>.npy).
  Result<Tensor> reference(size_t o) const;
};

// The cases of `dir`, or an error naming what is missing (the manifest, an input file).
Result<std::vector<ModelCase>> read_model_cases(const std::filesystem::path& dir);

}  // namespace baton::testing
