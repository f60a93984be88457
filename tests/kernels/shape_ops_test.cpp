// Identity, Reshape, Flatten, Transpose, Squeeze, Unsqueeze and Concat: shapes from infer and
// bytes against index-by-index references, over several dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/kernel_test_util.h"

namespace baton::testing {
namespace {

const DType kDTypes[] = {DType::Float32, DType::Int64, DType::UInt8, DType::Float16};

void expect_same_bytes(const HostTensor& out, const HostTensor& in) {
  ASSERT_EQ(out.nbytes(), in.nbytes());
  EXPECT_EQ(std::memcmp(out.storage.data(), in.storage.data(), in.nbytes()), 0);
}

// Runs an op whose output is input 0's bytes in a new shape.
void expect_reshaped_copy(OpTester& t, const std::vector<int64_t>& out_shape) {
  BATON_ASSERT_OK(t.run());
  EXPECT_EQ(t.output().sizes, out_shape);
  EXPECT_EQ(t.output().dtype, t.input_tensor(0).dtype);
  expect_same_bytes(t.output(), t.input_tensor(0));
}

TEST(Identity, CopiesAnyDtype) {
  std::mt19937 rng(1);
  for (DType dt : kDTypes) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{}, {1}, {7}, {3, 17}, {0, 4}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      OpTester t("Identity");
      t.input(random_bytes(rng, dt, shape));
      expect_reshaped_copy(t, shape);
    }
  }
}

TEST(Reshape, ResolvesZeroAndMinusOne) {
  std::mt19937 rng(2);
  struct Case {
    std::vector<int64_t> in, shape, out;
    int allowzero;
  };
  const Case cases[] = {
      {{2, 3, 4}, {4, -1}, {4, 6}, 0},
      {{2, 3, 4}, {0, -1}, {2, 12}, 0},
      {{2, 3, 4}, {0, 0, 4}, {2, 3, 4}, 0},
      {{2, 3, 4}, {24}, {24}, 0},
      {{2, 3, 4}, {-1}, {24}, 0},
      {{2, 3, 4}, {3, -1, 2}, {3, 4, 2}, 0},
      {{7}, {1, 7, 1}, {1, 7, 1}, 0},
      {{}, {1, 1}, {1, 1}, 0},
      {{1, 1}, {}, {}, 0},
      {{17}, {-1, 1}, {17, 1}, 0},
      {{0, 3}, {0, 3}, {0, 3}, 1},
      {{0, 3}, {3, 0}, {3, 0}, 1},
      {{2, 3}, {0, 3}, {2, 3}, 0},
  };
  for (DType dt : {DType::Float32, DType::Int32, DType::UInt8}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(shape_str(c.in) + " -> " + shape_str(c.shape) + " allowzero " +
                   std::to_string(c.allowzero));
      OpTester t("Reshape");
      t.input(random_bytes(rng, dt, c.in)).input(int64s(c.shape)).attr("allowzero", c.allowzero);
      expect_reshaped_copy(t, c.out);
    }
  }
}

TEST(Reshape, Errors) {
  expect_error(OpTester("Reshape")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(shape_only(DType::Int64, {2}))
                   .infer(),
               Error::NotSupported, "Reshape", "input 'shape' must be a constant");
  expect_error(
      OpTester("Reshape").input(HostTensor(DType::Float32, {2, 3})).input(int64s({-1, -1})).infer(),
      Error::InvalidArgument, "Reshape", "more than one -1");
  expect_error(
      OpTester("Reshape").input(HostTensor(DType::Float32, {2, 3})).input(int64s({4, 2})).infer(),
      Error::InvalidArgument, "Reshape", "cannot reshape [2, 3]");
  expect_error(
      OpTester("Reshape").input(HostTensor(DType::Float32, {2, 3})).input(int64s({4, -1})).infer(),
      Error::InvalidArgument, "Reshape", "cannot infer the -1");
  expect_error(OpTester("Reshape")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(int64s({0, -1}))
                   .attr("allowzero", 1)
                   .infer(),
               Error::InvalidArgument, "Reshape", "both 0 and -1");
  expect_error(
      OpTester("Reshape").input(HostTensor(DType::Float32, {6})).input(int64s({2, 0})).infer(),
      Error::InvalidArgument, "Reshape", "rank 1");
  expect_error(OpTester("Reshape")
                   .input(HostTensor(DType::Float32, {6}))
                   .input(make_tensor<int32_t>({1}, {6}))
                   .infer(),
               Error::InvalidArgument, "Reshape", "int64");
}

