// The ten reductions, ArgMax and ArgMin: values against element-by-element references (independent
// of the kernel's walk), both definitions (axes attribute at opset 13, axes input at 18), empty
// groups, NaN, integer wrap-around, and every error path of the definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/kernel_test_util.h"
#include "ops/reduce.h"

namespace baton::testing {
namespace {

using ops::Reduction;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The reduction of `values` as ONNX defines it, in double (its empty-set identities included).
double reduce_values(Reduction r, const std::vector<double>& v) {
  double acc = 0;
  switch (r) {
    case Reduction::Prod:
      acc = 1;
      for (double x : v) acc *= x;
      return acc;
    case Reduction::Max:
      acc = -kInf;
      for (double x : v) acc = std::max(acc, x);
      return acc;
    case Reduction::Min:
      acc = kInf;
      for (double x : v) acc = std::min(acc, x);
      return acc;
    case Reduction::LogSumExp:
      for (double x : v) acc += std::exp(x);
      return std::log(acc);
    default:
      break;
  }
  for (double x : v) {
    acc += r == Reduction::L1                                ? std::fabs(x)
           : r == Reduction::SumSquare || r == Reduction::L2 ? x * x
                                                             : x;
  }
  if (r == Reduction::Mean) return acc / static_cast<double>(v.size());
  if (r == Reduction::L2) return std::sqrt(acc);
  if (r == Reduction::LogSum) return std::log(acc);
  return acc;
}

// For each output element (keepdims shape), the input elements it reduces.
std::vector<double> reference(Reduction r, const HostTensor& x, const std::vector<bool>& reduced) {
  std::vector<int64_t> kept(x.sizes);
  for (size_t d = 0; d < kept.size(); ++d) {
    if (reduced[d]) kept[d] = 1;
  }
  const std::vector<double> in = to_double(x);
  std::vector<std::vector<double>> groups(static_cast<size_t>(numel_of(kept)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> index = unravel(i, x.sizes);
    for (size_t d = 0; d < index.size(); ++d) {
      if (reduced[d]) index[d] = 0;
    }
    int64_t o = 0;
    for (size_t d = 0; d < kept.size(); ++d) o = o * kept[d] + index[d];
    groups[static_cast<size_t>(o)].push_back(in[static_cast<size_t>(i)]);
  }
  std::vector<double> out;
  for (const auto& g : groups) out.push_back(reduce_values(r, g));
  return out;
}

// Exactly `want` (infinities and NaN included).
void expect_identity(const HostTensor& out, double want) {
  for (double got : to_double(out)) {
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(got, want);
    }
  }
}

std::vector<bool> mask(size_t rank, std::initializer_list<int> dims) {
  std::vector<bool> m(rank, false);
  for (int d : dims) m[static_cast<size_t>(d < 0 ? d + static_cast<int>(rank) : d)] = true;
  return m;
}

TEST(Reduce, EveryReductionMatchesTheReferenceInBothForms) {
  std::mt19937 rng(21);
  struct Axes {
    std::vector<int64_t> axes;  // empty: absent (reduce all)
    std::initializer_list<int> dims;
  };
  const std::vector<int64_t> shape = {3, 4, 5};
  const Axes cases[] = {
      {{1}, {1}}, {{0, 2}, {0, 2}}, {{-1}, {-1}}, {{2, -3, 1}, {0, 1, 2}}, {{}, {0, 1, 2}}};
  for (const ops::ReduceRow& row : ops::reduce_rows()) {
    for (const Axes& a : cases) {
      for (int keepdims : {0, 1}) {
        for (bool input_form : {false, true}) {
          SCOPED_TRACE(fmt::format("{} axes {} keepdims {} {}", row.name, shape_str(a.axes),
                                   keepdims, input_form ? "input" : "attribute"));
          // Positive values for ReduceLogSum; factors near 1 keep ReduceProd's 60 in range.
          const float lo = row.reduction == Reduction::LogSum ? 0.25f : -1.5f;
          const HostTensor x = random_floats(rng, shape, lo, 1.5f);
          // The attribute form: two opsets before the input form (ReduceSum 11, the others 16).
          OpTester t(row.name, "node_1", input_form ? kTestOpset : row.input_axes_since - 2);
          t.input(x).attr("keepdims", keepdims);
          if (input_form && !a.axes.empty()) t.input(int64s(a.axes));
          if (!input_form && !a.axes.empty()) t.attr("axes", a.axes);
          BATON_ASSERT_OK(t.run());
          const std::vector<bool> reduced = mask(3, a.dims);
          EXPECT_EQ(t.output().sizes, ops::reduced_shape(shape, reduced, keepdims != 0));
          expect_close(t.output(), reference(row.reduction, x, reduced), 1e-5, 1e-5);
        }
      }
    }
  }
}

// float32 ReduceSum and ReduceMean sum each reduced row in 32 interleaved partial sums
// (vmath::sum_f32): rows of every length from 1 to 70 (no whole block, one, two and a remainder)
// and of an image's 111 x 113 positions, inner axes reduced (one row a group) and outer ones
// (rows kept, an accumulator per element), against the double reference.
TEST(Reduce, FloatSumsOfLongRowsMatchTheReference) {
  std::mt19937 rng(22);
  struct Case {
    std::vector<int64_t> shape, axes;  // axes non-negative
  };
  std::vector<Case> cases = {{{2, 3, 111, 113}, {2, 3}}, {{5, 40, 33}, {0, 1}}};
  for (int64_t n = 1; n <= 70; ++n) cases.push_back({{3, n}, {1}});
  for (const Case& c : cases) {
    for (const char* op : {"ReduceSum", "ReduceMean"}) {
      SCOPED_TRACE(fmt::format("{} of {} over {}", op, shape_str(c.shape), shape_str(c.axes)));
      const HostTensor x = random_floats(rng, c.shape, -1.0f, 1.5f);
      OpTester t(op);
      t.input(x).input(int64s(c.axes)).attr("keepdims", 0);
      BATON_ASSERT_OK(t.run());
      const Reduction r = std::string_view(op) == "ReduceSum" ? Reduction::Sum : Reduction::Mean;
      std::vector<bool> reduced(c.shape.size(), false);
      for (int64_t a : c.axes) reduced[static_cast<size_t>(a)] = true;
      expect_close(t.output(), reference(r, x, reduced), 1e-5, 1e-5);
    }
  }
}

TEST(Reduce, AttributeAxesAreCanonicalSortedAndNonNegative) {
  OpTester t("ReduceMean", "node_1", 13);
  t.input(HostTensor(DType::Float32, {2, 3, 4})).attr("axes", std::vector<int64_t>{-1, 0});
  BATON_ASSERT_OK(t.infer());
  EXPECT_EQ(t.canonical_attrs()[0].ints, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(t.metas()[0].sizes, (std::vector<int64_t>{1, 3, 1}));
}

TEST(Reduce, LowPrecisionAccumulatesInFloat) {
  // 4096 values of 1 + 2^-9: a float16 running sum would stop growing at 2048 + ...; the float
  // accumulator gets 4104 (4096 * (1 + 2^-9) = 4104 is exact in float16 too).
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    HostTensor x(DType::Float32, {4096});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 1.0f + 1.0f / 512;
    OpTester t("ReduceSum");
    t.input(cast_floats(x, dt));
    BATON_ASSERT_OK(t.run());
    const double got = to_double(t.output())[0];
    EXPECT_NEAR(got, 4104.0, dt == DType::Float16 ? 4.0 : 32.0);
  }
}

TEST(Reduce, NoopWithEmptyAxesReducesEachElementAlone) {
  const HostTensor x = make_tensor<float>({2, 2}, {-1.0f, 2.0f, -3.0f, 0.5f});
  const std::pair<const char*, std::vector<double>> cases[] = {
      {"ReduceSum", {-1, 2, -3, 0.5}},  {"ReduceSumSquare", {1, 4, 9, 0.25}},
      {"ReduceL1", {1, 2, 3, 0.5}},     {"ReduceL2", {1, 2, 3, 0.5}},
      {"ReduceMean", {-1, 2, -3, 0.5}}, {"ReduceLogSumExp", {-1, 2, -3, 0.5}},
  };
  for (const auto& [op, want] : cases) {
    SCOPED_TRACE(op);
    for (bool absent : {true, false}) {
      OpTester t(op);
      t.input(x).attr("noop_with_empty_axes", 1);
      if (!absent) t.input(int64s({}));
      BATON_ASSERT_OK(t.run());
      EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{2, 2}));
      expect_close(t.output(), want);
    }
  }
  // Without noop, empty axes reduce everything.
  OpTester all("ReduceSum");
  all.input(x).input(int64s({})).attr("keepdims", 0);
  BATON_ASSERT_OK(all.run());
  EXPECT_TRUE(all.output().sizes.empty());
  expect_close(all.output(), {-1.5});
}

