// Gather, GatherElements, GatherND, ScatterND, Slice, Split, Expand, Tile, Trilu, Shape, Size,
// Range, ConstantOfShape and Einsum: values against index-by-index references (independent of the
// kernels' plans), and every error path: bad attributes and shapes at inference, indices out of
// range at run time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "kernels/kernel_test_util.h"

namespace baton::testing {
namespace {

HostTensor iota_floats(std::vector<int64_t> sizes) {
  HostTensor t(DType::Float32, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

int64_t flat(std::span<const int64_t> index, std::span<const int64_t> sizes) {
  int64_t offset = 0;
  for (size_t d = 0; d < sizes.size(); ++d) offset = offset * sizes[d] + index[d];
  return offset;
}

int64_t wrap(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

// ---- Gather ------------------------------------------------------------------------------------

TEST(Gather, MatchesReferenceOnEveryAxisWithNegativeIndices) {
  std::mt19937 rng(11);
  const std::vector<int64_t> data_shape = {4, 5, 6};
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    for (DType index_type : {DType::Int64, DType::Int32}) {
      SCOPED_TRACE(fmt::format("axis {} {}", axis, dtype_name(index_type)));
      const int64_t a = wrap(axis, 3);
      const int64_t n = data_shape[a];
      const HostTensor data = random_floats(rng, data_shape);
      const HostTensor idx = index_type == DType::Int64
                                 ? random_ints<int64_t>(rng, {2, 3}, -n, n - 1)
                                 : random_ints<int32_t>(rng, {2, 3}, -n, n - 1);
      OpTester t("Gather");
      t.input(data).input(idx).attr("axis", axis);
      BATON_ASSERT_OK(t.run());
      EXPECT_EQ(t.canonical_attrs()[0].i, a);
      const HostTensor& out = t.output();
      std::vector<float> ref;
      for (int64_t o = 0; o < out.numel(); ++o) {
        const std::vector<int64_t> oi = unravel(o, out.sizes);
        // out index = data[:a] + idx (2 dims) + data[a+1:]
        std::vector<int64_t> di(oi.begin(), oi.begin() + a);
        const int64_t k = oi[a] * 3 + oi[a + 1];
        const int64_t v =
            index_type == DType::Int64 ? idx.data<int64_t>()[k] : idx.data<int32_t>()[k];
        di.push_back(wrap(v, n));
        di.insert(di.end(), oi.begin() + a + 2, oi.end());
        ref.push_back(data.data<float>()[flat(di, data_shape)]);
      }
      expect_equal_values(out, ref);
    }
  }
}

TEST(Gather, ScalarIndexDropsTheAxis) {
  OpTester t("Gather");
  t.input(iota_floats({3, 4})).input(make_tensor<int64_t>({}, {-1})).attr("axis", 1);
  BATON_ASSERT_OK(t.run());
  EXPECT_EQ(t.output().sizes, (std::vector<int64_t>{3}));
  expect_equal_values<float>(t.output(), {3, 7, 11});
}

TEST(Gather, IndicesOutOfRangeAreARunTimeError) {
  for (int64_t bad : {int64_t{5}, int64_t{-6}, INT64_MAX, INT64_MIN}) {
    OpTester t("Gather");
    t.input(iota_floats({5, 2})).input(make_tensor<int64_t>({3}, {0, bad, 1}));
    expect_error(t.run(), Error::InvalidArgument, "Gather", "outside [-5, 4]");
  }
  OpTester t("Gather");
  t.input(iota_floats({5, 2})).input(make_tensor<int32_t>({2}, {1, 2}));
  BATON_ASSERT_OK(t.run());
  // The same kernel, rebound to a bad index: checked again at every run.
  t.rebind_input(1, make_tensor<int32_t>({2}, {1, 7}));
  expect_error(t.rerun(), Error::InvalidArgument, "Gather", "holds 7 at flat position 1");
  // An empty dimension has no valid index.
  OpTester empty("Gather");
  empty.input(HostTensor(DType::Float32, {2, 0})).input(make_tensor<int64_t>({1}, {0}));
  empty.attr("axis", 1);
  expect_error(empty.run(), Error::InvalidArgument, "Gather", "size 0");
}

TEST(Gather, InferenceErrors) {
  expect_error(OpTester("Gather")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(shape_only(DType::Int64, {2}))
                   .attr("axis", 2)
                   .infer(),
               Error::InvalidArgument, "Gather", "attribute 'axis' is 2");
  expect_error(OpTester("Gather")
                   .input(HostTensor(DType::Float32, {}))
                   .input(shape_only(DType::Int64, {2}))
                   .infer(),
               Error::InvalidArgument, "Gather", "rank >= 1");
  // Constant indices are checked at compile time.
  expect_error(OpTester("Gather")
                   .input(shape_only(DType::Float32, {3, 4}))
                   .input(make_tensor<int64_t>({2}, {0, 3}))
                   .infer(),
               Error::InvalidArgument, "Gather", "holds 3");
  expect_error(OpTester("Gather")
                   .input(HostTensor(DType::Float32, {3}))
                   .input(shape_only(DType::Float32, {2}))
                   .infer(),
               Error::InvalidArgument, "Gather", "Tind");
}

TEST(Gather, AnyDtypeAndEmptyTensors) {
  std::mt19937 rng(12);
  for (DType dt : {DType::UInt8, DType::Float16, DType::Int32, DType::Float64, DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    const HostTensor data = random_bytes(rng, dt, {4, 3});
    OpTester t("Gather");
    t.input(data).input(make_tensor<int64_t>({2}, {3, -4}));
    BATON_ASSERT_OK(t.run());
    const size_t row = 3 * dtype_size(dt);
    const auto* d = reinterpret_cast<const uint8_t*>(data.storage.data());
    const auto* o = reinterpret_cast<const uint8_t*>(t.output().storage.data());
    EXPECT_EQ(std::memcmp(o, d + 3 * row, row), 0);
    EXPECT_EQ(std::memcmp(o + row, d, row), 0);
  }
  OpTester empty("Gather");
  empty.input(HostTensor(DType::Float32, {4, 0})).input(make_tensor<int64_t>({2}, {1, 2}));
  BATON_ASSERT_OK(empty.run());
  EXPECT_EQ(empty.output().sizes, (std::vector<int64_t>{2, 0}));
  // A zero-element data tensor with huge other dimensions (whose product still fits: one past
  // int64 is refused by every op, see EmptyShapes and RobustnessTest).
  OpTester huge("Gather");
  huge.input(shape_only(DType::Float32, {0, int64_t{1} << 28, int64_t{1} << 28}))
      .input(make_tensor<int64_t>({0}, {}))
      .attr("axis", 1);
  BATON_ASSERT_OK(huge.infer());
}

// ---- GatherElements -----------------------------------------------------------------------------

TEST(GatherElements, MatchesReference) {
  std::mt19937 rng(13);
  const std::vector<int64_t> data_shape = {4, 5, 6};
  const std::vector<int64_t> idx_shape = {3, 5, 2};
  for (int64_t axis : {0, 1, 2, -1}) {
    SCOPED_TRACE(axis);
    const int64_t a = wrap(axis, 3);
    const int64_t n = data_shape[a];
    std::vector<int64_t> shape = idx_shape;
    shape[a] = 7;  // the axis may be longer than data's
    const HostTensor data = random_floats(rng, data_shape);
    const HostTensor idx = random_ints<int32_t>(rng, shape, -n, n - 1);
    OpTester t("GatherElements");
    t.input(data).input(idx).attr("axis", axis);
    BATON_ASSERT_OK(t.run());
    std::vector<float> ref;
    for (int64_t o = 0; o < idx.numel(); ++o) {
      std::vector<int64_t> i = unravel(o, shape);
      i[a] = wrap(idx.data<int32_t>()[o], n);
      ref.push_back(data.data<float>()[flat(i, data_shape)]);
    }
    expect_equal_values(t.output(), ref);
  }
}

TEST(GatherElements, Errors) {
  expect_error(OpTester("GatherElements")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(shape_only(DType::Int64, {3}))
                   .infer(),
               Error::InvalidArgument, "GatherElements", "rank");
  expect_error(OpTester("GatherElements")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(shape_only(DType::Int64, {2, 5}))
                   .infer(),
               Error::InvalidArgument, "GatherElements", "along dimension 1");
  OpTester t("GatherElements");
  t.input(iota_floats({2, 2})).input(make_tensor<int64_t>({2, 2}, {0, 1, 2, 0}));
  expect_error(t.run(), Error::InvalidArgument, "GatherElements", "holds 2 at flat position 2");
}

// ---- GatherND -----------------------------------------------------------------------------------

TEST(GatherND, MatchesReferenceWithBatchDims) {
  std::mt19937 rng(14);
  const std::vector<int64_t> data_shape = {2, 3, 4, 5};
  struct Case {
    std::vector<int64_t> idx_shape;
    int64_t batch_dims;
  };
  for (const Case& c : {Case{{6, 2}, 0}, Case{{2, 3, 3}, 0}, Case{{2, 7, 1}, 1}, Case{{2, 4, 2}, 1},
                        Case{{2, 3, 2}, 2}, Case{{2, 3, 5, 1}, 2}}) {
    SCOPED_TRACE(shape_str(c.idx_shape) + " batch_dims " + std::to_string(c.batch_dims));
    const auto b = static_cast<size_t>(c.batch_dims);
    const auto k = static_cast<size_t>(c.idx_shape.back());
    const HostTensor data = random_floats(rng, data_shape);
    HostTensor idx(DType::Int64, c.idx_shape);
    for (int64_t p = 0; p < idx.numel(); ++p) {
      const int64_t n = data_shape[b + static_cast<size_t>(p) % k];
      idx.data<int64_t>()[p] = std::uniform_int_distribution<int64_t>(-n, n - 1)(rng);
    }
    OpTester t("GatherND");
    t.input(data).input(idx).attr("batch_dims", c.batch_dims);
    BATON_ASSERT_OK(t.run());
    const HostTensor& out = t.output();
    std::vector<float> ref;
    const size_t q = c.idx_shape.size();
    for (int64_t o = 0; o < out.numel(); ++o) {
      const std::vector<int64_t> oi = unravel(o, out.sizes);
      // oi = indices[:-1] coordinates + the slice's coordinates
      std::vector<int64_t> tuple_at(oi.begin(), oi.begin() + (q - 1));
      tuple_at.push_back(0);
      const int64_t base = flat(tuple_at, c.idx_shape);
      std::vector<int64_t> di(oi.begin(), oi.begin() + b);
      for (size_t j = 0; j < k; ++j)
        di.push_back(wrap(idx.data<int64_t>()[base + j], data_shape[b + j]));
      di.insert(di.end(), oi.begin() + (q - 1), oi.end());
      ref.push_back(data.data<float>()[flat(di, data_shape)]);
    }
    expect_equal_values(out, ref);
  }
}

TEST(GatherND, Errors) {
  expect_error(OpTester("GatherND")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(shape_only(DType::Int64, {2, 3}))
                   .infer(),
               Error::InvalidArgument, "GatherND", "last dimension of 'indices'");
  expect_error(OpTester("GatherND")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(shape_only(DType::Int64, {3, 1}))
                   .attr("batch_dims", 2)
                   .infer(),
               Error::InvalidArgument, "GatherND", "'batch_dims' is 2");
  expect_error(OpTester("GatherND")
                   .input(HostTensor(DType::Float32, {3, 4}))
                   .input(shape_only(DType::Int64, {2, 1}))
                   .attr("batch_dims", 1)
                   .infer(),
               Error::InvalidArgument, "GatherND", "batch dimensions");
  OpTester t("GatherND");
  t.input(iota_floats({3, 4})).input(make_tensor<int64_t>({2, 2}, {0, 3, 2, -5}));
  expect_error(t.run(), Error::InvalidArgument, "GatherND", "holds -5 at flat position 3");
}

// ---- ScatterND ----------------------------------------------------------------------------------

// What a scatter with reduction `r` leaves where `d` was when `v` lands on it.
float scattered(std::string_view r, float d, float v) {
  return r == "none"  ? v
         : r == "add" ? d + v
         : r == "mul" ? d * v
         : r == "max" ? std::max(d, v)
                      : std::min(d, v);
}

TEST(ScatterND, EveryReductionMatchesReference) {
  std::mt19937 rng(15);
  const std::vector<int64_t> data_shape = {5, 3, 4};
  for (const char* r : {"none", "add", "mul", "max", "min"}) {
    for (int64_t k : {1, 2, 3}) {
      SCOPED_TRACE(fmt::format("{} k {}", r, k));
      // Duplicate tuples on purpose: they apply in order.
      std::vector<int64_t> idx_shape = {6, k};
      HostTensor idx(DType::Int64, idx_shape);
      for (int64_t p = 0; p < idx.numel(); ++p) {
        const int64_t n = data_shape[p % k];
        idx.data<int64_t>()[p] = std::uniform_int_distribution<int64_t>(-n, 1)(rng);
      }
      std::vector<int64_t> upd_shape = {6};
      upd_shape.insert(upd_shape.end(), data_shape.begin() + k, data_shape.end());
      const HostTensor data = random_floats(rng, data_shape);
      const HostTensor upd = random_floats(rng, upd_shape);
      OpTester t("ScatterND");
      t.input(data).input(idx).input(upd).attr("reduction", std::string(r));
      BATON_ASSERT_OK(t.run());
      std::vector<float> ref = data.values<float>();
      const int64_t slice = numel_of(std::span<const int64_t>(data_shape).subspan(k));
      for (int64_t u = 0; u < 6; ++u) {
        std::vector<int64_t> at(data_shape.size(), 0);
        for (int64_t j = 0; j < k; ++j) at[j] = wrap(idx.data<int64_t>()[u * k + j], data_shape[j]);
        const int64_t base = flat(at, data_shape);
        for (int64_t e = 0; e < slice; ++e) {
          float& d = ref[base + e];
          d = scattered(r, d, upd.data<float>()[u * slice + e]);
        }
      }
      expect_equal_values(t.output(), ref);
    }
  }
}

TEST(ScatterND, IntegerAndBoolReductions) {
  OpTester t("ScatterND");
  t.input(make_tensor<int32_t>({3}, {INT32_MAX, 5, -7}))
      .input(make_tensor<int64_t>({3, 1}, {0, 2, 2}))
      .input(make_tensor<int32_t>({3}, {1, 3, -2}))
      .attr("reduction", std::string("add"));
  BATON_ASSERT_OK(t.run());
  expect_equal_values<int32_t>(t.output(), {INT32_MIN, 5, -6});  // wraps
  HostTensor flags(DType::Bool, {3});
  flags.data<uint8_t>()[0] = 1;
  HostTensor updates(DType::Bool, {2});
  updates.data<uint8_t>()[0] = 0;
  updates.data<uint8_t>()[1] = 1;
  OpTester b("ScatterND");
  b.input(flags).input(make_tensor<int64_t>({2, 1}, {0, 1})).input(updates);
  b.attr("reduction", std::string("mul"));
  BATON_ASSERT_OK(b.run());
  EXPECT_EQ(b.output().values<uint8_t>(), (std::vector<uint8_t>{0, 0, 0}));
}

TEST(ScatterND, Errors) {
  expect_error(OpTester("ScatterND")
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .input(shape_only(DType::Int64, {2, 1}))
                   .input(shape_only(DType::Float32, {2, 4}))
                   .infer(),
               Error::InvalidArgument, "ScatterND", "need [2, 3]");
  expect_error(OpTester("ScatterND")
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .input(shape_only(DType::Int64, {2, 3}))
                   .input(shape_only(DType::Float32, {2}))
                   .infer(),
               Error::InvalidArgument, "ScatterND", "last dimension of 'indices'");
  expect_error(OpTester("ScatterND")
                   .input(HostTensor(DType::Float32, {4}))
                   .input(shape_only(DType::Int64, {1, 1}))
                   .input(shape_only(DType::Float32, {1}))
                   .attr("reduction", std::string("avg"))
                   .infer(),
               Error::InvalidArgument, "ScatterND", "'reduction' is 'avg'");
  // max and min arrived in opset 18.
  expect_error(OpTester("ScatterND", "node_1", 16)
                   .input(HostTensor(DType::Float32, {4}))
                   .input(shape_only(DType::Int64, {1, 1}))
                   .input(shape_only(DType::Float32, {1}))
                   .attr("reduction", std::string("max"))
                   .infer(),
               Error::InvalidArgument, "ScatterND", "from opset 18");
  OpTester t("ScatterND");
  t.input(iota_floats({4})).input(make_tensor<int64_t>({2, 1}, {1, 4})).input(iota_floats({2}));
  expect_error(t.run(), Error::InvalidArgument, "ScatterND", "holds 4 at flat position 1");
  // Nothing was written: the output still holds the 0x7f fill pattern.
  EXPECT_EQ(t.output().data<uint32_t>()[0], 0x7f7f7f7fu);
}

// ---- ScatterElements ----------------------------------------------------------------------------

// Against a reference that walks indices' positions in order, for every axis, reduction and index
// type, with duplicate and negative indices and indices smaller than data off the axis.
TEST(ScatterElements, EveryAxisAndReductionMatchesReference) {
  std::mt19937 rng(16);
  const std::vector<int64_t> data_shape = {4, 3, 5};
  for (const char* r : {"none", "add", "mul", "max", "min"}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      for (DType index_type : {DType::Int64, DType::Int32}) {
        SCOPED_TRACE(fmt::format("{} axis {} {}", r, axis, dtype_name(index_type)));
        const auto a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
        std::vector<int64_t> idx_shape = {3, 2, 4};
        idx_shape[a] = 6;  // longer than data along the axis: duplicates
        const HostTensor data = random_floats(rng, data_shape);
        const HostTensor upd = random_floats(rng, idx_shape);
        HostTensor idx(index_type, idx_shape);
        std::vector<int64_t> values(static_cast<size_t>(idx.numel()));
        for (int64_t& v : values) {
          v = std::uniform_int_distribution<int64_t>(-data_shape[a], data_shape[a] - 1)(rng);
        }
        for (size_t p = 0; p < values.size(); ++p) {
          if (index_type == DType::Int64)
            idx.data<int64_t>()[p] = values[p];
          else
            idx.data<int32_t>()[p] = static_cast<int32_t>(values[p]);
        }
        OpTester t("ScatterElements");
        t.input(data).input(idx).input(upd).attr("axis", axis).attr("reduction", std::string(r));
        BATON_ASSERT_OK(t.run());
        std::vector<float> ref = data.values<float>();
        std::vector<int64_t> at(3, 0);
        for (size_t p = 0; p < values.size(); ++p) {
          std::vector<int64_t> to = at;
          to[a] = wrap(values[p], data_shape[a]);
          float& d = ref[flat(to, data_shape)];
          d = scattered(r, d, upd.data<float>()[p]);
          for (size_t k = 3; k-- > 0;) {
            if (++at[k] < idx_shape[k]) break;
            at[k] = 0;
          }
        }
        expect_equal_values(t.output(), ref);
      }
    }
  }
}

TEST(ScatterElements, IntegersWrapAndOpset13HasNoReduction) {
  OpTester t("ScatterElements");
  t.input(make_tensor<int64_t>({2, 2}, {INT64_MAX, 1, 2, 3}))
      .input(make_tensor<int64_t>({1, 2}, {0, 0}))
      .input(make_tensor<int64_t>({1, 2}, {1, 10}))
      .attr("axis", int64_t{0})
      .attr("reduction", std::string("add"));
  BATON_ASSERT_OK(t.run());
  expect_equal_values<int64_t>(t.output(), {INT64_MIN, 11, 2, 3});
  OpTester old("ScatterElements", "node_1", 13);
  old.input(make_tensor<float>({3}, {1, 2, 3}))
      .input(make_tensor<int64_t>({2}, {2, -3}))
      .input(make_tensor<float>({2}, {7, 8}));
  BATON_ASSERT_OK(old.run());
  expect_equal_values<float>(old.output(), {8, 2, 7});
  // max and min are opset 18's.
  expect_error(OpTester("ScatterElements", "node_1", 16)
                   .input(HostTensor(DType::Float32, {3}))
                   .input(shape_only(DType::Int64, {2}))
                   .input(shape_only(DType::Float32, {2}))
                   .attr("reduction", std::string("max"))
                   .infer(),
               Error::InvalidArgument, "ScatterElements", "'max' and 'min' from opset 18");
}

TEST(ScatterElements, Errors) {
  expect_error(OpTester("ScatterElements")
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .input(shape_only(DType::Int64, {2, 3}))
                   .input(shape_only(DType::Float32, {2, 2}))
                   .infer(),
               Error::InvalidArgument, "ScatterElements", "must have the shape of 'indices'");
  expect_error(OpTester("ScatterElements")
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .input(shape_only(DType::Int64, {2, 4}))
                   .input(shape_only(DType::Float32, {2, 4}))
                   .infer(),
               Error::InvalidArgument, "ScatterElements", "larger than 'data'");
  expect_error(OpTester("ScatterElements")
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .input(shape_only(DType::Int64, {2}))
                   .input(shape_only(DType::Float32, {2}))
                   .infer(),
               Error::InvalidArgument, "ScatterElements", "must have the rank of 'data'");
  OpTester t("ScatterElements");
  t.input(iota_floats({3, 2}))
      .input(make_tensor<int64_t>({1, 2}, {1, 3}))
      .input(iota_floats({1, 2}))
      .attr("axis", int64_t{0});
  expect_error(t.run(), Error::InvalidArgument, "ScatterElements", "holds 3 at flat position 1");
}

// ---- Slice --------------------------------------------------------------------------------------

// The ONNX specification's Slice, one axis at a time, by enumeration. (It differs from numpy in
// one corner: with a negative step, a start before the beginning is clamped to 0, not emptied.)
std::vector<int64_t> spec_slice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  std::vector<int64_t> kept;
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step) kept.push_back(i);
  return kept;
}

TEST(Slice, MatchesTheSpecIncludingNegativeStepsAndClamping) {
  std::mt19937 rng(16);
  const std::vector<int64_t> shape = {7, 6, 5};
  std::uniform_int_distribution<int64_t> pos(-10, 10);
  std::uniform_int_distribution<int64_t> stp(-3, 3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> starts, ends, axes, steps;
    for (int64_t a : {2, 0, 1}) {
      if (rng() % 3 == 0) continue;
      int64_t s = stp(rng);
      if (s == 0) s = 1;
      starts.push_back(rng() % 7 == 0 ? INT64_MIN : pos(rng));
      ends.push_back(rng() % 7 == 0 ? INT64_MAX : pos(rng));
      axes.push_back(rng() % 2 == 0 ? a : a - 3);
      steps.push_back(s);
    }
    SCOPED_TRACE(fmt::format("starts {} ends {} axes {} steps {}", shape_str(starts),
                             shape_str(ends), shape_str(axes), shape_str(steps)));
    const HostTensor data = iota_floats(shape);
    OpTester t("Slice");
    t.input(data)
        .input(int64s(starts))
        .input(int64s(ends))
        .input(int64s(axes))
        .input(int64s(steps));
    BATON_ASSERT_OK(t.run());
    std::vector<std::vector<int64_t>> kept(3);
    for (int d = 0; d < 3; ++d) {
      kept[d].resize(static_cast<size_t>(shape[d]));
      std::iota(kept[d].begin(), kept[d].end(), 0);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t d = wrap(axes[i], 3);
      kept[d] = spec_slice(shape[d], starts[i], ends[i], steps[i]);
    }
    const std::vector<int64_t> out_shape = {static_cast<int64_t>(kept[0].size()),
                                            static_cast<int64_t>(kept[1].size()),
                                            static_cast<int64_t>(kept[2].size())};
    ASSERT_EQ(t.output().sizes, out_shape);
    std::vector<float> ref;
    for (int64_t i : kept[0]) {
      for (int64_t j : kept[1]) {
        for (int64_t k : kept[2]) ref.push_back(static_cast<float>((i * 6 + j) * 5 + k));
      }
    }
    expect_equal_values(t.output(), ref);
  }
}

TEST(Slice, Int32InputsAndAbsentOptionals) {
  OpTester t("Slice");
  t.input(iota_floats({4, 5}))
      .input(make_tensor<int32_t>({1}, {-2}))
      .input(make_tensor<int32_t>({1}, {100}));
  BATON_ASSERT_OK(t.run());
  expect_equal_values<float>(t.output(), {10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  OpTester s("Slice");
  s.input(iota_floats({4, 5}))
      .input(int64s({0, 4}))
      .input(int64s({4, 0}))
      .absent_input()
      .input(int64s({3, -2}));
  BATON_ASSERT_OK(s.run());
  expect_equal_values<float>(s.output(), {4, 2, 19, 17});
}

TEST(Slice, Errors) {
  const auto data = [] { return HostTensor(DType::Float32, {4, 5}); };
  expect_error(OpTester("Slice")
                   .input(data())
                   .input(shape_only(DType::Int64, {1}))
                   .input(int64s({2}))
                   .infer(),
               Error::NotSupported, "Slice", "input 'starts' must be a constant");
  expect_error(OpTester("Slice")
                   .input(data())
                   .input(int64s({0}))
                   .input(int64s({2}))
                   .input(int64s({0}))
                   .input(shape_only(DType::Int64, {1}))
                   .infer(),
               Error::NotSupported, "Slice", "input 'steps' must be a constant");
  expect_error(OpTester("Slice")
                   .input(data())
                   .input(int64s({0}))
                   .input(int64s({2}))
                   .input(int64s({0}))
                   .input(int64s({0}))
                   .infer(),
               Error::InvalidArgument, "Slice", "'steps' entry 0 (axis 0) is 0");
  expect_error(OpTester("Slice")
                   .input(data())
                   .input(int64s({0, 0}))
                   .input(int64s({2, 2}))
                   .input(int64s({1, -1}))
                   .infer(),
               Error::InvalidArgument, "Slice", "names dimension 1 twice");
  expect_error(OpTester("Slice")
                   .input(data())
                   .input(int64s({0}))
                   .input(int64s({2}))
                   .input(int64s({2}))
                   .infer(),
               Error::InvalidArgument, "Slice", "'axes' entry 2 is out of range");
  expect_error(OpTester("Slice").input(data()).input(int64s({0, 1})).input(int64s({2})).infer(),
               Error::InvalidArgument, "Slice", "'ends' has 1");
  expect_error(OpTester("Slice")
                   .input(data())
                   .input(int64s({0}))
                   .input(make_tensor<int32_t>({1}, {2}))
                   .infer(),
               Error::InvalidArgument, "Slice", "Tind");
}

// ---- Split --------------------------------------------------------------------------------------

TEST(Split, SplitInputNumOutputsAndEqualParts) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
    std::optional<std::vector<int64_t>> split;
    std::optional<int64_t> num_outputs;
    std::vector<int64_t> parts;
  };
  const Case cases[] = {
      {{2, 6}, 1, std::vector<int64_t>{1, 0, 5}, std::nullopt, {1, 0, 5}},
      {{6, 2}, 0, std::nullopt, std::nullopt, {2, 2, 2}},
      {{7, 2}, 0, std::nullopt, 3, {3, 3, 1}},
      {{3, 10}, -1, std::nullopt, 4, {3, 3, 3, 1}},
      {{3, 6}, -1, std::nullopt, 4, {2, 2, 2, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " parts " + shape_str(c.parts));
    OpTester t("Split");
    t.input(iota_floats(c.shape)).attr("axis", c.axis).outputs(c.parts.size());
    if (c.split) t.input(int64s(*c.split));
    if (c.num_outputs) t.attr("num_outputs", *c.num_outputs);
    BATON_ASSERT_OK(t.run());
    const int64_t a = wrap(c.axis, 2);
    int64_t offset = 0;
    for (size_t o = 0; o < c.parts.size(); ++o) {
      std::vector<int64_t> expected = c.shape;
      expected[a] = c.parts[o];
      ASSERT_EQ(t.output(o).sizes, expected);
      std::vector<float> ref;
      for (int64_t e = 0; e < numel_of(expected); ++e) {
        std::vector<int64_t> i = unravel(e, expected);
        i[a] += offset;
        ref.push_back(static_cast<float>(flat(i, c.shape)));
      }
      expect_equal_values(t.output(o), ref);
      offset += c.parts[o];
    }
  }
}

TEST(Split, Errors) {
  const auto x = [] { return HostTensor(DType::Float32, {2, 6}); };
  expect_error(
      OpTester("Split").input(x()).input(int64s({2, 3})).attr("axis", 1).outputs(2).infer(),
      Error::InvalidArgument, "Split", "adds up to 5");
  expect_error(OpTester("Split").input(x()).input(int64s({2, 4})).outputs(3).infer(),
               Error::InvalidArgument, "Split", "2 entries for 3 outputs");
  expect_error(
      OpTester("Split").input(x()).input(int64s({-1, 7})).attr("axis", 1).outputs(2).infer(),
      Error::InvalidArgument, "Split", "negative");
  expect_error(OpTester("Split").input(x()).attr("axis", 1).outputs(4).infer(),
               Error::InvalidArgument, "Split", "does not split into 4 equal parts");
  expect_error(OpTester("Split").input(x()).attr("num_outputs", int64_t{3}).outputs(2).infer(),
               Error::InvalidArgument, "Split", "'num_outputs' is 3");
  expect_error(OpTester("Split")
                   .input(x())
                   .input(int64s({3, 3}))
                   .attr("axis", 1)
                   .attr("num_outputs", int64_t{2})
                   .outputs(2)
                   .infer(),
               Error::InvalidArgument, "Split", "not both");
  expect_error(OpTester("Split")
                   .input(x())
                   .attr("axis", 1)
                   .attr("num_outputs", int64_t{5})
                   .outputs(5)
                   .infer(),
               Error::InvalidArgument, "Split", "cannot be split into 5 parts");
  expect_error(OpTester("Split").input(x()).attr("axis", 2).outputs(2).infer(),
               Error::InvalidArgument, "Split", "attribute 'axis' is 2");
  expect_error(OpTester("Split").input(x()).input(shape_only(DType::Int64, {2})).outputs(2).infer(),
               Error::NotSupported, "Split", "input 'split' must be a constant");
}

// ---- Expand and Tile ----------------------------------------------------------------------------

TEST(Expand, BroadcastsBothWays) {
  struct Case {
    std::vector<int64_t> in, shape, out;
  };
  for (const Case& c :
       {Case{{3, 1}, {2, 3, 4}, {2, 3, 4}}, Case{{3, 4}, {1, 1}, {3, 4}},
        Case{{1, 4}, {5, 1}, {5, 4}}, Case{{}, {2, 2}, {2, 2}}, Case{{2, 1}, {2, 0}, {2, 0}}}) {
    SCOPED_TRACE(shape_str(c.in) + " " + shape_str(c.shape));
    const HostTensor x = iota_floats(c.in);
    OpTester t("Expand");
    t.input(x).input(int64s(c.shape));
    BATON_ASSERT_OK(t.run());
    ASSERT_EQ(t.output().sizes, c.out);
    std::vector<float> ref;
    for (int64_t o = 0; o < numel_of(c.out); ++o) {
      ref.push_back(x.data<float>()[broadcast_offset(unravel(o, c.out), c.in)]);
    }
    expect_equal_values(t.output(), ref);
  }
}

TEST(Expand, Errors) {
  expect_error(
      OpTester("Expand").input(HostTensor(DType::Float32, {3, 2})).input(int64s({4, 2})).infer(),
      Error::InvalidArgument, "Expand", "cannot broadcast");
  expect_error(
      OpTester("Expand").input(HostTensor(DType::Float32, {3, 1})).input(int64s({3, -1})).infer(),
      Error::InvalidArgument, "Expand", "negative size");
  expect_error(OpTester("Expand")
                   .input(HostTensor(DType::Float32, {3, 1}))
                   .input(shape_only(DType::Int64, {2}))
                   .infer(),
               Error::NotSupported, "Expand", "input 'shape' must be a constant");
}

TEST(Tile, RepeatsEveryDimension) {
  std::mt19937 rng(17);
  for (DType dt : {DType::Float32, DType::UInt8, DType::Int64, DType::Float16}) {
    for (const auto& [in, repeats] :
         std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{2, 3}, {2, 2}}, {{3}, {1}}, {{2, 1, 3}, {3, 4, 1}}, {{2, 2}, {0, 3}}, {{}, {}}}) {
      SCOPED_TRACE(
          fmt::format("{} {} repeats {}", dtype_name(dt), shape_str(in), shape_str(repeats)));
      const HostTensor x = random_bytes(rng, dt, in);
      OpTester t("Tile");
      t.input(x).input(int64s(repeats));
      BATON_ASSERT_OK(t.run());
      const std::vector<int64_t> out = t.output().sizes;
      const size_t es = dtype_size(dt);
      const auto* src = reinterpret_cast<const uint8_t*>(x.storage.data());
      const auto* dst = reinterpret_cast<const uint8_t*>(t.output().storage.data());
      for (int64_t o = 0; o < numel_of(out); ++o) {
        std::vector<int64_t> i = unravel(o, out);
        for (size_t d = 0; d < in.size(); ++d) i[d] %= in[d];
        ASSERT_EQ(std::memcmp(dst + o * es, src + flat(i, in) * es, es), 0) << "element " << o;
      }
    }
  }
}

TEST(Tile, Errors) {
  const auto x = [] { return HostTensor(DType::Float32, {2, 3}); };
  expect_error(OpTester("Tile").input(x()).input(int64s({2})).infer(), Error::InvalidArgument,
               "Tile", "one entry per dimension");
  expect_error(OpTester("Tile").input(x()).input(int64s({2, -1})).infer(), Error::InvalidArgument,
               "Tile", "negative count");
  expect_error(OpTester("Tile").input(x()).input(int64s({INT64_MAX, 1})).infer(),
               Error::InvalidArgument, "Tile", "overflows dimension 0");
  expect_error(OpTester("Tile").input(x()).input(shape_only(DType::Int64, {2})).infer(),
               Error::NotSupported, "Tile", "input 'repeats' must be a constant");
}

// ---- DepthToSpace, SpaceToDepth, CumSum (values: ONNX's node tests; errors here) --------------

TEST(DepthToSpace, Errors) {
  const auto x = [](std::vector<int64_t> s) { return HostTensor(DType::Float32, std::move(s)); };
  expect_error(OpTester("DepthToSpace").input(x({8, 2, 2})).attr("blocksize", 2).infer(),
               Error::InvalidArgument, "DepthToSpace", "must be 4-D NCHW, got [8, 2, 2]");
  expect_error(OpTester("DepthToSpace").input(x({1, 8, 2, 2})).attr("blocksize", 0).infer(),
               Error::InvalidArgument, "DepthToSpace", "positive block edge, got 0");
  expect_error(OpTester("DepthToSpace").input(x({1, 6, 2, 2})).attr("blocksize", 2).infer(),
               Error::InvalidArgument, "DepthToSpace", "do not divide into blocks of 2 x 2");
  expect_error(OpTester("DepthToSpace")
                   .input(x({1, 8, 2, 2}))
                   .attr("blocksize", 2)
                   .attr("mode", std::string("RCD"))
                   .infer(),
               Error::InvalidArgument, "DepthToSpace", "'mode' is DCR or CRD, got 'RCD'");
  expect_error(OpTester("SpaceToDepth").input(x({1, 2, 4, 5})).attr("blocksize", 2).infer(),
               Error::InvalidArgument, "SpaceToDepth", "do not divide into blocks of 2");
}

TEST(CumSum, Errors) {
  const auto x = [] { return HostTensor(DType::Float32, {3, 4}); };
  expect_error(OpTester("CumSum").input(x()).input(int64s({0, 1})).infer(), Error::InvalidArgument,
               "CumSum", "'axis' must hold one value, it holds 2");
  expect_error(OpTester("CumSum").input(x()).input(int64s({2})).infer(), Error::InvalidArgument,
               "CumSum", "'axis' 2 is outside [-2, 2)");
  expect_error(OpTester("CumSum").input(x()).input(int64s({0})).attr("reverse", 2).infer(),
               Error::InvalidArgument, "CumSum", "'reverse' is 0 or 1, got 2");
  expect_error(OpTester("CumSum").input(x()).input(shape_only(DType::Int64, {1})).infer(),
               Error::NotSupported, "CumSum", "input 'axis' must be a constant");
}

// ---- TopK (ONNX's node tests cover floats along the last and a middle axis; ties, NaN, integers,
// K = 0 and the errors here) ---------------------------------------------------------------------

TEST(TopK, TiesGoToTheLowerIndexAndNanIsAboveEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = make_tensor<float>({2, 5}, {1, 3, 3, nan, 0, 2, 2, 2, 1, 5});
  OpTester largest("TopK");
  largest.input(x).input(int64s({3})).attr("axis", 1);
  BATON_ASSERT_OK(largest.run());
  const float* v = largest.output(0).data<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 3.0f);
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_EQ(v[3], 5.0f);
  EXPECT_EQ(v[4], 2.0f);
  EXPECT_EQ(v[5], 2.0f);
  expect_equal_values<int64_t>(largest.output(1), {3, 1, 2, 4, 0, 1});
  OpTester smallest("TopK");
  smallest.input(x).input(int64s({3})).attr("axis", -1).attr("largest", 0);
  BATON_ASSERT_OK(smallest.run());
  expect_equal_values<float>(smallest.output(0), {0, 1, 3, 1, 2, 2});
  expect_equal_values<int64_t>(smallest.output(1), {4, 0, 1, 3, 0, 1});
}

