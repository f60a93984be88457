// Random test data: fixed-seed, never all zeros.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "baton/core/tensor.h"

namespace baton::testing {

// Uniform floats in [lo, hi).
Tensor random_tensor(std::mt19937& rng, std::vector<int64_t> sizes, float lo = -1.0f,
                     float hi = 1.0f);
// n floats from a normal distribution of mean 0 (weights for test models).
std::vector<float> random_normal(std::mt19937& rng, size_t n, float stddev);
Tensor random_int64_tensor(std::mt19937& rng, std::vector<int64_t> sizes, int64_t lo, int64_t hi);

// ‖a − b‖ / ‖b‖ over float32 tensors of equal size (∞ when the sizes differ).
double relative_error(const float* a, const float* b, int64_t n);
// The same over two tensors of float types (float32, float16, bfloat16, float64; they may differ,
// e.g. a float16 output against a float32 reference); ∞ when the sizes differ.
double relative_error(const Tensor& a, const Tensor& b);

}  // namespace baton::testing
