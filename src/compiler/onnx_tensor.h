// Reading ONNX TensorProto data (initializers, Constant values, test data files).
#pragma once

#include <filesystem>
#include <string>

#include "baton/core/tensor.h"

namespace onnx {
class TensorProto;
}

namespace baton::compiler {

struct OnnxTensor {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::shared_ptr<const std::vector<uint8_t>> data;  // row-major little-endian bytes
};

// `base_dir` resolves external data locations. `what` names the tensor's role in messages
// ("initializer 'fc1.weight'").
Result<OnnxTensor> read_onnx_tensor(const onnx::TensorProto& proto,
                                    const std::filesystem::path& base_dir, const std::string& what);

// Reads a serialized TensorProto file (the ONNX backend tests' input_N.pb / output_N.pb).
Result<OnnxTensor> load_onnx_tensor_file(const std::string& path);

// "INT4" for an ONNX element type code, from ONNX's current TensorProto.DataType list (the ONNX
// library Baton builds against can be older and know fewer); "an element type this Baton does not
// know" past the list.
std::string onnx_elem_type_name(int code);

}  // namespace baton::compiler
