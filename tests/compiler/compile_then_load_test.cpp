// What the compiler writes, its runtime loads: for each edge case either the program compiles and
// loads, or the compile fails with an error naming what is not supported.
#include <gtest/gtest.h>

#include <functional>

#include "compiler/robustness.h"

namespace baton::testing {
namespace {

TEST_F(RobustnessTest, WhatCompilesLoadsOrFailsToCompileByName) {
  struct Case {
    const char* what;
    std::function<void(OnnxBuilder&)> build;
    const char* error;  // null: must compile and load
  };
  const std::vector<int64_t> rank17(17, 1);
  const Case cases[] = {
      {"a zero-byte initializer read by a kernel",
       [](OnnxBuilder& b) {
         b.input("x", {2, 3});
         b.initializer("empty", {0, 3}, {});
         auto& c = b.node("Concat", {"x", "empty"}, {"y"}, "concat");
         OnnxBuilder::attr_int(c, "axis", 0);
         b.output("y", {2, 3});
       },
       nullptr},
      {"a zero-byte initializer as a graph output",
       [](OnnxBuilder& b) {
         b.input("x", {2});
         b.initializer("empty", {0}, {});
         b.node("Relu", {"x"}, {"y"}, "relu");
         b.output("y", {2});
         b.output("empty", {0});
       },
       nullptr},
      {"only zero-byte constants, next to a delegate-free program",
       [](OnnxBuilder& b) {
         b.input("x", {0, 3});
         b.initializer("empty", {0, 3}, {});
         b.node("Add", {"x", "empty"}, {"y"}, "add");
         b.output("y", {0, 3});
       },
       nullptr},
      {"a graph input that is a graph output",
       [](OnnxBuilder& b) {
         b.input("x", {2});
         b.node("Relu", {"x"}, {"y"}, "relu");
         b.output("y", {2});
         b.output("x", {2});
       },
       nullptr},
      {"an initializer that is a graph output",
       [](OnnxBuilder& b) {
         b.input("x", {2});
         b.initializer("w", {2}, {1.0f, 2.0f});
         b.node("Relu", {"x"}, {"y"}, "relu");
         b.output("y", {2});
         b.output("w", {2});
       },
       nullptr},
      {"one value listed twice as an output",
       [](OnnxBuilder& b) {
         b.input("x", {2});
         b.node("Relu", {"x"}, {"y"}, "relu");
         b.output("y", {2});
         b.output("y", {2});
       },
       nullptr},
      {"an unused input",
       [](OnnxBuilder& b) {
         b.input("x", {2});
         b.input("unused", {5});
         b.node("Relu", {"x"}, {"y"}, "relu");
         b.output("y", {2});
       },
       nullptr},
      {"names that are not UTF-8",
       [](OnnxBuilder& b) {
         b.input("x\xff", {2});
         b.node("Relu", {"x\xff"}, {"y\xfe"}, "NODE\xff\xfe");
         b.output("y\xfe", {2});
       },
       nullptr},
      {"an empty tensor through every kind of kernel",
       [](OnnxBuilder& b) {
         b.input("x", {0, 4});
         b.initializer("w", {4, 3}, std::vector<float>(12, 0.5f));
         b.node("MatMul", {"x", "w"}, {"h"}, "mm");
         auto& s = b.node("Softmax", {"h"}, {"y"}, "sm");
         OnnxBuilder::attr_int(s, "axis", 0);
         b.output("y", {0, 3});
       },
       nullptr},
      {"a rank-17 graph input",
       [&](OnnxBuilder& b) {
         b.input("x", rank17);
         b.node("Flatten", {"x"}, {"y"}, "flatten");
         b.output("y", {1, 1});
       },
       "input 'x' of '<memory>' has rank 17"},
      {"a rank-17 initializer",
       [&](OnnxBuilder& b) {
         b.input("x", {1, 1});
         b.initializer("w", rank17, {1.0f});
         b.node("Flatten", {"w"}, {"wf"}, "flatten");
         b.node("Add", {"x", "wf"}, {"y"}, "add");
         b.output("y", {1, 1});
       },
       "initializer 'w' has rank 17"},
      {"a node making rank 17",
       [&](OnnxBuilder& b) {
         b.input("x", std::vector<int64_t>(16, 1));
         b.initializer_int64("axes", {1}, {0});
         b.node("Unsqueeze", {"x", "axes"}, {"y"}, "unsqueeze");
         b.output("y", rank17);
       },
       "Unsqueeze (node 'unsqueeze'): output 0 would have rank 17"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Status s = compile_and_load(c.build);
    if (c.error != nullptr) {
      // What the runtime would refuse is refused here, as not supported, by name.
      expect_error(s, Error::NotSupported, c.error);
    } else {
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
  }
}

}  // namespace
}  // namespace baton::testing
