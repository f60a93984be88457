// The optimizer pipeline: pass names, --disable-pass / --no-optimize, per-pass reports.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class PipelineTest : public PassTest {};

OnnxBuilder linear_model() {
  OnnxBuilder b;
  b.input("x", {2, 4});
  b.initializer("w", {4, 3}, std::vector<float>(12, 0.5f));
  b.initializer("b", {3}, {1.0f, 2.0f, 3.0f});
  b.node("MatMul", {"x", "w"}, {"xw"}, "mm");
  b.node("Add", {"xw", "b"}, {"y"}, "add");
  b.output("y", {2, 3});
  return b;
}

TEST_F(PipelineTest, AnUnknownPassNameIsAnErrorListingThePasses) {
  compiler::CompileOptions options;
  options.disabled_passes = {"gelu", "fusion"};
  auto compiled = compiler::compile_bytes(linear_model().bytes(), options);
  ASSERT_EQ(compiled.code(), Error::InvalidArgument);
  const std::string m = compiled.status().message();
  EXPECT_NE(m.find("no optimizer pass 'fusion'"), std::string::npos) << m;
  for (const compiler::PassDef& p : compiler::optimizer_passes()) {
    EXPECT_NE(m.find(p.name), std::string::npos) << m;
  }
}

TEST_F(PipelineTest, TheSummaryReportsEachPassAndWhatWasDisabled) {
  compiler::CompileOptions options;
  options.disabled_passes = {"gelu"};
  auto compiled = compiler::compile_bytes(linear_model().bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  const auto& passes = compiled->summary().passes;
  ASSERT_EQ(passes.size(), compiler::optimizer_passes().size());
  for (const auto& [name, changed] : passes) {
    if (name == "gelu") {
      EXPECT_EQ(changed, -1);
    }
    if (name == "matmul-add") {
      EXPECT_EQ(changed, 1);
    }
  }
  EXPECT_EQ(compiled->summary().kernel_calls, 1u);

  options.optimize = false;
  auto plain = compiler::compile_bytes(linear_model().bytes(), options);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  for (const auto& [name, changed] : plain->summary().passes) EXPECT_EQ(changed, -1) << name;
  EXPECT_EQ(plain->summary().kernel_calls, 2u);
}

// A target that does not lower a pass's op (here, a Linear with split outputs) skips that pass,
// so a model it ran whole keeps running whole; the other passes still run.
TEST_F(PipelineTest, APassWhoseOpATargetDoesNotLowerIsSkipped) {
  OnnxBuilder b;
  b.input("x", {3, 4});
  float value = 0.25f;  // each its own weights (the cse pass would merge equal ones)
  for (const char* p : {"q", "k", "v"}) {
    const std::string s(p);
    b.initializer("w" + s, {4, 4}, std::vector<float>(16, value += 0.25f));
    b.initializer("b" + s, {4}, {1.0f, 2.0f, 3.0f, 4.0f});
    b.node("MatMul", {"x", "w" + s}, {"xw" + s}, "mm" + s);
    b.node("Add", {"xw" + s, "b" + s}, {s}, "add" + s);
    b.output(s, {3, 4});
  }
  compiler::OptimizeOptions no_splits;
  no_splits.lowered = [](std::string_view, std::string_view op) { return op != "LinearSplits"; };
  EXPECT_EQ(op_counts(optimized(b)).at("Linear"), 1);
  EXPECT_EQ(op_counts(optimized(b, no_splits)).at("Linear"), 3);
}

}  // namespace
}  // namespace baton::testing
