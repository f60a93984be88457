// fuse-conv and fuse-linear: a convolution's residual Add and activation, and a GEMM's Relu or
// Gelu, become attributes of one canonical node (FusedConv, Linear), whose CPU kernels must give
// what the unfused nodes give; near misses stay as they are.
#include <fmt/format.h>

#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class FusePassTest : public PassTest {};

// x [2, 4, 7, 7] -> Conv 3x3 pads 1 (+ bias) -> [Add r] -> [activation] -> y. `r` is a graph
// input; `activation` an op type with its attributes set by `attrs`, or "".
OnnxBuilder conv_model(std::mt19937& rng, bool residual, const std::string& activation,
                       void (*attrs)(onnx::NodeProto&) = nullptr, int64_t group = 1) {
  OnnxBuilder b(20);
  b.input("x", {2, 4, 7, 7});
  if (residual) b.input("r", {2, 4, 7, 7});
  b.initializer("w", {4, 4 / group, 3, 3}, PassTest::random_floats(rng, 4 * 4 / group * 9));
  b.initializer("b", {4}, PassTest::random_floats(rng, 4));
  auto& conv = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(conv, "group", group);
  std::string v = "c";
  if (residual) {
    b.node("Add", {"r", v}, {"s"}, "residual");
    v = "s";
  }
  if (!activation.empty()) {
    auto& a = b.node(activation, {v}, {"y"}, "act");
    if (attrs) attrs(a);
    v = "y";
  }
  b.output(v, {2, 4, 7, 7});
  return b;
}

TEST_F(FusePassTest, ConvResidualAndActivationBecomeOneFusedConv) {
  std::mt19937 rng(41);
  struct Act {
    std::string op;
    void (*attrs)(onnx::NodeProto&);
    std::vector<double> params;  // canonical: every attribute of the row
  };
  const Act acts[] = {
      {"Relu", nullptr, {}},
      {"HardSwish", nullptr, {}},
      {"HardSigmoid",
       [](onnx::NodeProto& n) {
         OnnxBuilder::attr_float(n, "alpha", 0.25f);
         OnnxBuilder::attr_float(n, "beta", 0.375f);
       },
       {0.25, 0.375}},
      {"LeakyRelu",
       [](onnx::NodeProto& n) { OnnxBuilder::attr_float(n, "alpha", 0.125f); },
       {0.125}},
      {"Sigmoid", nullptr, {}},
      {"Gelu", nullptr, {}},
  };
  for (const Act& a : acts) {
    for (bool residual : {true, false}) {
      for (int64_t group : {1, 4}) {
        SCOPED_TRACE(a.op + (residual ? " with a residual" : "") + " group " +
                     std::to_string(group));
        const OnnxBuilder b = conv_model(rng, residual, a.op, a.attrs, group);
        const compiler::Graph g = optimized(b);
        const auto ops = op_counts(g);
        EXPECT_EQ(ops.count("Conv"), 0u);
        EXPECT_EQ(ops.count("Add"), 0u);
        EXPECT_EQ(ops.count(a.op), 0u);
        const compiler::IrNode* fused = only(g, "FusedConv");
        ASSERT_NE(fused, nullptr);
        EXPECT_EQ(fused->attr_string("activation"), a.op);
        EXPECT_EQ(fused->attr_floats("activation_params"), a.params);
        EXPECT_EQ(fused->inputs.size() > 3 && fused->inputs[3] >= 0, residual);
        std::vector<Tensor> inputs = {random_tensor(rng, {2, 4, 7, 7})};
        if (residual) inputs.push_back(random_tensor(rng, {2, 4, 7, 7}));
        expect_same_outputs(b, inputs);
      }
    }
  }
}

TEST_F(FusePassTest, AResidualAloneIsFused) {
  std::mt19937 rng(42);
  const OnnxBuilder b = conv_model(rng, true, "");
  const compiler::Graph g = optimized(b);
  const compiler::IrNode* fused = only(g, "FusedConv");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->attr_string("activation"), "");
  expect_same_outputs(b, {random_tensor(rng, {2, 4, 7, 7}), random_tensor(rng, {2, 4, 7, 7})});
}

