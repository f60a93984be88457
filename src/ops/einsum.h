// ONNX Einsum's equation (opset 12), parsed once for its definition (the output shape and the
// canonical equation) and its CPU kernel (the loop nest).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::ops {

// Labels are numbered: first the dimensions an ellipsis stands for (aligned right across
// operands, as numpy broadcasts them), then the letters in order of first appearance.
struct EinsumPlan {
  std::vector<int64_t> label_sizes;            // by label (broadcast size for ellipsis dims)
  std::vector<std::vector<int>> input_labels;  // per input, the label of each dimension
  std::vector<int> output_labels;              // the label of each output dimension
  // The equation in explicit form: no spaces, "->" and the output subscripts always written
  // (the implicit output is the ellipsis, then the letters used once, in ASCII order).
  std::string canonical;
};

// Parses `equation` against the input shapes. Letters a-z and A-Z, "..." at most once per term,
// repeated letters within one term (diagonals) and letters summed over are all allowed; a letter's
// dimensions must agree, ellipsis dimensions broadcast. Errors name `what`.
Result<EinsumPlan> plan_einsum(std::string_view equation,
                               std::span<const std::span<const int64_t>> shapes,
                               std::string_view what);

// How an equation is computed, in the order numpy's and onnxruntime's einsum use: each input is
// first reduced to the labels that matter beyond it (its diagonals taken, the labels only it has
// and the output lacks summed), then the operands are contracted two at a time, always the pair
// whose result is smallest (numpy's greedy order), and the last operand is laid out in the
// output's order. The work is then bounded by the inputs, the intermediates and the output,
// instead of the product of every label's size (a one-loop-nest einsum of "abcd,efgh,ijkl->" on
// three 256 KB inputs is 2.8e14 steps; this is 2e5).
struct EinsumContraction {
  // Per input: its distinct labels in order of first appearance (a dimension of size 1 that
  // broadcasts against a larger label size is not among them), and those of them kept.
  struct Reduce {
    std::vector<int> labels;
    std::vector<int> kept;
  };
  // Operands are numbered as a list: the reduced inputs, then each pair's result appended while
  // its two operands leave the list. A pair names positions in the list as it stands before it.
  // Result = batch, then left, then right labels: C[b, l, r] = sum_s A[b, l, s] * B[b, s, r].
  struct Pair {
    size_t a = 0, b = 0;  // a < b
    std::vector<int> batch, left, right, summed;
  };
  std::vector<Reduce> reduces;
  std::vector<Pair> pairs;
  std::vector<int> result_labels;  // the last operand's labels (a permutation of a subset of the
                                   // output's: labels of size 1 that every input broadcasts are
                                   // absent)
  double work = 0;                 // multiply-adds and copies, in elements
};
EinsumContraction plan_contraction(const EinsumPlan& plan,
                                   std::span<const std::span<const int64_t>> shapes);

}  // namespace baton::ops
