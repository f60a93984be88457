#include "testing/random.h"

#include <cmath>
#include <limits>

namespace baton::testing {

std::vector<float> random_normal(std::mt19937& rng, size_t n, float stddev) {
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Tensor random_tensor(std::mt19937& rng, std::vector<int64_t> sizes, float lo, float hi) {
  Tensor t = Tensor::empty(DType::Float32, std::move(sizes)).value();
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Tensor random_int64_tensor(std::mt19937& rng, std::vector<int64_t> sizes, int64_t lo, int64_t hi) {
  Tensor t = Tensor::empty(DType::Int64, std::move(sizes)).value();
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  int64_t* p = t.data_as<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

double relative_error(const float* a, const float* b, int64_t n) {
  double diff = 0.0;
  double ref = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    ref += static_cast<double>(b[i]) * b[i];
  }
  if (ref == 0.0) return diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / ref);
}

namespace {

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float16:
      return half_to_float(t.data_as<const uint16_t>()[i]);
    case DType::BFloat16:
      return bfloat16_to_float(t.data_as<const uint16_t>()[i]);
    case DType::Float64:
      return t.data_as<const double>()[i];
    default:
      return t.data_as<const float>()[i];
  }
}

}  // namespace

double relative_error(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double ref = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = element(a, i), y = element(b, i);
    if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::infinity();
    diff += (x - y) * (x - y);
    ref += y * y;
  }
  if (ref == 0.0) return diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / ref);
}

}  // namespace baton::testing