TEST(TopK, IntegersAlongAMiddleAxisAndAnEmptyK) {
  // [2, 3, 2]: along axis 1, each of the 2 x 2 lines of 3.
  const HostTensor x = make_tensor<int64_t>({2, 3, 2}, {4, -1, 9, -1, 4, 7, 0, 0, 0, 5, 0, 5});
  OpTester t("TopK");
  t.input(x).input(int64s({2})).attr("axis", 1).attr("sorted", 0);
  BATON_ASSERT_OK(t.run());
  expect_equal_values<int64_t>(t.output(0), {9, 7, 4, -1, 0, 5, 0, 5});
  expect_equal_values<int64_t>(t.output(1), {1, 2, 0, 0, 0, 1, 1, 2});
  OpTester none("TopK");
  none.input(x).input(int64s({0})).attr("axis", 1);
  BATON_ASSERT_OK(none.run());
  EXPECT_EQ(none.output(0).numel(), 0);
  EXPECT_EQ(none.output(1).numel(), 0);
}

TEST(TopK, Errors) {
  const auto x = [] { return HostTensor(DType::Float32, {3, 4}); };
  expect_error(OpTester("TopK").input(x()).input(int64s({1, 2})).infer(), Error::InvalidArgument,
               "TopK", "'K' must hold one value, it holds 2");
  expect_error(OpTester("TopK").input(x()).input(int64s({5})).infer(), Error::InvalidArgument,
               "TopK", "'K' is 5, but axis 1 of 'X' [3, 4] has 4 elements (K must be 0..4)");
  expect_error(OpTester("TopK").input(x()).input(int64s({-1})).infer(), Error::InvalidArgument,
               "TopK", "'K' is -1");
  expect_error(OpTester("TopK").input(x()).input(int64s({2})).attr("largest", 2).infer(),
               Error::InvalidArgument, "TopK", "'largest' is 0 or 1, got 2");
  expect_error(OpTester("TopK").input(x()).input(int64s({2})).attr("axis", 2).infer(),
               Error::InvalidArgument, "TopK");
  expect_error(OpTester("TopK").input(x()).input(shape_only(DType::Int64, {1})).infer(),
               Error::NotSupported, "TopK", "input 'K' must be a constant");
}

