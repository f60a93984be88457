// Empty tensors whose other dimensions are huge ([0, 2^40, 2^40]) are refused where they enter a
// model or where a node makes one, naming it: every partial product of their sizes overflows.
#include <gtest/gtest.h>

#include "compiler/robustness.h"

namespace baton::testing {
namespace {

constexpr int64_t kBig = int64_t{1} << 40;

TEST_F(RobustnessTest, EmptyShapesWithOverflowingDimensionsAreRefusedAtCompileTime) {
  // A graph input of [0, 2^40, 2^40].
  OnnxBuilder input;
  input.input("x", {0, kBig, kBig});
  auto& sm = input.node("Softmax", {"x"}, {"y"}, "softmax");
  OnnxBuilder::attr_int(sm, "axis", 0);
  input.output("y", {0, kBig, kBig});
  auto r = compile(input);
  expect_error(r.status(), Error::InvalidArgument, "input 'x'");
  expect_error(r.status(), Error::InvalidArgument, "[0, 1099511627776, 1099511627776]");

  // A Reshape that makes one from an empty input: the node that makes it is named.
  OnnxBuilder reshape;
  reshape.input("x", {0, 4});
  reshape.initializer_int64("shape", {3}, {0, kBig, kBig});
  auto& rs = reshape.node("Reshape", {"x", "shape"}, {"r"}, "make_huge");
  OnnxBuilder::attr_int(rs, "allowzero", 1);
  auto& t = reshape.node("Transpose", {"r"}, {"y"}, "transpose");
  OnnxBuilder::attr_ints(t, "perm", {2, 0, 1});
  reshape.output("y", {kBig, 0, kBig});
  r = compile(reshape);
  expect_error(r.status(), Error::InvalidArgument, "node 'make_huge'");
  expect_error(r.status(), Error::InvalidArgument, "[0, 1099511627776, 1099511627776]");

  // An initializer of that shape (no bytes needed).
  OnnxBuilder init;
  init.input("x", {1});
  init.initializer("w", {0, kBig, kBig}, {});
  init.node("Add", {"w", "x"}, {"y"}, "add");
  init.output("y", {0, kBig, kBig});
  r = compile(init);
  expect_error(r.status(), Error::InvalidArgument, "initializer 'w' has invalid dims");
}

}  // namespace
}  // namespace baton::testing
