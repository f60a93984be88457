#include "testing/conformance/cases.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "baton/core/tensor.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

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
      {"Acos", {{-1, 1, 0}}},
      {"Asin", {{-1, 1, 0}}},
      {"Atanh", {{-0.96875, 0.96875, 0}}},
      {"Acosh", {{1, 8, 0}}},
      {"Tan", {{-1.5, 1.5, 0}}},
      {"Sinh", {{-3, 3, 0}}},
      {"Cosh", {{-3, 3, 0}}},
      {"Elu", {{-3, 3, 0}}},
      {"Selu", {{-3, 3, 0}}},
      {"Celu", {{-3, 3, 0}}},
      {"Softplus", {{-6, 6, 0}}},
      // Few distinct values, so that Equal finds equal pairs.
      {"Equal", {{-1, 1, 0}, {-1, 1, 0}}},
      {"PRelu", {{-4, 4, 0}, {-1, 1, 0}}},
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

// Attribute values the generated cases try besides the defaults, per row with attributes.
const std::map<std::string, std::vector<std::vector<std::pair<std::string, AttrValue>>>>&
attribute_variants() {
  static const std::map<std::string, std::vector<std::vector<std::pair<std::string, AttrValue>>>>
      v = {
          {"Celu", {{{"alpha", AttrValue::of_float(0.5)}}, {{"alpha", AttrValue::of_float(-2)}}}},
          {"Elu", {{{"alpha", AttrValue::of_float(0.25)}}}},
          {"HardSigmoid",
           {{{"alpha", AttrValue::of_float(0.5)}, {"beta", AttrValue::of_float(0.25)}}}},
          {"IsInf",
           {{{"detect_negative", AttrValue::of_int(0)}},
            {{"detect_positive", AttrValue::of_int(0)}}}},
          {"LeakyRelu", {{{"alpha", AttrValue::of_float(0.375)}}}},
          {"Selu", {{{"alpha", AttrValue::of_float(2)}, {"gamma", AttrValue::of_float(0.5)}}}},
          {"Shrink", {{{"bias", AttrValue::of_float(1.5)}, {"lambd", AttrValue::of_float(1.25)}}}},
          {"ThresholdedRelu", {{{"alpha", AttrValue::of_float(-0.5)}}}},
      };
  return v;
}

// Bool-valued rows the CUDA engine lowers as typed kernels of their own (its fused kernels are
// float-only), in every dtype.
// Rows whose cases are written out below instead of generated (Mod: fmod = 0 is for integers).
bool hand_written(std::string_view op) { return op == "Mod"; }

// Default generators for the elementwise table's rows. Bool rows (And, Not, ...) run on bool
// inputs only; rows with a device expression are expected to run on the CUDA engine.
void elementwise_cases(std::vector<Case>& out) {
  for (const ops::ElementwiseRow& row : ops::elementwise_rows()) {
    const std::string op(row.name);
    if (hand_written(op)) continue;
    const bool bools = row.types == ops::kBoolTypes;
    auto add = [&](std::string label, std::vector<CaseInput> inputs,
                   std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
      Case c = make(op, std::move(label), std::move(inputs), std::move(attrs));
      if (bools) {
        for (CaseInput& i : c.inputs) {
          i.dtype = DType::Bool;
          i.lo = 0;
          i.hi = 1;
        }
        c.dtypes = {DType::Bool};
      }
      c.cuda = row.on_device();
      c.cuda_all_types = row.typed_on_device();
      out.push_back(std::move(c));
    };
    if (row.arity == 1) {
      for (std::vector<int64_t> s :
           std::vector<std::vector<int64_t>>{{}, {1}, {17}, {3, 5}, {2, 3, 7}}) {
        add(shape_to_string(s), {in(s, op)});
      }
      auto it = attribute_variants().find(op);
      if (it == attribute_variants().end()) continue;
      for (const auto& attrs : it->second) {
        std::string label = "[3, 5]";
        for (const auto& [name, value] : attrs) label += " " + name + "=" + value.to_string();
        add(label, {in({3, 5}, op)}, attrs);
      }
      continue;
    }
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> pairs = {
        {{3, 5}, {3, 5}}, {{3, 5}, {5}}, {{2, 1, 4}, {3, 1}}, {{}, {4}}, {{7}, {1}}, {{5, 1}, {}},
    };
    if (row.out == ops::ElementwiseOut::ShapeOfA) {  // B broadcasts to A
      pairs = {{{3, 5}, {3, 5}}, {{3, 5}, {5}}, {{2, 3, 4}, {3, 1}}, {{7}, {1}}, {{5, 1}, {}}};
    }
    for (const auto& [a, b] : pairs) {
      add(shape_to_string(a) + " x " + shape_to_string(b), {in(a, op, 0), in(b, op, 1)});
    }
    // A constant operand (weights, biases) folds into the GPU kernel as data or a literal.
    add("[4, 6] x constant [6]", {in({4, 6}, op, 0), constant(in({6}, op, 1))});
    add("[4, 6] x constant scalar", {in({4, 6}, op, 0), constant(in({}, op, 1))});
  }
  // Integer Add, Sub and Mul (int32 and int64, what exports compute on sizes and indices) run on
  // the CUDA engine as typed kernels; the other integer types stay on the CPU.
  for (const char* op : {"Add", "Sub", "Mul"}) {
    for (const auto& [a, b] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{3, 5}, {3, 5}}, {{4, 1, 1, 1}, {1}}, {{1, 1, 1, 6}, {3, 1, 1, 1}}}) {
      Case c = make(op, shape_to_string(a) + " x " + shape_to_string(b) + " integers",
                    {in(a, op, 0), in(b, op, 1)});
      c.inputs[0].lo = c.inputs[1].lo = -1000;
      c.inputs[0].hi = c.inputs[1].hi = 1000;
      c.dtypes = {DType::Int32, DType::Int64};
      c.cuda = c.cuda_all_types = true;
      out.push_back(std::move(c));
    }
  }
}