TEST(Flatten, SplitsAtAxis) {
  std::mt19937 rng(3);
  const std::tuple<std::vector<int64_t>, int, std::vector<int64_t>> cases[] = {
      {{2, 3, 4}, 0, {1, 24}}, {{2, 3, 4}, 1, {2, 12}}, {{2, 3, 4}, 2, {6, 4}},
      {{2, 3, 4}, 3, {24, 1}}, {{2, 3, 4}, -1, {6, 4}}, {{2, 3, 4}, -3, {1, 24}},
      {{}, 0, {1, 1}},         {{7}, 1, {7, 1}},        {{0, 5}, 1, {0, 5}},
  };
  for (const auto& [in, axis, out] : cases) {
    SCOPED_TRACE(shape_str(in) + " axis " + std::to_string(axis));
    OpTester t("Flatten");
    t.input(random_bytes(rng, DType::Float32, in)).attr("axis", axis);
    expect_reshaped_copy(t, out);
  }
  OpTester t("Flatten");  // default axis 1
  t.input(random_bytes(rng, DType::Int64, {3, 5, 2}));
  expect_reshaped_copy(t, {3, 10});
  expect_error(
      OpTester("Flatten").input(HostTensor(DType::Float32, {2, 3, 4})).attr("axis", 4).infer(),
      Error::InvalidArgument, "Flatten", "'axis' is 4, out of range [-3, 3]");
}

// out[i] = in[index with out dim d taken from in dim perm[d]].
template <typename T>
std::vector<T> transpose_reference(const HostTensor& in, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out_sizes(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) out_sizes[d] = in.sizes[perm[d]];
  std::vector<T> out;
  for (int64_t i = 0; i < numel_of(out_sizes); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_sizes);
    std::vector<int64_t> ii(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) ii[perm[d]] = oi[d];
    int64_t off = 0;
    for (size_t d = 0; d < perm.size(); ++d) off = off * in.sizes[d] + ii[d];
    out.push_back(in.data<T>()[off]);
  }
  return out;
}

template <typename T>
void check_transpose(std::mt19937& rng, DType dt) {
  const std::pair<std::vector<int64_t>, std::vector<int64_t>> cases[] = {
      {{3, 17}, {1, 0}},
      {{1, 7}, {1, 0}},
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {1, 2, 0}},
      {{2, 3, 4}, {0, 1, 2}},
      {{5, 1, 3, 1, 2}, {4, 2, 0, 3, 1}},
      {{3, 4, 5, 6}, {0, 2, 1, 3}},
      {{3, 4, 5, 6}, {3, 1, 0, 2}},
      {{7}, {0}},
      {{}, {}},
      {{2, 0, 3}, {2, 1, 0}},
  };
  for (const auto& [shape, perm] : cases) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape) + " perm " + shape_str(perm));
    HostTensor x = random_bytes(rng, dt, shape);
    OpTester t("Transpose");
    t.input(x).attr("perm", perm);
    BATON_ASSERT_OK(t.run());
    expect_equal_values<T>(t.output(), transpose_reference<T>(x, perm));
  }
  // No perm: reversed dimensions.
  HostTensor x = random_bytes(rng, dt, {2, 3, 5});
  OpTester t("Transpose");
  t.input(x);
  BATON_ASSERT_OK(t.run());
  EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{5, 3, 2}));
  expect_equal_values<T>(t.output(), transpose_reference<T>(x, {2, 1, 0}));
}

TEST(Transpose, MatchesReference) {
  std::mt19937 rng(4);
  check_transpose<uint32_t>(rng, DType::Float32);
  check_transpose<uint64_t>(rng, DType::Int64);
  check_transpose<uint8_t>(rng, DType::UInt8);
  check_transpose<uint16_t>(rng, DType::Float16);
}

TEST(Transpose, Errors) {
  expect_error(OpTester("Transpose")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .attr("perm", std::vector<int64_t>{0, 0})
                   .infer(),
               Error::InvalidArgument, "Transpose", "not a permutation");
  expect_error(OpTester("Transpose")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .attr("perm", std::vector<int64_t>{0, 2})
                   .infer(),
               Error::InvalidArgument, "Transpose", "not a permutation");
  expect_error(OpTester("Transpose")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .attr("perm", std::vector<int64_t>{-1, 0})
                   .infer(),
               Error::InvalidArgument, "Transpose", "not a permutation");
  expect_error(OpTester("Transpose")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .attr("perm", std::vector<int64_t>{0, 1, 2})
                   .infer(),
               Error::InvalidArgument, "Transpose", "is not a permutation of the 2 dimensions");
}