// ---- RNN, GRU, LSTM (values: ONNX's node tests and tests/python/test_recurrent.py; errors here)
// --

TEST(Recurrent, Errors) {
  const auto t = [](std::vector<int64_t> s) { return HostTensor(DType::Float32, std::move(s)); };
  // X [5, 2, 3], hidden 4: LSTM's W [1, 16, 3], R [1, 16, 4].
  const auto lstm = [&] {
    OpTester o("LSTM");
    o.input(t({5, 2, 3})).input(t({1, 16, 3})).input(t({1, 16, 4})).attr("hidden_size", 4);
    return o;
  };
  BATON_ASSERT_OK(lstm().infer());
  expect_error(OpTester("LSTM").input(t({5, 3})).input(t({1, 16, 3})).input(t({1, 16, 4})).infer(),
               Error::InvalidArgument, "LSTM", "X, W and R must be 3-D");
  expect_error(lstm().attr("direction", std::string("sideways")).infer(), Error::InvalidArgument,
               "LSTM", "'direction' is forward, reverse or bidirectional, got 'sideways'");
  expect_error(lstm().attr("layout", 2).infer(), Error::InvalidArgument, "LSTM",
               "'layout' is 0 or 1, got 2");
  expect_error(lstm().attr("direction", std::string("bidirectional")).infer(),
               Error::InvalidArgument, "LSTM", "W is [1, 16, 3]; with 2 direction(s)");
  expect_error(
      OpTester("GRU").input(t({5, 2, 3})).input(t({1, 12, 3})).input(t({1, 12, 5})).infer(),
      Error::InvalidArgument, "GRU", "R is [1, 12, 5]; it must be [1, 12, 4]");
  expect_error(lstm().input(t({1, 16})).infer(), Error::InvalidArgument, "LSTM",
               "B is [1, 16]; it must be [1, 32]");
  BATON_ASSERT_OK(lstm().attr("clip", 1.0).infer());
  expect_error(lstm().attr("clip", 0.0).infer(), Error::InvalidArgument, "LSTM",
               "'clip' is a positive threshold, got 0");
  BATON_ASSERT_OK(lstm().attr("activations", std::string("HardSigmoid,Elu,softplus")).infer());
  expect_error(lstm().attr("activations", std::string("Sigmoid,Tanh")).infer(),
               Error::InvalidArgument, "LSTM", "needs 3 per direction, 3 in all");
  expect_error(lstm().attr("activations", std::string("Sigmoid,Tanh,Swish")).infer(),
               Error::NotSupported, "LSTM", "activation 'Swish' is not one of");
  expect_error(lstm()
                   .attr("activations", std::string("Sigmoid,ScaledTanh,Tanh"))
                   .attr("activation_alpha", std::vector<double>{0.5})
                   .infer(),
               Error::InvalidArgument, "LSTM", "activation 'ScaledTanh' needs its alpha and beta");
}

