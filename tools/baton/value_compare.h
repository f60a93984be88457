// How `baton compare` holds one of Baton's values against the reference's: tolerances by
// precision, and the element-by-element comparison with its statistics. Plain C++ on host tensors
// (tests/tools checks the rules without a reference runtime).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/tensor.h"

namespace baton::tool {

// An element is outside when |baton - reference| > atol + rtol * |reference| (NumPy's isclose).
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  // The precision's largest finite value (fp16 65504, bf16 about 3.39e38; 0: none): a reference
  // beyond it can only be that precision's infinity of the same sign, which then matches it (a
  // -FLT_MAX attention mask is -inf in fp16).
  double largest = 0;
};

// Defaults that fit how a precision computes ("fp32", "tf32", "fp16", "bf16"): fp32 is Baton's
// strict path (and the CPU's), TF32 and fp16 keep about 10 mantissa bits, bf16 about 7.
Tolerance default_tolerance(std::string_view precision);

// The looser of two precisions.
std::string_view looser(std::string_view a, std::string_view b);

// One value, Baton's against the reference's.
struct Comparison {
  std::string name;
  Tolerance tolerance;
  std::string node, op;  // the ONNX node that computes it (empty for a graph input)
  std::string dtype, reference_dtype;
  std::vector<int64_t> shape, reference_shape;
  bool in_model = true;  // false: Baton's optimizer made it; the model has no such value
  bool shapes_match = true;
  int64_t elements = 0;
  int64_t mismatches = 0;
  double max_abs = 0, max_rel = 0, rel_l2 = 0;  // over the finite pairs (max_rel: reference != 0)
  int64_t worst = -1;  // the element furthest outside the tolerance (or with the largest error)
  double worst_baton = 0, worst_reference = 0;
  bool match() const { return in_model && shapes_match && mismatches == 0; }
};

// NaN matches only NaN; an infinity matches the same infinity (or, with Tolerance::largest, a
// reference beyond it of the same sign). Shapes must be equal; dtypes may differ (both are read
// as doubles).
Comparison compare_values(const TensorView& baton, const TensorView& reference, Tolerance tol);

// The multi-dimensional index of flat element `flat` of a C-order tensor of `sizes`, and as text.
std::vector<int64_t> unflatten(int64_t flat, std::span<const int64_t> sizes);
std::string index_text(const std::vector<int64_t>& index);

}  // namespace baton::tool