TEST(Squeeze, RemovesSizeOneDimensions) {
  std::mt19937 rng(5);
  const std::pair<std::vector<int64_t>, std::vector<int64_t>> with_axes[] = {
      {{1, 3, 1, 5}, {0}},     {{1, 3, 1, 5}, {-2}}, {{1, 3, 1, 5}, {0, 2}},
      {{1, 3, 1, 5}, {2, -4}}, {{1}, {0}},           {{3, 1}, {1}},
  };
  const std::vector<std::vector<int64_t>> expected = {{3, 1, 5}, {1, 3, 5}, {3, 5},
                                                      {3, 5},    {},        {3}};
  for (size_t i = 0; i < std::size(with_axes); ++i) {
    const auto& [in, axes] = with_axes[i];
    SCOPED_TRACE(shape_str(in) + " axes " + shape_str(axes));
    OpTester t("Squeeze");
    t.input(random_bytes(rng, DType::Float32, in)).input(int64s(axes));
    expect_reshaped_copy(t, expected[i]);
  }
  // No axes (absent, or None): every size-1 dimension.
  {
    OpTester t("Squeeze");
    t.input(random_bytes(rng, DType::Int64, {1, 3, 1, 5, 1}));
    expect_reshaped_copy(t, {3, 5});
  }
  {
    OpTester t("Squeeze");
    t.input(random_bytes(rng, DType::UInt8, {1, 7, 1})).absent_input();
    expect_reshaped_copy(t, {7});
  }
  {
    OpTester t("Squeeze");
    t.input(random_bytes(rng, DType::Float32, {}));
    expect_reshaped_copy(t, {});
  }
}

TEST(Squeeze, Errors) {
  expect_error(
      OpTester("Squeeze").input(HostTensor(DType::Float32, {1, 3})).input(int64s({1})).infer(),
      Error::InvalidArgument, "Squeeze", "its size is 3, not 1");
  expect_error(
      OpTester("Squeeze").input(HostTensor(DType::Float32, {1, 3})).input(int64s({0, -2})).infer(),
      Error::InvalidArgument, "Squeeze", "twice");
  expect_error(
      OpTester("Squeeze").input(HostTensor(DType::Float32, {1, 3})).input(int64s({2})).infer(),
      Error::InvalidArgument, "Squeeze", "out of range [-2, 1]");
  expect_error(OpTester("Squeeze")
                   .input(HostTensor(DType::Float32, {1, 3}))
                   .input(shape_only(DType::Int64, {1}))
                   .infer(),
               Error::NotSupported, "Squeeze", "must be a constant");
}

TEST(Unsqueeze, InsertsSizeOneDimensions) {
  std::mt19937 rng(6);
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>> cases[] = {
      {{3, 5}, {0}, {1, 3, 5}},
      {{3, 5}, {-1}, {3, 5, 1}},
      {{3, 5}, {1, 3}, {3, 1, 5, 1}},
      {{3, 5}, {3, 1}, {3, 1, 5, 1}},
      {{3, 5}, {-1, 0}, {1, 3, 5, 1}},
      {{}, {0}, {1}},
      {{}, {0, 1}, {1, 1}},
      {{7}, {-2}, {1, 7}},
      {{0, 2}, {1}, {0, 1, 2}},
  };
  for (const auto& [in, axes, out] : cases) {
    SCOPED_TRACE(shape_str(in) + " axes " + shape_str(axes));
    OpTester t("Unsqueeze");
    t.input(random_bytes(rng, DType::Float16, in)).input(int64s(axes));
    expect_reshaped_copy(t, out);
  }
}

TEST(Unsqueeze, Errors) {
  expect_error(
      OpTester("Unsqueeze").input(HostTensor(DType::Float32, {3})).input(int64s({2})).infer(),
      Error::InvalidArgument, "Unsqueeze", "out of range [-2, 1]");
  expect_error(
      OpTester("Unsqueeze").input(HostTensor(DType::Float32, {3})).input(int64s({0, -3})).infer(),
      Error::InvalidArgument, "Unsqueeze", "twice");
  expect_error(OpTester("Unsqueeze")
                   .input(HostTensor(DType::Float32, {3}))
                   .input(shape_only(DType::Int64, {1}))
                   .infer(),
               Error::NotSupported, "Unsqueeze", "must be a constant");
}

