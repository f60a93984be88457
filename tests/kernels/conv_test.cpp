// Conv and ConvTranspose against naive double-precision references: 1-D, 2-D and 3-D, groups
// (depthwise too), strides, dilations, explicit and automatic pads, output_padding and
// output_shape, bias, batches, every float dtype, each kernel path (pointwise GEMM, depthwise
// loop, im2col in one and in several column tiles), empty tensors; then the definitions' errors.
#include <gtest/gtest.h>

#include <functional>

#include "kernels/cpu/conv_common.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/kernel_test_util.h"
#include "ops/activation.h"
#include "runtime/thread_pool.h"

namespace baton::testing {
namespace {

using ops::AttrValue;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// The canonical value of INTS attribute `name` after inference.
std::vector<int64_t> canonical_ints(const OpTester& t, std::string_view name) {
  const int i = t.def().attr_index(name);
  EXPECT_GE(i, 0) << name;
  return i < 0 ? std::vector<int64_t>{} : t.canonical_attrs()[static_cast<size_t>(i)].ints;
}

struct Geometry {
  int spatial = 0;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;  // canonical
};

Geometry geometry(const OpTester& t, size_t spatial) {
  Geometry g;
  g.spatial = static_cast<int>(spatial);
  g.group = t.canonical_attrs()[static_cast<size_t>(t.def().attr_index("group"))].i;
  g.strides = canonical_ints(t, "strides");
  g.dilations = canonical_ints(t, "dilations");
  g.pads = canonical_ints(t, "pads");
  return g;
}

// Y[n, m, o] = B[m] + sum over the group's channels c and kernel offsets k of
// X[n, c, o * stride - pad + k * dilation] * W[m, c, k] (Conv), or the scatter of the same
// products into Y[n, m, i * stride - pad + k * dilation] from X[n, c, i] (ConvTranspose).
std::vector<double> reference(bool transposed, const HostTensor& x, const HostTensor& w,
                              const HostTensor* b, const Geometry& g,
                              const std::vector<int64_t>& y_sizes) {
  const std::vector<double> xv = to_double(x), wv = to_double(w);
  const std::vector<double> bv = b ? to_double(*b) : std::vector<double>();
  const int64_t n = x.sizes[0], c = x.sizes[1], m = y_sizes[1];
  const int64_t cg = c / g.group, mg = m / g.group;
  const std::vector<int64_t> in(x.sizes.begin() + 2, x.sizes.end());
  const std::vector<int64_t> out(y_sizes.begin() + 2, y_sizes.end());
  const std::vector<int64_t> kernel(w.sizes.begin() + 2, w.sizes.end());
  const int64_t in_count = numel_of(in), out_count = numel_of(out), k_count = numel_of(kernel);
  std::vector<double> y(static_cast<size_t>(numel_of(y_sizes)), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t mo = 0; mo < m; ++mo) {
      for (int64_t p = 0; p < out_count; ++p) y[(i * m + mo) * out_count + p] = b ? bv[mo] : 0.0;
    }
  }
  // `from` positions (outputs for Conv, inputs for ConvTranspose) against kernel offsets.
  const std::vector<int64_t>& from = transposed ? in : out;
  const std::vector<int64_t>& to = transposed ? out : in;
  // The flat `to` index of every (position, kernel offset) pair, or -1 outside.
  const int64_t from_count = numel_of(from);
  std::vector<int64_t> target(static_cast<size_t>(from_count * k_count));
  for (int64_t p = 0; p < from_count; ++p) {
    const std::vector<int64_t> pi = unravel(p, from);
    for (int64_t k = 0; k < k_count; ++k) {
      const std::vector<int64_t> ki = unravel(k, kernel);
      int64_t t = 0;
      for (int d = 0; d < g.spatial && t >= 0; ++d) {
        const int64_t v = pi[d] * g.strides[d] - g.pads[d] + ki[d] * g.dilations[d];
        t = v >= 0 && v < to[d] ? t * to[d] + v : -1;
      }
      target[static_cast<size_t>(p * k_count + k)] = t;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      for (int64_t ml = 0; ml < mg; ++ml) {
        for (int64_t cl = 0; cl < cg; ++cl) {
          const int64_t mo = grp * mg + ml, ci = grp * cg + cl;
          for (int64_t p = 0; p < from_count; ++p) {
            for (int64_t k = 0; k < k_count; ++k) {
              const int64_t t = target[static_cast<size_t>(p * k_count + k)];
              if (t < 0) continue;
              if (transposed) {
                y[(i * m + mo) * out_count + t] +=
                    xv[(i * c + ci) * in_count + p] * wv[(ci * mg + ml) * k_count + k];
              } else {
                y[(i * m + mo) * out_count + p] +=
                    xv[(i * c + ci) * in_count + t] * wv[(mo * cg + cl) * k_count + k];
              }
            }
          }
        }
      }
    }
  }
  return y;
}

double relative_error(const HostTensor& out, const std::vector<double>& ref) {
  const std::vector<double> got = to_double(out);
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

double bound_for(DType dtype) {
  switch (dtype) {
    case DType::Float64:
      return 1e-12;
    case DType::Float16:
      return 2e-3;
    case DType::BFloat16:
      return 1.6e-2;
    default:
      return 1e-5;
  }
}

struct Spec {
  std::string label;
  std::vector<int64_t> x, w;
  Attrs attrs;
  bool bias = false;
  std::vector<int64_t> y;          // the expected output shape
  std::vector<int64_t> pads = {};  // the expected canonical pads (empty: not checked)
};

// Runs `spec` in `dtype` and compares with the reference; returns the output for more checks.
HostTensor check(const char* op, const Spec& spec, DType dtype, std::mt19937& rng, int opset = 21,
                 runtime::ThreadPool* pool = nullptr, bool constant_w = false) {
  SCOPED_TRACE(std::string(op) + " " + spec.label + " " + std::string(dtype_name(dtype)));
  const bool transposed = std::string_view(op) == "ConvTranspose";
  const int64_t m = transposed ? spec.y[1] : spec.w[0];
  HostTensor x = cast_floats(random_floats(rng, spec.x), dtype);
  HostTensor w = cast_floats(random_floats(rng, spec.w), dtype);
  HostTensor b = cast_floats(random_floats(rng, {m}), dtype);
  OpTester t(op, "node_1", opset);
  t.pool(pool).input(x).input(w);
  if (constant_w) t.constant_input(1);
  if (spec.bias) t.input(b);
  for (const auto& [name, value] : spec.attrs) t.set_attr_value(name, value);
  const Status status = t.run();
  EXPECT_TRUE(status.ok()) << status.to_string();
  if (!status.ok()) return HostTensor();
  EXPECT_EQ(t.output().sizes, spec.y);
  // A constant float32 W of a convolution that is not depthwise (one input channel per group, at
  // most 4 outputs each, 1-D or 2-D: op_conv.cpp's own kernel) is multiplied through the copy
  // packed at create (op_conv.cpp), at any depth.
  // A transposed convolution's constant float32 W is packed too (op_conv_transpose.cpp: W_g^T).
  const bool depthwise = spec.w[1] == 1 && spec.w[0] <= 4 * spec.x[1] && spec.x.size() <= 4;
  if (constant_w && (transposed || !depthwise) && dtype == DType::Float32 &&
      kernels::cpu::packed_gemm_available()) {
    EXPECT_GT(t.kernel()->held_bytes(), 0u) << "W was not packed";
  }
  if (!spec.pads.empty()) {
    EXPECT_EQ(canonical_ints(t, "pads"), spec.pads);
  }
  const Geometry g = geometry(t, spec.x.size() - 2);
  const std::vector<double> ref = reference(transposed, x, w, spec.bias ? &b : nullptr, g, spec.y);
  EXPECT_LE(relative_error(t.output(), ref), bound_for(dtype));
  return t.output();
}

AttrValue ints(std::vector<int64_t> v) { return AttrValue::of_ints(std::move(v)); }
AttrValue str(std::string s) { return AttrValue::of_string(std::move(s)); }
AttrValue one(int64_t v) { return AttrValue::of_int(v); }

std::vector<Spec> conv_specs() {
  return {
      {"2-D 3x3 pads 1, batch 2, bias",
       {2, 3, 7, 6},
       {5, 3, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       {2, 5, 7, 6}},
      {"1-D stride 2 dilation 2 asymmetric pads",
       {3, 2, 17},
       {4, 2, 3},
       {{"strides", ints({2})}, {"dilations", ints({2})}, {"pads", ints({1, 2})}},
       false,
       {3, 4, 8}},
      {"3-D group 2, bias",
       {1, 4, 5, 4, 6},
       {6, 2, 2, 3, 2},
       {{"group", one(2)}, {"pads", ints({0, 1, 1, 1, 0, 0})}, {"strides", ints({1, 2, 1})}},
       true,
       {1, 6, 5, 2, 6}},
      {"depthwise 2-D stride 2 pads 1, bias",
       {2, 6, 9, 8},
       {6, 1, 3, 3},
       {{"group", one(6)}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}},
       true,
       {2, 6, 5, 4}},
      {"depthwise multiplier 2, 1-D, dilation 3",
       {2, 3, 20},
       {6, 1, 4},
       {{"group", one(3)}, {"dilations", ints({3})}, {"pads", ints({2, 0})}},
       false,
       {2, 6, 13}},
      {"depthwise 2-D, kernel wider than the input, dilation (2, 1)",
       {1, 4, 5, 3},
       {4, 1, 3, 5},
       {{"group", one(4)}, {"dilations", ints({2, 1})}, {"pads", ints({2, 2, 2, 2})}},
       true,
       {1, 4, 5, 3}},
      {"pointwise 1x1 group 2, batch 3",
       {3, 4, 5, 7},
       {6, 2, 1, 1},
       {{"group", one(2)}},
       true,
       {3, 6, 5, 7}},
      {"1x1 stride 2 (im2col with K = 1)",
       {2, 3, 7, 7},
       {5, 3, 1, 1},
       {{"strides", ints({2, 2})}},
       false,
       {2, 5, 4, 4}},
      {"2-D dilations (2, 3), strides (2, 1), asymmetric pads",
       {1, 3, 11, 10},
       {2, 3, 3, 2},
       {{"dilations", ints({2, 3})}, {"strides", ints({2, 1})}, {"pads", ints({0, 2, 1, 0})}},
       true,
       {1, 2, 4, 9}},
      {"im2col in two column tiles (576 rows x 2304 columns)",
       {1, 64, 48, 48},
       {4, 64, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 4, 48, 48}},
      {"one channel into 8 (GEMM, not depthwise)",
       {2, 1, 6, 6},
       {8, 1, 3, 3},
       {},
       true,
       {2, 8, 4, 4}},
      {"SAME_UPPER stride 2 (odd padding at the end)",
       {1, 2, 6, 7},
       {3, 2, 3, 3},
       {{"auto_pad", str("SAME_UPPER")}, {"strides", ints({2, 2})}},
       false,
       {1, 3, 3, 4},
       {0, 1, 1, 1}},
      {"SAME_LOWER stride 2 (odd padding at the beginning)",
       {1, 2, 6, 7},
       {3, 2, 3, 3},
       {{"auto_pad", str("SAME_LOWER")}, {"strides", ints({2, 2})}},
       true,
       {1, 3, 3, 4},
       {1, 1, 0, 1}},
      {"SAME_UPPER depthwise stride 1, even kernel",
       {1, 3, 5, 5},
       {3, 1, 2, 4},
       {{"auto_pad", str("SAME_UPPER")}, {"group", one(3)}},
       false,
       {1, 3, 5, 5},
       {0, 1, 1, 2}},
      {"VALID with kernel_shape",
       {2, 2, 6, 5},
       {3, 2, 3, 2},
       {{"auto_pad", str("VALID")}, {"kernel_shape", ints({3, 2})}},
       true,
       {2, 3, 4, 4},
       {0, 0, 0, 0}},
  };
}

TEST(Conv, MatchesReferenceInEveryFloatType) {
  std::mt19937 rng(11);
  for (const Spec& spec : conv_specs()) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      check("Conv", spec, dtype, rng);
    }
  }
}