// ---- Trilu --------------------------------------------------------------------------------------

TEST(Trilu, KeepsTheTriangleForAnyK) {
  const std::vector<int64_t> shape = {2, 4, 5};
  for (int upper : {0, 1}) {
    for (int64_t k : std::vector<int64_t>{INT64_MIN, -5, -1, 0, 2, 4, 6, INT64_MAX}) {
      SCOPED_TRACE(fmt::format("upper {} k {}", upper, k));
      const HostTensor x = iota_floats(shape);
      OpTester t("Trilu");
      t.input(x).input(make_tensor<int64_t>({}, {k})).attr("upper", upper);
      BATON_ASSERT_OK(t.run());
      std::vector<float> ref;
      for (int64_t o = 0; o < x.numel(); ++o) {
        const std::vector<int64_t> i = unravel(o, shape);
        // c - r >= k (upper) or <= k (lower), in 128 bits so extreme k cannot overflow.
        const __int128 diff = static_cast<__int128>(i[2]) - i[1];
        const bool keep = upper ? diff >= k : diff <= k;
        ref.push_back(keep ? x.data<float>()[o] : 0.0f);
      }
      expect_equal_values(t.output(), ref);
    }
  }
  OpTester none("Trilu");
  none.input(iota_floats({2, 2})).attr("upper", 0);
  BATON_ASSERT_OK(none.run());
  expect_equal_values<float>(none.output(), {0, 0, 2, 3});
}