// Mod: fmod = 1 in every type (the float64 reference computes C's remainder exactly); fmod = 0
// (the divisor's sign) in the integer types, whose reference is the same integer kernel, since
// float64 tensors need fmod = 1.
void mod_cases(std::vector<Case>& out) {
  auto divisor = [](std::vector<int64_t> sizes) {
    CaseInput c = in(std::move(sizes));
    c.min_abs = 0.5;
    return c;
  };
  const std::pair<std::vector<int64_t>, std::vector<int64_t>> pairs[] = {
      {{3, 5}, {3, 5}}, {{2, 1, 4}, {3, 1}}, {{}, {4}}};
  for (const auto& [a, b] : pairs) {
    const std::string shapes = shape_to_string(a) + " x " + shape_to_string(b);
    out.push_back(
        make("Mod", shapes + " fmod=1", {in(a), divisor(b)}, {{"fmod", AttrValue::of_int(1)}}));
    out.back().cuda = true;
    for (DType t : {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8}) {
      Case c = make("Mod", shapes + " fmod=0", {in(a), divisor(b)});
      for (CaseInput& i : c.inputs) i.dtype = t;
      c.dtypes = {t};
      c.cuda = false;
      out.push_back(std::move(c));
    }
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
      // N not a multiple of 8 in a GEMM of 2^24 multiply-adds or more: the GPU pads B to 1008
      // columns and copies the result's rows into the output (its row kernel).
      {{64, 512}, {512, 1001}, true},
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

CaseInput bool_input(std::vector<int64_t> sizes) {
  CaseInput c = in(std::move(sizes));
  c.dtype = DType::Bool;
  c.lo = 0;
  c.hi = 1;
  return c;
}

CaseInput ranged(std::vector<int64_t> sizes, double lo, double hi) {
  CaseInput c = in(std::move(sizes));
  c.lo = lo;
  c.hi = hi;
  return c;
}

// The elementwise ops of their own shape: Where, Cast, CastLike, Clip, Max, Min, Mean and Sum.
// Where and Cast run on the CUDA engine in every dtype (not on empty tensors, nor Cast to
// float64, which the engine does not store); the others have no CUDA lowering yet.
void own_shape_elementwise_cases(std::vector<Case>& out) {
  auto add = [&](Case c) {
    c.cuda = false;
    out.push_back(std::move(c));
  };
  auto add_typed = [&](Case c, bool cuda) {
    c.cuda = cuda;
    c.cuda_all_types = cuda;
    out.push_back(std::move(c));
  };
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>> where[] = {
      {{3, 5}, {3, 5}, {3, 5}},
      {{3, 1}, {1, 5}, {}},
      {{5}, {2, 1, 5}, {2, 3, 1}},
      {{2, 1, 3}, {4, 1}, {3}},
      {{0, 3}, {3}, {1}}};
  for (const auto& [c, x, y] : where) {
    add_typed(
        make("Where", shape_to_string(c) + " ? " + shape_to_string(x) + " : " + shape_to_string(y),
             {bool_input(c), in(x), in(y)}),
        *checked_numel(c) > 0);
  }
  add_typed(make("Where", "[4, 6] constant condition",
                 {constant(bool_input({4, 6})), in({4, 6}), in({6})}),
            true);
  // The attention mask's form: a broadcast bool mask choosing between scores and a constant.
  add_typed(make("Where", "[1, 1, 5, 5] ? [2, 3, 5, 5] : constant []",
                 {bool_input({1, 1, 5, 5}), in({2, 3, 5, 5}), constant(in({}))}),
            true);
  add_typed(make("Where", "[2, 7] ? constant [7] : [2, 7]",
                 {bool_input({2, 7}), constant(in({7})), in({2, 7})}),
            true);

  for (DType to : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8,
                   DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::Bool}) {
    // Non-negative values for uint8: an integer source wraps, the float64 reference saturates.
    const double lo = to == DType::UInt8 ? 0.0 : -4.0;
    add_typed(make("Cast", fmt::format("[3, 7] to {}", dtype_name(to)), {ranged({3, 7}, lo, 4.0)},
                   {{"to", AttrValue::of_int(static_cast<int>(to))}}),
              to != DType::Float64);
    CaseInput target = in({2});
    target.dtype = to;
    add(make("CastLike", fmt::format("[2, 5] like {}", dtype_name(to)),
             {ranged({2, 5}, lo, 4.0), target}));
  }
  add_typed(make("Cast", "[] to float16 at opset 13", {in({})},
                 {{"to", AttrValue::of_int(static_cast<int>(DType::Float16))}}),
            true);
  out.back().opset = 13;
  // Large values: float to int saturates, to int8 and int16 too; NaN-free, all exact in float.
  for (DType to : {DType::Int8, DType::Int16, DType::Int32, DType::Bool}) {
    add_typed(
        make("Cast", fmt::format("[4, 9] large values to {}", dtype_name(to)),
             {ranged({4, 9}, -1000.0, 1000.0)}, {{"to", AttrValue::of_int(static_cast<int>(to))}}),
        true);
    out.back().dtypes = {DType::Float32, DType::Float16};
  }

  // Bounds that clip at both ends in every type (uint8 included).
  const CaseInput lo = constant(ranged({}, 0.5, 1.5));
  const CaseInput hi = constant(ranged({}, 2.5, 3.5));
  CaseInput absent;
  absent.absent = true;
  add(make("Clip", "[3, 5] min and max", {in({3, 5}), lo, hi}));
  add(make("Clip", "[3, 5] min only", {in({3, 5}), lo}));
  add(make("Clip", "[3, 5] max only", {in({3, 5}), absent, hi}));
  add(make("Clip", "[3, 5] no bounds", {in({3, 5})}));
  add(make("Clip", "[17] min > max",
           {in({17}), constant(ranged({}, 2.5, 3.5)), constant(ranged({1}, 0.5, 1.5))}));
  add(make("Clip", "[2, 3, 4] runtime bounds",
           {in({2, 3, 4}), ranged({}, 0.5, 1.5), ranged({}, 2.5, 3.5)}));

  // BitShift: uint8 only, so its reference is the same uint8 kernel (float64 cannot shift).
  for (const char* direction : {"LEFT", "RIGHT"}) {
    CaseInput x = ranged({3, 5}, 0, 255), bits = ranged({5}, 0, 9);
    x.dtype = bits.dtype = DType::UInt8;
    add(make("BitShift", fmt::format("[3, 5] x [5] {}", direction), {x, bits},
             {{"direction", AttrValue::of_string(direction)}}));
    out.back().dtypes = {DType::UInt8};
  }
  for (const char* op : {"Max", "Min", "Mean", "Sum"}) {
    add(make(op, "[3, 5]", {in({3, 5})}));
    add(make(op, "[3, 5] x2", {in({3, 5}), in({3, 5})}));
    add(make(op, "[2, 1, 4] [3, 1] [4]", {in({2, 1, 4}), in({3, 1}), in({4})}));
    add(make(op, "[] [5, 2] constant [2]", {in({}), in({5, 2}), constant(in({2}))}));
    add(make(op, "[0, 3] [3]", {in({0, 3}), in({3})}));
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
  out.push_back(make("Concat", "[3, 5] one input (a view on the GPU)", {in({3, 5})},
                     {{"axis", AttrValue::of_int(0)}}));
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
  out.push_back(make("Concat", "[2, 3, 1] [2, 3, 1] axis -1 (index pairs)",
                     {in({2, 3, 1}), in({2, 3, 1})}, {{"axis", AttrValue::of_int(-1)}}));
  // DenseNet's dense blocks: more inputs than one GPU kernel takes (runs of 15, one kernel each).
  out.push_back(make("Concat", "20 inputs [1, 2, 3, 2] axis 1 (a dense block)",
                     std::vector<CaseInput>(20, in({1, 2, 3, 2})),
                     {{"axis", AttrValue::of_int(1)}}));
  // Shares of the axis (or inner blocks) in whole 16-byte vectors, in runs of at least 1M
  // elements: the GPU kernel moves them with one load and one store (the many-input ones in runs
  // of 15, each run placed in the output, the second at an offset; a last run smaller than 1M
  // elements moves one element a thread).
  out.push_back(make("Concat", "[8, 16, 64, 64] [8, 16, 64, 128] axis -1 (16-byte moves)",
                     {in({8, 16, 64, 64}), in({8, 16, 64, 128})},
                     {{"axis", AttrValue::of_int(-1)}}));
  out.push_back(make("Concat", "[8, 24, 64, 64] [8, 40, 64, 64] axis 1 (16-byte moves)",
                     {in({8, 24, 64, 64}), in({8, 40, 64, 64})}, {{"axis", AttrValue::of_int(1)}}));
  out.push_back(make("Concat", "31 inputs [1, 16, 128, 64] axis -1 (16-byte moves)",
                     std::vector<CaseInput>(31, in({1, 16, 128, 64})),
                     {{"axis", AttrValue::of_int(-1)}}));
  out.push_back(make("Concat", "20 inputs [1, 24, 64, 64] axis 1 (16-byte moves)",
                     std::vector<CaseInput>(20, in({1, 24, 64, 64})),
                     {{"axis", AttrValue::of_int(1)}}));
  // Views and Concat take every dtype on the CUDA engine (int64 ids, bool masks).
  for (Case& c : out) {
    if (c.op == "Identity" || c.op == "Reshape" || c.op == "Flatten" || c.op == "Squeeze" ||
        c.op == "Unsqueeze" || c.op == "Concat") {
      c.cuda_all_types = true;
    }
  }
}

// Indices drawn from [-n, n - 1] (negative ones count from the end), as a graph input, so the
// kernel's run-time check sees them.
CaseInput indices(std::vector<int64_t> sizes, int64_t n, DType dtype = DType::Int64) {
  CaseInput c;
  c.sizes = std::move(sizes);
  c.lo = static_cast<double>(-n);
  c.hi = static_cast<double>(n - 1);
  c.dtype = dtype;
  return c;
}

CaseInput int32_input(std::vector<int64_t> values) {
  CaseInput c = shape_input(std::move(values));
  c.dtype = DType::Int32;
  return c;
}

// A one-element int64 scalar (Trilu's k), fixed at `value`, as a graph input or a constant.
CaseInput int64_scalar(int64_t value, bool is_constant) {
  CaseInput c;
  c.lo = c.hi = static_cast<double>(value);
  c.dtype = DType::Int64;
  c.constant = is_constant;
  return c;
}

Case with_dtypes(Case c, std::vector<DType> dtypes) {
  c.dtypes = std::move(dtypes);
  return c;
}

Case at_opset(Case c, int opset) {
  c.opset = opset;
  return c;
}

AttrValue tensor_attr(DType dtype, const std::vector<uint8_t>& bytes) {
  return AttrValue::of_tensor(
      ops::TensorValue{dtype, {1}, std::make_shared<std::vector<uint8_t>>(bytes)});
}

// Indexing ops. Gather and GatherND run on the CUDA engine in every dtype (not on empty
// tensors), GatherElements in every dtype, ScatterND and ScatterElements with reduction none in
// every dtype (their other reductions have no CUDA lowering).
void indexing_cases(std::vector<Case>& out) {
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t> gathers[] = {
      {{5, 4, 3}, {3}, 0}, {{5, 4, 3}, {2, 3}, 1}, {{5, 4, 3}, {}, -1},
      {{7}, {4, 2}, 0},    {{2, 50}, {9}, 1},      {{0, 4}, {3}, 1},
  };
  for (const auto& [data, idx, axis] : gathers) {
    const int64_t n = data[axis < 0 ? axis + data.size() : axis];
    out.push_back(make(
        "Gather",
        fmt::format("{} indices {} axis {}", shape_to_string(data), shape_to_string(idx), axis),
        {in(data), indices(idx, n)}, {{"axis", AttrValue::of_int(axis)}}));
  }
  out.push_back(make("Gather", "[6, 5] int32 indices [4] axis 0",
                     {in({6, 5}), indices({4}, 6, DType::Int32)}));
  out.push_back(make("Gather", "[10, 8] constant scalar index -2", {in({10, 8}), shape_input({-2})},
                     {{"axis", AttrValue::of_int(1)}}));
  out.back().inputs[1].sizes.clear();
  // An embedding table (constant data, ids at run time) and constant indices on axis 1 and 2, as
  // the exporters write them.
  out.push_back(make("Gather", "constant [50, 12] ids [2, 7] axis 0",
                     {constant(in({50, 12})), indices({2, 7}, 50)}));
  out.push_back(make("Gather", "[2, 9, 8] constant int32 indices [-1, 0, 3] axis 1",
                     {in({2, 9, 8}), int32_input({-1, 0, 3})}, {{"axis", AttrValue::of_int(1)}}));
  out.push_back(make("Gather", "[3, 4, 6] int32 indices [2, 2] axis -1",
                     {in({3, 4, 6}), indices({2, 2}, 6, DType::Int32)},
                     {{"axis", AttrValue::of_int(-1)}}));
  out.push_back(make("Gather", "[2, 5, 6] constant scalar index 0 axis 1",
                     {in({2, 5, 6}), shape_input({0})}, {{"axis", AttrValue::of_int(1)}}));
  out.back().inputs[1].sizes.clear();

  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, DType> elements[] = {
      {{3, 4}, {3, 4}, 1, DType::Int64},
      {{4, 5, 6}, {2, 5, 3}, 0, DType::Int64},
      {{4, 5, 6}, {4, 2, 6}, -2, DType::Int32},
      {{3, 3}, {2, 3}, 0, DType::Int32},
  };
  for (const auto& [data, idx, axis, dt] : elements) {
    const int64_t n = data[axis < 0 ? axis + data.size() : axis];
    out.push_back(make("GatherElements",
                       fmt::format("{} indices {} {} axis {}", shape_to_string(data),
                                   shape_to_string(idx), dtype_name(dt), axis),
                       {in(data), indices(idx, n, dt)}, {{"axis", AttrValue::of_int(axis)}}));
  }

  // (data, indices, batch_dims, smallest indexed dimension)
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, int64_t> nds[] = {
      {{4, 5}, {3, 2}, 0, 4},       {{4, 5, 6}, {2, 3, 1}, 0, 4},    {{4, 5, 6}, {7, 2}, 0, 4},
      {{3, 4, 5}, {3, 2, 1}, 1, 4}, {{2, 3, 4, 5}, {2, 3, 2}, 2, 4},
  };
  for (const auto& [data, idx, b, n] : nds) {
    out.push_back(make(
        "GatherND",
        fmt::format("{} indices {} batch_dims {}", shape_to_string(data), shape_to_string(idx), b),
        {in(data), indices(idx, n)}, {{"batch_dims", AttrValue::of_int(b)}}));
  }

  // (data, indices, updates, smallest indexed dimension). With a reduction, indices may repeat
  // (applied in order); with none (opset 13 has only that), ONNX leaves repeats undefined, so those
  // cases draw distinct indices (CaseInput::distinct_over) and run on the GPU too.
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, int64_t>
      scatters[] = {
          {{8}, {4, 1}, {4}, 8},
          {{4, 4, 4}, {2, 1}, {2, 4, 4}, 4},
          {{5, 6}, {3, 2}, {3}, 5},
          {{3, 4, 5}, {2, 2, 2}, {2, 2, 5}, 3},
          // A KV cache [batch, heads, max length, head size] and two new positions of every
          // batch and head, as a decoder's index_put exports it.
          {{2, 3, 16, 8}, {2, 3, 2, 3}, {2, 3, 2, 8}, 2},
      };
  for (const auto& [data, idx, upd, n] : scatters) {
    const std::string label = fmt::format("{} indices {} updates {}", shape_to_string(data),
                                          shape_to_string(idx), shape_to_string(upd));
    CaseInput distinct = indices(idx, n);
    distinct.distinct_over.assign(data.begin(), data.begin() + idx.back());
    out.push_back(
        at_opset(make("ScatterND", label + " opset 13", {in(data), distinct, in(upd)}), 13));
    out.push_back(make("ScatterND", label + " none", {in(data), distinct, in(upd)},
                       {{"reduction", AttrValue::of_string("none")}}));
    if (data.size() == 4) continue;
    for (const char* r : {"add", "mul", "max", "min"}) {
      out.push_back(make("ScatterND", label + " " + r, {in(data), indices(idx, n), in(upd)},
                         {{"reduction", AttrValue::of_string(r)}}));
    }
  }
  // ScatterElements: with a reduction, indices as long as data along the axis or longer
  // (repeats, in order); with none, distinct along the axis (no longer than data there).
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, DType> scatter_elements[] =
      {
          {{3, 4}, {3, 4}, 1, DType::Int64},
          {{4, 5, 6}, {6, 5, 3}, 0, DType::Int32},
          {{2, 3, 8, 4}, {2, 3, 2, 4}, 2, DType::Int64},
      };
  for (const auto& [data, idx, axis, dt] : scatter_elements) {
    const int64_t n = data[axis];
    const std::string label = fmt::format("{} indices {} {} axis {}", shape_to_string(data),
                                          shape_to_string(idx), dtype_name(dt), axis);
    for (const char* r : {"add", "max"}) {
      out.push_back(
          make("ScatterElements", label + " " + r, {in(data), indices(idx, n, dt), in(idx)},
               {{"axis", AttrValue::of_int(axis)}, {"reduction", AttrValue::of_string(r)}}));
    }
    std::vector<int64_t> sizes = idx;
    sizes[axis] = std::min(sizes[axis], n);
    CaseInput distinct = indices(sizes, n, dt);
    distinct.distinct_axis = static_cast<int>(axis);
    distinct.distinct_extent = n;
    out.push_back(
        make("ScatterElements",
             fmt::format("{} indices {} {} axis {} none", shape_to_string(data),
                         shape_to_string(sizes), dtype_name(dt), axis),
             {in(data), distinct, in(sizes)},
             {{"axis", AttrValue::of_int(axis)}, {"reduction", AttrValue::of_string("none")}}));
  }
  for (Case& c : out) {
    if (c.op == "Gather" || c.op == "GatherND") {
      bool empty = false;
      for (const CaseInput& i : c.inputs) empty = empty || *checked_numel(i.sizes) == 0;
      c.cuda = c.cuda_all_types = !empty;
    } else if (c.op == "GatherElements") {
      c.cuda = c.cuda_all_types = true;
    } else if (c.op == "ScatterND" || c.op == "ScatterElements") {
      // Reduction "none" (opset 13's only one) runs on the GPU in every dtype; the others do
      // not (they would need atomics).
      bool none = true;
      for (const auto& [name, value] : c.attrs)
        none = none && !(name == "reduction" && value.s != "none");
      c.cuda = c.cuda_all_types = none;
    }
  }
}

// Layout ops new in issue 10. Slice, Split and Expand run on the CUDA engine in every dtype,
// except where an output is empty; Tile and Trilu have no CUDA lowering yet.
void layout_cases(std::vector<Case>& out) {
  const size_t first = out.size();
  // (data, starts, ends, axes, steps)
  struct S {
    std::vector<int64_t> data, starts, ends, axes, steps;
  };
  const S slices[] = {
      {{20, 10, 5}, {0, 0}, {3, 10}, {0, 1}, {1, 1}},
      {{20, 10, 5}, {1}, {1000}, {1}, {1}},     // end clamped
      {{20, 10, 5}, {-1}, {-1000}, {0}, {-3}},  // negative step, end clamped to -1
      {{20, 10, 5}, {20, 10, 4}, {0, 1, 1}, {0, 1, 2}, {-1, -4, -2}},
      {{20, 10, 5}, {-4}, {-1}, {-1}, {1}},  // negative start, end and axis
      {{6, 7}, {5}, {2}, {0}, {1}},          // empty
      {{6, 7}, {1, 1}, {100, 100}, {1, 0}, {3, 2}},
      // Rows of at least 256 one pitch apart: the GPU copies them with its row kernel.
      {{6, 2500}, {3}, {2403}, {1}, {1}},
      {{2, 3, 700}, {50}, {650}, {2}, {1}},
  };
  for (const S& sl : slices) {
    out.push_back(
        make("Slice",
             fmt::format("{} starts {} ends {} axes {} steps {}", shape_to_string(sl.data),
                         shape_to_string(sl.starts), shape_to_string(sl.ends),
                         shape_to_string(sl.axes), shape_to_string(sl.steps)),
             {in(sl.data), shape_input(sl.starts), shape_input(sl.ends), shape_input(sl.axes),
              shape_input(sl.steps)}));
  }
  out.push_back(make("Slice", "[5, 6] no axes or steps",
                     {in({5, 6}), shape_input({1, -3}), shape_input({4, 100})}));
  out.push_back(make("Slice", "[5, 6] int32 starts, steps absent",
                     {in({5, 6}), int32_input({-2}), int32_input({0}), int32_input({0})}));
  {
    CaseInput absent;
    absent.absent = true;
    out.push_back(
        make("Slice", "[4, 9] axes absent, steps given",
             {in({4, 9}), shape_input({0, 8}), shape_input({4, 0}), absent, shape_input({2, -3})}));
  }

  out.push_back(make("Split", "[6, 4] equal parts axis 0", {in({6, 4})}));
  out.back().outputs = 3;
  out.push_back(make("Split", "[3, 10] split [2, 5, 3] axis 1",
                     {in({3, 10}), shape_input({2, 5, 3})}, {{"axis", AttrValue::of_int(1)}}));
  out.back().outputs = 3;
  out.push_back(make("Split", "[2, 3, 7] split [0, 7] axis -1",
                     {in({2, 3, 7}), shape_input({0, 7})}, {{"axis", AttrValue::of_int(-1)}}));
  out.back().outputs = 2;
  out.push_back(make("Split", "[7, 3] num_outputs 3 (uneven) axis 0", {in({7, 3})},
                     {{"num_outputs", AttrValue::of_int(3)}}));
  out.back().outputs = 3;
  out.push_back(make("Split", "[2, 10] num_outputs 4 (uneven) axis 1", {in({2, 10})},
                     {{"num_outputs", AttrValue::of_int(4)}, {"axis", AttrValue::of_int(1)}}));
  out.back().outputs = 4;
  out.push_back(at_opset(make("Split", "[9] equal parts opset 13", {in({9})}), 13));
  out.back().outputs = 3;
  // GPT-2's split of the fused QKV projection.
  out.push_back(make("Split", "[1, 5, 24] split [8, 8, 8] axis 2",
                     {in({1, 5, 24}), shape_input({8, 8, 8})}, {{"axis", AttrValue::of_int(2)}}));
  out.back().outputs = 3;
  out.push_back(make("Slice", "[3, 8, 6] step 2 on axes [-1, 1] from the end",
                     {in({3, 8, 6}), shape_input({-1, 7}), shape_input({-7, 0}),
                      shape_input({-1, 1}), shape_input({-2, -3})}));

  const std::pair<std::vector<int64_t>, std::vector<int64_t>> expands[] = {
      {{3, 1}, {2, 3, 4}}, {{3, 1}, {3, 1}},       {{1, 4}, {1}},
      {{}, {2, 3}},        {{2, 1, 5}, {2, 4, 1}}, {{5}, {3, 0, 5}},
  };
  for (const auto& [x, shape] : expands) {
    out.push_back(make("Expand", shape_to_string(x) + " to " + shape_to_string(shape),
                       {in(x), shape_input(shape)}));
  }

  const std::pair<std::vector<int64_t>, std::vector<int64_t>> tiles[] = {
      {{2, 3}, {2, 3}},
      {{3}, {4}},
      {{2, 1, 3}, {1, 5, 1}},
      {{2, 3}, {0, 2}},
      {{1, 2, 3, 2}, {2, 2, 2, 2}},
  };
  for (const auto& [x, repeats] : tiles) {
    out.push_back(make("Tile", shape_to_string(x) + " repeats " + shape_to_string(repeats),
                       {in(x), shape_input(repeats)}));
  }

  for (int64_t upper : {0, 1}) {
    out.push_back(make("Trilu", fmt::format("[4, 5] upper {}", upper), {in({4, 5})},
                       {{"upper", AttrValue::of_int(upper)}}));
    for (int64_t k : {-2, 1, 7, -9}) {
      out.push_back(make("Trilu", fmt::format("[2, 3, 6] upper {} k {} at run time", upper, k),
                         {in({2, 3, 6}), int64_scalar(k, false)},
                         {{"upper", AttrValue::of_int(upper)}}));
    }
    out.push_back(make("Trilu", fmt::format("[5, 3] upper {} constant k 1", upper),
                       {in({5, 3}), int64_scalar(1, true)}, {{"upper", AttrValue::of_int(upper)}}));
  }
  // DepthToSpace (both channel orders) and SpaceToDepth.
  for (const char* mode : {"DCR", "CRD"}) {
    out.push_back(
        make("DepthToSpace", fmt::format("[2, 8, 3, 5] blocksize 2 {}", mode), {in({2, 8, 3, 5})},
             {{"blocksize", AttrValue::of_int(2)}, {"mode", AttrValue::of_string(mode)}}));
  }
  out.push_back(make("DepthToSpace", "[1, 18, 2, 2] blocksize 3", {in({1, 18, 2, 2})},
                     {{"blocksize", AttrValue::of_int(3)}}));
  out.push_back(make("SpaceToDepth", "[2, 3, 4, 6] blocksize 2", {in({2, 3, 4, 6})},
                     {{"blocksize", AttrValue::of_int(2)}}));
  out.push_back(make("SpaceToDepth", "[1, 2, 6, 3] blocksize 3", {in({1, 2, 6, 3})},
                     {{"blocksize", AttrValue::of_int(3)}}));
  // CumSum: every direction, a scalar axis and a negative one-element axis.
  for (const int64_t exclusive : {0, 1}) {
    for (const int64_t reverse : {0, 1}) {
      out.push_back(make(
          "CumSum", fmt::format("[3, 4, 5] axis 1 exclusive {} reverse {}", exclusive, reverse),
          {in({3, 4, 5}), shape_input({1})},
          {{"exclusive", AttrValue::of_int(exclusive)}, {"reverse", AttrValue::of_int(reverse)}}));
      out.back().inputs[1].sizes.clear();
    }
  }
  out.push_back(make("CumSum", "[6, 7] axis [-1]", {in({6, 7}), shape_input({-1})}));
  // TopK: largest and smallest, a middle and the last axis, K of the whole axis. In
  // float32, float64 and the integers only: a half-precision rounding can make two of the
  // reference's float64 values equal, and the tie then picks another index.
  const std::vector<DType> exact = {DType::Float32, DType::Float64, DType::Int32, DType::Int64};
  for (const int64_t largest : {0, 1}) {
    out.push_back(make("TopK", fmt::format("[3, 4, 5] K 2 axis 1 largest {}", largest),
                       {in({3, 4, 5}), shape_input({2})},
                       {{"axis", AttrValue::of_int(1)}, {"largest", AttrValue::of_int(largest)}}));
    out.back().outputs = 2;
    out.back().dtypes = exact;
  }
  out.push_back(make("TopK", "[6, 7] K 7 axis -1", {in({6, 7}), shape_input({7})}));
  out.back().outputs = 2;
  out.back().dtypes = exact;
  // Long lines, small K: the GPU's block-per-line kernel (sampling's top-k of a vocabulary); 1/32
  // steps in [-4, 4] repeat along 1000 and 700, so ties are broken by index many times.
  for (const int64_t largest : {0, 1}) {
    out.push_back(make("TopK", fmt::format("[3, 1000] K 50 axis -1 largest {}", largest),
                       {in({3, 1000}), shape_input({50})},
                       {{"axis", AttrValue::of_int(-1)}, {"largest", AttrValue::of_int(largest)}}));
    out.back().outputs = 2;
    out.back().dtypes = exact;
  }
  out.push_back(make("TopK", "[2, 700, 3] K 20 axis 1", {in({2, 700, 3}), shape_input({20})},
                     {{"axis", AttrValue::of_int(1)}}));
  out.back().outputs = 2;
  out.back().dtypes = exact;
  // NonZero (a data-dependent count, CPU only): values on the 1/32 grid in [-1/32, 1/32] (a
  // third zeros in float types; all zeros, an empty result, in the integers), and in [-1, 1]
  // (a third zeros in the integers).
  out.push_back(make("NonZero", "[3, 4, 5] in [-1/32, 1/32]", {in({3, 4, 5})}));
  out.back().inputs[0].lo = -1.0 / 32;
  out.back().inputs[0].hi = 1.0 / 32;
  out.push_back(make("NonZero", "[7, 6] in [-1, 1]", {in({7, 6})}));
  out.back().inputs[0].lo = -1.0;
  out.back().inputs[0].hi = 1.0;
  // RNN, GRU and LSTM in both directions (their values: ONNX's node tests and onnxruntime,
  // tests/python/test_recurrent.py). CPU only.
  for (const auto& [op, gates] : {std::pair{"RNN", 1}, {"GRU", 3}, {"LSTM", 4}}) {
    out.push_back(make(op, "[5, 2, 3] hidden 4 bidirectional",
                       {in({5, 2, 3}), in({2, gates * 4, 3}), in({2, gates * 4, 4})},
                       {{"hidden_size", AttrValue::of_int(4)},
                        {"direction", AttrValue::of_string("bidirectional")}}));
    out.back().outputs = std::string_view(op) == "LSTM" ? 3 : 2;
  }
  // Other activations (alphas consumed in order) and clip.
  out.push_back(make("GRU", "[5, 2, 3] hidden 4 HardSigmoid/Elu clip 0.5",
                     {in({5, 2, 3}), in({1, 12, 3}), in({1, 12, 4})},
                     {{"hidden_size", AttrValue::of_int(4)},
                      {"activations", AttrValue::of_string("HardSigmoid,Elu")},
                      {"activation_alpha", AttrValue::of_floats({0.3, 0.9})},
                      {"activation_beta", AttrValue::of_floats({0.45})},
                      {"clip", AttrValue::of_float(0.5)}}));
  out.back().outputs = 2;
  out.push_back(make("LSTM", "[5, 2, 3] hidden 4 reverse HardSigmoid/Softsign/Softplus clip 0.4",
                     {in({5, 2, 3}), in({1, 16, 3}), in({1, 16, 4})},
                     {{"hidden_size", AttrValue::of_int(4)},
                      {"direction", AttrValue::of_string("reverse")},
                      {"activations", AttrValue::of_string("HardSigmoid,Softsign,Softplus")},
                      {"clip", AttrValue::of_float(0.4)}}));
  out.back().outputs = 3;
  for (size_t i = first; i < out.size(); ++i) {
    Case& c = out[i];
    const bool typed = c.op == "Slice" || c.op == "Split" || c.op == "Expand" ||
                       c.op == "DepthToSpace" || c.op == "SpaceToDepth" || c.op == "CumSum" ||
                       c.op == "TopK";
    const bool empty_output = c.label == "[6, 7] starts [5] ends [2] axes [0] steps [1]" ||
                              c.label == "[5, 6] int32 starts, steps absent" ||
                              c.label == "[2, 3, 7] split [0, 7] axis -1" ||
                              c.label == "[5] to [3, 0, 5]";
    c.cuda = c.cuda_all_types = typed && !empty_output;
  }
}

// Shape computations: all fold at compile time (Shape and Size from the static shape, the rest
// from constant inputs), through the same CPU kernels.
void shape_cases(std::vector<Case>& out) {
  const size_t first = out.size();
  out.push_back(at_opset(make("Shape", "[3, 4, 5] opset 13", {in({3, 4, 5})}), 13));
  const std::pair<int64_t, std::optional<int64_t>> ranges[] = {
      {0, std::nullopt}, {1, std::nullopt}, {-1, std::nullopt}, {0, 2}, {1, -1}, {-10, 10}, {2, 1},
  };
  for (const auto& [start, end] : ranges) {
    std::vector<std::pair<std::string, AttrValue>> attrs = {{"start", AttrValue::of_int(start)}};
    if (end) attrs.emplace_back("end", AttrValue::of_int(*end));
    out.push_back(
        make("Shape",
             fmt::format("[3, 4, 5] start {} end {}", start, end ? std::to_string(*end) : "none"),
             {in({3, 4, 5})}, attrs));
  }
  out.push_back(make("Size", "[3, 4, 5]", {in({3, 4, 5})}));
  out.push_back(make("Size", "scalar", {in({})}));

  const std::tuple<double, double, double> float_ranges[] = {
      {0, 5, 1}, {1.5, -3, -0.5}, {-2, 2.25, 0.75}, {3, 3, 1}, {4, 1, 1},
  };
  for (const auto& [start, limit, delta] : float_ranges) {
    std::vector<CaseInput> ins;
    for (double v : {start, limit, delta}) {
      CaseInput c;
      c.lo = c.hi = v;
      c.constant = true;
      ins.push_back(c);
    }
    out.push_back(
        with_dtypes(make("Range", fmt::format("{} to {} by {}", start, limit, delta), ins),
                    {DType::Float32, DType::Float64}));
  }
  const std::tuple<int64_t, int64_t, int64_t> int_ranges[] = {{-3, 10, 2}, {10, -3, -4}, {0, 0, 1}};
  for (const auto& [start, limit, delta] : int_ranges) {
    std::vector<CaseInput> ins;
    for (int64_t v : {start, limit, delta}) {
      CaseInput c;
      c.lo = c.hi = static_cast<double>(v);
      c.constant = true;
      ins.push_back(c);
    }
    out.push_back(
        with_dtypes(make("Range", fmt::format("{} to {} by {}", start, limit, delta), ins),
                    {DType::Int16, DType::Int32, DType::Int64}));
  }

  out.push_back(make("ConstantOfShape", "[2, 3] default value", {shape_input({2, 3})}));
  out.push_back(make("ConstantOfShape", "[] (a scalar)", {shape_input({})}));
  out.push_back(make("ConstantOfShape", "[4, 0] int64 value 7", {shape_input({4, 0})},
                     {{"value", tensor_attr(DType::Int64, {7, 0, 0, 0, 0, 0, 0, 0})}}));
  out.push_back(make("ConstantOfShape", "[3] float value 1.5", {shape_input({3})},
                     {{"value", tensor_attr(DType::Float32, {0, 0, 0xc0, 0x3f})}}));
  out.push_back(make("ConstantOfShape", "[2, 2] bool value true", {shape_input({2, 2})},
                     {{"value", tensor_attr(DType::Bool, {1})}}));
  out.push_back(make("ConstantOfShape", "[5] bfloat16 value 2", {shape_input({5})},
                     {{"value", tensor_attr(DType::BFloat16, {0x00, 0x40})}}));
  out.push_back(make("ConstantOfShape", "[2, 1] int8 value -3 opset 9", {shape_input({2, 1})},
                     {{"value", tensor_attr(DType::Int8, {0xfd})}}));
  out.back().opset = 9;
  for (size_t i = first; i < out.size(); ++i) out[i].cuda = false;
}

void einsum_cases(std::vector<Case>& out) {
  const std::pair<std::string, std::vector<std::vector<int64_t>>> equations[] = {
      {"ij,jk->ik", {{5, 7}, {7, 3}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}},
      {"ij->ji", {{3, 4}}},
      {"ij->i", {{3, 4}}},
      {"ij", {{3, 4}}},
      {"ji", {{3, 4}}},
      {"i,i", {{6}, {6}}},
      {"ii->i", {{4, 4}}},
      {"ii", {{4, 4}}},
      {"...ij->...ji", {{2, 3, 4, 5}}},
      {"...ij,...jk", {{2, 1, 3, 4}, {3, 4, 2}}},
      {"i,j->ij", {{3}, {4}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
      {"b i j , b j k -> b i k", {{2, 2, 3}, {2, 3, 2}}},
      {"ij->", {{3, 4}}},
      {"ij,jk->ik", {{2, 0}, {0, 3}}},
  };
  // The GPU takes an Einsum of two operands that is one batched matrix product (the einsum pass
  // writes it as Transposes, Reshapes and a MatMul); the rest stay on the CPU.
  const std::set<std::string> products = {"ij,jk->ik", "bij,bjk->bik", "bhqd,bhkd->bhqk",
                                          "i,i",       "i,j->ij",      "b i j , b j k -> b i k"};
  for (const auto& [eq, shapes] : equations) {
    std::vector<CaseInput> ins;
    for (const auto& s : shapes) ins.push_back(in(s, "", 0));
    out.push_back(make("Einsum", "'" + eq + "'", ins, {{"equation", AttrValue::of_string(eq)}}));
    bool empty = false;
    for (const auto& s : shapes) empty = empty || *checked_numel(s) == 0;
    out.back().cuda = products.count(eq) > 0 && !empty;
  }
}

// Conv and ConvTranspose (the GPU takes 1-D to 3-D Conv and 1-D and 2-D ConvTranspose; a 3-D
// ConvTranspose stays on the CPU): every kernel path
// (pointwise GEMM, depthwise loop, im2col, col2im), groups, strides, dilations, pads in every
// form, 1-D to 3-D, batches, with and without bias; weights constant as exporters write them.
void conv_cases(std::vector<Case>& out) {
  auto ints = [](std::vector<int64_t> v) { return AttrValue::of_ints(std::move(v)); };
  auto text = [](const char* s) { return AttrValue::of_string(s); };
  struct C {
    const char* op;
    const char* label;
    std::vector<int64_t> x, w;
    bool bias;
    std::vector<std::pair<std::string, AttrValue>> attrs;
  };
  const C cases[] = {
      {"Conv",
       "2-D 3x3 pads 1, batch 2",
       {2, 3, 8, 7},
       {4, 3, 3, 3},
       true,
       {{"pads", ints({1, 1, 1, 1})}}},
      {"Conv",
       "2-D 7x7 stride 2 pads 3 (a stem)",
       {1, 3, 17, 16},
       {8, 3, 7, 7},
       true,
       {{"strides", ints({2, 2})}, {"pads", ints({3, 3, 3, 3})}}},
      // Fewer than 8 input channels (cuDNN pads them to 8), with strides, dilations and
      // asymmetric pads that the windows overhang.
      {"Conv",
       "2-D 4 channels strides (2, 1) dilations (1, 2) pads (0, 1, 1, 0)",
       {2, 4, 9, 8},
       {5, 4, 3, 3},
       true,
       {{"strides", ints({2, 1})}, {"dilations", ints({1, 2})}, {"pads", ints({0, 1, 1, 0})}}},
      {"Conv", "pointwise 1x1", {2, 16, 5, 6}, {8, 16, 1, 1}, true, {}},
      // A 1x1 kernel over a 1x1 input (squeeze-excite): the GPU's row kernel up to 8 images,
      // 16 bytes per access (24 channels) or one element (20); cuDNN at 9 images.
      {"Conv", "1x1 of a 1x1 input, batch 3", {3, 24, 1, 1}, {40, 24, 1, 1}, true, {}},
      {"Conv",
       "1x1 of a 1x1 input, 20 channels, no bias",
       {1, 20, 1, 1},
       {12, 20, 1, 1},
       false,
       {}},
      {"Conv", "1x1 of a 1x1 input, batch 9", {9, 24, 1, 1}, {16, 24, 1, 1}, true, {}},
      // Windows that tile the input (kernel == stride, no padding): the GPU runs them as a GEMM
      // of the gathered patches.
      {"Conv",
       "patches 4x4 stride 4 (a patch embedding), batch 2",
       {2, 3, 8, 12},
       {6, 3, 4, 4},
       true,
       {{"strides", ints({4, 4})}}},
      {"Conv",
       "patches 2x3 stride (2, 3), a row and a column left over",
       {1, 5, 7, 10},
       {4, 5, 2, 3},
       false,
       {{"strides", ints({2, 3})}}},
      {"Conv",
       "depthwise 3x3 stride 2 SAME_UPPER",
       {1, 8, 9, 9},
       {8, 1, 3, 3},
       true,
       {{"group", AttrValue::of_int(8)},
        {"strides", ints({2, 2})},
        {"auto_pad", text("SAME_UPPER")}}},
      // Groups of several channels (RegNet, ResNeXt) and a depthwise channel multiplier: the GPU's
      // grouped kernel.
      {"Conv",
       "2-D 4 groups of 4 channels, 2 outputs each, stride 2 pads 1",
       {2, 16, 7, 8},
       {8, 4, 3, 3},
       true,
       {{"group", AttrValue::of_int(4)}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}},
      {"Conv",
       "depthwise, channel multiplier 2",
       {1, 4, 6, 5},
       {8, 1, 3, 3},
       false,
       {{"group", AttrValue::of_int(4)}, {"pads", ints({1, 1, 1, 1})}}},
      // 1-D (Whisper's stem): a 2-D convolution of height 1 on the GPU (the conv-1d pass).
      {"Conv",
       "1-D k3 stride 2 pads 1, batch 2",
       {2, 8, 15},
       {6, 8, 3},
       true,
       {{"strides", ints({2})}, {"pads", ints({1, 1})}}},
      {"Conv",
       "1-D group 2 dilation 2 SAME_LOWER",
       {2, 4, 11},
       {6, 2, 3},
       false,
       {{"group", AttrValue::of_int(2)},
        {"dilations", ints({2})},
        {"auto_pad", text("SAME_LOWER")}}},
      {"Conv",
       "3-D strides (1, 2, 2) asymmetric pads",
       {1, 2, 4, 5, 6},
       {3, 2, 2, 3, 3},
       true,
       {{"strides", ints({1, 2, 2})}, {"pads", ints({0, 1, 1, 1, 0, 1})}}},
      {"Conv",
       "3-D 2 groups, strides (2, 1, 1) dilations (1, 1, 2) SAME_UPPER, batch 2",
       {2, 4, 5, 6, 7},
       {6, 2, 3, 2, 3},
       true,
       {{"group", AttrValue::of_int(2)},
        {"strides", ints({2, 1, 1})},
        {"dilations", ints({1, 1, 2})},
        {"auto_pad", text("SAME_UPPER")}}},
      {"Conv",
       "3-D depthwise 3x3x3 no bias",
       {1, 4, 3, 4, 5},
       {4, 1, 3, 3, 3},
       false,
       {{"group", AttrValue::of_int(4)}, {"pads", ints({1, 1, 1, 1, 1, 1})}}},
      {"Conv",
       "2-D VALID dilations (2, 1)",
       {1, 3, 9, 6},
       {5, 3, 2, 3},
       false,
       {{"auto_pad", text("VALID")}, {"dilations", ints({2, 1})}}},
      {"ConvTranspose",
       "2-D stride 2 pads 1 output_padding 1",
       {2, 4, 5, 4},
       {4, 3, 3, 3},
       true,
       {{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}, {"output_padding", ints({1, 1})}}},
      {"ConvTranspose",
       "1-D group 2 dilation 2",
       {1, 4, 7},
       {4, 2, 3},
       true,
       {{"group", AttrValue::of_int(2)}, {"dilations", ints({2})}}},
      {"ConvTranspose",
       "2-D output_shape",
       {1, 2, 3, 3},
       {2, 3, 3, 3},
       false,
       {{"strides", ints({3, 2})}, {"output_shape", ints({10, 8})}}},
      {"ConvTranspose",
       "2-D SAME_UPPER stride 2",
       {1, 3, 4, 3},
       {3, 2, 3, 3},
       true,
       {{"strides", ints({2, 2})}, {"auto_pad", text("SAME_UPPER")}}},
      {"ConvTranspose",
       "2-D 3 groups strides (2, 1) dilations (1, 2) asymmetric pads",
       {1, 6, 4, 5},
       {6, 2, 3, 2},
       true,
       {{"group", AttrValue::of_int(3)},
        {"strides", ints({2, 1})},
        {"dilations", ints({1, 2})},
        {"pads", ints({1, 0, 0, 1})}}},
      {"ConvTranspose",
       "2-D depthwise stride 2 output_padding (1, 0), batch 2",
       {2, 4, 3, 3},
       {4, 1, 3, 3},
       false,
       {{"group", AttrValue::of_int(4)},
        {"strides", ints({2, 2})},
        {"output_padding", ints({1, 0})}}},
      {"ConvTranspose",
       "1-D stride 3 pads 1 output_padding 2",
       {2, 3, 5},
       {3, 4, 4},
       false,
       {{"strides", ints({3})}, {"pads", ints({1, 1})}, {"output_padding", ints({2})}}},
      {"ConvTranspose", "3-D", {1, 2, 3, 3, 4}, {2, 2, 2, 3, 2}, true, {}},
      {"ConvTranspose", "pointwise 1x1", {2, 6, 4, 5}, {6, 4, 1, 1}, false, {}},
  };
  for (const C& c : cases) {
    std::vector<CaseInput> ins = {in(c.x), constant(in(c.w))};
    int64_t group = 1;
    for (const auto& [name, value] : c.attrs) {
      if (name == "group") group = value.i;
    }
    // B has one value per output channel: W[0] for Conv, W[1] * group for ConvTranspose.
    const int64_t m = std::string_view(c.op) == "Conv" ? c.w[0] : c.w[1] * group;
    if (c.bias) ins.push_back(constant(in({m})));
    out.push_back(make(c.op, c.label, ins, c.attrs));
    // The GPU runs 2-D Conv and ConvTranspose, any group count (builder/ops/conv.cpp,
    // conv_transpose.cpp), 1-D ones as 2-D (the conv-1d pass), and 3-D Conv (a direct kernel).
    out.back().cuda =
        c.x.size() == 4 || c.x.size() == 3 || (c.x.size() == 5 && std::string_view(c.op) == "Conv");
  }
  // The opset-1 definitions (models of opsets 1 to 10).
  out.push_back(make("Conv", "2-D at opset 8", {in({1, 2, 5, 5}), constant(in({3, 2, 3, 3}))},
                     {{"pads", ints({1, 1, 1, 1})}}));
  out.back().opset = 8;
  out.push_back(make("ConvTranspose", "2-D at opset 8",
                     {in({1, 2, 3, 3}), constant(in({2, 2, 3, 3}))}, {{"strides", ints({2, 2})}}));
  out.back().opset = 8;
}

// Baton's FusedConv (the fuse-conv pass's Conv + residual + activation) on every GPU path: cuDNN
// with the epilogue in its graph (Relu, HardSwish, HardSigmoid) or an epilogue kernel after it
// (LeakyRelu, Silu), the depthwise and row kernels (activation inside, a residual after), the patch
// GEMM (Relu in cuBLASLt's epilogue, the rest after), the 3-D kernel (both inside). And Baton's
// Linear with an activation (the fuse-linear pass): cuBLASLt's ReLU and tanh-GELU epilogues, the
// erf GELU (cuDNN in fp16 and bf16, a kernel in fp32), W stored [N, K] (transW), and an activation
// no GEMM epilogue has (a kernel after it).
void fused_cases(std::vector<Case>& out) {
  auto ints = [](std::vector<int64_t> v) { return AttrValue::of_ints(std::move(v)); };
  auto act = [](const char* name) { return AttrValue::of_string(name); };
  auto params = [](std::vector<double> v) { return AttrValue::of_floats(std::move(v)); };
  auto fused = [&](std::string label, std::vector<int64_t> x, std::vector<int64_t> w,
                   std::vector<int64_t> z, std::vector<std::pair<std::string, AttrValue>> attrs) {
    std::vector<CaseInput> ins = {in(x), constant(in(w)), constant(in({w[0]}))};
    if (!z.empty()) ins.push_back(in(z));
    Case c = make("FusedConv", std::move(label), std::move(ins), std::move(attrs));
    c.domain = "baton";
    c.cuda = x.size() == 4 || x.size() == 5;
    out.push_back(c);
  };
  fused("3x3 pads 1 + residual + Relu", {2, 3, 8, 7}, {4, 3, 3, 3}, {2, 4, 8, 7},
        {{"pads", ints({1, 1, 1, 1})}, {"activation", act("Relu")}});
  fused("3x3 + HardSwish", {1, 8, 6, 6}, {8, 8, 3, 3}, {}, {{"activation", act("HardSwish")}});
  fused("3x3 + HardSigmoid(0.3, 0.4)", {1, 8, 6, 6}, {8, 8, 3, 3}, {},
        {{"activation", act("HardSigmoid")}, {"activation_params", params({0.3, 0.4})}});
  fused("3x3 + residual + LeakyRelu(0.1), an epilogue kernel", {2, 5, 7, 7}, {6, 5, 3, 3},
        {2, 6, 5, 5}, {{"activation", act("LeakyRelu")}, {"activation_params", params({0.1})}});
  fused("pointwise 1x1 + residual", {2, 16, 5, 6}, {8, 16, 1, 1}, {2, 8, 5, 6}, {});
  fused(
      "depthwise 3x3 + residual + Relu", {1, 8, 9, 9}, {8, 1, 3, 3}, {1, 8, 9, 9},
      {{"group", AttrValue::of_int(8)}, {"pads", ints({1, 1, 1, 1})}, {"activation", act("Relu")}});
  fused("depthwise 3x3 + HardSwish", {2, 8, 9, 9}, {8, 1, 3, 3}, {},
        {{"group", AttrValue::of_int(8)}, {"activation", act("HardSwish")}});
  fused("1x1 of a 1x1 input + HardSigmoid", {3, 24, 1, 1}, {40, 24, 1, 1}, {},
        {{"activation", act("HardSigmoid")}});
  fused("1x1 of a 1x1 input + residual + Relu", {2, 24, 1, 1}, {16, 24, 1, 1}, {2, 16, 1, 1},
        {{"activation", act("Relu")}});
  fused("patches 4x4 + Relu", {2, 3, 8, 12}, {6, 3, 4, 4}, {},
        {{"strides", ints({4, 4})}, {"activation", act("Relu")}});
  fused("patches 4x4 + residual + Gelu", {2, 3, 8, 12}, {6, 3, 4, 4}, {2, 6, 2, 3},
        {{"strides", ints({4, 4})}, {"activation", act("Gelu")}});
  fused("3-D + residual + Tanh", {1, 2, 4, 5, 6}, {3, 2, 2, 3, 3}, {1, 3, 3, 3, 4},
        {{"activation", act("Tanh")}});
  // SiLU (fuse-conv's Sigmoid(v) * v): an epilogue kernel after cuDNN, inside the depthwise
  // kernel.
  fused("3x3 + residual + Silu", {2, 5, 7, 7}, {6, 5, 3, 3}, {2, 6, 5, 5},
        {{"activation", act("Silu")}});
  fused(
      "depthwise 3x3 + Silu", {2, 8, 9, 9}, {8, 1, 3, 3}, {},
      {{"group", AttrValue::of_int(8)}, {"pads", ints({1, 1, 1, 1})}, {"activation", act("Silu")}});

  auto linear = [&](std::string label, std::vector<int64_t> x, std::vector<int64_t> w, bool bias,
                    std::vector<std::pair<std::string, AttrValue>> attrs) {
    int64_t n = w[1];
    for (const auto& [name, value] : attrs) {
      if (name == "transW" && value.i != 0) n = w[0];
    }
    std::vector<CaseInput> ins = {in(x), constant(in(w))};
    if (bias) ins.push_back(constant(in({n})));
    Case c = make("Linear", std::move(label), std::move(ins), std::move(attrs));
    c.domain = "baton";
    out.push_back(c);
  };
  linear("[2, 3, 8] x [8, 5] + [5], Relu", {2, 3, 8}, {8, 5}, true, {{"activation", act("Relu")}});
  linear("[6, 16] x [16, 24], Relu, no bias", {6, 16}, {16, 24}, false,
         {{"activation", act("Relu")}});
  linear("[8, 32] x [32, 48] + [48], GeluTanh", {8, 32}, {32, 48}, true,
         {{"activation", act("GeluTanh")}});
  linear("[8, 32] x [32, 48] + [48], Gelu", {8, 32}, {32, 48}, true, {{"activation", act("Gelu")}});
  linear("[4, 12] x [20, 12]^T + [20] (transW), Relu", {4, 12}, {20, 12}, true,
         {{"transW", AttrValue::of_int(1)}, {"activation", act("Relu")}});
  linear("[5, 8] x [8, 6] + [6], Tanh (a kernel after the GEMM)", {5, 8}, {8, 6}, true,
         {{"activation", act("Tanh")}});
}

// Baton's Attention: every mask kind, K stored either way, odd and unequal sizes, rows for a
// warp and rows for a block.
void attention_cases(std::vector<Case>& out) {
  auto attention = [](std::string label, std::vector<CaseInput> inputs,
                      std::vector<std::pair<std::string, AttrValue>> attrs) {
    Case c = make("Attention", std::move(label), std::move(inputs), std::move(attrs));
    c.domain = "baton";
    return c;
  };
  const AttrValue scale = AttrValue::of_float(0.125);
  const AttrValue transposed = AttrValue::of_int(1);
  const AttrValue add = AttrValue::of_string("add"), select = AttrValue::of_string("select");
  out.push_back(attention("[2, 3, 5, 8] no mask",
                          {in({2, 3, 5, 8}), in({2, 3, 7, 8}), in({2, 3, 7, 4})},
                          {{"scale", scale}}));
  out.push_back(attention("[2, 2, 4, 8] K transposed, additive mask [2, 1, 1, 6]",
                          {in({2, 2, 4, 8}), in({2, 2, 8, 6}), in({2, 2, 6, 8}), in({2, 1, 1, 6})},
                          {{"scale", scale}, {"k_transposed", transposed}, {"mask_kind", add}}));
  out.push_back(attention("[1, 2, 6, 8] additive mask [1, 2, 6, 6]",
                          {in({1, 2, 6, 8}), in({1, 2, 6, 8}), in({1, 2, 6, 8}), in({1, 2, 6, 6})},
                          {{"scale", AttrValue::of_float(0.35355339)}, {"mask_kind", add}}));
  out.push_back(attention("[3, 7, 5] constant additive mask [7, 1]",
                          {in({3, 7, 5}), in({3, 11, 5}), in({3, 11, 9}), constant(in({7, 1}))},
                          {{"scale", scale}, {"mask_kind", add}}));
  // Row 1 of the mask keeps nothing: its scores are all -inf, softmax gives NaN and nan_to_zero
  // turns it into 0.
  CaseInput causal = constant(in({1, 1, 3, 5}));
  causal.dtype = DType::Bool;
  causal.floats = std::vector<double>{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1};
  out.push_back(attention("[1, 2, 3, 4] constant bool mask with a fully masked row",
                          {in({1, 2, 3, 4}), in({1, 2, 5, 4}), in({1, 2, 5, 3}), causal},
                          {{"scale", AttrValue::of_float(0.5)},
                           {"mask_kind", select},
                           {"nan_to_zero", AttrValue::of_int(1)}}));
  out.push_back(
      attention("[2, 3, 4, 16] K transposed, runtime bool mask [2, 1, 4, 9], fill -1e4",
                {in({2, 3, 4, 16}), in({2, 3, 16, 9}), in({2, 3, 9, 5}), bool_input({2, 1, 4, 9})},
                {{"scale", AttrValue::of_float(0.25)},
                 {"k_transposed", transposed},
                 {"mask_kind", select},
                 {"mask_fill", AttrValue::of_float(-1e4)},
                 {"nan_to_zero", AttrValue::of_int(1)}}));
  // Rank 3 with a mask per batch: in fp16 and bf16 engines cuDNN reads it as a bias [B, 1, Sq, Sk].
  out.push_back(attention("[3, 4, 8] x [3, 6, 8], runtime additive mask [3, 4, 6]",
                          {in({3, 4, 8}), in({3, 6, 8}), in({3, 6, 8}), in({3, 4, 6})},
                          {{"scale", scale}, {"mask_kind", add}}));
  // A constant causal mask with head sizes cuDNN takes (GPT-2's shape of mask).
  CaseInput lower = constant(in({5, 5}));
  lower.dtype = DType::Bool;
  lower.floats = std::vector<double>(25);
  for (size_t i = 0; i < 5; ++i) {
    for (size_t j = 0; j <= i; ++j) (*lower.floats)[i * 5 + j] = 1;
  }
  out.push_back(attention(
      "[2, 2, 5, 8] constant causal bool mask [5, 5]",
      {in({2, 2, 5, 8}), in({2, 2, 5, 8}), in({2, 2, 5, 8}), lower},
      {{"scale", scale}, {"mask_kind", select}, {"mask_fill", AttrValue::of_float(-1e4)}}));
  out.push_back(attention("[4, 7, 32] x [4, 33, 32], Dv 17",
                          {in({4, 7, 32}), in({4, 33, 32}), in({4, 33, 17})},
                          {{"scale", AttrValue::of_float(0.0625)}}));
  out.push_back(attention("[5, 8] x [6, 8] rank 2", {in({5, 8}), in({6, 8}), in({6, 3})},
                          {{"scale", scale}}));
  out.push_back(
      attention("[1, 1, 3, 8] x [1, 1, 1100, 8] rows wider than a warp's limit",
                {in({1, 1, 3, 8}), in({1, 1, 8, 1100}), in({1, 1, 1100, 4}), bool_input({1100})},
                {{"scale", scale}, {"k_transposed", transposed}, {"mask_kind", select}}));
}

// LayerNormalization and the optimizer's canonical ops. LayerNormalization, AddLayerNorm,
// Attention and one-output Linears run on the GPU; a runtime Scale or B that broadcasts,
// LayerNormalization's Mean / InvStdDev outputs and split Linears stay on the CPU.
void normalization_and_canonical_cases(std::vector<Case>& out) {
  auto cpu_only = [](Case c) {
    c.cuda = false;
    return c;
  };
  auto baton_op = [](Case c) {
    c.domain = "baton";
    return c;
  };
  const AttrValue eps = AttrValue::of_float(1e-3);
  const AttrValue axis1 = AttrValue::of_int(1), axis2 = AttrValue::of_int(2);
  // Rows of x's last dimension, constant Scale and B of that length: how the row's length and
  // count pick the GPU kernel's path (device/layer_norm.cuh).
  auto rows_case = [&](const std::vector<int64_t>& x, const std::string& what) {
    const int64_t n = x.back();
    out.push_back(make("LayerNormalization", shape_to_string(x) + " " + what,
                       {in(x), constant(in({n})), constant(in({n}))}, {{"epsilon", eps}}));
  };
  out.push_back(make("LayerNormalization", "[2, 5, 16] axis -1",
                     {in({2, 5, 16}), in({16}), in({16})}, {{"epsilon", eps}}));
  out.push_back(
      cpu_only(make("LayerNormalization", "[3, 4, 6] axis 1, runtime broadcast scale",
                    {in({3, 4, 6}), in({1, 6}), in({4, 1})}, {{"axis", axis1}, {"epsilon", eps}})));
  out.push_back(make("LayerNormalization", "[3, 4, 6] axis 1, constant broadcast scale",
                     {in({3, 4, 6}), constant(in({1, 6})), constant(in({4, 1}))},
                     {{"axis", axis1}, {"epsilon", eps}}));
  out.push_back(
      make("LayerNormalization", "[7, 9] no bias", {in({7, 9}), in({9})}, {{"epsilon", eps}}));
  out.push_back(make("LayerNormalization", "[5, 7] narrow rows, constant scale",
                     {in({5, 7}), constant(in({7})), constant(in({7}))}));
  // Many rows (at least 1024): a warp per row, four to a block, the last block partly empty.
  rows_case({3, 367, 24}, "many narrow rows (a warp each)");
  rows_case({3, 3000}, "wide rows");
  // Rows longer than the GPU keeps in registers (device/layer_norm.cuh: 8 single elements a
  // thread when the length is not a multiple of 8), read three times: under a warp
  // (300 > 8 x 32) and under a block (9002 > 8 x 1024).
  rows_case({1024, 300}, "many rows, each read three times");
  rows_case({2, 9002}, "rows too long for registers");
  // Lengths that are multiples of 8 are read 8 at a time: a warp's row in three groups a lane
  // (768 = 3 x 8 x 32), and a row longer than the vector groups hold (40000 > 4 x 8 x 1024),
  // which falls back to three reads.
  rows_case({1024, 768}, "many rows, 8-wide accesses (a warp each)");
  rows_case({2, 40000}, "8-wide rows too long for registers");
  out.push_back(make("LayerNormalization", "[2, 3, 5, 40] axis 2, scale [5, 40], bias [40]",
                     {in({2, 3, 5, 40}), constant(in({5, 40})), constant(in({40}))},
                     {{"axis", axis2}, {"epsilon", eps}}));
  out.push_back(make("LayerNormalization", "[2, 6, 300] axis 1 (1800-wide rows), no bias",
                     {in({2, 6, 300}), constant(in({1, 300}))}, {{"axis", axis1}}));
  Case stats = cpu_only(make("LayerNormalization", "[4, 10] with Mean and InvStdDev",
                             {in({4, 10}), in({10}), in({10})}, {{"epsilon", eps}}));
  stats.outputs = 3;
  out.push_back(with_dtypes(stats, {DType::Float32}));
  out.push_back(
      baton_op(make("AddLayerNorm", "[2, 5, 16]",
                    {in({2, 5, 16}), in({2, 5, 16}), in({16}), in({16})}, {{"epsilon", eps}})));
  Case with_sum = baton_op(make("AddLayerNorm", "[4, 12] with Sum",
                                {in({4, 12}), in({4, 12}), in({12})}, {{"epsilon", eps}}));
  with_sum.outputs = 2;
  out.push_back(with_sum);
  Case many_sum =
      baton_op(make("AddLayerNorm", "[1030, 40] with Sum, many rows (a warp each)",
                    {in({1030, 40}), in({1030, 40}), in({40}), in({40})}, {{"epsilon", eps}}));
  many_sum.outputs = 2;
  out.push_back(many_sum);
  Case wide_sum =
      baton_op(make("AddLayerNorm", "[3, 2000] with Sum, wide rows",
                    {in({3, 2000}), in({3, 2000}), constant(in({2000})), constant(in({2000}))}));
  wide_sum.outputs = 2;
  out.push_back(wide_sum);
  Case long_sum =
      baton_op(make("AddLayerNorm", "[2, 9002] with Sum, rows too long for registers",
                    {in({2, 9002}), in({2, 9002}), constant(in({9002})), constant(in({9002}))}));
  long_sum.outputs = 2;
  out.push_back(long_sum);
  // BERT's shape: a block per row, one 8-wide group a thread; runtime Scale and B.
  Case bert_sum =
      baton_op(make("AddLayerNorm", "[128, 768] with Sum, runtime scale and bias, 8-wide",
                    {in({128, 768}), in({128, 768}), in({768}), in({768})}, {{"epsilon", eps}}));
  bert_sum.outputs = 2;
  out.push_back(bert_sum);
  out.push_back(
      baton_op(make("AddLayerNorm", "[2, 3, 10] axis 1, constant broadcast scale",
                    {in({2, 3, 10}), in({2, 3, 10}), constant(in({1, 10})), constant(in({3, 1}))},
                    {{"axis", axis1}, {"epsilon", eps}})));
  // One-output Linears run on the GPU (the GEMM lowering, bias in cuBLASLt's epilogue).
  out.push_back(baton_op(make("Linear", "[2, 3, 8] x [8, 5] + [5]",
                              {in({2, 3, 8}), constant(in({8, 5})), constant(in({5}))})));
  out.push_back(baton_op(make("Linear", "[6, 4] x [4, 3] no bias", {in({6, 4}), in({4, 3})})));
  Case split = baton_op(make("Linear", "[5, 8] x [8, 9] splits [2, 3, 4]",
                             {in({5, 8}), constant(in({8, 9})), constant(in({9}))},
                             {{"splits", AttrValue::of_ints({2, 3, 4})}}));
  split.outputs = 3;
  out.push_back(split);
  attention_cases(out);
}
// Softmax's opsets 1 and 11 (the input flattened at `axis`), LogSoftmax and Hardmax. Only Softmax
// has a CUDA lowering.
void softmax_family_cases(std::vector<Case>& out) {
  auto cpu_only = [](Case c) {
    c.cuda = false;
    return c;
  };
  for (int opset : {1, 11}) {
    out.push_back(at_opset(make("Softmax", fmt::format("opset {} [2, 3, 4, 5] axis 2", opset),
                                {in({2, 3, 4, 5})}, {{"axis", AttrValue::of_int(2)}}),
                           opset));
    out.push_back(at_opset(
        make("Softmax", fmt::format("opset {} [3, 7, 5] default axis 1", opset), {in({3, 7, 5})}),
        opset));
  }
  for (const char* op : {"LogSoftmax", "Hardmax"}) {
    for (int64_t axis : {-1, 0, 1, 2}) {
      out.push_back(cpu_only(make(op, fmt::format("[3, 17, 45] axis {}", axis), {in({3, 17, 45})},
                                  {{"axis", AttrValue::of_int(axis)}})));
    }
    out.push_back(cpu_only(make(op, "[2, 3000] wide rows", {in({2, 3000})})));
    out.push_back(cpu_only(make(op, "[0, 5] empty", {in({0, 5})})));
    for (int opset : {1, 11}) {
      out.push_back(cpu_only(
          at_opset(make(op, fmt::format("opset {} [2, 3, 4, 5] axis 1", opset), {in({2, 3, 4, 5})}),
                   opset)));
      out.push_back(cpu_only(at_opset(make(op, fmt::format("opset {} [4, 6, 5] axis -1", opset),
                                           {in({4, 6, 5})}, {{"axis", AttrValue::of_int(-1)}}),
                                      opset)));
    }
  }
}

// BatchNormalization (inference), InstanceNormalization and GroupNormalization; the GPU takes all
// but the empty ones (nothing to normalize).
void batch_group_norm_cases(std::vector<Case>& out) {
  auto add = [&](Case c, int opset) {
    c.cuda = *checked_numel(c.inputs[0].sizes) > 0;
    c.opset = opset;
    out.push_back(std::move(c));
  };
  // scale, B, mean and var of `sizes`; var positive.
  auto stats = [](std::vector<int64_t> sizes, bool is_constant = false) {
    CaseInput var = ranged(sizes, 0.25, 4.0);
    var.constant = is_constant;
    std::vector<CaseInput> p = {in(sizes), in(sizes), in(sizes), var};
    for (size_t i = 0; i < 3; ++i) p[i].constant = is_constant;
    return p;
  };
  auto with_x = [](CaseInput x, std::vector<CaseInput> rest) {
    rest.insert(rest.begin(), std::move(x));
    return rest;
  };
  const AttrValue eps = AttrValue::of_float(1e-3);
  add(make("BatchNormalization", "[2, 3, 4, 5]", with_x(in({2, 3, 4, 5}), stats({3})),
           {{"epsilon", eps}}),
      15);
  add(make("BatchNormalization", "[2, 3, 4, 5] constant statistics",
           with_x(in({2, 3, 4, 5}), stats({3}, true))),
      14);
  add(make("BatchNormalization", "[5, 4] rank 2", with_x(in({5, 4}), stats({4}))), 9);
  add(make("BatchNormalization", "[7] rank 1, one channel", with_x(in({7}), stats({1}))), 9);
  add(make("BatchNormalization", "[2, 3, 3, 2, 4] 3-D", with_x(in({2, 3, 3, 2, 4}), stats({3}))),
      15);
  add(make("BatchNormalization", "[0, 3, 4] empty batch", with_x(in({0, 3, 4}), stats({3}))), 15);
  add(make("BatchNormalization", "[2, 3, 4] spatial 0", with_x(in({2, 3, 4}), stats({3, 4})),
           {{"spatial", AttrValue::of_int(0)}}),
      7);
  add(make("BatchNormalization", "[2, 4, 3, 3] opset 6 is_test",
           with_x(in({2, 4, 3, 3}), stats({4})), {{"is_test", AttrValue::of_int(1)}}),
      6);
  add(make("BatchNormalization", "[2, 4, 3] opset 1", with_x(in({2, 4, 3}), stats({4})),
           {{"is_test", AttrValue::of_int(1)}, {"consumed_inputs", AttrValue::of_ints({})}}),
      1);
  // Opset 15's statistics may have another type than X: float32 for every X.
  std::vector<CaseInput> f32 = stats({3});
  for (CaseInput& p : f32) p.dtype = DType::Float32;
  add(make("BatchNormalization", "[2, 3, 5] float32 statistics", with_x(in({2, 3, 5}), f32)), 15);

  for (int opset : {1, 6}) {
    add(make("InstanceNormalization", fmt::format("[2, 3, 4, 5] opset {}", opset),
             {in({2, 3, 4, 5}), in({3}), in({3})}, {{"epsilon", eps}}),
        opset);
  }
  add(make("InstanceNormalization", "[3, 2, 17]", {in({3, 2, 17}), in({2}), in({2})}), 6);
  add(make("InstanceNormalization", "[1, 2, 3, 2, 4] 3-D", {in({1, 2, 3, 2, 4}), in({2}), in({2})}),
      6);
  add(make("InstanceNormalization", "[0, 2, 3] empty", {in({0, 2, 3}), in({2}), in({2})}), 6);

  const auto groups = [](int64_t g) { return AttrValue::of_int(g); };
  add(make("GroupNormalization", "opset 18 [2, 6, 4, 4] 3 groups, per-group scale",
           {in({2, 6, 4, 4}), in({3}), in({3})}, {{"num_groups", groups(3)}, {"epsilon", eps}}),
      18);
  add(make("GroupNormalization", "opset 18 [3, 4, 5] 1 group", {in({3, 4, 5}), in({1}), in({1})},
           {{"num_groups", groups(1)}}),
      18);
  add(make("GroupNormalization", "opset 21 [2, 6, 4, 4] 3 groups, per-channel scale",
           {in({2, 6, 4, 4}), in({6}), in({6})}, {{"num_groups", groups(3)}, {"epsilon", eps}}),
      21);
  add(make("GroupNormalization", "opset 21 [2, 4, 7] 4 groups", {in({2, 4, 7}), in({4}), in({4})},
           {{"num_groups", groups(4)}}),
      21);
  add(make("GroupNormalization", "opset 21 [2, 6] rank 2", {in({2, 6}), in({6}), in({6})},
           {{"num_groups", groups(2)}}),
      21);
}

// Pools over 1 to 3 spatial dimensions. The CUDA engine takes MaxPool (without Indices),
// AveragePool, GlobalAveragePool and GlobalMaxPool on non-empty tensors; LpPool and GlobalLpPool
// have no CUDA lowering yet.
void pool_cases(std::vector<Case>& out) {
  using Ints = std::vector<int64_t>;
  using Attrs = std::vector<std::pair<std::string, AttrValue>>;
  auto ints = [](Ints v) { return AttrValue::of_ints(std::move(v)); };
  auto add = [&](std::string op, std::string label, Ints x, Attrs attrs, int opset = 21,
                 size_t outputs = 1) {
    Case c = make(std::move(op), shape_to_string(x) + " " + label, {in(x)}, std::move(attrs));
    c.cuda = c.op != "LpPool" && c.op != "GlobalLpPool" && outputs == 1 && *checked_numel(x) > 0;
    c.opset = opset;
    c.outputs = outputs;
    out.push_back(std::move(c));
  };
  const AttrValue one = AttrValue::of_int(1);
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"}) {
    add(op, "kernel [3]", {2, 3, 11}, {{"kernel_shape", ints({3})}});
    add(op, "kernel [3, 2] stride [2, 1]", {2, 3, 9, 8},
        {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 1})}});
    add(op, "kernel [2, 3, 2] stride 2", {1, 2, 5, 6, 7},
        {{"kernel_shape", ints({2, 3, 2})}, {"strides", ints({2, 2, 2})}});
    add(op, "kernel [3, 3] pads [1, 2, 2, 1]", {2, 2, 7, 6},
        {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 2, 2, 1})}});
    add(op, "kernel [3, 3] stride 2 pads 1 ceil_mode", {1, 3, 8, 7},
        {{"kernel_shape", ints({3, 3})},
         {"strides", ints({2, 2})},
         {"pads", ints({1, 1, 1, 1})},
         {"ceil_mode", one}});
    // ceil_mode's last window would start in the right padding: dropped.
    add(op, "kernel [2] stride 2 pads [0, 1] ceil_mode", {1, 2, 6},
        {{"kernel_shape", ints({2})},
         {"strides", ints({2})},
         {"pads", ints({0, 1})},
         {"ceil_mode", one}});
    add(op, "kernel [3, 2] dilations [2, 3] stride 2 ceil_mode", {2, 2, 11, 10},
        {{"kernel_shape", ints({3, 2})},
         {"dilations", ints({2, 3})},
         {"strides", ints({2, 2})},
         {"ceil_mode", one}});
    add(op, "kernel [2, 3] dilations 2 pads 1", {1, 2, 7, 9},
        {{"kernel_shape", ints({2, 3})},
         {"dilations", ints({2, 2})},
         {"pads", ints({1, 1, 1, 1})}});
    for (const char* pad : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
      add(op, fmt::format("kernel [4, 3] stride [3, 2] {}", pad), {1, 2, 10, 7},
          {{"kernel_shape", ints({4, 3})},
           {"strides", ints({3, 2})},
           {"auto_pad", AttrValue::of_string(pad)}});
    }
    add(op, "kernel [2, 2] empty batch", {0, 3, 4, 4}, {{"kernel_shape", ints({2, 2})}});
  }
  // Opsets before the pools' dilations and ceil_mode.
  add("MaxPool", "opset 1 kernel [3, 3] stride 2 pads 1", {2, 2, 9, 9},
      {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}, 1);
  add("MaxPool", "opset 8 kernel [2, 3]", {2, 2, 6, 7}, {{"kernel_shape", ints({2, 3})}}, 8);
  add("AveragePool", "opset 1 kernel [3, 3] pads 1", {2, 2, 6, 6},
      {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}}, 1);
  add("AveragePool", "opset 7 kernel [3] stride 2 pads 1 count_include_pad", {2, 3, 9},
      {{"kernel_shape", ints({3})},
       {"strides", ints({2})},
       {"pads", ints({1, 1})},
       {"count_include_pad", one}},
      7);
  add("LpPool", "opset 11 kernel [2, 2] p 1", {2, 2, 5, 5},
      {{"kernel_shape", ints({2, 2})}, {"p", AttrValue::of_int(1)}}, 11);
  add("LpPool", "kernel [3, 3] p 3 pads 1", {2, 2, 5, 6},
      {{"kernel_shape", ints({3, 3})}, {"p", AttrValue::of_int(3)}, {"pads", ints({1, 1, 1, 1})}});
  // count_include_pad, with ceil_mode windows that run past the right padding.
  add("AveragePool", "kernel [3, 3] stride 2 pads [1, 1, 0, 0] ceil_mode count_include_pad",
      {2, 2, 8, 8},
      {{"kernel_shape", ints({3, 3})},
       {"strides", ints({2, 2})},
       {"pads", ints({1, 1, 0, 0})},
       {"ceil_mode", one},
       {"count_include_pad", one}});
  add("AveragePool", "kernel [3, 2, 3] pads 1 count_include_pad", {1, 2, 4, 5, 6},
      {{"kernel_shape", ints({3, 2, 3})},
       {"pads", ints({1, 1, 1, 1, 0, 1})},
       {"count_include_pad", one}});
  add("AveragePool", "kernel [3, 3] dilations 2 pads 2 count_include_pad", {1, 2, 9, 9},
      {{"kernel_shape", ints({3, 3})},
       {"dilations", ints({2, 2})},
       {"pads", ints({2, 2, 2, 2})},
       {"count_include_pad", one}});
  // MaxPool's Indices, row-major and column-major.
  for (int64_t order : {0, 1}) {
    add("MaxPool", fmt::format("kernel [3, 2] pads 1 with Indices, storage_order {}", order),
        {2, 3, 6, 5},
        {{"kernel_shape", ints({3, 2})},
         {"pads", ints({1, 1, 1, 1})},
         {"storage_order", AttrValue::of_int(order)}},
        21, 2);
    add("MaxPool", fmt::format("kernel [2, 3, 2] stride 2 with Indices, storage_order {}", order),
        {1, 2, 4, 6, 5},
        {{"kernel_shape", ints({2, 3, 2})},
         {"strides", ints({2, 2, 2})},
         {"storage_order", AttrValue::of_int(order)}},
        21, 2);
  }
  add("MaxPool", "kernel [4] with Indices, opset 8", {2, 3, 9}, {{"kernel_shape", ints({4})}}, 8,
      2);

  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) {
    for (Ints x : {Ints{2, 3, 7}, Ints{2, 3, 5, 6}, Ints{1, 4, 3, 2, 5}, Ints{0, 3, 4, 4}}) {
      add(op, "all positions", x, {});
    }
  }
  add("GlobalAveragePool", "opset 1", {2, 3, 4}, {}, 1);
  add("GlobalMaxPool", "opset 1", {2, 3, 4}, {}, 1);
  add("GlobalLpPool", "p 1", {2, 3, 4, 5}, {{"p", AttrValue::of_int(1)}}, 2);
  add("GlobalLpPool", "p 3", {2, 3, 4, 5}, {{"p", AttrValue::of_int(3)}}, 2);
  // The real models' pools: ResNet's stem (3x3 stride 2 pads 1), SqueezeNet's (3x3 stride 2
  // ceil_mode), squeeze-excite and classifier global pools.
  for (int64_t ceil : {0, 1}) {
    add("MaxPool", fmt::format("kernel [3, 3] stride 2 pads 1 ceil_mode {}", ceil), {2, 5, 16, 15},
        {{"kernel_shape", ints({3, 3})},
         {"strides", ints({2, 2})},
         {"pads", ints({1, 1, 1, 1})},
         {"ceil_mode", AttrValue::of_int(ceil)}});
    add("MaxPool", fmt::format("kernel [3, 3] stride 2 ceil_mode {}", ceil), {1, 6, 14, 13},
        {{"kernel_shape", ints({3, 3})},
         {"strides", ints({2, 2})},
         {"ceil_mode", AttrValue::of_int(ceil)}});
  }
  for (int64_t include : {0, 1}) {
    add("AveragePool", fmt::format("kernel [3, 3] stride 2 pads 1 count_include_pad {}", include),
        {2, 3, 9, 10},
        {{"kernel_shape", ints({3, 3})},
         {"strides", ints({2, 2})},
         {"pads", ints({1, 1, 1, 1})},
         {"count_include_pad", AttrValue::of_int(include)}});
    add("AveragePool",
        fmt::format("kernel [2, 2] stride 2 pads [0, 0, 1, 1] ceil_mode count_include_pad {}",
                    include),
        {1, 4, 7, 7},
        {{"kernel_shape", ints({2, 2})},
         {"strides", ints({2, 2})},
         {"pads", ints({0, 0, 1, 1})},
         {"ceil_mode", one},
         {"count_include_pad", AttrValue::of_int(include)}});
  }
  add("GlobalAveragePool", "classifier", {2, 64, 7, 7}, {});
  add("GlobalMaxPool", "wide", {1, 40, 3, 3}, {});
}

