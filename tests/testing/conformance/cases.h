// The backend-conformance table (in the spirit of ggml's test-backend-ops): cases for every
// registered operator, run on every available backend and precision against the CPU kernel.
//
// Most cases come from default generators: each row of the elementwise table gets scalars, odd
// sizes and broadcasting pairs; every case runs in every dtype the op's definition allows and
// Baton's CPU kernel takes. Ops with attributes or shape inputs list their cases by hand below.
// conformance_test.cpp fails when a registered op (or a CUDA lowering) has no case here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "baton/core/dtype.h"
#include "ops/op_def.h"

namespace baton::testing {

struct CaseInput {
  std::vector<int64_t> sizes;
  // Random values in [lo, hi] (floats on a 1/32 grid, exact in every float type; integers for
  // integer dtypes), at least `min_abs` in magnitude.
  double lo = -4.0, hi = 4.0, min_abs = 0.0;
  bool constant = false;  // an initializer instead of a graph input
  // A fixed integer constant (a shape input): int64, or int32 where `dtype` says so.
  std::optional<std::vector<int64_t>> int64s;
  // A fixed float constant (Resize's scales and roi): float32, or the type `dtype` says.
  std::optional<std::vector<double>> floats;
  std::optional<DType> dtype;  // a fixed dtype (else the case's T)
  bool absent = false;         // an absent optional input ("")
  // Indices without repeats, for scatters with reduction "none" (where ONNX leaves repeats
  // undefined and the GPU writes one of them): with `distinct_over` the sizes a ScatterND's index
  // tuples address (the data's first k dimensions), distinct tuples (the last dimension of
  // `sizes` is k); with `distinct_axis` >= 0, distinct indices along that axis of `sizes` into
  // an extent of `distinct_extent` (ScatterElements). Each index is negative (counted from the
  // end) or not at random.
  std::vector<int64_t> distinct_over;
  int distinct_axis = -1;
  int64_t distinct_extent = 0;
};

struct Case {
  std::string op;
  std::string domain;  // "" for ai.onnx; "baton" for Baton's canonical ops (opset 1)
  std::string label;   // what the case exercises
  std::vector<CaseInput> inputs;
  std::vector<std::pair<std::string, ops::AttrValue>> attrs;
  int opset = 21;
  size_t outputs = 1;
  // Types of T to run; empty: every dtype the definition allows and the CPU kernel takes.
  std::vector<DType> dtypes;
  // Whether the CUDA engine takes the node (in float types); false records a known limit (the
  // node then runs on the CPU, and the test checks that it does).
  bool cuda = true;
  // Whether the CUDA engine also takes the node in the case's integer and bool dtypes (ops that
  // move, select, compare or convert values of any dtype: Gather, Where, Cast, And, views, ...);
  // the CUDA tests then run those dtypes too.
  bool cuda_all_types = false;
};

std::vector<Case> conformance_cases();

// "Add [3, 1] x [5] float16".
std::string case_name(const Case& c, DType dtype);

// One test name per case, in order, as gtest takes them (letters, digits and '_'; unique):
// "Add_3_1_x_5". The conformance tests are parameterized by case, so --gtest_filter selects
// cases by these names (e.g. '*Conv_1x1*').
std::vector<std::string> conformance_test_names(const std::vector<Case>& cases);

}  // namespace baton::testing