TEST(Trilu, Errors) {
  expect_error(OpTester("Trilu").input(HostTensor(DType::Float32, {4})).infer(),
               Error::InvalidArgument, "Trilu", "rank >= 2");
  expect_error(OpTester("Trilu").input(HostTensor(DType::Float32, {4, 4})).attr("upper", 2).infer(),
               Error::InvalidArgument, "Trilu", "'upper' is 2");
  expect_error(
      OpTester("Trilu").input(HostTensor(DType::Float32, {4, 4})).input(int64s({1, 2})).infer(),
      Error::InvalidArgument, "Trilu", "'k' must be a scalar");
}

// ---- Shape, Size, Range, ConstantOfShape --------------------------------------------------------

TEST(Shape, StartAndEndAreClampedAndCanonical) {
  struct Case {
    int64_t start;
    std::optional<int64_t> end;
    std::vector<int64_t> out;
    int64_t canonical_start, canonical_end;
  };
  for (const Case& c :
       {Case{0, std::nullopt, {3, 4, 5}, 0, 3}, Case{-1, std::nullopt, {5}, 2, 3},
        Case{1, -1, {4}, 1, 2}, Case{-10, 10, {3, 4, 5}, 0, 3}, Case{2, 1, {}, 2, 2}}) {
    OpTester t("Shape");
    t.input(shape_only(DType::Float32, {3, 4, 5})).attr("start", c.start);
    if (c.end) t.attr("end", *c.end);
    BATON_ASSERT_OK(t.run());  // reads only the shape: the data pointer is null
    expect_equal_values(t.output(), c.out);
    EXPECT_EQ(t.canonical_attrs()[t.def().attr_index("start")].i, c.canonical_start);
    EXPECT_EQ(t.canonical_attrs()[t.def().attr_index("end")].i, c.canonical_end);
  }
  OpTester v13("Shape", "node_1", 13);
  v13.input(shape_only(DType::UInt8, {2, 7}));
  BATON_ASSERT_OK(v13.run());
  expect_equal_values<int64_t>(v13.output(), {2, 7});
}

