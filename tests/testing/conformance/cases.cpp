#include "testing/conformance/cases.h"

#include <fmt/format.h>

#include <map>

#include "baton/core/tensor.h"
#include "ops/elementwise.h"

namespace baton::testing {
namespace {

using ops::AttrValue;

// Value domains where an op is defined (and not too steep for low precisions).
struct Domain {
  double lo, hi, min_abs;
};
const std::map<std::string, std::vector<Domain>>& domains() {
  static const std::map<std::string, std::vector<Domain>> d = {
      {"Log", {{0.25, 8, 0}}},
      {"Sqrt", {{0, 8, 0}}},
      {"Reciprocal", {{-4, 4, 0.25}}},
      {"Exp", {{-3, 3, 0}}},
      {"Div", {{-4, 4, 0}, {-4, 4, 0.5}}},
      {"Pow", {{0.5, 2, 0}, {-2, 2, 0}}},
      {"Erf", {{-3, 3, 0}}},
      {"Tanh", {{-3, 3, 0}}},
      {"Sigmoid", {{-6, 6, 0}}},
  };
  return d;
}

CaseInput in(std::vector<int64_t> sizes, const std::string& op = "", size_t index = 0) {
  CaseInput c;
  c.sizes = std::move(sizes);
  auto it = domains().find(op);
  if (it != domains().end() && index < it->second.size()) {
    c.lo = it->second[index].lo;
    c.hi = it->second[index].hi;
    c.min_abs = it->second[index].min_abs;
  }
  return c;
}

CaseInput shape_input(std::vector<int64_t> values) {
  CaseInput c;
  c.sizes = {static_cast<int64_t>(values.size())};
  c.int64s = std::move(values);
  c.dtype = DType::Int64;
  c.constant = true;
  return c;
}

CaseInput constant(CaseInput c) {
  c.constant = true;
  return c;
}

Case make(std::string op, std::string label, std::vector<CaseInput> inputs,
          std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
  Case c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.inputs = std::move(inputs);
  c.attrs = std::move(attrs);
  return c;
}

// Default generators for the elementwise table's rows.
void elementwise_cases(std::vector<Case>& out) {
  for (const ops::ElementwiseRow& row : ops::elementwise_rows()) {
    const std::string op(row.name);
    if (row.arity == 1) {
      for (std::vector<int64_t> s :
           std::vector<std::vector<int64_t>>{{}, {1}, {17}, {3, 5}, {2, 3, 7}}) {
        out.push_back(make(op, shape_to_string(s), {in(s, op)}));
      }
      continue;
    }
    const std::pair<std::vector<int64_t>, std::vector<int64_t>> pairs[] = {
        {{3, 5}, {3, 5}}, {{3, 5}, {5}}, {{2, 1, 4}, {3, 1}}, {{}, {4}}, {{7}, {1}}, {{5, 1}, {}},
    };
    for (const auto& [a, b] : pairs) {
      out.push_back(
          make(op, shape_to_string(a) + " x " + shape_to_string(b), {in(a, op, 0), in(b, op, 1)}));
    }
    // A constant operand (weights, biases) folds into the GPU kernel as data or a literal.
    out.push_back(make(op, "[4, 6] x constant [6]", {in({4, 6}, op, 0), constant(in({6}, op, 1))}));
    out.push_back(
        make(op, "[4, 6] x constant scalar", {in({4, 6}, op, 0), constant(in({}, op, 1))}));
  }
}

void gemm_cases(std::vector<Case>& out) {
  struct G {
    int64_t m, k, n;
    int ta, tb;
    double alpha, beta;
    int c;  // 0 none, 1 row vector, 2 [m, n], 3 scalar, 4 runtime [m, n], 5 column [m, 1]
  };
  for (const G& g : {G{5, 37, 19, 0, 1, 1.0, 1.0, 1}, G{8, 64, 33, 0, 0, 1.0, 1.0, 0},
                     G{3, 17, 9, 1, 0, 0.5, 2.0, 2}, G{7, 13, 11, 1, 1, 1.5, 0.25, 3},
                     G{6, 29, 10, 0, 1, 1.0, 0.5, 4}, G{1, 100, 3, 0, 1, 1.0, 1.0, 1},
                     G{4, 9, 6, 0, 0, 1.0, 1.0, 5}}) {
    std::vector<CaseInput> ins = {
        in(g.ta ? std::vector<int64_t>{g.k, g.m} : std::vector<int64_t>{g.m, g.k}),
        constant(in(g.tb ? std::vector<int64_t>{g.n, g.k} : std::vector<int64_t>{g.k, g.n}))};
    if (g.c == 1) ins.push_back(constant(in({g.n})));
    if (g.c == 2) ins.push_back(constant(in({g.m, g.n})));
    if (g.c == 3) ins.push_back(constant(in({1})));
    if (g.c == 4) ins.push_back(in({g.m, g.n}));
    if (g.c == 5) ins.push_back(constant(in({g.m, 1})));
    out.push_back(make("Gemm",
                       fmt::format("m={} k={} n={} transA={} transB={} alpha={} beta={} C={}", g.m,
                                   g.k, g.n, g.ta, g.tb, g.alpha, g.beta, g.c),
                       ins,
                       {{"transA", AttrValue::of_int(g.ta)},
                        {"transB", AttrValue::of_int(g.tb)},
                        {"alpha", AttrValue::of_float(g.alpha)},
                        {"beta", AttrValue::of_float(g.beta)}}));
  }
}

void matmul_cases(std::vector<Case>& out) {
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, bool> shapes[] = {
      {{5, 37}, {37, 19}, true},
      {{2, 7, 13}, {13, 11}, true},
      {{3, 5, 9}, {3, 9, 6}, false},
      {{5, 9}, {4, 9, 7}, false},
      {{2, 3, 4, 5}, {2, 3, 5, 3}, false},
      {{17}, {17, 3}, true},
      {{4, 17}, {17}, false},
      {{2, 1, 3, 4}, {5, 4, 2}, false},
  };
  for (const auto& [a, b, b_constant] : shapes) {
    CaseInput bi = in(b);
    bi.constant = b_constant;
    out.push_back(make("MatMul", shape_to_string(a) + " x " + shape_to_string(b), {in(a), bi}));
    // Batch dimensions that broadcast against each other (not one side only, not equal) are
    // beyond cuBLASLt's strided batches: the CPU runs them.
    std::vector<int64_t> ab(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
    std::vector<int64_t> bb(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
    out.back().cuda = ab.empty() || bb.empty() || ab == bb;
  }
}

void other_cases(std::vector<Case>& out) {
  for (const char* form : {"none", "tanh"}) {
    out.push_back(make("Gelu", std::string(form) + " [3, 33]", {in({3, 33})},
                       {{"approximate", AttrValue::of_string(form)}}));
  }
  for (int64_t axis : {-1, 0, 1, 2}) {
    out.push_back(make("Softmax", fmt::format("[3, 17, 45] axis {}", axis), {in({3, 17, 45})},
                       {{"axis", AttrValue::of_int(axis)}}));
  }
  out.push_back(make("Softmax", "[2, 3000] wide rows", {in({2, 3000}, "", 0)}));
  for (std::vector<int64_t> perm :
       std::vector<std::vector<int64_t>>{{1, 0}, {0, 2, 1}, {2, 0, 1}, {0, 3, 2, 1}}) {
    std::vector<int64_t> sizes = {2, 3, 5, 7};
    sizes.resize(perm.size());
    out.push_back(make("Transpose", shape_to_string(sizes) + " perm " + shape_to_string(perm),
                       {in(sizes)}, {{"perm", AttrValue::of_ints(perm)}}));
  }
  out.push_back(make("Transpose", "[4, 6] default perm", {in({4, 6})}));
  out.push_back(make("Concat", "[2, 3] [2, 4] axis 1", {in({2, 3}), in({2, 4})},
                     {{"axis", AttrValue::of_int(1)}}));
  out.push_back(make("Concat", "[2, 3, 5] x3 axis -3",
                     {in({2, 3, 5}), in({1, 3, 5}), in({3, 3, 5})},
                     {{"axis", AttrValue::of_int(-3)}}));
  out.push_back(make("Concat", "[4, 2] with a constant", {in({4, 2}), constant(in({4, 1}))},
                     {{"axis", AttrValue::of_int(-1)}}));
  out.push_back(make("Identity", "[3, 5]", {in({3, 5})}));
  out.push_back(make("Reshape", "[6, 4] -> [3, -1, 2]", {in({6, 4}), shape_input({3, -1, 2})}));
  out.push_back(make("Reshape", "[2, 3, 4] -> [0, 12]", {in({2, 3, 4}), shape_input({0, 12})}));
  for (int64_t axis : {0, 1, 2, -1}) {
    out.push_back(make("Flatten", fmt::format("[2, 3, 4] axis {}", axis), {in({2, 3, 4})},
                       {{"axis", AttrValue::of_int(axis)}}));
  }
  out.push_back(
      make("Squeeze", "[3, 1, 5, 1] axes [1, -1]", {in({3, 1, 5, 1}), shape_input({1, -1})}));
  out.push_back(make("Squeeze", "[1, 4, 1] all", {in({1, 4, 1})}));
  out.push_back(make("Unsqueeze", "[3, 5] axes [0, 3]", {in({3, 5}), shape_input({0, 3})}));
}

// LayerNormalization and the optimizer's canonical ops (only Linear has a GPU lowering yet; the
// rest is issue 11).
void normalization_and_canonical_cases(std::vector<Case>& out) {
  auto cpu_only = [](Case c) {
    c.cuda = false;
    return c;
  };
  auto baton_op = [&](Case c) {
    c.domain = "baton";
    return cpu_only(std::move(c));
  };
  const AttrValue eps = AttrValue::of_float(1e-3);
  out.push_back(cpu_only(make("LayerNormalization", "[2, 5, 16] axis -1",
                              {in({2, 5, 16}), in({16}), in({16})}, {{"epsilon", eps}})));
  out.push_back(cpu_only(make("LayerNormalization", "[3, 4, 6] axis 1, broadcast scale",
                              {in({3, 4, 6}), in({1, 6}), in({4, 1})},
                              {{"axis", AttrValue::of_int(1)}, {"epsilon", eps}})));
  out.push_back(cpu_only(
      make("LayerNormalization", "[7, 9] no bias", {in({7, 9}), in({9})}, {{"epsilon", eps}})));
  out.push_back(
      baton_op(make("AddLayerNorm", "[2, 5, 16]",
                    {in({2, 5, 16}), in({2, 5, 16}), in({16}), in({16})}, {{"epsilon", eps}})));
  Case with_sum = baton_op(make("AddLayerNorm", "[4, 12] with Sum",
                                {in({4, 12}), in({4, 12}), in({12})}, {{"epsilon", eps}}));
  with_sum.outputs = 2;
  out.push_back(with_sum);
  // One-output Linears run on the GPU (the GEMM lowering, bias in cuBLASLt's epilogue).
  auto on_gpu = [](Case c) {
    c.cuda = true;
    return c;
  };
  out.push_back(on_gpu(baton_op(make("Linear", "[2, 3, 8] x [8, 5] + [5]",
                                     {in({2, 3, 8}), constant(in({8, 5})), constant(in({5}))}))));
  out.push_back(
      on_gpu(baton_op(make("Linear", "[6, 4] x [4, 3] no bias", {in({6, 4}), in({4, 3})}))));
  Case split = baton_op(make("Linear", "[5, 8] x [8, 9] splits [2, 3, 4]",
                             {in({5, 8}), constant(in({8, 9})), constant(in({9}))},
                             {{"splits", AttrValue::of_ints({2, 3, 4})}}));
  split.outputs = 3;
  out.push_back(split);
  const AttrValue scale = AttrValue::of_float(0.125);
  out.push_back(
      baton_op(make("Attention", "[2, 3, 5, 8] no mask",
                    {in({2, 3, 5, 8}), in({2, 3, 7, 8}), in({2, 3, 7, 4})}, {{"scale", scale}})));
  out.push_back(
      baton_op(make("Attention", "[2, 2, 4, 8] K transposed, additive mask [2, 1, 1, 6]",
                    {in({2, 2, 4, 8}), in({2, 2, 8, 6}), in({2, 2, 6, 8}), in({2, 1, 1, 6})},
                    {{"scale", scale},
                     {"k_transposed", AttrValue::of_int(1)},
                     {"mask_kind", AttrValue::of_string("add")}})));
}

}  // namespace

std::vector<Case> conformance_cases() {
  std::vector<Case> out;
  elementwise_cases(out);
  gemm_cases(out);
  matmul_cases(out);
  other_cases(out);
  normalization_and_canonical_cases(out);
  return out;
}

std::string case_name(const Case& c, DType dtype) {
  return fmt::format("{} {} {}", c.op, c.label, dtype_name(dtype));
}

}  // namespace baton::testing