// A fixed float constant (Resize's scales and roi).
CaseInput float_constant(std::vector<double> values, DType dtype = DType::Float32) {
  CaseInput c;
  c.sizes = {static_cast<int64_t>(values.size())};
  c.floats = std::move(values);
  c.dtype = dtype;
  c.constant = true;
  return c;
}

// The ten reductions (both forms: axes as attribute at opset 13, as input at 21), ArgMax and
// ArgMin. The CUDA engine takes ReduceSum, ReduceMean, ReduceMax and ReduceMin in float types on
// non-empty tensors, and ArgMax / ArgMin in every numeric type; the other reductions have no
// CUDA lowering yet.
void reduce_cases(std::vector<Case>& out) {
  const size_t first = out.size();
  const std::vector<DType> floats = {DType::Float32, DType::Float16, DType::BFloat16,
                                     DType::Float64};
  for (const ops::ReduceRow& row : ops::reduce_rows()) {
    const std::string op(row.name);
    // ReduceLogSum needs a positive sum; ReduceProd small factors (products of 20 stay inside
    // float16's range).
    auto x = [&](std::vector<int64_t> sizes) {
      if (row.reduction == ops::Reduction::LogSum) return ranged(std::move(sizes), 0.5, 4);
      if (row.reduction == ops::Reduction::Prod) return ranged(std::move(sizes), -1.5, 1.5);
      return in(std::move(sizes));
    };
    const std::vector<int64_t> shape = {3, 4, 5};
    auto ints = [](std::vector<int64_t> v) { return AttrValue::of_ints(std::move(v)); };
    const AttrValue keep0 = AttrValue::of_int(0);
    // opset 13: the attribute form (ReduceSum's input form starts at 13: it takes opset 11).
    const int attr_opset = row.input_axes_since <= 13 ? 11 : 13;
    auto attr_case = [&](std::string label, std::vector<std::pair<std::string, AttrValue>> attrs,
                         std::vector<int64_t> sizes) {
      out.push_back(at_opset(make(op, label + " (axes attribute)", {x(sizes)}, attrs), attr_opset));
    };
    attr_case("[3, 4, 5] axes [1]", {{"axes", ints({1})}}, shape);
    attr_case("[3, 4, 5] axes [2, 0] keepdims 0", {{"axes", ints({2, 0})}, {"keepdims", keep0}},
              shape);
    attr_case("[3, 4, 5] axes [-1]", {{"axes", ints({-1})}}, shape);
    attr_case("[2, 3] all axes", {}, {2, 3});
    attr_case("[7] all axes keepdims 0", {{"keepdims", keep0}}, {7});
    attr_case("[] scalar", {}, {});

    CaseInput absent;
    absent.absent = true;
    out.push_back(make(op, "[3, 4, 5] axes [1, -1] keepdims 0", {x(shape), shape_input({1, -1})},
                       {{"keepdims", keep0}}));
    out.push_back(make(op, "[3, 4, 5] axes [0]", {x(shape), shape_input({0})}));
    out.push_back(make(op, "[4, 5] no axes: all", {x({4, 5})}));
    out.push_back(make(op, "[4, 5] empty axes: all", {x({4, 5}), shape_input({})}));
    out.push_back(make(op, "[4, 5] empty axes, noop", {x({4, 5}), shape_input({})},
                       {{"noop_with_empty_axes", AttrValue::of_int(1)}}));
    out.push_back(make(op, "[4, 5] absent axes, noop keepdims 0", {x({4, 5}), absent},
                       {{"noop_with_empty_axes", AttrValue::of_int(1)}, {"keepdims", keep0}}));
    out.push_back(make(op, "[2, 3, 4, 5] axes [1, 3]", {x({2, 3, 4, 5}), shape_input({1, 3})}));
    out.push_back(make(op, "[0, 3] axes [1] (nothing to reduce)", {x({0, 3}), shape_input({1})}));
    // Empty groups give the identity: only the reductions whose identity is finite (the
    // comparison cannot take infinities) and NaN (ReduceMean), in float types.
    const bool finite_identity =
        row.reduction != ops::Reduction::Max && row.reduction != ops::Reduction::Min &&
        row.reduction != ops::Reduction::LogSum && row.reduction != ops::Reduction::LogSumExp;
    if (finite_identity) {
      out.push_back(with_dtypes(
          make(op, "[3, 0, 2] axes [1] (empty groups)", {x({3, 0, 2}), shape_input({1})}), floats));
    }
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t axis : {0, 1, -1}) {
      for (int64_t keep : {0, 1}) {
        for (int64_t last : {0, 1}) {
          out.push_back(make(
              op,
              fmt::format("[3, 4, 5] axis {} keepdims {} select_last_index {}", axis, keep, last),
              {in({3, 4, 5})},
              {{"axis", AttrValue::of_int(axis)},
               {"keepdims", AttrValue::of_int(keep)},
               {"select_last_index", AttrValue::of_int(last)}}));
        }
      }
    }
    out.push_back(at_opset(make(op, "[6, 7] default axis opset 11", {in({6, 7})}), 11));
    out.push_back(make(op, "[17] axis 0", {in({17})}));
    out.push_back(make(op, "[4, 0] axis 0 (empty output)", {in({4, 0})}));
    // Long lines (a language model's logits) take the GPU's block-per-line kernel; values on a
    // 1/32 grid in [-4, 4] repeat many times along 1000, so the tie rule is exercised too.
    for (int64_t last : {0, 1}) {
      out.push_back(make(op, fmt::format("[3, 1000] axis 1 select_last_index {}", last),
                         {in({3, 1000})},
                         {{"axis", AttrValue::of_int(1)},
                          {"keepdims", AttrValue::of_int(0)},
                          {"select_last_index", AttrValue::of_int(last)}}));
    }
    out.push_back(
        make(op, "[2, 600, 3] axis 1", {in({2, 600, 3})}, {{"axis", AttrValue::of_int(1)}}));
  }
  // Axis sets the models reduce over: H and W (squeeze-excite, the dynamo exporter's global
  // pool), the innermost dimension (a block per output), channels, and long rows. The last five
  // keep the innermost dimension and reduce at least 16 elements each, the GPU's blocks of columns
  // (as a channels-last pool reads): one element per access where the kept row is not a multiple
  // of the vector ([4, 300, 3], [2, 17, 130]), 16 bytes per access otherwise, with one outer index
  // or several, and kept rows narrower than a block's columns ([3, 20, 40]). [4, 300, 3] and
  // [600, 24] are also few blocks over long columns, which take 1024 threads a block: one element
  // per access, and 16 bytes per access with rows left over after the four-row steps.
  const std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t> more[] = {
      {{2, 24, 7, 9}, {2, 3}, 1}, {{2, 24, 7, 9}, {-1, -2}, 0}, {{2, 6, 5, 33}, {3}, 0},
      {{2, 6, 5, 7}, {1}, 1},     {{3, 4, 5, 6}, {0, 2}, 0},    {{2, 1000}, {1}, 1},
      {{4, 300, 3}, {1}, 0},      {{40, 64}, {0}, 1},           {{2, 48, 24}, {1}, 0},
      {{3, 20, 40}, {1}, 1},      {{2, 17, 130}, {1}, 0},       {{600, 24}, {0}, 1},
  };
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
    for (const auto& [x, axes, keep] : more) {
      out.push_back(make(
          op,
          fmt::format("{} axes {} keepdims {}", shape_to_string(x), shape_to_string(axes), keep),
          {in(x), shape_input(axes)}, {{"keepdims", AttrValue::of_int(keep)}}));
    }
  }
  for (size_t i = first; i < out.size(); ++i) {
    Case& c = out[i];
    const bool empty = *checked_numel(c.inputs[0].sizes) == 0;
    c.cuda = !empty && (c.op == "ReduceSum" || c.op == "ReduceMean" || c.op == "ReduceMax" ||
                        c.op == "ReduceMin" || c.op == "ArgMax" || c.op == "ArgMin");
    // ArgMax and ArgMin read every numeric dtype on the GPU.
    c.cuda_all_types = c.cuda && (c.op == "ArgMax" || c.op == "ArgMin");
  }
}

