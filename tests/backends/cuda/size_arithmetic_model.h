// A model of what dynamic exports compute on sizes and indices (position ids, mask offsets,
// index pairs, a token-type lookup), over ids [2, N] (int64, values in 0..63):
//   shape = Shape(ids)                                   -> [2, N]
//   pos   = Range(3, shape[1] + 3, 1)                    -> 3, 4, 5, ... (N values)
//   mixed = ids * 7 + pos[None, :] - ids                 (int64 Mul, Add, Sub)
//   pairs = Concat(ids[..., None], mixed[..., None], -1) (an int64 Concat)
//   types = GatherElements(table [2, 64], ids, axis 1)   (float)
// Shared by the dynamic engine tests with and without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "testing/onnx_builder.h"

namespace baton::testing {

inline std::vector<uint8_t> size_arithmetic_model() {
  OnnxBuilder b(17);
  b.input("ids", {2, -1}, 7);  // int64
  b.initializer_int64("one", {}, {1});
  b.initializer_int64("three", {}, {3});
  b.initializer_int64("seven", {}, {7});
  b.initializer_int64("axis0", {1}, {0});
  b.initializer_int64("axis2", {1}, {2});
  std::vector<float> table(2 * 64);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * static_cast<float>(i) - 3.0f;
  b.initializer("table", {2, 64}, table);
  b.node("Shape", {"ids"}, {"shape"}, "shape");
  b.node("Gather", {"shape", "one"}, {"n"}, "n");
  b.node("Add", {"n", "three"}, {"limit"}, "limit");
  b.node("Range", {"three", "limit", "one"}, {"pos"}, "positions");
  b.node("Unsqueeze", {"pos", "axis0"}, {"pos_row"}, "pos_row");
  b.node("Mul", {"ids", "seven"}, {"scaled"}, "scaled");
  b.node("Add", {"scaled", "pos_row"}, {"offset"}, "offset");
  b.node("Sub", {"offset", "ids"}, {"mixed"}, "mixed");
  b.node("Unsqueeze", {"ids", "axis2"}, {"ids3"}, "ids3");
  b.node("Unsqueeze", {"mixed", "axis2"}, {"mixed3"}, "mixed3");
  OnnxBuilder::attr_int(b.node("Concat", {"ids3", "mixed3"}, {"pairs"}, "pairs"), "axis", -1);
  OnnxBuilder::attr_int(b.node("GatherElements", {"table", "ids"}, {"types"}, "types"), "axis", 1);
  b.output("shape", {2}, 7);
  b.output("pairs", {2, -1, 2}, 7);
  b.output("types", {2, -1}, 1);
  return b.bytes();
}

}  // namespace baton::testing