// SiLU as the exporters write it, Sigmoid(v) and Mul(v, Sigmoid(v)) in either operand order, after
// a convolution or its residual Add, is the FusedConv's activation "Silu"; the outputs match the
// unfused graph's.
TEST_F(FusePassTest, SigmoidTimesItsInputAfterAConvolutionIsItsSiluActivation) {
  std::mt19937 rng(47);
  for (bool residual : {false, true}) {
    for (bool sigmoid_first : {false, true}) {
      for (int64_t group : {1, 4}) {
        SCOPED_TRACE(fmt::format("{}Mul({}) group {}", residual ? "residual, " : "",
                                 sigmoid_first ? "s, v" : "v, s", group));
        OnnxBuilder b = conv_model(rng, residual, "", nullptr, group);
        const std::string v = residual ? "s" : "c";
        b.graph().mutable_output()->Clear();
        b.node("Sigmoid", {v}, {"sig"}, "sigmoid");
        b.node(
            "Mul",
            sigmoid_first ? std::vector<std::string>{"sig", v} : std::vector<std::string>{v, "sig"},
            {"y"}, "silu");
        b.output("y", {2, 4, 7, 7});
        const compiler::Graph g = optimized(b);
        const auto ops = op_counts(g);
        EXPECT_EQ(ops.count("Sigmoid"), 0u);
        EXPECT_EQ(ops.count("Mul"), 0u);
        const compiler::IrNode* fused = only(g, "FusedConv");
        ASSERT_NE(fused, nullptr);
        EXPECT_EQ(fused->attr_string("activation"), "Silu");
        EXPECT_TRUE(fused->attr_floats("activation_params").empty());
        std::vector<Tensor> inputs = {random_tensor(rng, {2, 4, 7, 7})};
        if (residual) inputs.push_back(random_tensor(rng, {2, 4, 7, 7}));
        expect_same_outputs(b, inputs);
      }
    }
  }
}

// Near misses of SiLU stay a Mul: its other operand is not the convolution's output, the Sigmoid's
// output has another reader, the convolution's output is a graph output too, the Mul squares the
// convolution's output beside the Sigmoid.
TEST_F(FusePassTest, SiluNearMissesAreLeftAlone) {
  std::mt19937 rng(48);
  enum class Miss { OtherOperand, SigmoidReadTwice, ConvReadThrice, SquareBesideSigmoid };
  for (Miss miss : {Miss::OtherOperand, Miss::SigmoidReadTwice, Miss::ConvReadThrice,
                    Miss::SquareBesideSigmoid}) {
    SCOPED_TRACE(static_cast<int>(miss));
    OnnxBuilder b = conv_model(rng, false, "");
    b.graph().mutable_output()->Clear();
    b.input("r", {2, 4, 7, 7});
    b.node("Sigmoid", {"c"}, {"sig"}, "sigmoid");
    if (miss == Miss::SquareBesideSigmoid) {
      // Mul(c, c) beside the Sigmoid, whose output goes elsewhere: not SiLU.
      b.node("Mul", {"c", "c"}, {"y"}, "mul");
      b.output("sig", {2, 4, 7, 7});
    } else {
      b.node("Mul", {miss == Miss::OtherOperand ? "r" : "c", "sig"}, {"y"}, "mul");
    }
    b.output("y", {2, 4, 7, 7});
    if (miss == Miss::SigmoidReadTwice) b.output("sig", {2, 4, 7, 7});
    if (miss == Miss::ConvReadThrice) b.output("c", {2, 4, 7, 7});
    const compiler::Graph g = optimized(b);
    const auto ops = op_counts(g);
    EXPECT_EQ(ops.at("Mul"), 1);
    // With another operand the Sigmoid alone is the convolution's activation (its only reader).
    EXPECT_EQ(ops.count("Sigmoid"), miss == Miss::OtherOperand ? 0u : 1u);
    for (const compiler::IrNode& n : g.nodes) {
      if (!n.dead && n.op_type == "FusedConv") EXPECT_NE(n.attr_string("activation"), "Silu");
    }
  }
}