TEST(Reduce, EmptyGroupsGiveTheIdentity) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::pair<const char*, double> floats[] = {
      {"ReduceSum", 0},        {"ReduceMean", nan},
      {"ReduceProd", 1},       {"ReduceSumSquare", 0},
      {"ReduceL1", 0},         {"ReduceL2", 0},
      {"ReduceLogSum", -kInf}, {"ReduceLogSumExp", -kInf},
      {"ReduceMax", -kInf},    {"ReduceMin", kInf},
  };
  for (const auto& [op, want] : floats) {
    SCOPED_TRACE(op);
    OpTester t(op);
    t.input(HostTensor(DType::Float32, {2, 0, 3})).input(int64s({1}));
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{2, 1, 3}));
    expect_identity(t.output(), want);
  }
  // Integers: the type's lowest and highest values for ReduceMax and ReduceMin (and -inf
  // saturated for ReduceLogSum), 0 for ReduceMean.
  const std::pair<const char*, int32_t> ints[] = {
      {"ReduceMax", std::numeric_limits<int32_t>::lowest()},
      {"ReduceMin", std::numeric_limits<int32_t>::max()},
      {"ReduceLogSum", std::numeric_limits<int32_t>::lowest()},
      {"ReduceMean", 0},
      {"ReduceProd", 1},
  };
  for (const auto& [op, want] : ints) {
    SCOPED_TRACE(std::string(op) + " int32");
    OpTester t(op);
    t.input(HostTensor(DType::Int32, {0, 4})).input(int64s({0})).attr("keepdims", 0);
    BATON_ASSERT_OK(t.run());
    expect_equal_values<int32_t>(t.output(), std::vector<int32_t>(4, want));
  }
  // Nothing to write: the empty output of [0, 3] reduced along axis 1.
  OpTester none("ReduceSum");
  none.input(HostTensor(DType::Float32, {0, 3})).input(int64s({1}));
  BATON_ASSERT_OK(none.run());
  EXPECT_EQ(none.output().sizes, (std::vector<int64_t>{0, 1}));
}

