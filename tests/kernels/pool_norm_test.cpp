// Pools (MaxPool, AveragePool, LpPool, the global forms), BatchNormalization,
// InstanceNormalization, GroupNormalization, LogSoftmax, Hardmax and Softmax's opsets 1 and 11:
// kernels against naive double-precision references, canonical attributes, since_versions, and
// the definitions' errors (bad attributes and shapes refused at compile time, naming node, op and
// attribute).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/kernel_test_util.h"
#include "runtime/thread_pool.h"

namespace baton::testing {
namespace {

using Ints = std::vector<int64_t>;

// ---- Pools -------------------------------------------------------------------------------------

struct PoolSpec {
  Ints x, kernel, strides, dilations, pads;  // pads: heads then tails
  bool ceil_mode = false, count_include_pad = false;
};

// Output size of one axis, written out from the spec's formula (explicit pads).
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t head, int64_t tail,
                 bool ceil_mode) {
  const int64_t dk = (k - 1) * d + 1;
  const int64_t span = in + head + tail - dk;
  if (!ceil_mode) return span / s + 1;
  int64_t out = (span + s - 1) / s + 1;
  if ((out - 1) * s >= in + head) --out;
  return out;
}

// A naive pool over every tap of every window; `kind` "max", "avg" or "lp2". Also returns the
// output shape and MaxPool's row-major argmax.
std::vector<double> pool_reference(const PoolSpec& p, const std::vector<double>& x,
                                   const std::string& kind, Ints& y_shape, Ints* argmax) {
  const size_t n = p.kernel.size();
  y_shape = {p.x[0], p.x[1]};
  Ints in(p.x.begin() + 2, p.x.end());
  for (size_t i = 0; i < n; ++i) {
    y_shape.push_back(out_size(in[i], p.kernel[i], p.strides[i], p.dilations[i], p.pads[i],
                               p.pads[n + i], p.ceil_mode));
  }
  const Ints out(y_shape.begin() + 2, y_shape.end());
  const int64_t planes = p.x[0] * p.x[1], in_plane = numel_of(in), out_plane = numel_of(out);
  std::vector<double> y(static_cast<size_t>(planes * out_plane));
  if (argmax) argmax->assign(y.size(), -1);
  for (int64_t plane = 0; plane < planes; ++plane) {
    for (int64_t o = 0; o < out_plane; ++o) {
      const Ints oi = unravel(o, out);
      double acc = kind == "max" ? -INFINITY : 0.0;
      int64_t count = 0, padded = 0, at = -1;
      for (int64_t t = 0; t < numel_of(p.kernel); ++t) {
        const Ints ti = unravel(t, p.kernel);
        bool inside = true, in_pad_extent = true;
        int64_t flat = 0;
        for (size_t i = 0; i < n; ++i) {
          const int64_t pos = oi[i] * p.strides[i] - p.pads[i] + ti[i] * p.dilations[i];
          inside = inside && pos >= 0 && pos < in[i];
          in_pad_extent = in_pad_extent && pos < in[i] + p.pads[n + i];
          flat = flat * in[i] + pos;
        }
        if (in_pad_extent) ++padded;
        if (!inside) continue;
        ++count;
        const double v = x[static_cast<size_t>(plane * in_plane + flat)];
        if (kind == "max") {
          if (v > acc) {
            acc = v;
            at = flat;
          }
        } else if (kind == "avg") {
          acc += v;
        } else {
          acc += v * v;
        }
      }
      const auto k = static_cast<size_t>(plane * out_plane + o);
      if (kind == "max") {
        y[k] = acc;
        if (argmax) (*argmax)[k] = plane * in_plane + at;
      } else if (kind == "avg") {
        y[k] = acc / static_cast<double>(p.count_include_pad ? padded : count);
      } else {
        y[k] = std::sqrt(acc);
      }
    }
  }
  return y;
}

void set_pool_attrs(OpTester& t, const PoolSpec& p) {
  t.attr("kernel_shape", p.kernel).attr("strides", p.strides).attr("pads", p.pads);
  t.attr("dilations", p.dilations).attr("ceil_mode", p.ceil_mode ? 1 : 0);
}

TEST(Pool, WindowsMatchANaiveReference) {
  const PoolSpec specs[] = {
      {{2, 3, 11}, {3}, {1}, {1}, {0, 0}},
      {{1, 2, 10}, {3}, {3}, {1}, {1, 2}, true},
      {{1, 2, 6}, {2}, {2}, {1}, {0, 1}, true},  // the ceil window starting in the padding: dropped
      {{2, 2, 7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 2, 2, 1}},
      {{1, 3, 8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      {{1, 3, 8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}, true, true},
      {{2, 2, 11, 10}, {3, 2}, {2, 2}, {2, 3}, {0, 0, 0, 0}, true},
      {{1, 2, 9, 9}, {3, 3}, {1, 2}, {2, 2}, {2, 2, 2, 1}, false, true},
      {{1, 2, 5, 6, 7}, {2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {0, 1, 0, 1, 1, 0}, true, true},
      {{1, 1, 220}, {20}, {10}, {10}, {10, 10}},
  };
  std::mt19937 rng(31);
  for (const PoolSpec& p : specs) {
    for (const char* kind : {"max", "avg", "lp2"}) {
      SCOPED_TRACE(std::string(kind) + " " + shape_str(p.x) + " kernel " + shape_str(p.kernel) +
                   " pads " + shape_str(p.pads));
      const HostTensor x = random_floats(rng, p.x, -2.0f, 2.0f);
      const std::string op = kind == std::string("max")   ? "MaxPool"
                             : kind == std::string("avg") ? "AveragePool"
                                                          : "LpPool";
      OpTester t(op);
      t.input(x);
      set_pool_attrs(t, p);
      if (op == "AveragePool") t.attr("count_include_pad", p.count_include_pad ? 1 : 0);
      if (op == "MaxPool") t.outputs(2);
      BATON_ASSERT_OK(t.run());
      Ints y_shape, argmax;
      const std::vector<double> ref =
          pool_reference(p, to_double(x), kind, y_shape, op == "MaxPool" ? &argmax : nullptr);
      ASSERT_EQ(t.output().sizes, y_shape);
      expect_close(t.output(), ref, 1e-5, 1e-6);
      if (op == "MaxPool") expect_equal_values<int64_t>(t.output(1), argmax);
    }
  }
}

// MaxPool without Indices takes the row path for float32 with up to 2 spatial axes (op_pool.cpp):
// the same specs, with NaNs sprinkled in, one thread and three, must give what the window path
// (Indices requested) gives, NaN for NaN.
TEST(Pool, MaxPoolRowPathMatchesTheWindowPath) {
  const PoolSpec specs[] = {
      {{2, 3, 11}, {3}, {1}, {1}, {0, 0}},
      {{1, 2, 10}, {3}, {3}, {1}, {1, 2}, true},
      {{1, 2, 6}, {2}, {2}, {1}, {0, 1}, true},
      {{2, 2, 7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 2, 2, 1}},
      {{1, 3, 8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      {{2, 2, 11, 10}, {3, 2}, {2, 2}, {2, 3}, {0, 0, 0, 0}, true},
      {{1, 2, 9, 9}, {3, 3}, {1, 2}, {2, 2}, {2, 2, 2, 1}, false},
      {{1, 64, 23, 23}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},  // SqueezeNet's, smaller
      // Stride 2 over wide rows: the AVX-512 path's whole blocks of 16 outputs and a remainder,
      // from even and odd shifts (ResNet-50's pool, fewer rows; a ceil window; dilation 2).
      {{1, 4, 20, 112}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {{2, 2, 9, 67}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      {{1, 2, 8, 80}, {2, 3}, {2, 2}, {2, 2}, {0, 2, 1, 0}},
  };
  std::mt19937 rng(32);
  runtime::ThreadPool pool(3);
  for (const PoolSpec& p : specs) {
    SCOPED_TRACE(shape_str(p.x) + " kernel " + shape_str(p.kernel) + " pads " + shape_str(p.pads));
    HostTensor x = random_floats(rng, p.x, -2.0f, 2.0f);
    for (int64_t i = 0; i < x.numel(); i += 17) x.data<float>()[i] = NAN;
    OpTester window("MaxPool");
    window.input(x).outputs(2);
    set_pool_attrs(window, p);
    BATON_ASSERT_OK(window.run());
    for (runtime::ThreadPool* threads : {static_cast<runtime::ThreadPool*>(nullptr), &pool}) {
      OpTester rows("MaxPool");
      rows.pool(threads).input(x);
      set_pool_attrs(rows, p);
      BATON_ASSERT_OK(rows.run());
      ASSERT_EQ(rows.output().sizes, window.output().sizes);
      for (int64_t i = 0; i < rows.output().numel(); ++i) {
        const float a = rows.output().data<float>()[i], b = window.output().data<float>()[i];
        EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << i << ": " << a << " vs " << b;
      }
    }
  }
}

// AveragePool over float32 with at most two spatial axes sums whole rows a tap at a time in
// double (op_pool.cpp's average rows): windows of at most 9 floats in [-2, 2] sum exactly in
// double in any order, so each output is the exactly rounded mean, bit for bit: DenseNet's 2x2
// stride-2 transitions over wide rows, pads counted and not, a ceil window, stride 1, dilation,
// 1-D, on one thread and three.
TEST(Pool, AveragePoolRowsGiveTheExactlyRoundedMean) {
  const PoolSpec specs[] = {
      {{1, 6, 28, 58}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {{2, 3, 9, 67}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true, true},
      {{1, 2, 9, 40}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}, true, false},
      {{1, 2, 7, 33}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, false, false},
      {{1, 2, 11, 30}, {3, 2}, {1, 2}, {2, 3}, {2, 0, 1, 3}, false, true},
      {{2, 3, 50}, {3}, {2}, {1}, {1, 1}, false, true},
  };
  std::mt19937 rng(33);
  runtime::ThreadPool pool(3);
  for (const PoolSpec& p : specs) {
    SCOPED_TRACE(shape_str(p.x) + " kernel " + shape_str(p.kernel) + " pads " + shape_str(p.pads));
    const HostTensor x = random_floats(rng, p.x, -2.0f, 2.0f);
    Ints y_shape;
    const std::vector<double> ref = pool_reference(p, to_double(x), "avg", y_shape, nullptr);
    for (runtime::ThreadPool* threads : {static_cast<runtime::ThreadPool*>(nullptr), &pool}) {
      OpTester t("AveragePool");
      t.pool(threads).input(x).attr("count_include_pad", p.count_include_pad ? 1 : 0);
      set_pool_attrs(t, p);
      BATON_ASSERT_OK(t.run());
      ASSERT_EQ(t.output().sizes, y_shape);
      for (int64_t i = 0; i < t.output().numel(); ++i) {
        ASSERT_EQ(t.output().data<float>()[i], static_cast<float>(ref[static_cast<size_t>(i)]))
            << "element " << i;
      }
    }
  }
}

TEST(Pool, AutoPadIsCanonicalizedToExplicitPads) {
  struct Case {
    const char* auto_pad;
    Ints x, kernel, strides, dilations, pads, out;
  };
  const Case cases[] = {
      // out = ceil(in / s); total pad (out - 1) * s + dk - in, the odd one at the end (UPPER) or
      // at the start (LOWER).
      {"SAME_UPPER", {1, 1, 10, 7}, {4, 3}, {3, 2}, {1, 1}, {1, 1, 2, 1}, {4, 4}},
      {"SAME_LOWER", {1, 1, 10, 7}, {4, 3}, {3, 2}, {1, 1}, {2, 1, 1, 1}, {4, 4}},
      {"SAME_UPPER", {1, 1, 9}, {3}, {1}, {2}, {2, 2}, {9}},  // the dilated extent
      {"SAME_UPPER", {1, 1, 6}, {1}, {4}, {1}, {0, 0}, {2}},  // a negative total is 0
      {"VALID", {1, 1, 10, 7}, {4, 3}, {3, 2}, {1, 1}, {0, 0, 0, 0}, {3, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.auto_pad) + " " + shape_str(c.x));
    OpTester t("MaxPool");
    t.input(HostTensor(DType::Float32, c.x)).attr("auto_pad", std::string(c.auto_pad));
    t.attr("kernel_shape", c.kernel).attr("strides", c.strides).attr("dilations", c.dilations);
    t.attr("ceil_mode", 1);  // no effect with auto_pad
    BATON_ASSERT_OK(t.infer());
    Ints expected = {c.x[0], c.x[1]};
    expected.insert(expected.end(), c.out.begin(), c.out.end());
    EXPECT_EQ(t.metas()[0].sizes, expected);
    const ops::OpDef& def = t.def();
    const auto& attrs = t.canonical_attrs();
    EXPECT_EQ(attrs[def.attr_index("auto_pad")].s, "NOTSET");
    EXPECT_EQ(attrs[def.attr_index("pads")].ints, c.pads);
    EXPECT_EQ(attrs[def.attr_index("ceil_mode")].i, 0);
  }
  // Absent strides, dilations and pads are filled in.
  OpTester t("AveragePool");
  t.input(HostTensor(DType::Float32, {1, 1, 5, 5})).attr("kernel_shape", Ints{2, 2});
  BATON_ASSERT_OK(t.infer());
  const auto& attrs = t.canonical_attrs();
  EXPECT_EQ(attrs[t.def().attr_index("strides")].ints, (Ints{1, 1}));
  EXPECT_EQ(attrs[t.def().attr_index("dilations")].ints, (Ints{1, 1}));
  EXPECT_EQ(attrs[t.def().attr_index("pads")].ints, (Ints{0, 0, 0, 0}));
}

TEST(Pool, MaxPoolIndicesColumnMajorAndIntegers) {
  // storage_order 1: the spatial position in column-major order, after N and C in row-major.
  std::mt19937 rng(32);
  const HostTensor x = random_floats(rng, {2, 3, 4, 5});
  OpTester t("MaxPool");
  t.input(x).attr("kernel_shape", Ints{2, 2}).attr("strides", Ints{2, 2});
  t.attr("storage_order", 1).outputs(2);
  BATON_ASSERT_OK(t.run());
  const std::vector<double> v = to_double(x);
  const int64_t* idx = t.output(1).data<int64_t>();
  for (int64_t k = 0; k < t.output(1).numel(); ++k) {
    const int64_t plane = k / 4, spatial = idx[k] - plane * 20;
    const int64_t h = spatial % 4, w = spatial / 4;  // column-major: h + w * H
    EXPECT_EQ(t.output().data<float>()[k], static_cast<float>(v[plane * 20 + h * 5 + w]));
  }
  // int8 and uint8 (MaxPool-12), with padding that must not win over negative values.
  OpTester i8("MaxPool");
  i8.input(make_tensor<int8_t>({1, 1, 3}, {-128, -5, -7})).attr("kernel_shape", Ints{2});
  i8.attr("pads", Ints{1, 1});
  BATON_ASSERT_OK(i8.run());
  expect_equal_values<int8_t>(i8.output(), {-128, -5, -5, -7});
  OpTester u8("MaxPool");
  u8.input(make_tensor<uint8_t>({1, 1, 4}, {3, 250, 0, 7})).attr("kernel_shape", Ints{3});
  BATON_ASSERT_OK(u8.run());
  expect_equal_values<uint8_t>(u8.output(), {250, 250});
  // A NaN in a window wins, as in Max.
  OpTester nan("MaxPool");
  nan.input(make_tensor<float>({1, 1, 3}, {1.0f, NAN, 2.0f})).attr("kernel_shape", Ints{2});
  BATON_ASSERT_OK(nan.run());
  EXPECT_TRUE(std::isnan(nan.output().data<float>()[0]));
  EXPECT_TRUE(std::isnan(nan.output().data<float>()[1]));
}

TEST(Pool, GlobalPoolsAndEmptyBatches) {
  std::mt19937 rng(33);
  const HostTensor x = random_floats(rng, {2, 3, 4, 5, 2});
  const std::vector<double> v = to_double(x);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) {
    SCOPED_TRACE(op);
    OpTester t(op);
    t.input(x);
    if (std::string(op) == "GlobalLpPool") t.attr("p", 3);
    BATON_ASSERT_OK(t.run());
    EXPECT_EQ(t.output().sizes, (Ints{2, 3, 1, 1, 1}));
    std::vector<double> ref;
    for (int64_t plane = 0; plane < 6; ++plane) {
      double sum = 0.0, cube = 0.0, m = -INFINITY;
      for (int64_t i = 0; i < 40; ++i) {
        const double e = v[plane * 40 + i];
        sum += e;
        cube += std::pow(std::fabs(e), 3.0);
        m = std::max(m, e);
      }
      ref.push_back(op == std::string("GlobalAveragePool") ? sum / 40
                    : op == std::string("GlobalMaxPool")   ? m
                                                           : std::cbrt(cube));
    }
    expect_close(t.output(), ref);
  }
  // An empty batch with huge spatial sizes runs and tabulates nothing.
  const int64_t big = int64_t{1} << 40;
  OpTester m("MaxPool");
  m.input(HostTensor(DType::Float32, {0, 1, big})).attr("kernel_shape", Ints{3});
  BATON_ASSERT_OK(m.run());
  EXPECT_EQ(m.output().sizes, (Ints{0, 1, big - 2}));
  OpTester g("GlobalAveragePool");
  g.input(HostTensor(DType::Float32, {0, 1, big, 1}));
  BATON_ASSERT_OK(g.run());
}

TEST(Pool, Errors) {
  const HostTensor x(DType::Float32, {1, 2, 5, 5});
  auto pool = [&](const char* op = "MaxPool") {
    OpTester t(op);
    t.input(x).attr("kernel_shape", Ints{2, 2});
    return t;
  };
  expect_error(pool().attr("kernel_shape", Ints{2}).infer(), Error::InvalidArgument, "MaxPool",
               "attribute 'kernel_shape' is [2]; it must have 2 values");
  expect_error(pool().attr("kernel_shape", Ints{2, 0}).infer(), Error::InvalidArgument, "MaxPool",
               "'kernel_shape' is [2, 0]; every value must be 1 or more");
  expect_error(pool().attr("strides", Ints{1, 0}).infer(), Error::InvalidArgument, "MaxPool",
               "'strides'");
  expect_error(pool().attr("dilations", Ints{0, 1}).infer(), Error::InvalidArgument, "MaxPool",
               "'dilations'");
  expect_error(pool().attr("pads", Ints{0, -1, 0, 0}).infer(), Error::InvalidArgument, "MaxPool",
               "'pads' is [0, -1, 0, 0]; every value must be 0 or more");
  expect_error(pool().attr("pads", Ints{1, 1}).infer(), Error::InvalidArgument, "MaxPool",
               "'pads' is [1, 1]; it must have 4 values");
  expect_error(pool().attr("auto_pad", std::string("SAME")).infer(), Error::InvalidArgument,
               "MaxPool", "attribute 'auto_pad' is 'SAME'");
  expect_error(pool().attr("auto_pad", std::string("VALID")).attr("pads", Ints{1, 0, 0, 0}).infer(),
               Error::InvalidArgument, "MaxPool", "with auto_pad 'VALID'");
  expect_error(pool().attr("ceil_mode", 2).infer(), Error::InvalidArgument, "MaxPool",
               "attribute 'ceil_mode' is 2");
  expect_error(pool().attr("storage_order", 3).infer(), Error::InvalidArgument, "MaxPool",
               "attribute 'storage_order' is 3");
  expect_error(pool("AveragePool").attr("count_include_pad", -1).infer(), Error::InvalidArgument,
               "AveragePool", "attribute 'count_include_pad' is -1");
  expect_error(pool("LpPool").attr("p", 0).infer(), Error::InvalidArgument, "LpPool",
               "attribute 'p' is 0");
  // Shapes.
  expect_error(OpTester("MaxPool")
                   .input(HostTensor(DType::Float32, {2, 5}))
                   .attr("kernel_shape", Ints{2})
                   .infer(),
               Error::InvalidArgument, "MaxPool", "rank 3 or more");
  expect_error(OpTester("MaxPool")
                   .input(HostTensor(DType::Float32, {1, 1, 3, 3, 3, 3}))
                   .attr("kernel_shape", Ints{1, 1, 1, 1})
                   .infer(),
               Error::NotSupported, "MaxPool", "4 spatial dimensions");
  expect_error(pool().attr("kernel_shape", Ints{6, 2}).infer(), Error::InvalidArgument, "MaxPool",
               "is larger than spatial dimension 0 (size 5) with pads 0 and 0");
  expect_error(pool().attr("kernel_shape", Ints{3, 2}).attr("dilations", Ints{3, 1}).infer(),
               Error::InvalidArgument, "MaxPool", "extent 7");
  expect_error(OpTester("AveragePool")
                   .input(HostTensor(DType::Float32, {1, 1, 0}))
                   .attr("kernel_shape", Ints{1})
                   .infer(),
               Error::InvalidArgument, "AveragePool", "empty spatial dimension 0");
  // Windows that see only padding: past the input on the right, before it on the left, and
  // stepping over it with a dilation wider than the input.
  expect_error(pool().attr("kernel_shape", Ints{1, 1}).attr("pads", Ints{0, 0, 0, 2}).infer(),
               Error::InvalidArgument, "MaxPool", "covers only padding");
  expect_error(pool().attr("kernel_shape", Ints{2, 2}).attr("pads", Ints{2, 0, 0, 0}).infer(),
               Error::InvalidArgument, "MaxPool", "covers only padding");
  expect_error(OpTester("AveragePool")
                   .input(HostTensor(DType::Float32, {1, 1, 2}))
                   .attr("kernel_shape", Ints{2})
                   .attr("dilations", Ints{3})
                   .attr("pads", Ints{1, 1})
                   .infer(),
               Error::InvalidArgument, "AveragePool", "covers only padding");
  // ... which an empty batch does not run.
  BATON_ASSERT_OK(OpTester("MaxPool")
                      .input(HostTensor(DType::Float32, {0, 1, 5}))
                      .attr("kernel_shape", Ints{1})
                      .attr("pads", Ints{0, 2})
                      .infer());
  // Geometry past int64.
  const int64_t max = std::numeric_limits<int64_t>::max();
  expect_error(pool().attr("pads", Ints{0, max, 0, max}).attr("kernel_shape", Ints{2, max}).infer(),
               Error::InvalidArgument, "MaxPool", "reach past int64");
  expect_error(OpTester("GlobalMaxPool").input(HostTensor(DType::Float32, {1, 2, 0})).infer(),
               Error::InvalidArgument, "GlobalMaxPool", "no spatial positions");
  expect_error(OpTester("GlobalAveragePool").input(HostTensor(DType::Float32, {1, 2})).infer(),
               Error::InvalidArgument, "GlobalAveragePool", "rank 3 or more");
  expect_error(OpTester("GlobalLpPool").input(x).attr("p", -2).infer(), Error::InvalidArgument,
               "GlobalLpPool", "attribute 'p' is -2");
  // int8 is MaxPool's only (from opset 12).
  expect_error(OpTester("AveragePool")
                   .input(HostTensor(DType::Int8, {1, 1, 4}))
                   .attr("kernel_shape", Ints{2})
                   .infer(),
               Error::InvalidArgument, "AveragePool", "int8");
  expect_error(OpTester("MaxPool", "node_1", 11)
                   .input(HostTensor(DType::UInt8, {1, 1, 4}))
                   .attr("kernel_shape", Ints{2})
                   .infer(),
               Error::InvalidArgument, "MaxPool", "uint8");
}

// ---- Normalizations ----------------------------------------------------------------------------

TEST(BatchNormalization, MatchesReferenceInEveryVersion) {
  std::mt19937 rng(41);
  for (int opset : {1, 6, 7, 9, 14, 15}) {
    for (const Ints& shape : {Ints{2, 3, 4, 5}, Ints{4, 3}, Ints{2, 3, 2, 2, 3}}) {
      SCOPED_TRACE(fmt::format("opset {} {}", opset, shape_str(shape)));
      const HostTensor x = random_floats(rng, shape, -3.0f, 3.0f);
      const HostTensor scale = random_floats(rng, {3}), bias = random_floats(rng, {3});
      const HostTensor mean = random_floats(rng, {3}), var = random_floats(rng, {3}, 0.1f, 2.0f);
      OpTester t("BatchNormalization", "node_1", opset);
      t.input(x).input(scale).input(bias).input(mean).input(var).attr("epsilon", 0.01);
      if (opset == 1) t.attr("consumed_inputs", Ints{});
      if (opset < 7) t.attr("is_test", 1);
      BATON_ASSERT_OK(t.run());
      EXPECT_EQ(t.def().since_version, opset);
      const std::vector<double> xv = to_double(x);
      const int64_t inner = numel_of(shape) / (shape[0] * 3);
      std::vector<double> ref(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) {
        const auto c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % 3);
        ref[i] = (xv[i] - mean.data<float>()[c]) / std::sqrt(var.data<float>()[c] + 0.01) *
                     scale.data<float>()[c] +
                 bias.data<float>()[c];
      }
      expect_close(t.output(), ref);
    }
  }
  // spatial 0 (before opset 9): statistics per position of [C, D...].
  const HostTensor x = random_floats(rng, {2, 3, 4});
  std::vector<HostTensor> p;
  for (int i = 0; i < 4; ++i) p.push_back(random_floats(rng, {3, 4}, i == 3 ? 0.1f : -1.0f, 1.0f));
  OpTester t("BatchNormalization", "node_1", 7);
  t.input(x).input(p[0]).input(p[1]).input(p[2]).input(p[3]).attr("spatial", 0);
  BATON_ASSERT_OK(t.run());
  std::vector<double> ref;
  const std::vector<double> xv = to_double(x);
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t k = i % 12;
    ref.push_back((xv[i] - p[2].data<float>()[k]) / std::sqrt(p[3].data<float>()[k] + 1e-5) *
                      p[0].data<float>()[k] +
                  p[1].data<float>()[k]);
  }
  expect_close(t.output(), ref);
}

// A float32 X's planes (batch item, channel) run a loop cloned per instruction set and split over
// the pool: on one thread and on three, every element is (x - mean) * scale / sqrt(var + eps) +
// B computed in double and rounded once, bit for bit; with large planes (one task each) and with
// many small ones (several planes a task).
TEST(BatchNormalization, FloatPlanesGiveTheDoubleFormulasBitsOnAnyPool) {
  std::mt19937 rng(43);
  runtime::ThreadPool pool(3);
  for (const Ints& shape : {Ints{2, 40, 33, 37}, Ints{5, 7, 3, 3}, Ints{3, 24, 301}}) {
    const int64_t c = shape[1];
    const HostTensor x = random_floats(rng, shape, -3.0f, 3.0f);
    const HostTensor scale = random_floats(rng, {c}), bias = random_floats(rng, {c});
    const HostTensor mean = random_floats(rng, {c}), var = random_floats(rng, {c}, 0.1f, 2.0f);
    const int64_t inner = numel_of(shape) / (shape[0] * c);
    for (runtime::ThreadPool* p : {static_cast<runtime::ThreadPool*>(nullptr), &pool}) {
      SCOPED_TRACE(fmt::format("{} on {} thread(s)", shape_str(shape), p ? 3 : 1));
      OpTester t("BatchNormalization", "node_1", 15);
      // An epsilon exact in float and double: the attribute's own rounding is not what is tested.
      t.pool(p).input(x).input(scale).input(bias).input(mean).input(var).attr("epsilon", 0.25);
      BATON_ASSERT_OK(t.run());
      const float* got = t.output().data<float>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t ch = (i / inner) % c;
        const double mul = static_cast<double>(scale.data<float>()[ch]) /
                           std::sqrt(static_cast<double>(var.data<float>()[ch]) + 0.25);
        const float want = static_cast<float>(
            (static_cast<double>(x.data<float>()[i]) - mean.data<float>()[ch]) * mul +
            static_cast<double>(bias.data<float>()[ch]));
        ASSERT_EQ(got[i], want) << "element " << i;
      }
    }
  }
}

TEST(BatchNormalization, Errors) {
  auto bn = [](int opset = 15, Ints x = {2, 3, 4}, Ints p = {3}) {
    OpTester t("BatchNormalization", "node_1", opset);
    t.input(HostTensor(DType::Float32, x));
    for (int i = 0; i < 4; ++i) t.input(HostTensor(DType::Float32, p));
    return t;
  };
  expect_error(bn().attr("training_mode", 1).outputs(3).infer(), Error::NotSupported,
               "BatchNormalization",
               "'training_mode' is 1; Baton runs BatchNormalization for "
               "inference only");
  expect_error(bn().attr("training_mode", 2).infer(), Error::InvalidArgument, "BatchNormalization",
               "'training_mode' is 2");
  expect_error(bn().outputs(3).infer(), Error::InvalidArgument, "BatchNormalization",
               "has 3 outputs; with training_mode 0 it has only Y");
  expect_error(bn(9).outputs(5).infer(), Error::NotSupported, "BatchNormalization",
               "saved_mean and saved_var are outputs of training");
  expect_error(bn(6).infer(), Error::NotSupported, "BatchNormalization", "'is_test' is 0");
  expect_error(bn(7).attr("spatial", 2).infer(), Error::InvalidArgument, "BatchNormalization",
               "attribute 'spatial' is 2");
  expect_error(bn().attr("epsilon", -1.0).infer(), Error::InvalidArgument, "BatchNormalization",
               "attribute 'epsilon' is -1");
  expect_error(bn(15, {2, 3, 4}, {4}).infer(), Error::InvalidArgument, "BatchNormalization",
               "input 1 ('scale') has shape [4]; it must be [3] (one value per channel)");
  expect_error(bn(7, {2, 3, 4}, {3}).attr("spatial", 0).infer(), Error::InvalidArgument,
               "BatchNormalization", "it must be [3, 4] (spatial 0: X without N)");
  expect_error(bn(7, {5}, {1}).infer(), Error::InvalidArgument, "BatchNormalization",
               "rank 2 or more");
  BATON_ASSERT_OK(bn(9, {5}, {1}).infer());
  // Statistics of another float type than X: opset 15 (T2), not opset 9 (one T).
  OpTester mixed("BatchNormalization");
  mixed.input(HostTensor(DType::Float16, {2, 3})).input(HostTensor(DType::Float16, {3}));
  mixed.input(HostTensor(DType::Float16, {3}));
  mixed.input(HostTensor(DType::Float64, {3})).input(HostTensor(DType::Float64, {3}));
  BATON_ASSERT_OK(mixed.infer());
  OpTester old("BatchNormalization", "node_1", 9);
  old.input(HostTensor(DType::Float16, {2, 3})).input(HostTensor(DType::Float16, {3}));
  old.input(HostTensor(DType::Float16, {3}));
  old.input(HostTensor(DType::Float64, {3})).input(HostTensor(DType::Float64, {3}));
  expect_error(old.infer(), Error::InvalidArgument, "BatchNormalization", "must match");
  // An empty batch with large other sizes runs.
  const int64_t large = int64_t{1} << 20;
  BATON_ASSERT_OK(bn(15, {0, large, large}, {large}).run());
}

// (x - mean) / sqrt(var + eps) * scale + bias over groups of `x` [N, C, spatial...].
std::vector<double> group_norm_reference(const HostTensor& x, const HostTensor& scale,
                                         const HostTensor& bias, int64_t groups, bool per_group,
                                         double eps) {
  const std::vector<double> v = to_double(x);
  const int64_t n = x.sizes[0], c = x.sizes[1];
  const int64_t spatial = numel_of(x.sizes) / (n * c), size = c / groups * spatial;
  std::vector<double> y(v.size());
  for (int64_t b = 0; b < n * groups; ++b) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < size; ++j) mean += v[b * size + j];
    mean /= static_cast<double>(size);
    for (int64_t j = 0; j < size; ++j) var += (v[b * size + j] - mean) * (v[b * size + j] - mean);
    var /= static_cast<double>(size);
    for (int64_t j = 0; j < size; ++j) {
      const int64_t g = b % groups, ch = g * (c / groups) + j / spatial;
      const int64_t at = per_group ? g : ch;
      y[b * size + j] = (v[b * size + j] - mean) / std::sqrt(var + eps) * scale.data<float>()[at] +
                        bias.data<float>()[at];
    }
  }
  return y;
}

TEST(GroupNormalization, InstanceAndGroupNormMatchReference) {
  std::mt19937 rng(42);
  for (int opset : {1, 6}) {
    const HostTensor x = random_floats(rng, {2, 3, 4, 5}, -2.0f, 3.0f);
    const HostTensor s = random_floats(rng, {3}), b = random_floats(rng, {3});
    OpTester t("InstanceNormalization", "node_1", opset);
    t.input(x).input(s).input(b).attr("epsilon", 0.01);
    BATON_ASSERT_OK(t.run());
    expect_close(t.output(), group_norm_reference(x, s, b, 3, false, 0.01));
  }
  for (int opset : {18, 21}) {
    for (int64_t groups : {1, 2, 3, 6}) {
      SCOPED_TRACE(fmt::format("opset {} groups {}", opset, groups));
      const HostTensor x = random_floats(rng, {2, 6, 3, 4}, -2.0f, 3.0f);
      const int64_t params = opset == 18 ? groups : 6;
      const HostTensor s = random_floats(rng, {params}), b = random_floats(rng, {params});
      OpTester t("GroupNormalization", "node_1", opset);
      t.input(x).input(s).input(b).attr("num_groups", groups);
      BATON_ASSERT_OK(t.run());
      expect_close(t.output(), group_norm_reference(x, s, b, groups, opset == 18, 1e-5));
    }
  }
}

TEST(GroupNormalization, Errors) {
  auto gn = [](int opset, int64_t groups, Ints p, Ints x = {2, 6, 4}) {
    OpTester t("GroupNormalization", "node_1", opset);
    t.input(HostTensor(DType::Float32, x)).input(HostTensor(DType::Float32, p));
    t.input(HostTensor(DType::Float32, p)).attr("num_groups", groups);
    return t;
  };
  expect_error(gn(21, 4, {6}).infer(), Error::InvalidArgument, "GroupNormalization",
               "'num_groups' is 4; it must be positive and divide the 6 channels");
  expect_error(gn(21, 0, {6}).infer(), Error::InvalidArgument, "GroupNormalization",
               "'num_groups' is 0");
  expect_error(gn(18, 3, {6}).infer(), Error::InvalidArgument, "GroupNormalization",
               "it must be [3] (one value per group)");
  expect_error(gn(21, 3, {3}).infer(), Error::InvalidArgument, "GroupNormalization",
               "it must be [6] (one value per channel)");
  expect_error(gn(21, 3, {6}).attr("stash_type", 0).infer(), Error::NotSupported,
               "GroupNormalization", "'stash_type' is 0");
  expect_error(gn(21, 3, {6}, {6}).infer(), Error::InvalidArgument, "GroupNormalization",
               "rank 2 or more");
  auto in = [](Ints x, Ints p) {
    OpTester t("InstanceNormalization");
    t.input(HostTensor(DType::Float32, x)).input(HostTensor(DType::Float32, p));
    t.input(HostTensor(DType::Float32, p));
    return t;
  };
  expect_error(in({2, 3}, {3}).infer(), Error::InvalidArgument, "InstanceNormalization",
               "rank 3 or more");
  expect_error(in({2, 3, 4}, {2}).infer(), Error::InvalidArgument, "InstanceNormalization",
               "input 1 ('scale') has shape [2]; it must be [3]");
  expect_error(in({2, 3, 4}, {3}).attr("epsilon", std::nan("")).infer(), Error::InvalidArgument,
               "InstanceNormalization", "'epsilon'");
  // Empty inputs with large other sizes run.
  const int64_t large = int64_t{1} << 20;
  BATON_ASSERT_OK(in({0, large, large}, {large}).run());
  BATON_ASSERT_OK(gn(21, 2, {large}, {0, large, large}).run());
}

// ---- LogSoftmax, Hardmax, Softmax before opset 13 ----------------------------------------------

// Along `axis` with the tensor seen as [outer, n, inner]; `flatten`: over [axis, rank) at once.
std::vector<double> softmax_family_reference(const HostTensor& x, int axis, bool flatten,
                                             const std::string& op) {
  const Ints& s = x.sizes;
  if (axis < 0) axis += static_cast<int>(s.size());
  int64_t outer = 1, n = 1, inner = 1;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) {
    (d < axis ? outer : d == axis || flatten ? n : inner) *= s[static_cast<size_t>(d)];
  }
  const std::vector<double> v = to_double(x);
  std::vector<double> y(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + i); };
      double m = -INFINITY, sum = 0.0;
      int64_t arg = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (v[at(j)] > m) {
          m = v[at(j)];
          arg = j;
        }
      }
      for (int64_t j = 0; j < n; ++j) sum += std::exp(v[at(j)] - m);
      for (int64_t j = 0; j < n; ++j) {
        if (op == "Softmax") y[at(j)] = std::exp(v[at(j)] - m) / sum;
        if (op == "LogSoftmax") y[at(j)] = v[at(j)] - m - std::log(sum);
        if (op == "Hardmax") y[at(j)] = j == arg ? 1.0 : 0.0;
      }
    }
  }
  return y;
}