TEST(Size, CountsElements) {
  OpTester t("Size");
  t.input(shape_only(DType::Bool, {3, 4, 5}));
  BATON_ASSERT_OK(t.run());
  EXPECT_TRUE(t.output().sizes.empty());
  expect_equal_values<int64_t>(t.output(), {60});
}

TEST(Range, FloatAndIntegerRanges) {
  OpTester f("Range");
  f.input(make_tensor<float>({}, {1.0f}))
      .input(make_tensor<float>({}, {-2.0f}))
      .input(make_tensor<float>({}, {-0.75f}));
  BATON_ASSERT_OK(f.run());
  expect_equal_values<float>(f.output(), {1.0f, 0.25f, -0.5f, -1.25f});
  OpTester i("Range");
  i.input(make_tensor<int64_t>({}, {INT64_MIN}))
      .input(make_tensor<int64_t>({}, {INT64_MAX}))
      .input(make_tensor<int64_t>({}, {INT64_MAX}));
  BATON_ASSERT_OK(i.run());
  expect_equal_values<int64_t>(i.output(), {INT64_MIN, -1, INT64_MAX - 1});
  OpTester empty("Range");
  empty.input(make_tensor<int32_t>({}, {5}))
      .input(make_tensor<int32_t>({}, {5}))
      .input(make_tensor<int32_t>({}, {-1}));
  BATON_ASSERT_OK(empty.run());
  EXPECT_EQ(empty.output().sizes, (std::vector<int64_t>{0}));
}