// The convolution's output read twice, a broadcast residual, a constant one: each stays a node.
TEST_F(FusePassTest, ConvNearMissesAreLeftAlone) {
  std::mt19937 rng(43);
  {
    OnnxBuilder b = conv_model(rng, true, "Relu");
    b.output("c", {2, 4, 7, 7});  // the convolution's output is read outside the chain
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("Conv"), 1);
    EXPECT_EQ(ops.at("Add"), 1);
  }
  {
    OnnxBuilder b;
    b.input("x", {2, 4, 7, 7});
    b.input("r", {1, 4, 1, 1});  // broadcast: not a residual of the output's shape
    b.initializer("w", {4, 4, 1, 1}, PassTest::random_floats(rng, 16));
    b.node("Conv", {"x", "w"}, {"c"}, "conv");
    b.node("Add", {"c", "r"}, {"y"}, "add");
    b.output("y", {2, 4, 7, 7});
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("Conv"), 1);
    EXPECT_EQ(ops.at("Add"), 1);
  }
  {
    compiler::OptimizeOptions options;
    options.disabled = {"fuse-conv"};
    const auto ops = op_counts(optimized(conv_model(rng, true, "Relu"), options));
    EXPECT_EQ(ops.at("Conv"), 1);
    EXPECT_EQ(ops.count("FusedConv"), 0u);
  }
}

// x [6, 16] -> GEMM (a MatMul, a MatMul + bias Add, a Gemm with transB, a Gemm with a [1, N] C)
// -> [a view] -> activation -> y.
TEST_F(FusePassTest, GemmAndReluOrGeluBecomeOneLinear) {
  std::mt19937 rng(44);
  enum class Gemm { MatMul, MatMulAdd, GemmTransB, GemmRowC };
  for (Gemm kind : {Gemm::MatMul, Gemm::MatMulAdd, Gemm::GemmTransB, Gemm::GemmRowC}) {
    for (const char* act : {"Relu", "Gelu", "GeluTanh"}) {
      for (bool view : {false, true}) {
        SCOPED_TRACE(std::to_string(static_cast<int>(kind)) + " " + act + (view ? " view" : ""));
        OnnxBuilder b(20);
        b.input("x", {6, 16});
        const bool trans = kind == Gemm::GemmTransB;
        b.initializer("w", trans ? std::vector<int64_t>{12, 16} : std::vector<int64_t>{16, 12},
                      PassTest::random_floats(rng, 192));
        b.initializer(
            "bias", kind == Gemm::GemmRowC ? std::vector<int64_t>{1, 12} : std::vector<int64_t>{12},
            PassTest::random_floats(rng, 12));
        if (kind == Gemm::MatMul || kind == Gemm::MatMulAdd) {
          b.node("MatMul", {"x", "w"}, {kind == Gemm::MatMul ? "h" : "p"}, "mm");
          if (kind == Gemm::MatMulAdd) b.node("Add", {"p", "bias"}, {"h"}, "add");
        } else {
          auto& g = b.node("Gemm", {"x", "w", "bias"}, {"h"}, "gemm");
          OnnxBuilder::attr_int(g, "transB", trans ? 1 : 0);
        }
        std::string v = "h";
        if (view) {
          b.initializer_int64("shape", {3}, {2, 3, 12});
          b.node("Reshape", {"h", "shape"}, {"hv"}, "view");
          v = "hv";
        }
        auto& a = b.node("Gelu", {v}, {"y"}, "act");
        if (std::string(act) == "Relu") a.set_op_type("Relu");
        if (std::string(act) == "GeluTanh") OnnxBuilder::attr_string(a, "approximate", "tanh");
        b.output("y", view ? std::vector<int64_t>{2, 3, 12} : std::vector<int64_t>{6, 12});
        const compiler::Graph g = optimized(b);
        const auto ops = op_counts(g);
        EXPECT_EQ(ops.count("MatMul") + ops.count("Gemm") + ops.count("Add"), 0u);
        EXPECT_EQ(ops.count("Relu") + ops.count("Gelu"), 0u);
        EXPECT_EQ(ops.count("Reshape"), view ? 1u : 0u);
        const compiler::IrNode* linear = only(g, "Linear");
        ASSERT_NE(linear, nullptr);
        EXPECT_EQ(linear->attr_string("activation"), act);
        EXPECT_EQ(linear->attr_int("transW"), trans ? 1 : 0);
        EXPECT_EQ(linear->inputs.size() > 2 && linear->inputs[2] >= 0, kind != Gemm::MatMul);
        expect_same_outputs(b, {random_tensor(rng, {6, 16})});
      }
    }
  }
}