// AddLayerNorm (its sum in per-thread row buffers, no Sum output) splits its rows over the pool:
// the same bits as on one thread, and within float rounding of a double-precision reference.
TEST(LayerNormalization, RowsSplitOverThePoolGiveOneThreadsBits) {
  std::mt19937 rng(12);
  const HostTensor x = random_floats(rng, {4, 64, 96}), r = random_floats(rng, {4, 64, 96});
  const HostTensor scale = random_floats(rng, {96}), bias = random_floats(rng, {96});
  auto run = [&](runtime::ThreadPool* pool) {
    OpTester t("AddLayerNorm", "node_1", kTestOpset, "baton");
    t.pool(pool).input(x).input(r).input(scale).input(bias).attr("axis", int64_t{-1});
    EXPECT_TRUE(t.run().ok());
    return to_double(t.output(0));
  };
  const std::vector<double> one = run(nullptr);
  runtime::ThreadPool pool(3);
  const uint64_t before = pool.dispatched();
  EXPECT_EQ(run(&pool), one);
  EXPECT_GT(pool.dispatched(), before) << "the rows were not split over the pool";
  for (int64_t row = 0; row < 4 * 64; ++row) {
    double mean = 0.0, var = 0.0;
    std::vector<double> sum(96);
    for (int64_t j = 0; j < 96; ++j) {
      // The sum as the Add it replaces stored it: rounded to float.
      sum[static_cast<size_t>(j)] =
          static_cast<float>(x.data<float>()[row * 96 + j] + r.data<float>()[row * 96 + j]);
      mean += sum[static_cast<size_t>(j)] / 96.0;
    }
    for (double v : sum) var += (v - mean) * (v - mean) / 96.0;
    for (int64_t j = 0; j < 96; ++j) {
      const double want =
          (sum[static_cast<size_t>(j)] - mean) / std::sqrt(var + 1e-5) * scale.data<float>()[j] +
          bias.data<float>()[j];
      ASSERT_NEAR(one[static_cast<size_t>(row * 96 + j)], want, 1e-5 * (1.0 + std::abs(want)))
          << row << ", " << j;
    }
  }
}