// Shapes large enough for each way a conv splits over threads (conv specs above are mostly too
// small to split anything but depthwise channels and groups).
std::vector<Spec> threaded_conv_specs() {
  return {
      {"pointwise 64 -> 96 over 40x40: a column tile per thread",
       {1, 64, 40, 40},
       {96, 64, 1, 1},
       {},
       true,
       {1, 96, 40, 40}},
      {"3x3 256 -> 64 on 7x7: too few columns, the GEMM split by rows",
       {1, 256, 7, 7},
       {64, 256, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 64, 7, 7}},
      {"3x3 16 -> 16 on 40x40, batch 2: im2col per thread",
       {2, 16, 40, 40},
       {16, 16, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       false,
       {2, 16, 40, 40}},
      {"3x3 group 4: the groups in parallel",
       {1, 32, 20, 20},
       {32, 8, 3, 3},
       {{"group", one(4)}, {"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 32, 20, 20}},
      {"depthwise 3x3 on 24 channels: channel chunks in parallel",
       {1, 24, 30, 30},
       {24, 1, 3, 3},
       {{"group", one(24)}, {"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 24, 30, 30}},
  };
}

// Every conv spec with pools of 2 and 3 threads matches the reference, and each large one hands
// work to the pool's workers (without the threaded paths `dispatched` would stay 0).
TEST(Conv, ThreadedPathsMatchTheReference) {
  std::mt19937 rng(13);
  for (unsigned threads : {2u, 3u}) {
    runtime::ThreadPool pool(threads);
    SCOPED_TRACE(std::to_string(threads) + " threads");
    for (const Spec& spec : conv_specs()) check("Conv", spec, DType::Float32, rng, 21, &pool);
    for (const Spec& spec : threaded_conv_specs()) {
      for (DType dtype : {DType::Float32, DType::Float16}) {
        const uint64_t before = pool.dispatched();
        check("Conv", spec, dtype, rng, 21, &pool);
        EXPECT_GT(pool.dispatched(), before) << spec.label << ": nothing ran on the workers";
      }
    }
  }
}

// The depthwise kernel (depthwise.h: a padded plane, 16 output columns in registers, strides 1
// and 2 specialized) over widths on both sides of its blocks (1 to 37 columns: short blocks
// only, whole blocks, and a remainder), kernels 3, 5 and 7, strides 1, 2, 3 and 6 (the others
// read lane by lane: all 16 lanes at stride 6 would reach past the plane's slack), dilations,
// uneven pads, a channel multiplier of 2, 1-D too, in float32 and float16 against the reference.
TEST(Conv, DepthwiseKernelAtEveryBlockRemainder) {
  std::mt19937 rng(41);
  int cases = 0;
  for (int64_t width : {1, 5, 15, 16, 17, 31, 32, 37}) {
    for (int64_t k : {3, 5, 7}) {
      for (int64_t stride : {1, 2, 3, 6}) {
        const int64_t dil = width % 2 == 0 ? 2 : 1, multiplier = k == 5 ? 2 : 1;
        const int64_t pad_lo = k / 2, pad_hi = (k / 2 + stride) % (k / 2 + 1);
        const int64_t reach = dil * (k - 1) + 1;  // the dilated kernel's extent
        const int64_t in_h = reach + k % 3;
        auto out = [&](int64_t in) { return (in + pad_lo + pad_hi - reach) / stride + 1; };
        if (width + pad_lo + pad_hi < reach) continue;  // no output position fits
        const Spec spec{"depthwise width " + std::to_string(width) + " k " + std::to_string(k) +
                            " stride " + std::to_string(stride) + " dilation " +
                            std::to_string(dil),
                        {2, 3, in_h, width},
                        {3 * multiplier, 1, k, k},
                        {{"group", one(3)},
                         {"strides", ints({stride, stride})},
                         {"dilations", ints({dil, dil})},
                         {"pads", ints({pad_lo, pad_lo, pad_hi, pad_hi})}},
                        true,
                        {2, 3 * multiplier, out(in_h), out(width)}};
        for (DType dtype : {DType::Float32, DType::Float16}) check("Conv", spec, dtype, rng);
        const Spec row{"1-D " + spec.label,
                       {1, 4, width},
                       {4, 1, k},
                       {{"group", one(4)},
                        {"strides", ints({stride})},
                        {"dilations", ints({dil})},
                        {"pads", ints({pad_lo, pad_hi})}},
                       false,
                       {1, 4, out(width)}};
        check("Conv", row, DType::Float32, rng);
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 50);
}

// FusedConv (x, w, b, residual z, attrs) with each activation, on one thread and on a pool of
// three, against Conv's output (its W a constant when `constant_w`) with the residual added in
// float and the activation applied after: bit for bit. Returns the outputs, one per (activation,
// thread count), in that order.
std::vector<std::vector<double>> check_fused_epilogue(const HostTensor& x, const HostTensor& w,
                                                      const HostTensor& b, const HostTensor& z,
                                                      const Attrs& attrs,
                                                      std::initializer_list<const char*> acts,
                                                      bool constant_w) {
  OpTester conv("Conv");
  conv.input(x).input(w).input(b);
  if (constant_w) conv.constant_input(1);
  for (const auto& [name, value] : attrs) conv.set_attr_value(name, value);
  EXPECT_TRUE(conv.run().ok());
  const std::vector<double> plain = to_double(conv.output()), residual = to_double(z);
  runtime::ThreadPool pool(3);
  std::vector<std::vector<double>> outputs;
  for (const char* act : acts) {
    for (runtime::ThreadPool* p : {static_cast<runtime::ThreadPool*>(nullptr), &pool}) {
      SCOPED_TRACE(std::string(act) + (p ? " on 3 threads" : " on 1 thread"));
      OpTester fused("FusedConv", "node_1", kTestOpset, "baton");
      fused.pool(p).input(x).input(w).input(b).input(z);
      if (constant_w) fused.constant_input(1);
      for (const auto& [name, value] : attrs) fused.set_attr_value(name, value);
      fused.attr("activation", std::string(act));
      EXPECT_TRUE(fused.run().ok());
      auto a = ops::make_activation(act, {}, "test");
      EXPECT_TRUE(a.ok());
      outputs.push_back(to_double(fused.output()));
      const std::vector<double>& got = outputs.back();
      EXPECT_EQ(got.size(), plain.size());
      for (size_t i = 0; i < got.size() && i < plain.size(); ++i) {
        // Conv's float sum plus the residual, rounded to float as the kernel does, then the
        // activation.
        float v = static_cast<float>(plain[i]) + static_cast<float>(residual[i]);
        ops::apply_activation(*a, &v, 1);
        if (got[i] != static_cast<double>(v)) {
          ADD_FAILURE() << "element " << i << ": " << got[i] << " against " << v;
          break;
        }
      }
    }
  }
  return outputs;
}

// FusedConv's epilogue on the depthwise path runs on each plane as it is computed: the residual
// added and the activation applied match Conv's output with them applied after, on one thread
// and on a pool.
TEST(Conv, DepthwiseFusedEpilogueMatchesConvThenResidualAndActivation) {
  std::mt19937 rng(42);
  const HostTensor x = random_floats(rng, {2, 24, 13, 19});
  const HostTensor w = random_floats(rng, {24, 1, 5, 5});
  const HostTensor b = random_floats(rng, {24});
  const HostTensor z = random_floats(rng, {2, 24, 7, 10});
  check_fused_epilogue(
      x, w, b, z, {{"group", one(24)}, {"strides", ints({2, 2})}, {"pads", ints({2, 2, 2, 2})}},
      {"Relu", "HardSigmoid"}, false);
}

// A float32 W that is a constant of the program is packed at create by row blocks
// (packed_gemm.h's packed_rows_gemm): pointwise and im2col convolutions with a small depth,
// groups, many output channels at a larger depth, few output channels at a large depth
// (DenseNet's), row counts around the 6-row blocks (and packed_gemm's 12), column counts around
// the 64-column panels and 256-column chunks; on one thread and on pools.
std::vector<Spec> packed_conv_specs() {
  return {
      {"pointwise 24 -> 40 over 17x19, bias",
       {2, 24, 17, 19},
       {40, 24, 1, 1},
       {},
       true,
       {2, 40, 17, 19}},
      {"pointwise 16 -> 13 over 7x7", {1, 16, 7, 7}, {13, 16, 1, 1}, {}, false, {1, 13, 7, 7}},
      {"3x3 16 -> 7 pads 1 stride 2 (depth 144)",
       {1, 16, 23, 21},
       {7, 16, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}},
       true,
       {1, 7, 12, 11}},
      {"3x3 group 4 of 8 channels (RegNet's)",
       {1, 32, 14, 14},
       {32, 8, 3, 3},
       {{"group", one(4)}, {"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 32, 14, 14}},
      {"pointwise 300 -> 130 (depth over 192, many rows)",
       {1, 300, 9, 31},
       {130, 300, 1, 1},
       {},
       true,
       {1, 130, 9, 31}},
      {"3x3 128 -> 20 (depth 1152, few output channels)",
       {1, 128, 9, 10},
       {20, 128, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 20, 9, 10}},
      {"3x3 260 -> 7 stride 2 (depth 2340)",
       {1, 260, 11, 9},
       {7, 260, 3, 3},
       {{"strides", ints({2, 2})}},
       true,
       {1, 7, 5, 4}},
      // Stride 1, one group, 2-D, more than 196 output positions: the taps GEMM over a
      // zero-padded image (op_conv.cpp), with begin and end pads that differ, none, a 5x5 and a
      // 1x3 kernel, and rectangular images.
      {"taps 3x3 12 -> 17, pads 2 0 1 3, batch 2",
       {2, 12, 17, 14},
       {17, 12, 3, 3},
       {{"pads", ints({2, 0, 1, 3})}},
       true,
       {2, 17, 18, 15}},
      {"taps 3x3 8 -> 30 without pads", {1, 8, 11, 26}, {30, 8, 3, 3}, {}, false, {1, 30, 9, 24}},
      {"taps 5x5 6 -> 13 pads 2",
       {1, 6, 7, 33},
       {13, 6, 5, 5},
       {{"pads", ints({2, 2, 2, 2})}},
       true,
       {1, 13, 7, 33}},
      {"taps 5x3 over a 3-wide image, pads 5 2 4 2 (a first output row of padding only)",
       {1, 4, 40, 3},
       {5, 4, 5, 3},
       {{"pads", ints({5, 2, 4, 2})}},
       true,
       {1, 5, 45, 5}},
      {"taps 1x3 140 -> 9 pads 0 1 (depth 420, two depth blocks per tap)",
       {1, 140, 5, 40},
       {9, 140, 1, 3},
       {{"pads", ints({0, 1, 0, 1})}},
       true,
       {1, 9, 5, 40}},
      {"1-D kernel 5, 6 -> 25",
       {3, 6, 40},
       {25, 6, 5},
       {{"pads", ints({2, 2})}},
       true,
       {3, 25, 40}},
      // Stride 2 past 196 positions: im2col's rows copied by the vectorized stride-2 copy, in
      // runs of 37-38 and 32-35 elements (whole vectors and a remainder).
      {"3x3 stride 2 pads 1, 3 -> 20 over 21x75",
       {1, 3, 21, 75},
       {20, 3, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}},
       true,
       {1, 20, 11, 38}},
      {"7x7 stride 2 pads 3 (a stem), 3 -> 16 over 40x70",
       {1, 3, 40, 70},
       {16, 3, 7, 7},
       {{"pads", ints({3, 3, 3, 3})}, {"strides", ints({2, 2})}},
       true,
       {1, 16, 20, 35}},
  };
}

// 2-D, one group, at most 196 output positions: the GEMM turned around, positions by output
// channels, with the columns gathered from a channels-last padded image (op_conv.cpp's
// few_positions_item): pointwise and strided 1x1, 3x3 with pads that differ, stride 2, dilation,
// a kernel larger than the image, output channel counts that are not a whole panel (32) and
// depths that are not a multiple of 16, and a depth of 1024 (its rows padded apart).
std::vector<Spec> few_positions_specs() {
  return {
      {"pointwise 40 -> 70 over 7x7, batch 2",
       {2, 40, 7, 7},
       {70, 40, 1, 1},
       {},
       true,
       {2, 70, 7, 7}},
      {"1x1 stride 2 1024 -> 33 from 13x14 (depth 1024)",
       {1, 1024, 13, 14},
       {33, 1024, 1, 1},
       {{"strides", ints({2, 2})}},
       true,
       {1, 33, 7, 7}},
      {"3x3 36 -> 45 pads 2 0 1 3 over 9x8",
       {1, 36, 9, 8},
       {45, 36, 3, 3},
       {{"pads", ints({2, 0, 1, 3})}},
       false,
       {1, 45, 10, 9}},
      {"3x3 stride 2 pads 1 29 -> 64 from 14x14, batch 3",
       {3, 29, 14, 14},
       {64, 29, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}},
       true,
       {3, 64, 7, 7}},
      {"3x3 dilation 2 pads 2 17 -> 5 over 6x11",
       {1, 17, 6, 11},
       {5, 17, 3, 3},
       {{"pads", ints({2, 2, 2, 2})}, {"dilations", ints({2, 2})}},
       true,
       {1, 5, 6, 11}},
      {"7x7 over a 3x3 image, pads 3 (every window mostly padding)",
       {1, 6, 3, 3},
       {11, 6, 7, 7},
       {{"pads", ints({3, 3, 3, 3})}},
       true,
       {1, 11, 3, 3}},
      {"3x3 stride 2 1 -> 3 with a 1x1 output",
       {1, 1, 3, 3},
       {3, 1, 3, 3},
       {{"strides", ints({2, 2})}},
       false,
       {1, 3, 1, 1}},
      {"3x3 96 -> 130 over 14x14 (196 positions, the most on this path)",
       {1, 96, 14, 14},
       {130, 96, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 130, 14, 14}},
  };
}

// im2col's stride-2 rows (conv_common.cpp's vectorized copy_stride2) at every length up to a few
// vectors, from an odd and an even start, against the plain loop.
TEST(Conv, StrideTwoCopyMatchesTheLoopAtEveryLength) {
  std::vector<float> src(200);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.0f;
  for (int64_t start : {0, 1}) {
    for (int64_t count = 0; count <= 70; ++count) {
      std::vector<float> got(static_cast<size_t>(count) + 1, -1.0f);
      kernels::cpu::copy_strided(src.data() + start, 2, count, got.data());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(got[i], src[start + 2 * i]) << "count " << count << " element " << i;
      }
      EXPECT_EQ(got[count], -1.0f) << "wrote past the end at count " << count;
    }
  }
}

TEST(Conv, PackedConstantWeightsMatchTheReference) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(43);
  runtime::ThreadPool two(2), three(3);
  for (runtime::ThreadPool* p : {static_cast<runtime::ThreadPool*>(nullptr), &two, &three}) {
    SCOPED_TRACE(p ? std::to_string(p->size()) + " threads" : "1 thread");
    for (const Spec& spec : packed_conv_specs()) {
      check("Conv", spec, DType::Float32, rng, 21, p, true);
    }
    for (const Spec& spec : few_positions_specs()) {
      check("Conv", spec, DType::Float32, rng, 21, p, true);
    }
  }
  // The kernel multiplies by the copy it packed at create: W's storage changed afterwards leaves
  // the output as it was (a W read in place would change it), and a smaller batch after a resize
  // (dynamic shapes) is the packed W's product with the new X.
  const HostTensor x = random_floats(rng, {3, 16, 10, 12}), w = random_floats(rng, {30, 16, 3, 3});
  OpTester t("Conv");
  t.input(x).input(w).constant_input(1).attr("pads", std::vector<int64_t>{1, 1, 1, 1}).dynamic();
  BATON_ASSERT_OK(t.run());
  const std::vector<double> before = to_double(t.output());
  t.rebind_input(1, random_floats(rng, w.sizes));
  BATON_ASSERT_OK(t.rerun());
  EXPECT_EQ(to_double(t.output()), before);
  const HostTensor small = random_floats(rng, {1, 16, 10, 12});
  BATON_ASSERT_OK(t.resize({small, w}));
  BATON_ASSERT_OK(t.rerun());
  OpTester fresh("Conv");
  fresh.input(small).input(w).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  BATON_ASSERT_OK(fresh.run());
  ASSERT_EQ(t.output().sizes, fresh.output().sizes);
  expect_norm_close(t.output(), to_double(fresh.output()));
}

// Which packed copy a convolution makes says which GEMM runs it: at most 196 output positions
// (2-D, one group) W^T by panels of 32 output channels for the turned-around GEMM
// (packed_size(depth, M)), else W by blocks of 6 rows (packed_rows_size(M, depth)). With 13
// output channels (a group) the two sizes differ on either CPU (32 against 18 rows).
TEST(Conv, FewOutputPositionsTurnTheGemmAround) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(46);
  struct Case {
    std::vector<int64_t> x;
    int64_t kernel, stride, group;
    bool turned;
    int64_t pad = -1;  // -1: kernel / 2
  };
  const Case cases[] = {
      {{1, 16, 7, 7}, 1, 1, 1, true},     // 49 positions, pointwise
      {{1, 16, 14, 14}, 3, 1, 1, true},   // 196, the limit
      {{1, 16, 15, 14}, 3, 1, 1, false},  // 210: the taps GEMM
      {{1, 16, 28, 28}, 3, 2, 1, true},   // 196 after stride 2
      {{1, 16, 8, 8}, 3, 1, 2, false},    // two groups: row blocks per group
      // 49 positions, but pads of 3000 at stride 1000: the channels-last image would be
      // 6003 x 6003 x 16 floats, so im2col's columns (bounded by the output) take it.
      {{1, 16, 5, 5}, 3, 1000, 1, false, 3000},
  };
  for (const Case& c : cases) {
    const int64_t m = 13 * c.group, depth = c.x[1] / c.group * c.kernel * c.kernel;
    const int64_t pad = c.pad >= 0 ? c.pad : c.kernel / 2;
    SCOPED_TRACE(::testing::Message() << c.x[2] << "x" << c.x[3] << " kernel " << c.kernel
                                      << " stride " << c.stride << " group " << c.group);
    OpTester t("Conv");
    t.input(random_floats(rng, c.x))
        .input(random_floats(rng, {m, c.x[1] / c.group, c.kernel, c.kernel}))
        .constant_input(1)
        .attr("pads", std::vector<int64_t>{pad, pad, pad, pad})
        .attr("strides", std::vector<int64_t>{c.stride, c.stride})
        .attr("group", c.group);
    BATON_ASSERT_OK(t.run());
    const int64_t floats = c.turned ? kernels::cpu::packed_size(depth, m)
                                    : c.group * kernels::cpu::packed_rows_size(m / c.group, depth);
    EXPECT_EQ(t.kernel()->held_bytes(), static_cast<uint64_t>(floats) * sizeof(float));
  }
}

// The turned-around GEMM's copies are split over the pool: one thread and three give the same
// bits (copies, and packed_gemm's sums in the same order on any split), pointwise and 3x3.
TEST(Conv, FewOutputPositionsGiveTheSameBitsOnAnyPool) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(47);
  runtime::ThreadPool three(3);
  for (const int64_t k : {1, 3}) {
    SCOPED_TRACE("kernel " + std::to_string(k));
    const HostTensor x = random_floats(rng, {2, 150, 9, 11});
    const HostTensor w = random_floats(rng, {70, 150, k, k});
    std::vector<std::vector<double>> outputs;
    for (runtime::ThreadPool* p : {static_cast<runtime::ThreadPool*>(nullptr), &three}) {
      OpTester t("Conv");
      t.pool(p).input(x).input(w).constant_input(1).attr(
          "pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
      BATON_ASSERT_OK(t.run());
      outputs.push_back(to_double(t.output()));
    }
    EXPECT_EQ(outputs[0], outputs[1]);
  }
}

// The packed convolution's epilogue gives Conv's packed output with it applied after, bit for
// bit, and the same bits on one thread and on three: applied to each part of Y as its sums
// complete on the im2col path (stride 2 here), over the whole item after the taps GEMM (stride 1)
// and after the turned-around GEMM (few output positions).
TEST(Conv, PackedFusedEpilogueMatchesConvThenResidualAndActivation) {
  if (!kernels::cpu::packed_gemm_available()) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(44);
  struct Path {
    const char* name;
    int64_t h, stride;
  };
  for (const Path& path : {Path{"taps GEMM", 25, 1}, Path{"im2col, epilogue in the GEMM", 25, 2},
                           Path{"turned around (68 positions)", 7, 2}}) {
    SCOPED_TRACE(path.name);
    const int64_t stride = path.stride;
    const int64_t out_h = (path.h + 2 - 3) / stride + 1, out_w = (33 + 2 - 3) / stride + 1;
    const HostTensor x = random_floats(rng, {2, 20, path.h, 33});
    const HostTensor w = random_floats(rng, {50, 20, 3, 3});
    const HostTensor b = random_floats(rng, {50});
    const HostTensor z = random_floats(rng, {2, 50, out_h, out_w});
    const auto outputs = check_fused_epilogue(
        x, w, b, z, {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({stride, stride})}},
        {"Relu", "HardSwish"}, true);
    ASSERT_EQ(outputs.size(), 4u);
    EXPECT_EQ(outputs[0], outputs[1]);  // one thread and three
    EXPECT_EQ(outputs[2], outputs[3]);
  }
}

// FusedConv's "Silu" activation (fuse-conv's Sigmoid(v) * v) gives what the unfused nodes give:
// Conv (plus the residual), the Sigmoid kernel, then the product, bit for bit, on the im2col,
// packed and depthwise paths, on one thread and on three.
TEST(Conv, SiluEpilogueGivesTheSigmoidAndMulBits) {
  std::mt19937 rng(45);
  struct Path {
    const char* name;
    std::vector<int64_t> x, w;
    Attrs attrs;
    bool constant_w, residual;
  };
  const Path paths[] = {
      {"im2col, depth 360 (OpenBLAS)", {1, 40, 9, 11}, {24, 40, 3, 3}, {}, false, true},
      {"packed, depth 180",
       {2, 20, 15, 15},
       {50, 20, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       false},
      {"packed and turned around (56 positions), depth 180",
       {2, 20, 7, 8},
       {50, 20, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       true},
      {"depthwise 5x5 stride 2",
       {2, 24, 13, 19},
       {24, 1, 5, 5},
       {{"group", one(24)}, {"strides", ints({2, 2})}, {"pads", ints({2, 2, 2, 2})}},
       false,
       true},
  };
  runtime::ThreadPool pool(3);
  for (const Path& p : paths) {
    SCOPED_TRACE(p.name);
    // Inputs from -4 to 4, so that the sigmoid's both branches and its saturation are exercised.
    const HostTensor x = random_floats(rng, p.x, -4.0f, 4.0f);
    const HostTensor w = random_floats(rng, p.w);
    const HostTensor b = random_floats(rng, {p.w[0]});
    OpTester conv("Conv");
    conv.input(x).input(w).input(b);
    if (p.constant_w) conv.constant_input(1);
    for (const auto& [name, value] : p.attrs) conv.set_attr_value(name, value);
    BATON_ASSERT_OK(conv.run());
    HostTensor v = conv.output();
    const HostTensor z = random_floats(rng, v.sizes);
    if (p.residual) {
      for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] += z.data<float>()[i];
    }
    OpTester sigmoid("Sigmoid");
    sigmoid.input(v);
    BATON_ASSERT_OK(sigmoid.run());
    for (runtime::ThreadPool* threads : {static_cast<runtime::ThreadPool*>(nullptr), &pool}) {
      SCOPED_TRACE(threads != nullptr ? "3 threads" : "1 thread");
      OpTester fused("FusedConv", "node_1", kTestOpset, "baton");
      fused.pool(threads).input(x).input(w).input(b);
      if (p.residual) fused.input(z);
      if (p.constant_w) fused.constant_input(1);
      for (const auto& [name, value] : p.attrs) fused.set_attr_value(name, value);
      fused.attr("activation", std::string("Silu"));
      BATON_ASSERT_OK(fused.run());
      const HostTensor& got = fused.output();
      ASSERT_EQ(got.numel(), v.numel());
      for (int64_t i = 0; i < v.numel(); ++i) {
        const float want = v.data<float>()[i] * sigmoid.output().data<float>()[i];
        ASSERT_EQ(got.data<float>()[i], want) << "element " << i;
      }
    }
  }
}

TEST(Conv, Opset1DefinitionRunsTheSame) {
  std::mt19937 rng(12);
  ASSERT_NE(ops::op_registry().find("Conv", "", 1), nullptr);
  EXPECT_EQ(ops::op_registry().find("Conv", "", 10)->since_version, 1);
  EXPECT_EQ(ops::op_registry().find("Conv", "", 21)->since_version, 11);
  check("Conv", conv_specs()[0], DType::Float32, rng, /*opset=*/8);
}

TEST(Conv, CanonicalAttributesAreAFixpoint) {
  std::mt19937 rng(13);
  OpTester t("Conv");
  t.input(random_floats(rng, {1, 2, 6, 7})).input(random_floats(rng, {3, 2, 3, 3}));
  t.attr("auto_pad", std::string("SAME_LOWER")).attr("strides", std::vector<int64_t>{2, 2});
  BATON_ASSERT_OK(t.infer());
  const std::vector<ops::AttrValue> canonical = t.canonical_attrs();
  EXPECT_EQ(canonical[static_cast<size_t>(t.def().attr_index("auto_pad"))].s, "NOTSET");
  EXPECT_EQ(canonical_ints(t, "kernel_shape"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(canonical_ints(t, "dilations"), (std::vector<int64_t>{1, 1}));
  // Inference on the canonical attributes leaves them as they are (the loader's check).
  OpTester again("Conv");
  again.input(HostTensor(DType::Float32, {1, 2, 6, 7}))
      .input(HostTensor(DType::Float32, {3, 2, 3, 3}));
  for (size_t i = 0; i < canonical.size(); ++i) {
    again.set_attr_value(t.def().attrs[i].name, canonical[i]);
  }
  BATON_ASSERT_OK(again.infer());
  EXPECT_EQ(again.canonical_attrs(), canonical);
  EXPECT_EQ(again.metas()[0].sizes, t.metas()[0].sizes);
}

TEST(Conv, EmptyTensors) {
  std::mt19937 rng(14);
  // Batch 0: nothing to compute.
  check("Conv", {"batch 0", {0, 3, 5, 5}, {4, 3, 3, 3}, {}, true, {0, 4, 3, 3}}, DType::Float32,
        rng);
  // No input channels: every output is its bias.
  check("Conv", {"no input channels", {2, 0, 4, 4}, {3, 0, 3, 3}, {}, true, {2, 3, 2, 2}},
        DType::Float32, rng);
  // No output channels.
  check("Conv", {"no output channels", {2, 3, 4, 4}, {0, 3, 3, 3}, {}, false, {2, 0, 2, 2}},
        DType::Float32, rng);
  // An empty spatial axis padded out to a full window: the output is the bias.
  check("Conv",
        {"empty spatial axis with pads",
         {1, 2, 0, 4},
         {3, 2, 1, 3},
         {{"pads", ints({1, 0, 1, 0})}},
         true,
         {1, 3, 2, 2}},
        DType::Float16, rng);
  // An empty spatial axis without pads: an empty output.
  check("Conv", {"empty spatial axis", {1, 2, 0, 4}, {3, 2, 1, 3}, {}, true, {1, 3, 0, 2}},
        DType::Float32, rng);
  // Empty with huge other dimensions: nothing is sized by them.
  const int64_t large = int64_t{1} << 20;
  OpTester huge("Conv");
  huge.input(HostTensor(DType::Float32, {0, 2, large, large}))
      .input(HostTensor(DType::Float32, {3, 2, 1, 1}));
  BATON_ASSERT_OK(huge.run());
  EXPECT_EQ(huge.output().sizes, (std::vector<int64_t>{0, 3, large, large}));
}

std::vector<Spec> conv_transpose_specs() {
  return {
      {"2-D default (the ONNX example)", {1, 1, 3, 3}, {1, 2, 3, 3}, {}, false, {1, 2, 5, 5}},
      {"strides (3, 2), output_padding, pads, batch 2, bias",
       {2, 3, 3, 4},
       {3, 2, 3, 3},
       {{"strides", ints({3, 2})}, {"output_padding", ints({1, 1})}, {"pads", ints({1, 2, 0, 1})}},
       true,
       {2, 2, 9, 7}},
      {"1-D group 2 dilation 2 stride 2",
       {2, 4, 6},
       {4, 3, 3},
       {{"group", one(2)}, {"dilations", ints({2})}, {"strides", ints({2})}},
       true,
       {2, 6, 15}},
      {"3-D", {1, 2, 3, 4, 5}, {2, 2, 3, 3, 3}, {}, true, {1, 2, 5, 6, 7}},
      {"3-D group 2, strides (2, 1, 2)",
       {2, 4, 2, 3, 2},
       {4, 1, 2, 2, 3},
       {{"group", one(2)}, {"strides", ints({2, 1, 2})}, {"pads", ints({0, 1, 0, 1, 0, 1})}},
       false,
       {2, 2, 3, 3, 4}},
      {"output_shape (pads generated, the odd one at the beginning)",
       {1, 1, 3, 3},
       {1, 2, 3, 3},
       {{"strides", ints({3, 2})}, {"output_shape", ints({8, 6})}},
       false,
       {1, 2, 8, 6},
       {1, 1, 0, 0}},
      {"output_shape past the natural size (bias-only elements at the end)",
       {1, 1, 3, 3},
       {1, 2, 3, 3},
       {{"strides", ints({3, 2})}, {"output_shape", ints({10, 8})}},
       true,
       {1, 2, 10, 8},
       {0, 0, 0, 0}},
      {"output_shape [N, M, ...] (ONNX Runtime's form)",
       {1, 1, 3, 3},
       {1, 2, 3, 3},
       {{"strides", ints({3, 2})}, {"output_shape", ints({1, 2, 10, 8})}},
       false,
       {1, 2, 10, 8},
       {0, 0, 0, 0}},
      {"SAME_UPPER stride 2 (odd padding at the end)",
       {1, 2, 3, 3},
       {2, 3, 3, 3},
       {{"auto_pad", str("SAME_UPPER")}, {"strides", ints({2, 2})}},
       true,
       {1, 3, 6, 6},
       {0, 0, 1, 1}},
      {"SAME_LOWER stride 2 (odd padding at the beginning)",
       {1, 2, 3, 3},
       {2, 3, 3, 3},
       {{"auto_pad", str("SAME_LOWER")}, {"strides", ints({2, 2})}},
       false,
       {1, 3, 6, 6},
       {1, 1, 0, 0}},
      {"VALID", {1, 2, 3, 2}, {2, 1, 2, 2}, {{"auto_pad", str("VALID")}}, false, {1, 1, 4, 3}},
      {"pointwise 1x1 group 2, batch 2",
       {2, 4, 3, 5},
       {4, 3, 1, 1},
       {{"group", one(2)}},
       true,
       {2, 6, 3, 5}},
      {"col2im in two column tiles (144 rows x 9216 columns)",
       {1, 4, 96, 96},
       {4, 16, 3, 3},
       {{"pads", ints({1, 1, 1, 1})}},
       true,
       {1, 16, 96, 96}},
  };
}

TEST(ConvTranspose, MatchesReferenceInEveryFloatType) {
  std::mt19937 rng(21);
  for (const Spec& spec : conv_transpose_specs()) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      check("ConvTranspose", spec, dtype, rng);
    }
  }
}

TEST(ConvTranspose, ThreadedPathsMatchTheReference) {
  std::mt19937 rng(23);
  const Spec large = {"3x3 64 -> 32 from 16x16: the GEMM split",
                      {1, 64, 16, 16},
                      {64, 32, 3, 3},
                      {{"pads", ints({1, 1, 1, 1})}},
                      true,
                      {1, 32, 16, 16}};
  const Spec pointwise = {
      "pointwise 96 -> 64 on 24x24", {1, 96, 24, 24}, {96, 64, 1, 1}, {}, false, {1, 64, 24, 24}};
  for (unsigned threads : {2u, 3u}) {
    runtime::ThreadPool pool(threads);
    for (const Spec& spec : conv_transpose_specs()) {
      check("ConvTranspose", spec, DType::Float32, rng, 21, &pool);
    }
    for (const Spec* spec : {&large, &pointwise}) {
      const uint64_t before = pool.dispatched();
      check("ConvTranspose", *spec, DType::Float32, rng, 21, &pool);
      EXPECT_GT(pool.dispatched(), before) << spec->label << ": nothing ran on the workers";
    }
  }
}

// A constant float32 W: each group's W^T packed at create, the products through Baton's packed
// kernel (op_conv_transpose.cpp), pointwise and through col2im, on one thread and on pools; the
// same reference as the OpenBLAS path.
TEST(ConvTranspose, ConstantWeightsArePackedAndMatchTheReference) {
  std::mt19937 rng(29);
  std::vector<Spec> specs = conv_transpose_specs();
  specs.push_back({"2x2 stride 2 128 -> 64 from 16x16 (a UNet's upsampling)",
                   {1, 128, 16, 16},
                   {128, 64, 2, 2},
                   {{"strides", ints({2, 2})}},
                   true,
                   {1, 64, 32, 32}});
  specs.push_back({"pointwise 96 -> 64 on 24x24, bias",
                   {2, 96, 24, 24},
                   {96, 64, 1, 1},
                   {},
                   true,
                   {2, 64, 24, 24}});
  for (unsigned threads : {1u, 2u, 3u}) {
    SCOPED_TRACE(threads);
    runtime::ThreadPool pool(threads);
    for (const Spec& spec : specs) {
      if (spec.x[1] == 0 || spec.w[1] == 0) continue;  // nothing to pack
      check("ConvTranspose", spec, DType::Float32, rng, 21, threads > 1 ? &pool : nullptr,
            /*constant_w=*/true);
    }
  }
}

TEST(ConvTranspose, Opset1DefinitionAndCanonicalForm) {
  std::mt19937 rng(22);
  EXPECT_EQ(ops::op_registry().find("ConvTranspose", "", 8)->since_version, 1);
  EXPECT_EQ(ops::op_registry().find("ConvTranspose", "", 21)->since_version, 11);
  check("ConvTranspose", conv_transpose_specs()[1], DType::Float32, rng, /*opset=*/8);
  // output_shape becomes pads plus output_padding, and the canonical form is a fixpoint.
  OpTester t("ConvTranspose");
  t.input(HostTensor(DType::Float32, {1, 1, 3, 3})).input(HostTensor(DType::Float32, {1, 2, 3, 3}));
  t.attr("strides", std::vector<int64_t>{3, 2}).attr("output_shape", std::vector<int64_t>{10, 8});
  BATON_ASSERT_OK(t.infer());
  EXPECT_EQ(canonical_ints(t, "output_padding"), (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(t.canonical_attrs()[static_cast<size_t>(t.def().attr_index("output_shape"))].none);
  const std::vector<ops::AttrValue> canonical = t.canonical_attrs();
  OpTester again("ConvTranspose");
  again.input(HostTensor(DType::Float32, {1, 1, 3, 3}))
      .input(HostTensor(DType::Float32, {1, 2, 3, 3}));
  for (size_t i = 0; i < canonical.size(); ++i) {
    again.set_attr_value(t.def().attrs[i].name, canonical[i]);
  }
  BATON_ASSERT_OK(again.infer());
  EXPECT_EQ(again.canonical_attrs(), canonical);
  EXPECT_EQ(again.metas()[0].sizes, (std::vector<int64_t>{1, 2, 10, 8}));
}

TEST(ConvTranspose, EmptyTensors) {
  std::mt19937 rng(23);
  check("ConvTranspose", {"batch 0", {0, 2, 3, 3}, {2, 3, 3, 3}, {}, true, {0, 3, 5, 5}},
        DType::Float32, rng);
  check("ConvTranspose", {"no input channels", {2, 0, 3, 3}, {0, 3, 3, 3}, {}, true, {2, 3, 5, 5}},
        DType::BFloat16, rng);
  check("ConvTranspose",
        {"no output channels", {2, 2, 3, 3}, {2, 0, 3, 3}, {}, false, {2, 0, 5, 5}}, DType::Float32,
        rng);
  // No input positions: the kernel's reach alone, filled with the bias.
  check("ConvTranspose", {"empty spatial axis", {1, 2, 0, 3}, {2, 3, 2, 2}, {}, true, {1, 3, 1, 4}},
        DType::Float32, rng);
}

// ---- Errors ------------------------------------------------------------------------------------

struct ErrorCase {
  const char* op;
  std::vector<int64_t> x, w;
  std::vector<int64_t> b;  // empty: no bias
  Attrs attrs;
  const char* fragment;
};

TEST(ConvErrors, AttributesAndShapesAreRefusedNamingTheNode) {
  const int64_t big = int64_t{1} << 62;
  const ErrorCase cases[] = {
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"auto_pad", str("SAME")}}, "'auto_pad' is 'SAME'"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"group", one(0)}}, "'group' is 0"},
      {"Conv", {1, 4, 5}, {3, 2, 3}, {}, {{"group", one(2)}}, "not divisible by group 2"},
      {"Conv", {1, 4, 5}, {4, 3, 3}, {}, {}, "times group 1 that must be X's 4 channels"},
      {"Conv", {1, 2, 5, 5}, {3, 2, 3}, {}, {}, "W must be [M, C / group, k1, ...]"},
      {"Conv", {2, 5}, {3, 2}, {}, {}, "at least one spatial axis"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"kernel_shape", ints({2})}}, "'kernel_shape' [2]"},
      {"Conv", {1, 2, 5}, {3, 2, 0}, {}, {}, "empty kernel"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"strides", ints({0})}}, "'strides' [0] has 0"},
      {"Conv", {1, 2, 5, 5}, {3, 2, 3, 3}, {}, {{"strides", ints({1})}}, "needs 2"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"dilations", ints({-1})}}, "'dilations'"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"pads", ints({1, -1})}}, "each must be >= 0"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"pads", ints({1, 1, 1})}}, "needs 2"},
      {"Conv",
       {1, 2, 5},
       {3, 2, 3},
       {},
       {{"pads", ints({1, 1})}, {"auto_pad", str("SAME_UPPER")}},
       "both set"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {4}, {}, "B must be [3]"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {3, 1}, {}, "B must be [3]"},
      {"Conv", {1, 2, 2}, {3, 2, 3}, {}, {}, "shorter than the dilated kernel (3)"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"dilations", ints({3})}}, "dilated kernel (7)"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"pads", ints({big, big})}}, "overflows int64"},
      {"Conv", {1, 2, 5}, {3, 2, 3}, {}, {{"dilations", ints({big})}}, "overflows int64"},
      {"ConvTranspose", {1, 2, 5}, {3, 2, 3}, {}, {}, "X's 2 input channels first"},
      {"ConvTranspose", {1, 3, 5}, {3, 2, 3}, {}, {{"group", one(2)}}, "not divisible by group"},
      {"ConvTranspose", {1, 2, 5}, {2, 3, 3}, {2}, {}, "B must be [3]"},
      {"ConvTranspose",
       {1, 2, 5},
       {2, 3, 3},
       {},
       {{"output_shape", ints({1, 2})}},
       "'output_shape' [1, 2] must have one size per spatial axis"},
      {"ConvTranspose", {1, 2, 5}, {2, 3, 3}, {}, {{"output_shape", ints({-4})}}, "negative"},
      {"ConvTranspose",
       {1, 2, 5},
       {2, 3, 3},
       {},
       {{"output_padding", ints({-1})}},
       "'output_padding'"},
      {"ConvTranspose",
       {1, 2, 5},
       {2, 3, 3},
       {},
       {{"output_padding", ints({2})}, {"strides", ints({2})}},
       "less than max(stride, dilation) = 2"},
      {"ConvTranspose",
       {1, 2, 3, 3},
       {2, 3, 3, 3},
       {},
       {{"output_shape", ints({12, 8})}, {"strides", ints({3, 2})}},
       "spatial axis 0 of size 12 (attribute 'output_shape') is 3 past the 9 elements"},
      {"ConvTranspose", {1, 2, 5}, {2, 3, 3}, {}, {{"pads", ints({4, 4})}}, "remove more than"},
      {"ConvTranspose", {1, 2, 5}, {2, 3, 3}, {}, {{"strides", ints({big})}}, "overflows int64"},
      {"ConvTranspose",
       {1, 2, 5},
       {2, 3, 3},
       {},
       {{"pads", ints({0, 0})}, {"auto_pad", str("VALID")}},
       "both set"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(std::string(c.op) + ": " + c.fragment);
    OpTester t(c.op);
    t.input(HostTensor(DType::Float32, c.x)).input(HostTensor(DType::Float32, c.w));
    if (!c.b.empty()) t.input(HostTensor(DType::Float32, c.b));
    for (const auto& [name, value] : c.attrs) t.set_attr_value(name, value);
    expect_error(t.infer(), Error::InvalidArgument, c.op, c.fragment);
  }
}

TEST(ConvErrors, IntegerTypesAreRefused) {
  OpTester t("Conv");
  t.input(HostTensor(DType::Int32, {1, 2, 5})).input(HostTensor(DType::Int32, {3, 2, 3}));
  EXPECT_EQ(t.infer().code(), Error::InvalidArgument);
}

}  // namespace
}  // namespace baton::testing