// A Gemm with alpha, an activation no GEMM epilogue has (Tanh), a GEMM result read twice: no
// Linear takes the activation.
TEST_F(FusePassTest, GemmNearMissesAreLeftAlone) {
  std::mt19937 rng(45);
  auto model = [&](float alpha, const char* act, bool read_twice) {
    OnnxBuilder b(20);
    b.input("x", {6, 16});
    b.initializer("w", {16, 12}, PassTest::random_floats(rng, 192));
    auto& g = b.node("Gemm", {"x", "w"}, {"h"}, "gemm");
    OnnxBuilder::attr_float(g, "alpha", alpha);
    b.node(act, {"h"}, {"y"}, "act");
    b.output("y", {6, 12});
    if (read_twice) b.output("h", {6, 12});
    return b;
  };
  for (const auto& [alpha, act, twice] :
       {std::tuple{0.5f, "Relu", false}, std::tuple{1.0f, "Tanh", false},
        std::tuple{1.0f, "Relu", true}}) {
    SCOPED_TRACE(std::string(act) + " alpha " + std::to_string(alpha));
    const OnnxBuilder b = model(alpha, act, twice);
    const auto ops = op_counts(optimized(b));
    EXPECT_EQ(ops.at("Gemm"), 1);
    EXPECT_EQ(ops.at(act), 1);
    expect_same_outputs(b, {random_tensor(rng, {6, 16})});
  }
}

// A Relu after an op that is no GEMM (here one with a single input, whose missing second input
// the pass must not read): nothing is fused, and the outputs are the unfused graph's.
TEST_F(FusePassTest, AnActivationAfterAnotherOpStaysAlone) {
  std::mt19937 rng(46);
  OnnxBuilder b(20);
  b.input("x", {6, 16});
  auto& t = b.node("Transpose", {"x"}, {"t"}, "transpose");
  OnnxBuilder::attr_ints(t, "perm", {1, 0});
  b.node("Sigmoid", {"t"}, {"s"}, "sigmoid");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y", {16, 6});
  const auto ops = op_counts(optimized(b));
  EXPECT_EQ(ops.at("Relu"), 1);
  EXPECT_EQ(ops.count("Linear"), 0u);
  expect_same_outputs(b, {random_tensor(rng, {6, 16})});
}

// Integer GEMMs never reach the passes today (no CPU kernel takes them: refused at compile,
// naming the node); the passes check for float tensors anyway, since Linear takes only those.
TEST_F(FusePassTest, IntegerGemmsAreRefusedBeforeTheOptimizer) {
  constexpr int kInt64 = 7;
  OnnxBuilder b(20);
  b.input("x", {3, 4}, kInt64);
  b.initializer_int64("w", {4, 5}, std::vector<int64_t>(20, 1));
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Relu", {"h"}, {"y"}, "relu");
  b.output("y", {3, 5}, kInt64);
  compiler::CompileOptions options;
  const auto compiled = compiler::compile_bytes(b.bytes(), options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), Error::NotSupported) << compiled.status().to_string();
  EXPECT_NE(compiled.status().message().find("MatMul node 'mm'"), std::string::npos);
}

}  // namespace
}  // namespace baton::testing