// Pad in every mode, with cropping, axes and constant_value (graph input or constant); Pad-2's
// attributes at opset 10.
void pad_cases(std::vector<Case>& out) {
  const size_t first = out.size();
  struct P {
    std::vector<int64_t> x, pads;
    const char* mode;
  };
  const P pads[] = {
      {{3, 4}, {1, 2, 0, 3}, "constant"},
      {{3, 4}, {1, 2, 2, 1}, "reflect"},
      {{3, 4}, {0, 3, 2, 0}, "edge"},
      {{3, 4}, {2, 1, 1, 5}, "wrap"},
      {{5}, {7, 9}, "reflect"},
      {{5}, {7, 11}, "wrap"},
      {{2, 3, 4}, {0, -1, 1, 1, 0, -2}, "constant"},
      {{2, 3, 4}, {1, -1, 2, 0, 1, -1}, "reflect"},
      {{2, 3, 4}, {0, 0, -3, 1, 2, 2}, "edge"},
      {{1, 3, 4, 5}, {0, 0, 1, 2, 0, 0, 2, 1}, "reflect"},
      {{4, 1}, {1, 2, 1, 2}, "edge"},
      {{2, 0}, {1, 1, 1, 1}, "constant"},
      {{3, 4}, {0, 0, 0, 0}, "reflect"},
  };
  for (const P& p : pads) {
    out.push_back(make(
        "Pad", fmt::format("{} pads {} {}", shape_to_string(p.x), shape_to_string(p.pads), p.mode),
        {in(p.x), shape_input(p.pads)}, {{"mode", AttrValue::of_string(p.mode)}}));
  }
  out.push_back(make("Pad", "[3, 4] constant_value constant",
                     {in({3, 4}), shape_input({1, 0, 1, 2}), constant(in({}))}));
  out.push_back(make("Pad", "[3, 4] constant_value a graph input",
                     {in({3, 4}), shape_input({2, 1, 0, 1}), in({1})}));
  CaseInput absent;
  absent.absent = true;
  out.push_back(make("Pad", "[2, 3, 4] axes [-1, 0] reflect",
                     {in({2, 3, 4}), shape_input({2, 1, 3, 0}), absent, shape_input({-1, 0})},
                     {{"mode", AttrValue::of_string("reflect")}}));
  out.push_back(make("Pad", "[2, 3, 4] int32 axes [1] constant",
                     {in({2, 3, 4}), shape_input({1, 2}), constant(in({})), int32_input({1})}));
  out.push_back(
      at_opset(make("Pad", "[3, 4] opset 13 edge", {in({3, 4}), shape_input({1, 1, 1, 1})},
                    {{"mode", AttrValue::of_string("edge")}}),
               13));
  out.push_back(at_opset(
      make("Pad", "[3, 4] opset 10 (pads and value attributes)", {in({3, 4})},
           {{"pads", AttrValue::of_ints({1, 0, 2, 3})}, {"value", AttrValue::of_float(1.5)}}),
      10));
  out.push_back(at_opset(
      make("Pad", "[3, 4] opset 10 reflect", {in({3, 4})},
           {{"pads", AttrValue::of_ints({2, 1, 0, 3})}, {"mode", AttrValue::of_string("reflect")}}),
      10));
  // Every dtype on the GPU; an empty input (nothing to read) stays on the CPU.
  for (size_t i = first; i < out.size(); ++i) {
    out[i].cuda = out[i].cuda_all_types = *checked_numel(out[i].inputs[0].sizes) > 0;
  }
}

