// The runtime's values: what a program's instructions read and write.
//
// A Value is a tagged, non-owning view: tensors point at arena, constant or caller memory; lists
// and strings point into the loaded program. Values live inside a Method (stable addresses) and
// are handed to kernels and delegates by pointer.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "baton/core/tensor.h"

namespace baton::runtime {

enum class ValueKind : uint8_t { None, Int, Float, String, IntList, FloatList, Tensor };

std::string_view value_kind_name(ValueKind kind);

struct Value {
  ValueKind kind = ValueKind::None;
  int64_t i = 0;
  double f = 0.0;
  std::string_view s;
  std::span<const int64_t> ints;
  std::span<const double> floats;
  TensorView tensor;

  bool is_none() const { return kind == ValueKind::None; }
  bool is_tensor() const { return kind == ValueKind::Tensor; }

  static Value none() { return Value{}; }
  static Value from_int(int64_t v) {
    Value x;
    x.kind = ValueKind::Int;
    x.i = v;
    return x;
  }
  static Value from_float(double v) {
    Value x;
    x.kind = ValueKind::Float;
    x.f = v;
    return x;
  }
  static Value from_string(std::string_view v) {
    Value x;
    x.kind = ValueKind::String;
    x.s = v;
    return x;
  }
  static Value from_ints(std::span<const int64_t> v) {
    Value x;
    x.kind = ValueKind::IntList;
    x.ints = v;
    return x;
  }
  static Value from_floats(std::span<const double> v) {
    Value x;
    x.kind = ValueKind::FloatList;
    x.floats = v;
    return x;
  }
  static Value from_tensor(TensorView t) {
    Value x;
    x.kind = ValueKind::Tensor;
    x.tensor = t;
    return x;
  }
};

}  // namespace baton::runtime