TEST(Reduce, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    OpTester t(op);
    t.input(make_tensor<float>({2, 3}, {1, nan, 3, 4, 5, 6})).input(int64s({1}));
    BATON_ASSERT_OK(t.run());
    const std::vector<double> got = to_double(t.output());
    EXPECT_TRUE(std::isnan(got[0])) << op;
    EXPECT_EQ(got[1], std::string(op) == "ReduceMax" ? 6 : 4);
  }
}

TEST(Reduce, LogSumExpDoesNotOverflow) {
  OpTester t("ReduceLogSumExp");
  t.input(make_tensor<float>({2, 2}, {1000, 1000, -1000, -std::numeric_limits<float>::infinity()}))
      .input(int64s({1}));
  BATON_ASSERT_OK(t.run());
  expect_close(t.output(), {1000 + std::log(2.0), -1000});
}

TEST(Reduce, IntegersAreExactAndWrapAround) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  OpTester sum("ReduceSum");
  sum.input(make_tensor<int32_t>({2, 2}, {big, 1, -7, 3})).input(int64s({1}));
  BATON_ASSERT_OK(sum.run());
  expect_equal_values<int32_t>(sum.output(), {std::numeric_limits<int32_t>::lowest(), -4});
  OpTester prod("ReduceProd");
  const int64_t big64 = std::numeric_limits<int64_t>::max();
  prod.input(make_tensor<int64_t>({3}, {big64, 2, -1}));
  BATON_ASSERT_OK(prod.run());
  expect_equal_values<int64_t>(prod.output(), {2});  // (2^63 - 1) * 2 wraps to -2, times -1
  OpTester l1("ReduceL1");
  l1.input(make_tensor<int64_t>({2}, {std::numeric_limits<int64_t>::lowest(), 1}));
  BATON_ASSERT_OK(l1.run());
  expect_equal_values<int64_t>(l1.output(), {std::numeric_limits<int64_t>::lowest() + 1});
  OpTester mean("ReduceMean");
  mean.input(make_tensor<int32_t>({4}, {7, -2, 0, 2}));
  BATON_ASSERT_OK(mean.run());
  expect_equal_values<int32_t>(mean.output(), {1});  // 7 / 4, truncated
  OpTester max8("ReduceMax");
  max8.input(make_tensor<int8_t>({3}, {-5, 100, -128}));
  BATON_ASSERT_OK(max8.run());
  expect_equal_values<int8_t>(max8.output(), {100});
  OpTester l2("ReduceL2");
  l2.input(make_tensor<int32_t>({2}, {3, 4}));
  BATON_ASSERT_OK(l2.run());
  expect_equal_values<int32_t>(l2.output(), {5});
}

