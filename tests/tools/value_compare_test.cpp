// `baton compare`'s rules for one value: tolerances, NaN and infinities, the worst element, the
// precision's range.
#include "value_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "run_common.h"

namespace baton::tool {
namespace {

TensorView view(std::vector<float>& v, std::vector<int64_t>& sizes) {
  return TensorView{v.data(), DType::Float32, sizes, Device::cpu()};
}

TEST(ValueCompare, WithinToleranceAndTheWorstElementOutside) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<int64_t> sizes = {3, 5};
  std::vector<float> ref(15), got(15);
  for (int i = 0; i < 15; ++i) {
    ref[i] = u(rng);
    got[i] = ref[i] + 4e-6f;  // inside 1e-5 + 1e-4 * |ref|
  }
  Comparison c = compare_values(view(got, sizes), view(ref, sizes), default_tolerance("fp32"));
  EXPECT_TRUE(c.match());
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.elements, 15);
  EXPECT_NEAR(c.max_abs, 4e-6, 1e-6);
  EXPECT_GT(c.rel_l2, 0.0);

  got[7] = ref[7] + 0.5f;  // [1, 2]
  got[12] = ref[12] - 0.01f;
  c = compare_values(view(got, sizes), view(ref, sizes), default_tolerance("fp32"));
  EXPECT_FALSE(c.match());
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(unflatten(c.worst, c.shape), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(index_text(unflatten(c.worst, c.shape)), "[1, 2]");
  EXPECT_FLOAT_EQ(static_cast<float>(c.worst_baton), got[7]);
  EXPECT_FLOAT_EQ(static_cast<float>(c.worst_reference), ref[7]);
  EXPECT_NEAR(c.max_abs, 0.5, 1e-6);

  // The caller's tolerance: 0.6 absolute takes both in.
  c = compare_values(view(got, sizes), view(ref, sizes), Tolerance{0.6, 0, 0});
  EXPECT_TRUE(c.match());
}

TEST(ValueCompare, NanMatchesOnlyNanAndInfinityOnlyItself) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<int64_t> sizes = {4};
  std::vector<float> ref = {kNan, kInf, -kInf, 1.0f};
  std::vector<float> got = {kNan, kInf, -kInf, 1.0f};
  EXPECT_TRUE(
      compare_values(view(got, sizes), view(ref, sizes), default_tolerance("fp32")).match());
  for (int i = 0; i < 4; ++i) {
    std::vector<float> bad = got;
    bad[i] = i == 0 ? 0.0f : i == 3 ? kNan : -bad[i];
    const Comparison c =
        compare_values(view(bad, sizes), view(ref, sizes), default_tolerance("bf16"));
    EXPECT_EQ(c.mismatches, 1) << i;
    EXPECT_EQ(c.worst, i);
  }
}

// In fp16 (or bf16) a reference beyond the type's largest finite value can only be its infinity:
// torch's -FLT_MAX attention mask is -inf there. A value inside the range is not excused.
TEST(ValueCompare, BeyondTheRangeOfTheProgramsPrecision) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<int64_t> sizes = {3};
  std::vector<float> ref = {-std::numeric_limits<float>::max(), 70000.0f, 0.5f};
  std::vector<float> got = {-kInf, kInf, 0.5f};
  EXPECT_TRUE(
      compare_values(view(got, sizes), view(ref, sizes), default_tolerance("fp16")).match());
  EXPECT_EQ(
      compare_values(view(got, sizes), view(ref, sizes), default_tolerance("fp32")).mismatches, 2);
  std::vector<float> wrong_sign = {kInf, kInf, 0.5f};
  EXPECT_EQ(compare_values(view(wrong_sign, sizes), view(ref, sizes), default_tolerance("fp16"))
                .mismatches,
            1);
  std::vector<float> in_range = {-100.0f, kInf, 0.5f};
  std::vector<float> overflowed = {-kInf, kInf, 0.5f};
  EXPECT_EQ(
      compare_values(view(overflowed, sizes), view(in_range, sizes), default_tolerance("fp16"))
          .mismatches,
      1);
  // bf16's range reaches FLT_MAX's neighbourhood: 3.4e38 is beyond it, 1e38 is not.
  std::vector<float> bf_ref = {-std::numeric_limits<float>::max(), 1e38f, 0.5f};
  std::vector<float> bf_got = {-kInf, kInf, 0.5f};
  EXPECT_EQ(compare_values(view(bf_got, sizes), view(bf_ref, sizes), default_tolerance("bf16"))
                .mismatches,
            1);
}

TEST(ValueCompare, ShapesMustAgreeAndDefaultsFollowThePrecision) {
  std::vector<int64_t> a = {2, 3}, b = {3, 2};
  std::vector<float> x(6, 1.0f), y(6, 1.0f);
  const Comparison c = compare_values(view(x, a), view(y, b), default_tolerance("fp32"));
  EXPECT_FALSE(c.shapes_match);
  EXPECT_FALSE(c.match());
  EXPECT_EQ(default_tolerance("fp32").atol, 1e-5);
  EXPECT_EQ(default_tolerance("fp32").rtol, 1e-4);
  EXPECT_EQ(default_tolerance("tf32").atol, 1e-3);
  EXPECT_EQ(default_tolerance("fp16").rtol, 1e-2);
  EXPECT_EQ(default_tolerance("bf16").atol, 5e-2);
  EXPECT_EQ(looser("fp32", "fp16"), "fp16");
  EXPECT_EQ(looser("bf16", "fp16"), "bf16");
  EXPECT_EQ(looser("tf32", "fp32"), "tf32");
}

// A GPU program's host output is the copy "NAME@cpu": compare and run's file names use NAME.
TEST(ValueCompare, ModelNamesOfProgramValues) {
  EXPECT_EQ(model_name("logits@cpu"), "logits");
  EXPECT_EQ(model_name("x@cuda:1"), "x");
  EXPECT_EQ(model_name("a@b"), "a@b");  // not a device: a name of the model's own
  EXPECT_EQ(model_name("plain"), "plain");
  EXPECT_EQ(output_file_name(0, "logits@cpu"), "output_0_logits.npy");
  EXPECT_EQ(output_file_name(2, "a/b:c"), "output_2_a_b_c.npy");
  EXPECT_EQ(output_file_name(1, ""), "output_1.npy");
}

}  // namespace
}  // namespace baton::tool
