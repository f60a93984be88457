// NonZero's element test (ops/nonzero.cpp), shared by the compile-time count of a constant input
// and the CPU kernel (kernels/cpu/op_nonzero.cpp), so that folding and running cannot disagree.
#pragma once

#include <cstdint>
#include <cstring>

#include "baton/core/dtype.h"

namespace baton::ops {

// Whether the element at `e` (of `dtype`, `width` bytes) is not zero. Floats compare as numbers
// (-0 is zero, NaN is not); every other dtype by its bytes.
inline bool element_is_nonzero(DType dtype, const uint8_t* e, size_t width) {
  switch (dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, e, 4);
      return v != 0.0f;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, e, 8);
      return v != 0.0;
    }
    case DType::Float16:
    case DType::BFloat16:
      return (e[0] | (e[1] & 0x7f)) != 0;  // little-endian: the sign is bit 7 of byte 1
    default:
      for (size_t b = 0; b < width; ++b) {
        if (e[b] != 0) return true;
      }
      return false;
  }
}

}  // namespace baton::ops