// Resize (opsets 10 to 21) and Upsample (7, 9): nearest in every dtype, linear and cubic in the
// float types; the GPU takes them all (static shapes).
void resize_cases(std::vector<Case>& out) {
  const size_t first = out.size();
  const std::vector<DType> floats = {DType::Float32, DType::Float16, DType::BFloat16,
                                     DType::Float64};
  CaseInput none;
  none.absent = true;
  auto str = [](const char* s) { return AttrValue::of_string(s); };
  using Attrs = std::vector<std::pair<std::string, AttrValue>>;
  auto scaled = [&](std::string label, std::vector<int64_t> x, std::vector<double> scales,
                    Attrs attrs) {
    out.push_back(
        make("Resize", label, {in(x), none, float_constant(std::move(scales))}, std::move(attrs)));
  };
  auto sized = [&](std::string label, std::vector<int64_t> x, std::vector<int64_t> sizes,
                   Attrs attrs) {
    out.push_back(make("Resize", label, {in(x), none, none, shape_input(std::move(sizes))},
                       std::move(attrs)));
  };
  for (const char* rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    for (const char* coord : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
      scaled(fmt::format("nearest [1, 2, 3, 4] scales [1, 1, 2.5, 0.75] {} {}", coord, rounding),
             {1, 2, 3, 4}, {1, 1, 2.5, 0.75},
             {{"nearest_mode", str(rounding)}, {"coordinate_transformation_mode", str(coord)}});
    }
  }
  sized("nearest [2, 3, 5] sizes [3, 7, 2]", {2, 3, 5}, {3, 7, 2}, {});
  sized("nearest [4, 4] sizes [9, 3] half_pixel_symmetric", {4, 4}, {9, 3},
        {{"coordinate_transformation_mode", str("half_pixel_symmetric")}});
  out.push_back(make("Resize", "nearest tf_crop_and_resize [1, 2, 4, 5] sizes [1, 2, 5, 3]",
                     {in({1, 2, 4, 5}), float_constant({0, 0, 0.1, -0.3, 1, 1, 0.9, 1.2}), none,
                      shape_input({1, 2, 5, 3})},
                     {{"coordinate_transformation_mode", str("tf_crop_and_resize")},
                      {"extrapolation_value", AttrValue::of_float(3)}}));
  const size_t interpolated = out.size();
  for (const char* coord : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                            "half_pixel_symmetric"}) {
    scaled(fmt::format("linear [1, 2, 3, 4] scales [1, 1, 2.5, 0.6] {}", coord), {1, 2, 3, 4},
           {1, 1, 2.5, 0.6},
           {{"mode", str("linear")}, {"coordinate_transformation_mode", str(coord)}});
    sized(fmt::format("cubic [1, 1, 5, 6] sizes [1, 1, 8, 3] {}", coord), {1, 1, 5, 6},
          {1, 1, 8, 3}, {{"mode", str("cubic")}, {"coordinate_transformation_mode", str(coord)}});
  }
  scaled("linear 1-D [7] scales [1.5]", {7}, {1.5}, {{"mode", str("linear")}});
  sized("linear 3-D [3, 4, 5] sizes [5, 2, 9]", {3, 4, 5}, {5, 2, 9}, {{"mode", str("linear")}});
  sized("linear [1, 1, 1, 4] sizes [1, 1, 3, 7] (a size-1 axis)", {1, 1, 1, 4}, {1, 1, 3, 7},
        {{"mode", str("linear")}});
  scaled("cubic [1, 1, 4, 4] scales [1, 1, 2, 0.5] exclude_outside A=-0.5", {1, 1, 4, 4},
         {1, 1, 2, 0.5},
         {{"mode", str("cubic")},
          {"exclude_outside", AttrValue::of_int(1)},
          {"cubic_coeff_a", AttrValue::of_float(-0.5)}});
  out.push_back(make("Resize", "linear tf_crop_and_resize [1, 1, 4, 5] sizes [1, 1, 3, 6]",
                     {in({1, 1, 4, 5}), float_constant({0, 0, 0.25, -0.5, 1, 1, 0.75, 1.25}), none,
                      shape_input({1, 1, 3, 6})},
                     {{"mode", str("linear")},
                      {"coordinate_transformation_mode", str("tf_crop_and_resize")},
                      {"extrapolation_value", AttrValue::of_float(2.5)}}));
  out.push_back(make("Resize", "cubic tf_crop_and_resize [1, 1, 5, 6] sizes [1, 1, 4, 7]",
                     {in({1, 1, 5, 6}), float_constant({0, 0, 0.2, -0.25, 1, 1, 1.1, 0.8}), none,
                      shape_input({1, 1, 4, 7})},
                     {{"mode", str("cubic")},
                      {"coordinate_transformation_mode", str("tf_crop_and_resize")},
                      {"extrapolation_value", AttrValue::of_float(0.75)}}));
  out.push_back(make("Resize", "linear axes [2, 3] scales [1.75, 0.5]",
                     {in({2, 1, 4, 6}), none, float_constant({1.75, 0.5})},
                     {{"mode", str("linear")}, {"axes", AttrValue::of_ints({2, 3})}}));
  for (const char* policy : {"not_larger", "not_smaller"}) {
    out.push_back(make("Resize", fmt::format("linear axes [-1, -2] sizes [7, 5] {}", policy),
                       {in({1, 4, 6}), none, none, shape_input({7, 5})},
                       {{"mode", str("linear")},
                        {"axes", AttrValue::of_ints({-1, -2})},
                        {"keep_aspect_ratio_policy", str(policy)}}));
  }
  out.push_back(
      at_opset(make("Resize", "linear opset 11 tf_half_pixel_for_nn roi and scales",
                    {in({1, 1, 3, 4}), float_constant({}), float_constant({1, 1, 2, 1.5})},
                    {{"mode", str("linear")},
                     {"coordinate_transformation_mode", str("tf_half_pixel_for_nn")}}),
               11));
  out.push_back(at_opset(make("Resize", "linear opset 10 [2, 3] scales [2, 1.5]",
                              {in({2, 3}), float_constant({2, 1.5})}, {{"mode", str("linear")}}),
                         10));
  for (size_t i = interpolated; i < out.size(); ++i) out[i].dtypes = floats;
  out.push_back(at_opset(make("Resize", "nearest opset 10 [2, 6] scales [2, 0.5] (ceil down)",
                              {in({2, 6}), float_constant({2, 0.5})}),
                         10));
  out.push_back(at_opset(make("Resize", "nearest opset 13 [3, 4] sizes [0, 5] (empty)",
                              {in({3, 4}), none, none, shape_input({0, 5})}),
                         13));
  out.push_back(at_opset(make("Upsample", "nearest opset 9 [1, 1, 2, 3] scales [1, 1, 2, 3]",
                              {in({1, 1, 2, 3}), float_constant({1, 1, 2, 3})}),
                         9));
  out.push_back(
      at_opset(with_dtypes(make("Upsample", "linear opset 9 [2, 3] scales [1.5, 2]",
                                {in({2, 3}), float_constant({1.5, 2})}, {{"mode", str("linear")}}),
                           floats),
               9));
  out.push_back(at_opset(make("Upsample", "nearest opset 7 scales attribute [1, 2.5]", {in({3, 2})},
                              {{"scales", AttrValue::of_floats({1, 2.5})}}),
                         7));
  // The GPU takes every one with an output (static shapes), nearest in every dtype.
  for (size_t i = first; i < out.size(); ++i) {
    Case& c = out[i];
    c.cuda = c.label.find("(empty)") == std::string::npos;
    // (The GPU takes tf_crop_and_resize in the float types only: it does not narrow an
    // extrapolation value into an integer type; those stay on the CPU, named as a fallback.)
    c.cuda_all_types = c.cuda && c.label.rfind("nearest", 0) == 0 &&
                       c.label.find("tf_crop_and_resize") == std::string::npos;
  }
}

}  // namespace

