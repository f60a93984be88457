// Element-type dispatch for the CPU kernels: one helper turns a runtime DType into a C++ storage
// type, instantiating a kernel only for the types its definition allows (a DTypeSet's bits).
//
// Float kernels compute in float for float16 and bfloat16 (and accumulate in float), in double
// for float64; integer kernels compute in their own type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "baton/core/dtype.h"

namespace baton::kernels::cpu {

// Storage of bool elements: one byte, any nonzero value true. A program's constants, a caller's
// input or an arena may hold any byte in a bool tensor, and reading such a byte as a C++ bool is
// undefined behaviour; kernels compute in bool after load() and write 0 or 1 through store().
struct BoolByte {
  uint8_t bits = 0;
  BoolByte() = default;
  explicit BoolByte(bool b) : bits(b ? 1 : 0) {}
  explicit operator bool() const { return bits != 0; }
};

template <typename S>
struct ComputeOf {
  using type = S;
};
template <>
struct ComputeOf<BoolByte> {
  using type = bool;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
// The type a kernel computes in for storage type S.
template <typename S>
using compute_t = typename ComputeOf<S>::type;

template <typename S>
inline compute_t<S> load(S v) {
  if constexpr (std::is_same_v<S, BoolByte>) {
    return static_cast<bool>(v);
  } else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

template <typename S>
inline S store(compute_t<S> c) {
  if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16> ||
                std::is_same_v<S, BoolByte>) {
    return S(c);
  } else {
    return c;
  }
}

// Calls `f.template operator()<S>()` with S the storage type of `dtype` when `kTypes` holds it,
// and returns whether it did. Types outside kTypes are never instantiated.
template <uint32_t kTypes, typename F>
bool dispatch(DType dtype, F&& f) {
#define BATON_DISPATCH_CASE(D, S)                            \
  case DType::D:                                             \
    if constexpr ((kTypes & DTypeSet::bit(DType::D)) != 0) { \
      f.template operator()<S>();                            \
      return true;                                           \
    }                                                        \
    return false;
  switch (dtype) {
    BATON_DISPATCH_CASE(Float32, float)
    BATON_DISPATCH_CASE(Float64, double)
    BATON_DISPATCH_CASE(Float16, Half)
    BATON_DISPATCH_CASE(BFloat16, BFloat16)
    BATON_DISPATCH_CASE(Int8, int8_t)
    BATON_DISPATCH_CASE(Int16, int16_t)
    BATON_DISPATCH_CASE(Int32, int32_t)
    BATON_DISPATCH_CASE(Int64, int64_t)
    BATON_DISPATCH_CASE(UInt8, uint8_t)
    BATON_DISPATCH_CASE(Bool, BoolByte)
  }
#undef BATON_DISPATCH_CASE
  return false;
}

// Calls `f.template operator()<Word>()` with the unsigned integer type of `element_size` bytes, for
// kernels that move elements without looking at them; false for sizes other than 1, 2, 4 and 8.
template <typename F>
bool dispatch_word(size_t element_size, F&& f) {
  switch (element_size) {
    case 1:
      f.template operator()<uint8_t>();
      return true;
    case 2:
      f.template operator()<uint16_t>();
      return true;
    case 4:
      f.template operator()<uint32_t>();
      return true;
    case 8:
      f.template operator()<uint64_t>();
      return true;
    default:
      return false;
  }
}

}  // namespace baton::kernels::cpu