// Concatenation along `axis` by output index.
std::vector<uint32_t> concat_reference(const std::vector<HostTensor>& ins, int axis,
                                       const std::vector<int64_t>& out_sizes) {
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < numel_of(out_sizes); ++i) {
    std::vector<int64_t> index = unravel(i, out_sizes);
    size_t k = 0;
    while (index[axis] >= ins[k].sizes[axis]) index[axis] -= ins[k++].sizes[axis];
    int64_t off = 0;
    for (size_t d = 0; d < index.size(); ++d) off = off * ins[k].sizes[d] + index[d];
    out.push_back(ins[k].data<uint32_t>()[off]);
  }
  return out;
}

TEST(Concat, MatchesReference) {
  std::mt19937 rng(7);
  struct Case {
    std::vector<std::vector<int64_t>> shapes;
    int axis;
    std::vector<int64_t> out;
  };
  const Case cases[] = {
      {{{3, 5}}, 0, {3, 5}},
      {{{3, 5}, {2, 5}, {1, 5}}, 0, {6, 5}},
      {{{3, 5}, {3, 1}, {3, 7}}, 1, {3, 13}},
      {{{3, 5}, {3, 1}, {3, 7}}, -1, {3, 13}},
      {{{2, 3, 4}, {2, 1, 4}}, -2, {2, 4, 4}},
      {{{2, 3, 4}, {2, 0, 4}, {2, 2, 4}}, 1, {2, 5, 4}},
      {{{7}, {17}}, 0, {24}},
      {{{0, 3}, {0, 3}}, 1, {0, 6}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.out) + " axis " + std::to_string(c.axis));
    std::vector<HostTensor> ins;
    OpTester t("Concat");
    for (const auto& s : c.shapes) {
      ins.push_back(random_bytes(rng, DType::Float32, s));
      t.input(ins.back());
    }
    t.attr("axis", c.axis);
    BATON_ASSERT_OK(t.run());
    ASSERT_EQ(t.output().sizes, c.out);
    int axis = c.axis < 0 ? c.axis + static_cast<int>(c.out.size()) : c.axis;
    expect_equal_values<uint32_t>(t.output(), concat_reference(ins, axis, c.out));
  }
  // Other element sizes.
  OpTester t("Concat");
  t.input(make_tensor<uint8_t>({2, 1}, {1, 2}))
      .input(make_tensor<uint8_t>({2, 2}, {3, 4, 5, 6}))
      .attr("axis", 1);
  BATON_ASSERT_OK(t.run());
  expect_equal_values<uint8_t>(t.output(), {1, 3, 4, 2, 5, 6});
}

TEST(Concat, Errors) {
  expect_error(OpTester("Concat")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Float32, {2, 3, 1}))
                   .attr("axis", 0)
                   .infer(),
               Error::InvalidArgument, "Concat", "may differ only along axis 0");
  expect_error(OpTester("Concat")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Float32, {3, 3}))
                   .attr("axis", 1)
                   .infer(),
               Error::InvalidArgument, "Concat", "[3, 3]");
  expect_error(OpTester("Concat")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Int64, {2, 3}))
                   .attr("axis", 1)
                   .infer(),
               Error::InvalidArgument, "Concat", "int64");
  expect_error(
      OpTester("Concat").input(HostTensor(DType::Float32, {2, 3})).attr("axis", -3).infer(),
      Error::InvalidArgument, "Concat", "'axis' is -3, out of range");
  expect_error(OpTester("Concat").input(HostTensor(DType::Float32, {})).attr("axis", 0).infer(),
               Error::InvalidArgument, "Concat", "rank >= 1");
  expect_error(OpTester("Concat").input(HostTensor(DType::Float32, {2})).infer(),
               Error::InvalidArgument, "Concat", "attribute 'axis'");
  expect_error(OpTester("Concat")
                   .input(HostTensor(DType::Float32, {2}))
                   .absent_input()
                   .attr("axis", 0)
                   .infer(),
               Error::InvalidArgument, "Concat", "input 1 ('inputs') is required but absent");
}

}  // namespace
}  // namespace baton::testing