TEST(Range, Errors) {
  expect_error(OpTester("Range")
                   .input(make_tensor<int32_t>({}, {0}))
                   .input(make_tensor<int32_t>({}, {5}))
                   .input(make_tensor<int32_t>({}, {0}))
                   .infer(),
               Error::InvalidArgument, "Range", "'delta' is 0");
  expect_error(OpTester("Range")
                   .input(shape_only(DType::Float32, {}))
                   .input(make_tensor<float>({}, {5}))
                   .input(make_tensor<float>({}, {1}))
                   .infer(),
               Error::NotSupported, "Range", "input 'start' must be a constant");
  expect_error(OpTester("Range")
                   .input(make_tensor<float>({}, {0}))
                   .input(make_tensor<float>({}, {INFINITY}))
                   .input(make_tensor<float>({}, {1}))
                   .infer(),
               Error::InvalidArgument, "Range", "no finite length");
  expect_error(OpTester("Range")
                   .input(make_tensor<int64_t>({}, {INT64_MIN}))
                   .input(make_tensor<int64_t>({}, {INT64_MAX}))
                   .input(make_tensor<int64_t>({}, {1}))
                   .infer(),
               Error::InvalidArgument, "Range", "too long");
  expect_error(OpTester("Range")
                   .input(make_tensor<float>({2}, {0, 1}))
                   .input(make_tensor<float>({}, {5}))
                   .input(make_tensor<float>({}, {1}))
                   .infer(),
               Error::InvalidArgument, "Range", "'start' must be a scalar");
}

ops::AttrValue one_element(DType dtype, std::vector<uint8_t> bytes,
                           std::vector<int64_t> sizes = {1}) {
  return ops::AttrValue::of_tensor(
      ops::TensorValue{dtype, std::move(sizes), std::make_shared<std::vector<uint8_t>>(bytes)});
}

TEST(ConstantOfShape, FillsWithTheValueOrFloatZero) {
  OpTester zero("ConstantOfShape");
  zero.input(int64s({2, 3}));
  BATON_ASSERT_OK(zero.run());
  EXPECT_EQ(zero.output().dtype, DType::Float32);
  expect_equal_values<float>(zero.output(), std::vector<float>(6, 0.0f));
  // The default is written into the canonical attributes.
  EXPECT_FALSE(zero.canonical_attrs()[0].none);
  OpTester seven("ConstantOfShape");
  seven.input(int64s({3})).set_attr_value("value", one_element(DType::Int32, {7, 0, 0, 0}));
  BATON_ASSERT_OK(seven.run());
  EXPECT_EQ(seven.output().dtype, DType::Int32);
  expect_equal_values<int32_t>(seven.output(), {7, 7, 7});
}

TEST(ConstantOfShape, Errors) {
  expect_error(OpTester("ConstantOfShape").input(int64s({2, -3})).infer(), Error::InvalidArgument,
               "ConstantOfShape", "negative size");
  expect_error(
      OpTester("ConstantOfShape")
          .input(int64s({2}))
          .set_attr_value("value", one_element(DType::Float32, std::vector<uint8_t>(8, 0), {2}))
          .infer(),
      Error::InvalidArgument, "ConstantOfShape", "exactly one element");
  expect_error(OpTester("ConstantOfShape", "node_1", 9)
                   .input(int64s({2}))
                   .set_attr_value("value", one_element(DType::BFloat16, {0, 0x40}))
                   .infer(),
               Error::InvalidArgument, "ConstantOfShape", "ConstantOfShape-9 takes");
  expect_error(OpTester("ConstantOfShape").input(shape_only(DType::Int64, {2})).infer(),
               Error::NotSupported, "ConstantOfShape", "input 'input' must be a constant");
}

// ---- Einsum -------------------------------------------------------------------------------------

// A naive einsum over explicit letter equations (no ellipsis), for reference.
std::vector<double> naive_einsum(const std::string& equation, const std::vector<HostTensor>& ins,
                                 std::vector<int64_t>* out_shape) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  std::string lhs = equation.substr(0, arrow), cur;
  for (char c : lhs + ",") {
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  const std::string rhs = equation.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t a = 0; a < terms[i].size(); ++a) size[terms[i][a]] = ins[i].sizes[a];
  }
  std::string letters;
  for (const auto& [c, s] : size) letters += c;
  out_shape->clear();
  for (char c : rhs) out_shape->push_back(size[c]);
  std::vector<double> out(static_cast<size_t>(numel_of(*out_shape)), 0.0);
  std::vector<int64_t> all;
  for (char c : letters) all.push_back(size[c]);
  for (int64_t p = 0; p < numel_of(all); ++p) {
    const std::vector<int64_t> at = unravel(p, all);
    auto value_of = [&](char c) { return at[letters.find(c)]; };
    double term = 1.0;
    for (size_t i = 0; i < terms.size(); ++i) {
      std::vector<int64_t> idx;
      for (char c : terms[i]) idx.push_back(value_of(c));
      term *= ins[i].data<float>()[flat(idx, ins[i].sizes)];
    }
    std::vector<int64_t> oi;
    for (char c : rhs) oi.push_back(value_of(c));
    out[flat(oi, *out_shape)] += term;
  }
  return out;
}

