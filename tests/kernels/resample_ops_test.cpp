// Pad, Resize and Upsample: values against ONNX's reference implementation (onnx.reference, onnx
// 1.17; the expected arrays below were computed with it) or worked by hand, every dtype path,
// and every error path of the definitions.
#include <gtest/gtest.h>

#include "kernels/kernel_test_util.h"

namespace baton::testing {
namespace {

HostTensor iota(std::vector<int64_t> sizes, float first = 1.0f) {
  HostTensor t(DType::Float32, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = first + static_cast<float>(i);
  return t;
}

HostTensor floats(std::vector<float> values) {
  return make_tensor<float>({static_cast<int64_t>(values.size())}, values);
}

// ---- Pad ---------------------------------------------------------------------------------------

TEST(Pad, ModesMatchTheReferenceWithPadsLongerThanTheAxis) {
  const std::pair<const char*, std::vector<double>> modes[] = {
      {"reflect", {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2}},
      {"edge", {1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3}},
      {"wrap", {2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2}},
      {"constant", {0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0}},
  };
  for (const auto& [mode, want] : modes) {
    SCOPED_TRACE(mode);
    OpTester t("Pad");
    t.input(iota({3})).input(int64s({5, 5})).attr("mode", std::string(mode));
    BATON_ASSERT_OK(t.run());
    expect_close(t.output(), want);
  }
  OpTester reflect("Pad");
  reflect.input(iota({2, 3})).input(int64s({1, 2, 2, 1})).attr("mode", std::string("reflect"));
  BATON_ASSERT_OK(reflect.run());
  EXPECT_EQ(reflect.output().sizes, (std::vector<int64_t>{5, 6}));
  expect_close(reflect.output(), {6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4,
                                  5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5});
  OpTester wrap("Pad");
  wrap.input(iota({2, 3})).input(int64s({3, 1, 0, 4})).attr("mode", std::string("wrap"));
  BATON_ASSERT_OK(wrap.run());
  expect_close(wrap.output(), {6, 4, 5, 6, 4, 5, 6, 4, 3, 1, 2, 3, 1, 2, 3, 1, 6, 4, 5, 6,
                               4, 5, 6, 4, 3, 1, 2, 3, 1, 2, 3, 1, 6, 4, 5, 6, 4, 5, 6, 4});
}

TEST(Pad, NegativePadsCropBeforePadding) {
  // [1 2 3 4 5] cropped by 1 at the start, then 2 edge elements of what is left at the end.
  OpTester edge("Pad");
  edge.input(iota({5})).input(int64s({-1, 2})).attr("mode", std::string("edge"));
  BATON_ASSERT_OK(edge.run());
  expect_close(edge.output(), {2, 3, 4, 5, 5, 5});
  OpTester reflect("Pad");
  reflect.input(iota({5})).input(int64s({2, -2})).attr("mode", std::string("reflect"));
  BATON_ASSERT_OK(reflect.run());
  expect_close(reflect.output(), {3, 2, 1, 2, 3});
  // Cropping everything of an axis in constant mode leaves only padding.
  OpTester all("Pad");
  all.input(iota({2, 2})).input(int64s({-2, 1, 0, 0})).input(floats({9}));
  BATON_ASSERT_OK(all.run());
  EXPECT_EQ(all.output().sizes, (std::vector<int64_t>{0, 3}));
}

TEST(Pad, ConstantValueAxesAndOpset2) {
  // constant_value as a one-element tensor, read at run time.
  OpTester t("Pad");
  t.input(iota({2, 2})).input(int64s({0, 1, 1, 0})).input(floats({-1}));
  BATON_ASSERT_OK(t.run());
  expect_close(t.output(), {-1, 1, 2, -1, 3, 4, -1, -1, -1});
  BATON_ASSERT_OK(t.rerun());
  // axes (opset 18): pads name the axes in the order given.
  OpTester axes("Pad");
  axes.input(iota({2, 2})).input(int64s({1, 0, 0, 2})).absent_input().input(int64s({-1, 0}));
  BATON_ASSERT_OK(axes.run());
  EXPECT_EQ(axes.output().sizes, (std::vector<int64_t>{4, 3}));
  expect_close(axes.output(), {0, 1, 2, 0, 3, 4, 0, 0, 0, 0, 0, 0});
  // Pad-2: pads and value as attributes.
  OpTester v2("Pad", "node_1", 10);
  v2.input(iota({2})).attr("pads", std::vector<int64_t>{1, 2}).attr("value", 0.5);
  BATON_ASSERT_OK(v2.run());
  expect_close(v2.output(), {0.5, 1, 2, 0.5, 0.5});
}

TEST(Pad, AnyDtypeIncludingBoolAndScalars) {
  OpTester b("Pad");
  HostTensor bools(DType::Bool, {2});
  bools.data<uint8_t>()[0] = 1;
  HostTensor one(DType::Bool, {});
  one.data<uint8_t>()[0] = 1;
  b.input(bools).input(int64s({1, 1})).input(one);
  BATON_ASSERT_OK(b.run());
  expect_equal_values<uint8_t>(b.output(), {1, 1, 0, 1});
  OpTester i64("Pad");
  i64.input(make_tensor<int64_t>({3}, {-5, 6, 7}))
      .input(int64s({0, 2}))
      .attr("mode", std::string("wrap"));
  BATON_ASSERT_OK(i64.run());
  expect_equal_values<int64_t>(i64.output(), {-5, 6, 7, -5, 6});
  OpTester half("Pad");
  half.input(cast_floats(iota({2}), DType::Float16)).input(int64s({1, 0}));
  half.attr("mode", std::string("edge"));
  BATON_ASSERT_OK(half.run());
  EXPECT_EQ(to_double(half.output()), (std::vector<double>{1, 1, 2}));
  OpTester scalar("Pad");
  scalar.input(make_tensor<float>({}, {4.5f})).input(int64s({}));
  BATON_ASSERT_OK(scalar.run());
  expect_close(scalar.output(), {4.5});
  // An empty input padded with the constant.
  OpTester empty("Pad");
  empty.input(HostTensor(DType::Float32, {0, 2})).input(int64s({1, 0, 1, 1})).input(floats({3}));
  BATON_ASSERT_OK(empty.run());
  EXPECT_EQ(empty.output().sizes, (std::vector<int64_t>{2, 3}));
  expect_close(empty.output(), std::vector<double>(6, 3));
}

TEST(Pad, Errors) {
  const HostTensor x(DType::Float32, {2, 3});
  expect_error(OpTester("Pad").input(x).input(int64s({1, 1})).infer(), Error::InvalidArgument,
               "Pad", "'pads' has 2 values; it needs 4");
  expect_error(OpTester("Pad")
                   .input(x)
                   .input(int64s({0, 0, 0, 0}))
                   .attr("mode", std::string("mirror"))
                   .infer(),
               Error::InvalidArgument, "Pad", "attribute 'mode' is 'mirror'");
  expect_error(OpTester("Pad", "node_1", 18)
                   .input(x)
                   .input(int64s({0, 0, 0, 0}))
                   .attr("mode", std::string("wrap"))
                   .infer(),
               Error::InvalidArgument, "Pad", "Pad-18 takes 'constant', 'reflect', 'edge'");
  expect_error(OpTester("Pad").input(x).input(int64s({-2, 0, -1, 0})).infer(),
               Error::InvalidArgument, "Pad", "crop more than its 2 elements");
  expect_error(OpTester("Pad").input(x).input(int64s({-3, 0, 0, 0})).infer(),
               Error::InvalidArgument, "Pad", "crop more");
  expect_error(OpTester("Pad")
                   .input(x)
                   .input(int64s({0, std::numeric_limits<int64_t>::max(), 0, 1}))
                   .infer(),
               Error::InvalidArgument, "Pad", "overflow");
  expect_error(OpTester("Pad")
                   .input(HostTensor(DType::Float32, {0, 3}))
                   .input(int64s({1, 0, 0, 0}))
                   .attr("mode", std::string("reflect"))
                   .infer(),
               Error::InvalidArgument, "Pad", "mode 'reflect' pads axis 0 from its elements");
  expect_error(OpTester("Pad").input(x).input(shape_only(DType::Int64, {4})).infer(),
               Error::NotSupported, "Pad", "input 'pads' must be a constant");
  expect_error(OpTester("Pad").input(x).input(int64s({0, 0, 0, 0})).input(floats({1, 2})).infer(),
               Error::InvalidArgument, "Pad", "'constant_value' has shape [2]");
  expect_error(OpTester("Pad")
                   .input(x)
                   .input(int64s({0, 0, 0, 0}))
                   .absent_input()
                   .input(int64s({1, -1}))
                   .infer(),
               Error::InvalidArgument, "Pad", "names dimension 1 twice");
  expect_error(OpTester("Pad")
                   .input(x)
                   .input(int64s({0, 0}))
                   .absent_input()
                   .input(shape_only(DType::Int64, {1}))
                   .infer(),
               Error::NotSupported, "Pad", "input 'axes' must be a constant");
  expect_error(OpTester("Pad", "node_1", 10).input(x).attr("pads", std::vector<int64_t>{1}).infer(),
               Error::InvalidArgument, "Pad", "'pads' has 1 values");
}

// ---- Resize and Upsample -----------------------------------------------------------------------

// Resize at opset 21 of `x` with scales or sizes (the other absent) and string attributes.
OpTester& resize(OpTester& t, HostTensor x, std::vector<float> scales, std::vector<int64_t> sizes,
                 std::vector<std::pair<std::string, std::string>> attrs) {
  t.input(std::move(x)).absent_input();
  if (!scales.empty()) t.input(floats(scales));
  if (!sizes.empty()) t.absent_input().input(int64s(sizes));
  for (auto& [name, value] : attrs) t.attr(name, value);
  return t;
}

TEST(Resize, MatchesTheReference) {
  struct R {
    const char* label;
    HostTensor x;
    std::vector<float> scales;
    std::vector<int64_t> sizes;
    std::vector<std::pair<std::string, std::string>> attrs;
    std::vector<int64_t> axes;
    std::vector<int64_t> out;
    std::vector<double> want;
  };
  const R cases[] = {
      {"half_pixel_symmetric linear",
       iota({1, 1, 3, 4}),
       {},
       {5, 3},
       {{"mode", "linear"}, {"coordinate_transformation_mode", "half_pixel_symmetric"}},
       {2, 3},
       {1, 1, 5, 3},
       {1.1666666, 2.5, 3.8333333, 2.7666667, 4.1, 5.4333334, 5.1666665, 6.5, 7.8333335, 7.5666666,
        8.9, 10.233334, 9.166667, 10.5, 11.833333}},
      {"not_larger linear",
       iota({1, 1, 3, 4}),
       {},
       {6, 6},
       {{"mode", "linear"}, {"keep_aspect_ratio_policy", "not_larger"}},
       {2, 3},
       {1, 1, 5, 6},
       {1.0,       1.5,       2.1666667, 2.8333333, 3.5,       4.0,       3.0,       3.5,
        4.1666665, 4.8333335, 5.5,       6.0,       5.6666665, 6.1666665, 6.8333335, 7.5,
        8.166667,  8.666667,  8.333333,  8.833333,  9.5,       10.166667, 10.833333, 11.333333,
        9.0,       9.5,       10.166667, 10.833333, 11.5,      12.0}},
      {"not_smaller nearest",
       iota({1, 1, 3, 4}),
       {},
       {6, 6},
       {{"keep_aspect_ratio_policy", "not_smaller"}},
       {2, 3},
       {1, 1, 6, 8},
       {1, 1, 2, 2, 3, 3, 4, 4, 1, 1, 2,  2,  3,  3,  4,  4,  5, 5, 6,  6,  7,  7,  8,  8,
        5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 9, 9, 10, 10, 11, 11, 12, 12}},
      {"cubic downsampling one axis",
       iota({1, 1, 3, 4}),
       {1, 1, 1.5, 0.75},
       {},
       {{"mode", "cubic"}},
       {},
       {1, 1, 4, 3},
       {0.7789352, 2.1527777, 3.5266204, 2.7511575, 4.125, 5.4988427, 6.047454, 7.421296, 8.795139,
        8.621528, 9.99537, 11.369213}},
      {"align_corners linear along the last axis",
       iota({1, 1, 3, 4}),
       {2},
       {},
       {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}},
       {3},
       {1, 1, 3, 8},
       {1.0, 1.428572,  1.857143, 2.285714,  2.714286,  3.142857,  3.571428,  4.0,
        5.0, 5.4285712, 5.857143, 6.285714,  6.714286,  7.142857,  7.571429,  8.0,
        9.0, 9.428572,  9.857142, 10.285714, 10.714286, 11.142858, 11.571428, 12.0}},
      {"pytorch_half_pixel linear 1-D",
       iota({5}),
       {0.5},
       {},
       {{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}},
       {},
       {2},
       {1.5, 3.5}},
      {"trilinear 3-D",
       iota({2, 2, 2}),
       {1.5, 2, 1},
       {},
       {{"mode", "linear"}},
       {},
       {3, 4, 2},
       {1,   2,   1.5, 2.5, 2.5, 3.5, 3,   4,   3,   4,   3.5, 4.5,
        4.5, 5.5, 5,   6,   5,   6,   5.5, 6.5, 6.5, 7.5, 7,   8}},
  };
  for (const R& c : cases) {
    SCOPED_TRACE(c.label);
    OpTester t("Resize");
    resize(t, c.x, c.scales, c.sizes, c.attrs);
    if (!c.axes.empty()) t.attr("axes", c.axes);
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().sizes, c.out);
    expect_close(t.output(), c.want, 1e-5, 1e-5);
  }
}

// An image's height and width interpolated (the outer dimensions not) are walked plane by plane
// (op_resize.cpp's run_planes); any other case by the per-element walk over every dimension. Both
// do the same arithmetic in the same order: x as [H, W, 1] (the height an outer dimension, so the
// generic walk) and as [1, H, W] (the plane walk) give the same bits, in every interpolation.
TEST(Resize, PlanesGiveTheBitsOfThePerElementWalk) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> modes = {
      {{"mode", "linear"}},
      {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}},
      {{"mode", "cubic"}},
      {{"mode", "cubic"}, {"exclude_outside", "1"}},
      {{"mode", "nearest"}, {"nearest_mode", "floor"}}};
  HostTensor tall(DType::Float32, {7, 9, 1}), flat(DType::Float32, {1, 7, 9});
  for (int64_t i = 0; i < tall.numel(); ++i) {
    const float v = static_cast<float>((i * 37) % 23) * 0.37f - 4.1f;
    tall.data<float>()[i] = v;
    flat.data<float>()[i] = v;
  }
  for (const auto& attrs : modes) {
    SCOPED_TRACE(attrs.back().second);
    for (const std::vector<float>& hw :
         {std::vector<float>{2.0f, 2.0f}, std::vector<float>{1.7f, 0.6f},
          std::vector<float>{1.0f, 2.5f}}) {
      auto run = [&](const HostTensor& x, std::vector<float> scales) {
        OpTester t("Resize");
        std::vector<std::pair<std::string, std::string>> strings;
        for (const auto& a : attrs) {
          if (a.first != "exclude_outside") strings.push_back(a);
        }
        resize(t, x, std::move(scales), {}, strings);
        if (strings.size() < attrs.size()) t.attr("exclude_outside", int64_t{1});
        EXPECT_TRUE(t.run().ok());
        return t.output();
      };
      const HostTensor a = run(tall, {hw[0], hw[1], 1.0f});
      const HostTensor b = run(flat, {1.0f, hw[0], hw[1]});
      ASSERT_EQ(a.numel(), b.numel());
      EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(),
                            static_cast<size_t>(a.numel()) * sizeof(float)),
                0)
          << hw[0] << " x " << hw[1];
    }
  }
}