std::vector<Case> conformance_cases() {
  std::vector<Case> out;
  elementwise_cases(out);
  mod_cases(out);
  own_shape_elementwise_cases(out);
  gemm_cases(out);
  matmul_cases(out);
  other_cases(out);
  indexing_cases(out);
  layout_cases(out);
  shape_cases(out);
  einsum_cases(out);
  conv_cases(out);
  fused_cases(out);
  normalization_and_canonical_cases(out);
  softmax_family_cases(out);
  batch_group_norm_cases(out);
  pool_cases(out);
  reduce_cases(out);
  pad_cases(out);
  resize_cases(out);
  return out;
}

std::string case_name(const Case& c, DType dtype) {
  return fmt::format("{} {} {}", c.op, c.label, dtype_name(dtype));
}

std::vector<std::string> conformance_test_names(const std::vector<Case>& cases) {
  std::vector<std::string> names;
  std::map<std::string, int> seen;
  for (const Case& c : cases) {
    std::string name;
    for (char ch : c.op + " " + c.label) {
      const bool word = std::isalnum(static_cast<unsigned char>(ch)) != 0;
      if (word) {
        name += ch;
      } else if (!name.empty() && name.back() != '_') {
        name += '_';
      }
    }
    while (!name.empty() && name.back() == '_') name.pop_back();
    // Two cases of one op and label (generated variants) get a number.
    if (const int n = ++seen[name]; n > 1) name += "_variant" + std::to_string(n);
    names.push_back(name);
  }
  return names;
}

}  // namespace baton::testing