TEST(Einsum, MatchesNaiveReference) {
  std::mt19937 rng(18);
  const std::pair<std::string, std::vector<std::vector<int64_t>>> cases[] = {
      {"ij,jk->ik", {{4, 6}, {6, 3}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"ij->ji", {{3, 4}}},
      {"ij->i", {{3, 4}}},
      {"ii->i", {{4, 4}}},
      {"iji->j", {{3, 2, 3}}},
      {"i,i->", {{5}, {5}}},
      {"ij,jk,kl->li", {{2, 3}, {3, 4}, {4, 2}}},
      {"Ab,bC->CA", {{2, 3}, {3, 2}}},
      // Pairwise contraction: batch, left, right and summed labels in every combination, three
      // and four operands, diagonals beside contractions, labels summed inside one operand.
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"i,j->ij", {{3}, {4}}},
      {"ab,ab,ab->", {{2, 3}, {2, 3}, {2, 3}}},
      {"abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 2}}},
      {"ii,ij->j", {{3, 3}, {3, 4}}},
      {"ijk,jl->il", {{2, 3, 4}, {3, 5}}},
      {"bik,bkj,bj->bi", {{2, 3, 4}, {2, 4, 5}, {2, 5}}},
      {"ab,cd,ef->", {{2, 2}, {3, 2}, {2, 3}}},
      {"ab,bc,cd,da->", {{2, 3}, {3, 4}, {4, 2}, {2, 2}}},
      {"iij,jk->ik", {{3, 3, 2}, {2, 4}}},
  };
  for (const auto& [eq, shapes] : cases) {
    SCOPED_TRACE(eq);
    std::vector<HostTensor> ins;
    OpTester t("Einsum");
    for (const auto& s : shapes) {
      ins.push_back(random_floats(rng, s));
      t.input(ins.back());
    }
    t.attr("equation", eq);
    BATON_ASSERT_OK(t.run());
    std::vector<int64_t> shape;
    const std::vector<double> ref = naive_einsum(eq, ins, &shape);
    EXPECT_EQ(t.output().sizes, shape);
    expect_close(t.output(), ref, 1e-5, 1e-6);
  }
}

TEST(Einsum, ImplicitOutputsAndEllipsisAreCanonicalized) {
  struct Case {
    std::string equation;
    std::vector<std::vector<int64_t>> shapes;
    std::string canonical;
    std::vector<int64_t> out;
  };
  for (const Case& c :
       {Case{"ij,jk", {{2, 3}, {3, 4}}, "ij,jk->ik", {2, 4}},
        Case{"ba", {{2, 3}}, "ba->ab", {3, 2}}, Case{"ii", {{3, 3}}, "ii->", {}},
        Case{" i j -> j i ", {{2, 3}}, "ij->ji", {3, 2}},
        Case{"...ij,...jk", {{5, 1, 2, 3}, {4, 3, 2}}, "...ij,...jk->...ik", {5, 4, 2, 2}},
        Case{"i...->...", {{3, 2, 2}}, "i...->...", {2, 2}}}) {
    SCOPED_TRACE(c.equation);
    OpTester t("Einsum");
    for (const auto& s : c.shapes) t.input(HostTensor(DType::Float32, s));
    t.attr("equation", c.equation);
    BATON_ASSERT_OK(t.infer());
    EXPECT_EQ(t.metas()[0].sizes, c.out);
    EXPECT_EQ(t.canonical_attrs()[0].s, c.canonical);
  }
  // Broadcast ellipsis values: x[2, 1, 3] against y[4, 3]: out[b, c, i] = x[b, 0, i] * y[c, i].
  OpTester t("Einsum");
  const HostTensor x = iota_floats({2, 1, 3});
  const HostTensor y = iota_floats({4, 3});
  t.input(x).input(y).attr("equation", std::string("...i,...i->...i"));
  BATON_ASSERT_OK(t.run());
  ASSERT_EQ(t.output().sizes, (std::vector<int64_t>{2, 4, 3}));
  std::vector<float> ref;
  for (int b = 0; b < 2; ++b) {
    for (int c = 0; c < 4; ++c) {
      for (int i = 0; i < 3; ++i) ref.push_back(static_cast<float>((b * 3 + i) * (c * 3 + i)));
    }
  }
  expect_equal_values(t.output(), ref);
}

// "abcd,efgh,ijkl->" on three inputs of 64K floats: as one loop nest over every label that is
// 2.8e14 steps (a hang at 52eb145, in baton run and in constant folding alike); contracted
// pairwise it is three sums and two products.
TEST(Einsum, DisjointOperandsAreSummedSeparately) {
  std::mt19937 rng(19);
  OpTester t("Einsum");
  std::vector<HostTensor> ins;
  for (int i = 0; i < 3; ++i) {
    ins.push_back(random_floats(rng, {16, 16, 16, 16}));
    t.input(ins.back());
  }
  t.attr("equation", std::string("abcd,efgh,ijkl->"));
  const auto started = std::chrono::steady_clock::now();
  BATON_ASSERT_OK(t.run());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 5.0);
  double product = 1;
  for (const HostTensor& in : ins) {
    double sum = 0;
    for (int64_t i = 0; i < in.numel(); ++i) sum += in.data<float>()[i];
    product *= sum;
  }
  expect_close(t.output(), {product}, 1e-5, 1e-6);
}

TEST(Einsum, IntegersWrap) {
  OpTester t("Einsum");
  t.input(make_tensor<int8_t>({2}, {100, 100})).input(make_tensor<int8_t>({2}, {2, 1}));
  t.attr("equation", std::string("i,i"));
  BATON_ASSERT_OK(t.run());
  expect_equal_values<int8_t>(t.output(), {static_cast<int8_t>(300 - 256)});
}

TEST(Einsum, Errors) {
  const auto x = [] { return HostTensor(DType::Float32, {2, 3}); };
  const std::pair<std::string, std::string> bad[] = {
      {"ij,jk->ik", "2 input terms for 1 inputs"},
      {"i1->i", "has '1' in term"},
      {"i.j->i", "has '.' in term"},
      {"......->", "two '...'"},
      {"ijk->i", "names 3 dimensions"},
      {"ij->k", "output label 'k'"},
      {"ij->ii", "appears twice"},
      {"ij->i->j", "more than one '->'"},
      {"ii->i", "label 'i'"},
  };
  for (const auto& [eq, fragment] : bad) {
    SCOPED_TRACE(eq);
    expect_error(OpTester("Einsum").input(x()).attr("equation", eq).infer(), Error::InvalidArgument,
                 "Einsum", fragment);
  }
  expect_error(OpTester("Einsum")
                   .input(x())
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .attr("equation", std::string("ij,jk->ik"))
                   .infer(),
               Error::InvalidArgument, "Einsum", "label 'j'");
  expect_error(OpTester("Einsum")
                   .input(HostTensor(DType::Float32, {2, 3}))
                   .input(HostTensor(DType::Float32, {4, 3}))
                   .attr("equation", std::string("...i,...i"))
                   .infer(),
               Error::InvalidArgument, "Einsum", "do not broadcast");
}

}  // namespace
}  // namespace baton::testing