TEST(Reduce, BoolMaxAndMinFromOpset20) {
  const HostTensor x = make_tensor<uint8_t>({2, 2}, {0, 1, 0, 0});
  HostTensor b(DType::Bool, {2, 2});
  std::memcpy(b.storage.data(), x.storage.data(), 4);
  b.data<uint8_t>()[1] = 7;  // any nonzero byte is true
  OpTester max("ReduceMax");
  max.input(b).input(int64s({1}));
  BATON_ASSERT_OK(max.run());
  expect_equal_values<uint8_t>(max.output(), {1, 0});
  OpTester min("ReduceMin");
  min.input(b).input(int64s({0}));
  BATON_ASSERT_OK(min.run());
  expect_equal_values<uint8_t>(min.output(), {0, 0});
  expect_error(OpTester("ReduceMax", "node_1", 18).input(b).infer(), Error::InvalidArgument,
               "ReduceMax", "bool");
  expect_error(OpTester("ReduceSum").input(b).infer(), Error::InvalidArgument, "ReduceSum", "bool");
}

TEST(Reduce, Errors) {
  const HostTensor x(DType::Float32, {2, 3, 4});
  expect_error(OpTester("ReduceSum").input(x).input(int64s({1, -2})).infer(),
               Error::InvalidArgument, "ReduceSum", "names dimension 1 twice");
  expect_error(OpTester("ReduceMean").input(x).input(int64s({3})).infer(), Error::InvalidArgument,
               "ReduceMean", "'axes' holds 3, out of range [-3, 2]");
  expect_error(OpTester("ReduceMean", "node_1", 13)
                   .input(x)
                   .attr("axes", std::vector<int64_t>{0, -3})
                   .infer(),
               Error::InvalidArgument, "ReduceMean", "twice");
  expect_error(
      OpTester("ReduceMax", "node_1", 13).input(x).attr("axes", std::vector<int64_t>{-4}).infer(),
      Error::InvalidArgument, "ReduceMax", "out of range");
  expect_error(OpTester("ReduceProd").input(x).attr("keepdims", 2).infer(), Error::InvalidArgument,
               "ReduceProd", "attribute 'keepdims' is 2");
  expect_error(OpTester("ReduceL1").input(x).attr("noop_with_empty_axes", -1).infer(),
               Error::InvalidArgument, "ReduceL1", "'noop_with_empty_axes' is -1");
  // Axes known only at run time: the output's shape would depend on them.
  expect_error(OpTester("ReduceL2").input(x).input(shape_only(DType::Int64, {1})).infer(),
               Error::NotSupported, "ReduceL2", "input 'axes' must be a constant");
  expect_error(OpTester("ReduceSum").input(x).input(make_tensor<int32_t>({1}, {0})).infer(),
               Error::InvalidArgument, "ReduceSum", "int32");
  expect_error(OpTester("ReduceLogSum").input(HostTensor(DType::Int8, {2})).infer(),
               Error::InvalidArgument, "ReduceLogSum", "int8");
}

