// How a timed cuDNN plan is checked against a reference plan (src/backends/cuda/tuning.h:
// output_deviation, agreement_tolerance), on the host: outputs of one product summed in fp32 in
// two orders agree; the same product summed in fp16, as a reduced-precision plan would, does not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/cuda/tuning.h"
#include "baton/core/dtype.h"

namespace baton::cuda {
namespace {

// `rows` dot products of length k over values drawn from [0, 1) (the operands a plan is timed
// on), as fp16 outputs: summed in fp32 forward, in fp32 in blocks of 32 from the end, and in fp16
// (every partial sum rounded to fp16).
struct Products {
  std::vector<uint16_t> forward, blocked, half_sums;
};

Products products(int rows, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Products p;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> terms(k);
    for (float& t : terms) {
      t = half_to_float(float_to_half(u(rng))) * half_to_float(float_to_half(u(rng) - 0.25f));
    }
    float forward = 0, half_sum = 0;
    for (float t : terms) {
      forward += t;
      half_sum = half_to_float(float_to_half(half_sum + t));
    }
    float blocked = 0;
    for (int end = k; end > 0; end -= 32) {
      float block = 0;
      for (int i = std::max(0, end - 32); i < end; ++i) block += terms[i];
      blocked += block;
    }
    p.forward.push_back(float_to_half(forward));
    p.blocked.push_back(float_to_half(blocked));
    p.half_sums.push_back(float_to_half(half_sum));
  }
  return p;
}

TEST(Agreement, Fp32SumsInAnotherOrderAgreeAndFp16SumsDoNot) {
  const float tolerance = agreement_tolerance(DType::Float16, DType::Float16, false);
  for (int k : {576, 1152, 4608}) {
    const Products p = products(256, k, 7 + k);
    const float same = output_deviation(p.blocked.data(), p.forward.data(), 256, DType::Float16);
    const float reduced =
        output_deviation(p.half_sums.data(), p.forward.data(), 256, DType::Float16);
    EXPECT_LE(same, tolerance) << "k=" << k;
    EXPECT_GT(reduced, tolerance) << "k=" << k;
    // The most two fp32 sums can differ by once rounded to fp16: one unit in the last place, in
    // every output.
    std::vector<uint16_t> ulp_off = p.forward;
    for (uint16_t& h : ulp_off) h = static_cast<uint16_t>(h + 1);
    EXPECT_LE(output_deviation(ulp_off.data(), p.forward.data(), 256, DType::Float16), tolerance)
        << "k=" << k;
  }
}

TEST(Agreement, DeviationIsRelativeToTheLargestReferenceValue) {
  const std::vector<float> ref = {1.0f, -4.0f, 2.0f, 0.0f};
  const std::vector<float> same = ref;
  std::vector<float> off = ref;
  off[2] = 2.5f;  // 0.5 / 4
  EXPECT_EQ(output_deviation(same.data(), ref.data(), 4, DType::Float32), 0.0f);
  EXPECT_FLOAT_EQ(output_deviation(off.data(), ref.data(), 4, DType::Float32), 0.125f);
  std::vector<uint16_t> bf(4), bf_ref(4);
  for (int i = 0; i < 4; ++i) {
    bf_ref[i] = float_to_bfloat16(ref[i]);
    bf[i] = float_to_bfloat16(off[i]);
  }
  EXPECT_FLOAT_EQ(output_deviation(bf.data(), bf_ref.data(), 4, DType::BFloat16), 0.125f);
}

TEST(Agreement, NonFiniteOrAllZeroReferencesNeverAgree) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ref = {1.0f, 2.0f};
  const std::vector<float> nan = {1.0f, std::nanf("")};
  const std::vector<float> zeros = {0.0f, 0.0f};
  const std::vector<float> small = {0.0f, 1e-30f};
  EXPECT_EQ(output_deviation(nan.data(), ref.data(), 2, DType::Float32), inf);
  EXPECT_EQ(output_deviation(ref.data(), nan.data(), 2, DType::Float32), inf);
  EXPECT_EQ(output_deviation(nan.data(), nan.data(), 2, DType::Float32), inf);
  EXPECT_EQ(output_deviation(zeros.data(), zeros.data(), 2, DType::Float32), 0.0f);
  EXPECT_EQ(output_deviation(small.data(), zeros.data(), 2, DType::Float32), inf);
}

TEST(Agreement, ToleranceFollowsTheCoarsestPrecision) {
  EXPECT_FLOAT_EQ(agreement_tolerance(DType::Float16, DType::Float16, false), 8 * 0x1p-11f);
  EXPECT_FLOAT_EQ(agreement_tolerance(DType::BFloat16, DType::Float16, false), 8 * 0x1p-8f);
  EXPECT_FLOAT_EQ(agreement_tolerance(DType::Float16, DType::BFloat16, false), 8 * 0x1p-8f);
  EXPECT_FLOAT_EQ(agreement_tolerance(DType::Float32, DType::Float32, false), 0x1p-12f);
  EXPECT_FLOAT_EQ(agreement_tolerance(DType::Float32, DType::Float32, true), 8 * 0x1p-11f);
}

}  // namespace
}  // namespace baton::cuda