TEST(Resize, CubicExcludeOutsideMatchesTheReference) {
  OpTester t("Resize");
  resize(t, iota({1, 1, 3, 4}), {1, 1, 2, 2}, {}, {{"mode", "cubic"}});
  t.attr("exclude_outside", 1);
  BATON_ASSERT_OK(t.run());
  const std::vector<double> first_row = {0.318182, 0.62769,  1.099828, 1.75142,
                                         2.15767,  2.809262, 3.281401, 3.590909};
  std::vector<double> got = to_double(t.output());
  got.resize(8);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(got[i], first_row[i], 1e-5) << i;
}

TEST(Resize, TfCropAndResizeExtrapolates) {
  OpTester t("Resize");
  t.input(iota({1, 1, 3, 4})).input(floats({0.2f, -0.5f, 0.9f, 1.2f})).absent_input();
  t.input(int64s({4, 5})).attr("axes", std::vector<int64_t>{2, 3});
  t.attr("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  t.attr("extrapolation_value", -1.0);
  BATON_ASSERT_OK(t.run());
  expect_close(t.output(),
               {-1, -1, 2, 3, -1, -1, -1, 6, 7, -1, -1, -1, 6, 7, -1, -1, -1, 10, 11, -1});
}

TEST(Resize, LegacyVersionsRoundNearestLikeOnnxRuntime) {
  // Resize-10 and Upsample: asymmetric coordinates, down when upsampling, up when downsampling.
  OpTester down("Resize", "node_1", 10);
  down.input(iota({1, 6})).input(floats({1, 0.4f}));
  BATON_ASSERT_OK(down.run());
  expect_close(down.output(), {1, 4});  // x = 0, 2.5 -> 0, 3
  OpTester up7("Upsample", "node_1", 7);
  up7.input(iota({2, 2}));
  up7.set_attr_value("scales", ops::AttrValue::of_floats({1, 2.5}));
  BATON_ASSERT_OK(up7.run());
  expect_close(up7.output(), {1, 1, 1, 2, 2, 3, 3, 3, 4, 4});
  OpTester up9("Upsample", "node_1", 9);
  up9.input(iota({2})).input(floats({2})).attr("mode", std::string("linear"));
  BATON_ASSERT_OK(up9.run());
  expect_close(up9.output(), {1, 1.5, 2, 2});
}

TEST(Resize, NearestTakesEveryDtype) {
  std::mt19937 rng(31);
  const HostTensor f = random_floats(rng, {2, 3, 5}, -50, 50);
  OpTester ref("Resize");
  resize(ref, f, {}, {3, 4, 7}, {{"nearest_mode", "ceil"}});
  BATON_ASSERT_OK(ref.run());
  const std::vector<float> want = ref.output().values<float>();
  HostTensor i32(DType::Int32, f.sizes);
  for (int64_t i = 0; i < f.numel(); ++i)
    i32.data<int32_t>()[i] = static_cast<int32_t>(f.data<float>()[i]);
  OpTester t("Resize");
  resize(t, i32, {}, {3, 4, 7}, {{"nearest_mode", "ceil"}});
  BATON_ASSERT_OK(t.run());
  // The same positions are picked: compare through the float run's (truncated) values.
  for (int64_t i = 0; i < t.output().numel(); ++i) {
    EXPECT_EQ(t.output().data<int32_t>()[i], static_cast<int32_t>(want[static_cast<size_t>(i)]));
  }
  HostTensor b(DType::Bool, {2});
  b.data<uint8_t>()[1] = 1;
  OpTester bools("Resize");
  resize(bools, b, {2}, {}, {});
  BATON_ASSERT_OK(bools.run());
  expect_equal_values<uint8_t>(bools.output(), {0, 0, 1, 1});
}

TEST(Resize, Errors) {
  const HostTensor x = iota({1, 1, 2, 3});
  auto run = [&](std::vector<float> scales, std::vector<int64_t> sizes,
                 std::vector<std::pair<std::string, std::string>> attrs, int opset = kTestOpset) {
    OpTester t("Resize", "node_1", opset);
    resize(t, x, std::move(scales), std::move(sizes), std::move(attrs));
    return t.infer();
  };
  expect_error(run({}, {}, {}), Error::InvalidArgument, "Resize",
               "exactly one of 'scales' and 'sizes' must be given (non-empty); neither is");
  {
    OpTester both("Resize");
    both.input(x).absent_input().input(floats({1, 1, 2, 2})).input(int64s({1, 1, 4, 6}));
    expect_error(both.infer(), Error::InvalidArgument, "Resize", "both are");
  }
  expect_error(run({1, 2}, {}, {}), Error::InvalidArgument, "Resize",
               "'scales' has 2 values for 4");
  expect_error(run({1, 1, -2, 1}, {}, {}), Error::InvalidArgument, "Resize",
               "scale -2 (axis 2) must be positive");
  expect_error(run({}, {1, 1, -1, 3}, {}), Error::InvalidArgument, "Resize", "sizes must be >= 0");
  expect_error(run({}, {1, 1, 4}, {}), Error::InvalidArgument, "Resize", "'sizes' has 3 values");
  expect_error(run({1, 1, 2, 2}, {}, {{"mode", "bilinear"}}), Error::InvalidArgument, "Resize",
               "attribute 'mode' is 'bilinear'");
  expect_error(run({1, 1, 2, 2}, {}, {{"nearest_mode", "up"}}), Error::InvalidArgument, "Resize",
               "attribute 'nearest_mode' is 'up'");
  expect_error(run({1, 1, 2, 2}, {}, {{"coordinate_transformation_mode", "tf_half_pixel_for_nn"}}),
               Error::InvalidArgument, "Resize", "'tf_half_pixel_for_nn'");
  expect_error(
      run({1, 1, 2, 2}, {}, {{"coordinate_transformation_mode", "half_pixel_symmetric"}}, 18),
      Error::InvalidArgument, "Resize", "Resize-18 takes");
  expect_error(run({}, {1, 1, 4, 6}, {{"keep_aspect_ratio_policy", "fit"}}), Error::InvalidArgument,
               "Resize", "'keep_aspect_ratio_policy' is 'fit'");
  expect_error(run({1, 1, 2, 2}, {}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}}),
               Error::InvalidArgument, "Resize", "needs 'roi' with 8 values");
  {
    OpTester anti("Resize");
    resize(anti, x, {1, 1, 0.5, 0.5}, {}, {{"mode", "linear"}});
    expect_error(anti.attr("antialias", 1).infer(), Error::NotSupported, "Resize",
                 "antialias = 1 (linear mode) is not supported");
    OpTester excl("Resize");
    resize(excl, x, {1, 1, 2, 2}, {}, {{"mode", "cubic"}});
    expect_error(excl.attr("exclude_outside", 2).infer(), Error::InvalidArgument, "Resize",
                 "'exclude_outside' is 2");
    OpTester dup("Resize");
    resize(dup, x, {2, 2}, {}, {});
    expect_error(dup.attr("axes", std::vector<int64_t>{3, -1}).infer(), Error::InvalidArgument,
                 "Resize", "names dimension 3 twice");
  }
  {
    OpTester ints("Resize");
    resize(ints, make_tensor<int32_t>({2}, {1, 2}), {2}, {}, {{"mode", "linear"}});
    expect_error(ints.infer(), Error::NotSupported, "Resize",
                 "Baton interpolates (linear mode) float types only, the input is int32");
  }
  {
    OpTester runtime("Resize");
    runtime.input(x).absent_input().input(shape_only(DType::Float32, {4}));
    expect_error(runtime.infer(), Error::NotSupported, "Resize",
                 "input 'scales' must be a constant");
    OpTester sizes("Resize");
    sizes.input(x).absent_input().absent_input().input(shape_only(DType::Int64, {4}));
    expect_error(sizes.infer(), Error::NotSupported, "Resize", "input 'sizes' must be a constant");
    OpTester roi("Resize");
    roi.input(x).input(shape_only(DType::Float32, {8})).absent_input().input(int64s({1, 1, 2, 2}));
    roi.attr("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    expect_error(roi.infer(), Error::NotSupported, "Resize", "input 'roi' must be a constant");
    // roi is not read by the other modes: a run-time one is fine.
    OpTester ignored("Resize");
    ignored.input(x)
        .input(shape_only(DType::Float32, {8}))
        .absent_input()
        .input(int64s({1, 1, 2, 2}));
    BATON_ASSERT_OK(ignored.infer());
  }
  {
    OpTester empty("Resize");
    resize(empty, HostTensor(DType::Float32, {0, 3}), {}, {2, 3}, {});
    expect_error(empty.infer(), Error::InvalidArgument, "Resize",
                 "axis 0 of the input has size 0 but the output's would be 2");
    OpTester scalar("Resize");
    resize(scalar, make_tensor<float>({}, {1}), {2}, {}, {});
    expect_error(scalar.infer(), Error::InvalidArgument, "Resize", "the input is a scalar");
    OpTester up("Upsample", "node_1", 9);
    up.input(x).input(floats({1, 1, 0.5, 2}));
    expect_error(up.infer(), Error::InvalidArgument, "Upsample", "scale 0.5 (axis 2) must be >= 1");
    OpTester cubic10("Resize", "node_1", 10);
    cubic10.input(x).input(floats({1, 1, 2, 2})).attr("mode", std::string("cubic"));
    expect_error(cubic10.infer(), Error::InvalidArgument, "Resize",
                 "Resize-10 takes 'nearest', 'linear'");
  }
}

}  // namespace
}  // namespace baton::testing
