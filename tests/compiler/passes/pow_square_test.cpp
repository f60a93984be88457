// pow-square: Pow(x, 2) of a float x becomes Mul(x, x), with the same bits for every input
// (special values included); other exponents, float64 and a runtime exponent keep the Pow.
#include <cmath>
#include <limits>

#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class PowSquarePassTest : public PassTest {};

OnnxBuilder pow_of(float exponent, int dtype = onnx::TensorProto::FLOAT) {
  OnnxBuilder b(17);
  b.input("x", {4, 8}, dtype);
  b.initializer("e", {}, {exponent});
  b.node("Pow", {"x", "e"}, {"y"}, "pow");
  b.output("y", {4, 8}, dtype);
  return b;
}

TEST_F(PowSquarePassTest, SquaringBecomesAMultiplyWithTheSameBits) {
  const OnnxBuilder b = pow_of(2.0f);
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.count("Pow"), 0u);
  EXPECT_EQ(ops.at("Mul"), 1);
  std::mt19937 rng(2);
  Tensor x = random_tensor(rng, {4, 8}, -3e19f, 3e19f);  // some squares overflow to inf
  float* v = x.data_as<float>();
  const float special[] = {0.0f,
                           -0.0f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::denorm_min(),
                           1e-20f,
                           -1.5f,
                           3.0f};
  for (size_t i = 0; i < std::size(special); ++i) v[i] = special[i];
  const std::vector<Tensor> want = run(b, {x}, false);
  const std::vector<Tensor> got = run(b, {x}, true);
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    const float w = want[0].data_as<float>()[i], g = got[0].data_as<float>()[i];
    uint32_t wb, gb;
    std::memcpy(&wb, &w, 4);
    std::memcpy(&gb, &g, 4);
    EXPECT_EQ(gb, wb) << "element " << i << ": x = " << v[i];
  }
}

TEST_F(PowSquarePassTest, OtherExponentsFloat64AndARuntimeExponentKeepThePow) {
  for (float e : {3.0f, 0.5f, 2.5f}) {
    SCOPED_TRACE(e);
    EXPECT_EQ(op_counts(optimized(pow_of(e))).at("Pow"), 1);
  }
  EXPECT_EQ(op_counts(optimized(pow_of(2.0f, onnx::TensorProto::DOUBLE))).at("Pow"), 1);
  OnnxBuilder b(17);
  b.input("x", {4, 8});
  b.input("e", {});
  b.node("Pow", {"x", "e"}, {"y"}, "pow");
  b.output("y", {4, 8});
  EXPECT_EQ(op_counts(optimized(b)).at("Pow"), 1);
}

}  // namespace
}  // namespace baton::testing
