// Element types. The numeric values are ONNX's TensorProto.DataType codes, so a DType read from a
// program file or an ONNX model means the same thing in both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// Storage types of float16 and bfloat16 elements, converted through float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(float_to_half(f)) {}
  explicit operator float() const { return half_to_float(bits); }
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(float_to_bfloat16(f)) {}
  explicit operator float() const { return bfloat16_to_float(bits); }
};

// A set of element types (an ONNX type constraint's list, what a kernel accepts).
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> types) {
    for (DType t : types) bits_ |= bit(t);
  }
  static constexpr DTypeSet from_bits(uint32_t b) {
    DTypeSet s;
    s.bits_ = b;
    return s;
  }
  static constexpr uint32_t bit(DType t) { return uint32_t{1} << static_cast<unsigned>(t); }
  constexpr uint32_t bits() const { return bits_; }
  constexpr bool contains(DType t) const { return (bits_ & bit(t)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr DTypeSet operator|(DTypeSet o) const { return from_bits(bits_ | o.bits_); }
  constexpr DTypeSet operator&(DTypeSet o) const { return from_bits(bits_ & o.bits_); }
  constexpr bool operator==(const DTypeSet&) const = default;
  // In code order ("float32", "uint8", ...).
  std::vector<DType> list() const;
  // "float32, float16, bfloat16"; "none" when empty.
  std::string to_string() const;

 private:
  uint32_t bits_ = 0;
};

}  // namespace baton
