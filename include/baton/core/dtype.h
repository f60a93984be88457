// Element types. The numeric values are ONNX's TensorProto.DataType codes, so a DType read from a
// program file or an ONNX model means the same thing in both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace baton {

enum class DType : uint8_t {
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  BFloat16 = 16,
};

// False for codes that are not one of the enumerators above (a corrupt file, an ONNX type Baton
// does not know).
bool is_valid_dtype(int code);
// Bytes per element; 0 for an invalid code.
size_t dtype_size(DType dtype);
// "float32", "int64", ... (numpy's spelling).
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

// IEEE binary16 and bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace baton