TEST(ArgMax, MatchesTheReferenceWithTiesAndNaN) {
  std::mt19937 rng(22);
  const std::vector<int64_t> shape = {3, 4, 5};
  for (const char* op : {"ArgMax", "ArgMin"}) {
    const bool is_max = std::string(op) == "ArgMax";
    for (int axis : {0, 1, 2, -1}) {
      for (int keepdims : {0, 1}) {
        for (int last : {0, 1}) {
          SCOPED_TRACE(fmt::format("{} axis {} keepdims {} last {}", op, axis, keepdims, last));
          // Few distinct values: ties everywhere.
          const HostTensor x = random_ints<int32_t>(rng, shape, -2, 2);
          OpTester t(op);
          t.input(x).attr("axis", axis).attr("keepdims", keepdims).attr("select_last_index", last);
          BATON_ASSERT_OK(t.run());
          const int a = axis < 0 ? axis + 3 : axis;
          EXPECT_EQ(t.output().sizes, ops::reduced_shape(shape, mask(3, {a}), keepdims != 0));
          EXPECT_EQ(t.output().dtype, DType::Int64);
          std::vector<int64_t> kept = shape;
          kept[static_cast<size_t>(a)] = 1;
          std::vector<int64_t> want;
          for (int64_t o = 0; o < numel_of(kept); ++o) {
            std::vector<int64_t> index = unravel(o, kept);
            int64_t best = -1;
            int32_t best_value = 0;
            for (int64_t j = 0; j < shape[static_cast<size_t>(a)]; ++j) {
              index[static_cast<size_t>(a)] = j;
              int64_t flat = 0;
              for (size_t d = 0; d < 3; ++d) flat = flat * shape[d] + index[d];
              const int32_t v = x.data<int32_t>()[flat];
              const bool better = is_max ? v > best_value : v < best_value;
              if (best < 0 || better || (last && v == best_value)) {
                best = j;
                best_value = v;
              }
            }
            want.push_back(best);
          }
          expect_equal_values<int64_t>(t.output(), want);
        }
      }
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpTester first("ArgMax");
  first.input(make_tensor<float>({5}, {1, nan, 7, nan, 2}));
  BATON_ASSERT_OK(first.run());
  expect_equal_values<int64_t>(first.output(), {1});
  OpTester last("ArgMin");
  last.input(make_tensor<float>({5}, {1, nan, -7, nan, 2})).attr("select_last_index", 1);
  BATON_ASSERT_OK(last.run());
  expect_equal_values<int64_t>(last.output(), {3});
}

TEST(ArgMax, Errors) {
  const HostTensor x(DType::Float32, {2, 3});
  expect_error(OpTester("ArgMax").input(x).attr("axis", 2).infer(), Error::InvalidArgument,
               "ArgMax", "attribute 'axis' is 2, out of range [-2, 1]");
  expect_error(OpTester("ArgMin").input(x).attr("select_last_index", 3).infer(),
               Error::InvalidArgument, "ArgMin", "'select_last_index' is 3");
  expect_error(OpTester("ArgMin").input(x).attr("keepdims", -1).infer(), Error::InvalidArgument,
               "ArgMin", "'keepdims' is -1");
  expect_error(OpTester("ArgMax").input(HostTensor(DType::Float32, {0, 3})).infer(),
               Error::InvalidArgument, "ArgMax", "axis 0 of the input [0, 3] has size 0");
  expect_error(OpTester("ArgMax").input(HostTensor(DType::Float32, {})).infer(),
               Error::InvalidArgument, "ArgMax", "out of range");
  expect_error(OpTester("ArgMax").input(HostTensor(DType::Bool, {2})).infer(),
               Error::InvalidArgument, "ArgMax", "bool");
  // select_last_index arrived in opset 12.
  OpTester old("ArgMax", "node_1", 11);
  EXPECT_EQ(old.def().attr_index("select_last_index"), -1);
  // An empty axis is fine when there is nothing to pick for.
  BATON_ASSERT_OK(
      OpTester("ArgMax").input(HostTensor(DType::Float32, {0, 0})).attr("axis", 1).run());
}

}  // namespace
}  // namespace baton::testing