TEST(SoftmaxFamily, EveryVersionMatchesReference) {
  std::mt19937 rng(51);
  const std::pair<Ints, int> cases[] = {
      {{7}, 0}, {{3, 17}, -1}, {{3, 17}, 0}, {{2, 3, 33}, 1}, {{2, 7, 3, 5}, 2}, {{2, 0, 3}, 1},
  };
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (int opset : {1, 11, 13}) {
      for (const auto& [shape, axis] : cases) {
        for (float scale : {1.0f, 100.0f}) {
          SCOPED_TRACE(
              fmt::format("{}-{} {} axis {} scale {}", op, opset, shape_str(shape), axis, scale));
          const HostTensor x = random_floats(rng, shape, -scale, scale);
          OpTester t(op, "node_1", opset);
          t.input(x).attr("axis", axis);
          BATON_ASSERT_OK(t.run());
          EXPECT_EQ(t.def().since_version, opset);
          expect_close(t.output(), softmax_family_reference(x, axis, opset < 13, op), 1e-5, 1e-6);
        }
      }
    }
  }
  // Defaults: axis 1 before opset 13 (everything after the batch), -1 from 13.
  const HostTensor x = random_floats(rng, {2, 3, 4});
  OpTester old("LogSoftmax", "node_1", 11), now("LogSoftmax");
  old.input(x);
  now.input(x);
  BATON_ASSERT_OK(old.run());
  BATON_ASSERT_OK(now.run());
  expect_close(old.output(), softmax_family_reference(x, 1, true, "LogSoftmax"));
  expect_close(now.output(), softmax_family_reference(x, -1, false, "LogSoftmax"));
  // Hardmax: the first of equal maxima; one-hot for float16.
  OpTester ties("Hardmax");
  ties.input(make_tensor<float>({2, 3}, {1, 5, 5, 2, 2, -1}));
  BATON_ASSERT_OK(ties.run());
  expect_close(ties.output(), {0, 1, 0, 1, 0, 0});
}

TEST(SoftmaxFamily, Errors) {
  for (const char* op : {"LogSoftmax", "Hardmax"}) {
    for (int opset : {1, 11, 13}) {
      expect_error(OpTester(op, "node_1", opset)
                       .input(HostTensor(DType::Float32, {2, 3}))
                       .attr("axis", 2)
                       .infer(),
                   Error::InvalidArgument, op, "'axis' is 2, out of range [-2, 1]");
    }
    expect_error(OpTester(op).input(HostTensor(DType::Int32, {2, 3})).infer(),
                 Error::InvalidArgument, op, "int32");
  }
  // The default axis 1 of opsets 1 and 11 needs rank 2.
  expect_error(OpTester("Softmax", "node_1", 11).input(HostTensor(DType::Float32, {4})).infer(),
               Error::InvalidArgument, "Softmax", "'axis' is 1");
}

}  // namespace
}  // namespace baton::testing
