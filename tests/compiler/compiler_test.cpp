// Compiler: import errors, shape inference and folding, partitioning, memory planning, emission.
#include "baton/compiler/compiler.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <functional>
#include <random>
#include <set>

#include "baton/baton.h"
#include "compiler/memory_plan.h"
#include "compiler/onnx_import.h"
#include "compiler/partition.h"
#include "compiler/passes.h"
#include "format/program_file.h"
#include "testing/compiler/test_backend_compiler.h"
#include "testing/onnx_builder.h"
#include "testing/random.h"
#include "testing/run_compiled.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

using compiler::CompileOptions;
using testing::OnnxBuilder;

std::vector<float> iota_floats(size_t n, float scale = 0.1f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 13) - 6);
  return v;
}

class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    testing::register_test_backend();
    testing::test_backend_stats().reset();
  }

  Result<compiler::CompiledProgram> compile(const OnnxBuilder& b, CompileOptions options = {}) {
    return compiler::compile_bytes(b.bytes(), options);
  }

  // Compiles, loads and runs; returns the outputs.
  std::vector<Tensor> run(const OnnxBuilder& b, const std::vector<Tensor>& inputs,
                          CompileOptions options = {}) {
    auto compiled = compile(b, options);
    EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
    if (!compiled.ok()) return {};
    return testing::run_compiled(*compiled, inputs);
  }
};

TEST_F(CompilerTest, NotAnOnnxModel) {
  for (std::vector<uint8_t> bytes :
       {std::vector<uint8_t>{}, std::vector<uint8_t>{'h', 'i', '!', 0xff, 0x13},
        std::vector<uint8_t>(100, 0x42)}) {
    auto r = compiler::compile_bytes(bytes, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Error::InvalidArgument);
    EXPECT_NE(r.status().message().find("not an ONNX model"), std::string::npos)
        << r.status().to_string();
  }
  auto missing = compiler::compile_file("/nonexistent/model.onnx", {});
  EXPECT_EQ(missing.code(), Error::IoError);
}

// Shapes whose byte size does not fit in 64 bits are refused where they arise, by name.
TEST_F(CompilerTest, ShapesWhoseSizeOverflowsAreRefused) {
  OnnxBuilder huge_input;
  huge_input.input("x", {int64_t{1} << 40, int64_t{1} << 40});
  huge_input.node("Relu", {"x"}, {"y"}, "relu");
  huge_input.output("y", {int64_t{1} << 40, int64_t{1} << 40});
  auto r = compile(huge_input);
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("its size in bytes overflows"), std::string::npos)
      << r.status().to_string();

  // Each input is 8 GiB; broadcasting them makes 2^62 floats.
  OnnxBuilder broadcast;
  broadcast.input("a", {int64_t{1} << 31, 1});
  broadcast.input("b", {1, int64_t{1} << 31});
  broadcast.node("Add", {"a", "b"}, {"y"}, "outer_sum");
  broadcast.output("y", {int64_t{1} << 31, int64_t{1} << 31});
  r = compile(broadcast);
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("'outer_sum'"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("whose size in bytes overflows"), std::string::npos)
      << r.status().to_string();
}

// Every way a model can be malformed or outside what Baton compiles gets an error naming the
// offending part (and, where there is one, the fix).
TEST_F(CompilerTest, MalformedModelsAreRefusedByName) {
  struct Case {
    const char* what;
    std::function<void(OnnxBuilder&)> damage;
    Error code;
    const char* needle;
  };
  auto relu = [](OnnxBuilder& b) {
    b.input("x", {2, 3});
    b.node("Relu", {"x"}, {"y"}, "relu");
    b.output("y", {2, 3});
  };
  const std::vector<Case> cases = {
      {"sparse initializer",
       [&](OnnxBuilder& b) {
         relu(b);
         b.graph().add_sparse_initializer()->mutable_values()->set_name("s");
       },
       Error::NotSupported,
       "has 1 sparse initializers (GraphProto field 'sparse_initializer', the first 's'), which "
       "Baton does not support"},
      {"Constant with a string value",
       [&](OnnxBuilder& b) {
         relu(b);
         auto& c = b.node("Constant", {}, {"k"}, "const_str");
         auto* a = c.add_attribute();
         a->set_name("value_string");
         a->set_type(onnx::AttributeProto::STRING);
         a->set_s("hi");
       },
       Error::NotSupported, "string constants are not supported"},
      {"Constant with two values",
       [&](OnnxBuilder& b) {
         relu(b);
         auto& c = b.node("Constant", {}, {"k"}, "const_two");
         OnnxBuilder::attr_float(c, "value_float", 1.0f);
         OnnxBuilder::attr_int(c, "value_int", 1);
       },
       Error::InvalidArgument,
       "must have exactly one value attribute (value, value_float(s), value_int(s)), has 2"},
      {"no ai.onnx opset import",
       [&](OnnxBuilder& b) {
         relu(b);
         b.model().mutable_opset_import(0)->set_domain("com.example");
       },
       Error::InvalidArgument, "does not import the ai.onnx operator set"},
      {"a value written twice",
       [&](OnnxBuilder& b) {
         relu(b);
         b.node("Relu", {"x"}, {"y"}, "relu_again");
       },
       Error::InvalidArgument, "writes 'y', which is already defined"},
      {"nodes out of order",
       [&](OnnxBuilder& b) {
         b.input("x", {2, 3});
         b.node("Relu", {"h"}, {"y"}, "second");
         b.node("Relu", {"x"}, {"h"}, "first");
         b.output("y", {2, 3});
       },
       Error::InvalidArgument, "reads 'h', which no earlier node, initializer or graph input"},
      {"an output nothing produces",
       [&](OnnxBuilder& b) {
         relu(b);
         b.output("ghost", {2, 3});
       },
       Error::InvalidArgument, "graph output 'ghost' of"},
      {"no outputs",
       [&](OnnxBuilder& b) {
         b.input("x", {2, 3});
         b.node("Relu", {"x"}, {"y"}, "relu");
       },
       Error::InvalidArgument, "has no graph outputs"},
      {"an input that is a sequence",
       [&](OnnxBuilder& b) {
         relu(b);
         auto* in = b.graph().add_input();
         in->set_name("seq");
         in->mutable_type()->mutable_sequence_type();
       },
       Error::NotSupported, "is not a tensor (sequences, maps and optionals are not supported)"},
      {"an input without a shape",
       [&](OnnxBuilder& b) {
         relu(b);
         auto* in = b.graph().add_input();
         in->set_name("shapeless");
         in->mutable_type()->mutable_tensor_type()->set_elem_type(1);
       },
       Error::InvalidArgument,
       "has no shape: give one with --shape "
       "shapeless="},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxBuilder b;
    c.damage(b);
    auto r = compile(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), c.code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().to_string();
  }

  OnnxBuilder b;
  relu(b);
  CompileOptions wrong_shape;
  wrong_shape.input_shapes = {{"z", {2, 3}}};
  auto r = compile(b, wrong_shape);
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("a shape was given for 'z', which is not an input"),
            std::string::npos)
      << r.status().to_string();
  CompileOptions bad_target;
  bad_target.target_device = "gpu7";
  r = compile(b, bad_target);
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("--target-device 'gpu7' is not a device"), std::string::npos)
      << r.status().to_string();
  const std::vector<uint8_t> empty;
  r = compiler::compile_bytes(empty, {});
  EXPECT_EQ(r.code(), Error::InvalidArgument);
}

TEST_F(CompilerTest, UnsupportedNodesAreAllListedWithOpDomainAndOpset) {
  OnnxBuilder b(17);
  b.input("x", {2, 3});
  b.node("Unique", {"x"}, {"a"}, "uq");
  b.node("Relu", {"a"}, {"r"}, "fine");
  b.node("FancyOp", {"r"}, {"y"}, "custom", "com.acme");
  b.output("y", {2, 3});
  auto* imp = b.model().add_opset_import();
  imp->set_domain("com.acme");
  imp->set_version(3);
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("2 unsupported nodes"), std::string::npos) << m;
  EXPECT_NE(m.find("node 'uq': op 'Unique' (domain 'ai.onnx', opset 17)"), std::string::npos) << m;
  EXPECT_NE(m.find("node 'custom': op 'FancyOp' (domain 'com.acme', opset 3)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("Supported ops:"), std::string::npos);
  // A data-dependent output size says so.
  EXPECT_NE(m.find("its output size depends on the input's values"), std::string::npos) << m;
}

// An If whose condition is a graph input (known only at run time) is refused naming the If and
// why; so is a Loop without a constant trip count.
TEST_F(CompilerTest, ControlFlowIsRefusedNamingTheNodeAndWhy) {
  OnnxBuilder b(17);
  b.input("x", {2, 3});
  b.input("c", {}, onnx::TensorProto::BOOL);
  auto& branch = b.node("If", {"c"}, {"y"}, "choose");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = branch.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(name);
    auto* n = g->add_node();
    n->set_op_type("Relu");
    n->add_input("x");
    n->add_output(std::string(name) + "_out");
    auto* out = g->add_output();
    out->set_name(std::string(name) + "_out");
  }
  b.output("y", {2, 3});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported) << r.status().to_string();
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("If node 'choose': its condition 'c' is not known at compile time"),
            std::string::npos)
      << m;
  OnnxBuilder loop(17);
  loop.input("x", {2, 3});
  auto& repeat = loop.node("Loop", {"", "", "x"}, {"y"}, "repeat");
  auto* body = repeat.add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  for (const char* in : {"i", "cond", "v"}) body->mutable_g()->add_input()->set_name(in);
  for (const char* out : {"cond", "v"}) body->mutable_g()->add_output()->set_name(out);
  loop.output("y", {2, 3});
  auto l = compile(loop);
  ASSERT_EQ(l.code(), Error::NotSupported) << l.status().to_string();
  EXPECT_NE(l.status().message().find("Loop node 'repeat': it has no trip count M; Baton unrolls "
                                      "a Loop only when its trip count is a constant"),
            std::string::npos)
      << l.status().to_string();
}

TEST_F(CompilerTest, OpsetOutsideTheSupportedRange) {
  OnnxBuilder b(22);
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", {2});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported);
  EXPECT_NE(r.status().message().find("opset 22; Baton supports opsets 1 to 21"), std::string::npos)
      << r.status().to_string();
}

// An old opset is read, and each op runs from the opset its definition starts at: Elu from 6,
// Relu (defined from 13) not at 11.
TEST_F(CompilerTest, OldOpsetsRunOpsDefinedThere) {
  OnnxBuilder ok(6);
  ok.input("x", {2});
  ok.node("Elu", {"x"}, {"y"});
  ok.output("y", {2});
  EXPECT_TRUE(compile(ok).ok()) << compile(ok).status().to_string();
  OnnxBuilder b(5);  // Relu-1 (its consumed_inputs attribute) is not defined; Relu-6 is
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", {2});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported);
  EXPECT_NE(r.status().message().find("Relu"), std::string::npos) << r.status().to_string();
}

TEST_F(CompilerTest, GeluNeedsOpset20) {
  OnnxBuilder b(18);
  b.input("x", {2});
  b.node("Gelu", {"x"}, {"y"}, "g");
  b.output("y", {2});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported);
  EXPECT_NE(r.status().message().find("supported from opset 20, the model uses opset 18"),
            std::string::npos)
      << r.status().to_string();
}

// Unsupported nodes are listed even when an input's shape would stop the compile first: both
// problems in one message, the nodes first.
TEST_F(CompilerTest, UnsupportedNodesAreListedBeforeAMissingShape) {
  OnnxBuilder b;
  b.input("x", {-1, 4});
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Unique", {"r"}, {"u"}, "uniq");
  b.node("Compress", {"r", "r"}, {"z"}, "cz");
  b.output("u", {-1});
  b.output("z", {2, -1});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported) << r.status().to_string();
  const std::string& m = r.status().message();
  for (const char* needle :
       {"2 unsupported nodes", "node 'uniq': op 'Unique'", "node 'cz': op 'Compress'",
        "Also: input 'x'", "symbolic dimension 'N' at axis 0"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
  }
}

// Every input whose shape is open is named in one error, each with all of its symbolic
// dimensions, followed by the --shape flags that fix them all.
TEST_F(CompilerTest, EveryOpenInputShapeIsNamedAtOnce) {
  OnnxBuilder b;
  b.input("ids", {-1, -1}, 7);
  b.input("mask", {-1, -1}, 7);
  b.input("extra", {3});
  auto& g = b.graph();
  g.mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  g.mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_param("seq");
  g.mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  g.mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_param("seq");
  g.mutable_input(2)->mutable_type()->mutable_tensor_type()->clear_shape();
  b.node("Add", {"ids", "mask"}, {"y"}, "add");
  b.output("y", {-1, -1}, 7);
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::InvalidArgument) << r.status().to_string();
  const std::string& m = r.status().message();
  for (const char* needle :
       {"3 inputs of", "have shapes the model leaves open", "input 'ids' of",
        "has symbolic dimensions 'batch' at axis 0 and 'seq' at axis 1", "input 'mask' of",
        "input 'extra' of", "has no shape",
        "fix them with --shape ids=<batch>x<seq> --shape mask=<batch>x<seq> --shape "
        "extra=D0xD1x..., each <name> replaced by a size"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
  }
}

TEST_F(CompilerTest, SymbolicDimensionsNeedAShape) {
  OnnxBuilder b;
  b.input("x", {-1, 4});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", {-1, 4});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("symbolic dimension 'N' at axis 0"), std::string::npos);
  // The hint keeps the sizes the model fixes and names the one to choose.
  EXPECT_NE(r.status().message().find("--shape x=<N>x4, each <name> replaced by a size"),
            std::string::npos)
      << r.status().to_string();

  CompileOptions options;
  options.input_shapes = {{"x", {3, 4}}};
  std::mt19937 rng(2);
  Tensor x = testing::random_tensor(rng, {3, 4});
  auto out = run(b, {x}, options);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{3, 4}));

  options.input_shapes = {{"x", {3, 5}}};
  r = compile(b, options);
  EXPECT_NE(r.status().message().find("fixes it at 4"), std::string::npos)
      << r.status().to_string();
  options.input_shapes = {{"x", {3}}};
  r = compile(b, options);
  EXPECT_NE(r.status().message().find("has rank 2 but the given shape [3] has rank 1"),
            std::string::npos);
  options.input_shapes = {{"nope", {3, 4}}};
  r = compile(b, options);
  EXPECT_NE(r.status().message().find("'nope', which is not an input"), std::string::npos)
      << r.status().to_string();
}

TEST_F(CompilerTest, UnknownAttributeIsRejectedNotIgnored) {
  OnnxBuilder b;
  b.input("x", {2, 3});
  auto& n = b.node("Softmax", {"x"}, {"y"}, "sm");
  OnnxBuilder::attr_int(n, "axis", 1);
  OnnxBuilder::attr_int(n, "temperature", 2);
  b.output("y", {2, 3});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::NotSupported);
  EXPECT_NE(r.status().message().find("attribute 'temperature' is not supported"),
            std::string::npos)
      << r.status().to_string();
}

TEST_F(CompilerTest, MissingRequiredAttributeAndWrongAttributeType) {
  OnnxBuilder b;
  b.input("x", {2, 3});
  b.node("Concat", {"x", "x"}, {"y"}, "cat");
  b.output("y", {4, 3});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("Concat node 'cat' is missing its required attribute 'axis'"),
            std::string::npos)
      << r.status().to_string();

  OnnxBuilder c;
  c.input("x", {2, 3});
  auto& n = c.node("Softmax", {"x"}, {"y"}, "sm");
  OnnxBuilder::attr_float(n, "axis", 1.0f);
  c.output("y", {2, 3});
  r = compile(c);
  EXPECT_NE(r.status().message().find("attribute 'axis' has ONNX type FLOAT, expected INT"),
            std::string::npos)
      << r.status().to_string();
}

TEST_F(CompilerTest, ShapeErrorsNameTheNode) {
  OnnxBuilder b;
  b.input("a", {2, 3});
  b.input("b", {4});
  b.node("Add", {"a", "b"}, {"y"}, "bad_add");
  b.output("y", {2, 3});
  auto r = compile(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad_add"), std::string::npos) << r.status().to_string();
}

TEST_F(CompilerTest, UndefinedInputName) {
  OnnxBuilder b;
  b.input("x", {2});
  b.node("Relu", {"ghost"}, {"y"}, "relu");
  b.output("y", {2});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("reads 'ghost'"), std::string::npos);
}

TEST_F(CompilerTest, ConstantSubgraphsAreFoldedAndStillCorrect) {
  OnnxBuilder b;
  b.input("x", {3, 4});
  b.initializer("w", {4, 3}, iota_floats(12));
  b.initializer_int64("shape", {2}, {3, 4});
  auto& t = b.node("Transpose", {"w"}, {"wt"}, "t");  // [3, 4]: folded
  OnnxBuilder::attr_ints(t, "perm", {1, 0});
  b.node("Reshape", {"wt", "shape"}, {"wr"}, "r");  // folded
  b.node("Relu", {"wr"}, {"wrelu"}, "relu_w");      // folded
  b.node("Add", {"x", "wrelu"}, {"y"}, "add");      // runs
  b.output("y", {3, 4});
  auto compiled = compile(b);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().folded_nodes, 3u);
  EXPECT_EQ(compiled->summary().kernel_calls, 1u);

  std::mt19937 rng(4);
  Tensor x = testing::random_tensor(rng, {3, 4});
  auto out = run(b, {x});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> w = iota_floats(12);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      const float wt = std::max(0.0f, w[j * 3 + i]);
      EXPECT_FLOAT_EQ(out[0].data_as<float>()[i * 4 + j], x.data_as<float>()[i * 4 + j] + wt);
    }
  }
}

// The exporters' shape subgraphs: Shape of a graph input with a static shape folds (its value is
// the shape), and what is computed from it folds in turn, down to the Reshape that reads it.
TEST_F(CompilerTest, ShapeSubgraphsOfStaticShapesFold) {
  OnnxBuilder b;
  b.input("x", {2, 3, 4});
  b.initializer_int64("zero", {}, {0});
  b.initializer_int64("axes0", {1}, {0});
  b.initializer_int64("minus_one", {1}, {-1});
  b.node("Shape", {"x"}, {"s"}, "shape");
  b.node("Gather", {"s", "zero"}, {"batch"}, "gather");
  b.node("Unsqueeze", {"batch", "axes0"}, {"batch_1d"}, "unsqueeze");
  auto& concat = b.node("Concat", {"batch_1d", "minus_one"}, {"new_shape"}, "concat");
  OnnxBuilder::attr_int(concat, "axis", 0);
  b.node("Reshape", {"x", "new_shape"}, {"flat"}, "reshape");
  b.node("Relu", {"flat"}, {"y"}, "relu");
  b.output("y", {2, 12});
  auto compiled = compile(b);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().folded_nodes, 4u);  // Shape, Gather, Unsqueeze, Concat
  EXPECT_EQ(compiled->summary().kernel_calls, 2u);  // Reshape, Relu

  std::mt19937 rng(5);
  Tensor x = testing::random_tensor(rng, {2, 3, 4});
  auto out = run(b, {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 12}));
  for (int i = 0; i < 24; ++i) {
    EXPECT_FLOAT_EQ(out[0].data_as<float>()[i], std::max(0.0f, x.data_as<float>()[i]));
  }
}

// A causal mask and index vector built from the input's shape (as GPT-2's exports do): Shape,
// Gather, Unsqueeze, Concat, ConstantOfShape, Trilu, Expand and Range all fold; Slice and Gather
// then read the folded values as their constant inputs.
TEST_F(CompilerTest, MaskAndRangeSubgraphsFold) {
  OnnxBuilder b;
  b.input("x", {1, 5, 8});
  b.initializer_int64("one_index", {}, {1});
  b.initializer_int64("axes0", {1}, {0});
  b.initializer_int64("axes2", {1}, {2});
  b.initializer_int64("starts", {1}, {0});
  b.initializer_int64("mask_shape", {3}, {1, 5, 5});
  b.initializer_int64("range_start", {}, {0});
  b.initializer_int64("range_delta", {}, {1});
  b.node("Shape", {"x"}, {"s"}, "shape");
  b.node("Gather", {"s", "one_index"}, {"n"}, "seq_len");
  b.node("Unsqueeze", {"n", "axes0"}, {"n_1d"}, "unsqueeze");
  auto& concat = b.node("Concat", {"n_1d", "n_1d"}, {"square"}, "concat");
  OnnxBuilder::attr_int(concat, "axis", 0);
  auto& ones = b.node("ConstantOfShape", {"square"}, {"ones"}, "ones");
  auto* value = ones.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(1.0f);
  auto& tri = b.node("Trilu", {"ones"}, {"lower"}, "trilu");
  OnnxBuilder::attr_int(tri, "upper", 0);
  b.node("Expand", {"lower", "mask_shape"}, {"mask"}, "expand");
  b.node("Slice", {"x", "starts", "n_1d", "axes2"}, {"xs"}, "slice");
  b.node("Range", {"range_start", "n", "range_delta"}, {"positions"}, "range");
  auto& gather = b.node("Gather", {"xs", "positions"}, {"g"}, "gather_rows");
  OnnxBuilder::attr_int(gather, "axis", 1);
  b.node("Add", {"g", "mask"}, {"y"}, "add");
  b.output("y", {1, 5, 5});
  auto compiled = compile(b);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().folded_nodes, 8u);
  EXPECT_EQ(compiled->summary().kernel_calls, 3u);  // Slice, Gather, Add

  std::mt19937 rng(6);
  Tensor x = testing::random_tensor(rng, {1, 5, 8});
  auto out = run(b, {x});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 5; ++j) {
      EXPECT_FLOAT_EQ(out[0].data_as<float>()[i * 5 + j],
                      x.data_as<float>()[i * 8 + j] + (j <= i ? 1.0f : 0.0f));
    }
  }
}

// Shape arguments computed at run time make the output shape dynamic: refused, naming the node
// and the input.
TEST_F(CompilerTest, ShapeArgumentsKnownOnlyAtRunTimeAreRefusedByName) {
  {
    OnnxBuilder b;
    b.input("x", {4, 6});
    b.input("ends", {1}, onnx::TensorProto::INT64);
    b.initializer_int64("starts", {1}, {0});
    b.node("Slice", {"x", "starts", "ends"}, {"y"}, "dynamic_slice");
    b.output("y", {});
    auto r = compile(b);
    ASSERT_EQ(r.code(), Error::NotSupported);
    EXPECT_NE(r.status().message().find("Slice (node 'dynamic_slice'): input 'ends' must be a "
                                        "constant"),
              std::string::npos)
        << r.status().to_string();
  }
  {
    OnnxBuilder b;
    b.input("limit", {}, onnx::TensorProto::FLOAT);
    b.initializer("start", {}, {0.0f});
    b.initializer("delta", {}, {1.0f});
    b.node("Range", {"start", "limit", "delta"}, {"y"}, "dynamic_range");
    b.output("y", {});
    auto r = compile(b);
    ASSERT_EQ(r.code(), Error::NotSupported);
    EXPECT_NE(r.status().message().find("Range (node 'dynamic_range'): input 'limit' must be a "
                                        "constant"),
              std::string::npos)
        << r.status().to_string();
  }
}

// Constant indices out of range stop the compile, naming the node.
TEST_F(CompilerTest, ConstantIndicesOutOfRangeAreACompileError) {
  OnnxBuilder b;
  b.input("x", {3, 4});
  b.initializer_int64("idx", {2}, {1, 4});
  auto& g = b.node("Gather", {"x", "idx"}, {"y"}, "bad_gather");
  OnnxBuilder::attr_int(g, "axis", 1);
  b.output("y", {});
  auto r = compile(b);
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("Gather (node 'bad_gather'): 'indices' holds 4"),
            std::string::npos)
      << r.status().to_string();
}

TEST_F(CompilerTest, ConstantNodesAndConstantOutputs) {
  OnnxBuilder b;
  b.input("x", {2});
  auto& c = b.node("Constant", {}, {"k"}, "k");
  auto* a = c.add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  a->add_floats(1.5f);
  a->add_floats(-2.0f);
  b.node("Mul", {"x", "k"}, {"y"}, "mul");
  b.output("y", {2});
  b.output("k", {2});
  std::vector<float> xv = {2.0f, 3.0f};
  Tensor x = Tensor::empty(DType::Float32, {2}).value();
  std::copy(xv.begin(), xv.end(), x.data_as<float>());
  auto out = run(b, {x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0].data_as<float>()[0], 3.0f);
  EXPECT_FLOAT_EQ(out[0].data_as<float>()[1], -6.0f);
  EXPECT_FLOAT_EQ(out[1].data_as<float>()[1], -2.0f);
}

TEST_F(CompilerTest, UnusedNodesAreRemoved) {
  OnnxBuilder b;
  b.input("x", {4});
  b.node("Relu", {"x"}, {"y"}, "used");
  b.node("Tanh", {"x"}, {"unused"}, "dead");
  b.output("y", {4});
  auto compiled = compile(b);
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(compiled->summary().kernel_calls, 1u);
}

// CompileOptions::expose_intermediates (compile --expose-intermediates, compare --per-node): every
// value a live node computes becomes an output after the model's own, in node order; inputs,
// constants (folded nodes included), removed nodes and values that are outputs already do not.
TEST_F(CompilerTest, ExposeIntermediatesAddsEveryComputedValueInNodeOrder) {
  OnnxBuilder b;
  b.input("x", {3});
  b.initializer("c", {3}, {1.0f, -5.0f, 0.5f});
  b.initializer("d", {3}, {2.0f, 2.0f, 2.0f});
  b.node("Add", {"c", "d"}, {"k"}, "folded");  // constant: folded away
  b.node("Add", {"x", "k"}, {"a"}, "add");
  b.node("Relu", {"a"}, {"r"}, "relu");
  b.node("Tanh", {"x"}, {"unused"}, "dead");
  b.node("Mul", {"r", "x"}, {"y"}, "mul");
  b.node("Neg", {"y"}, {"z"}, "neg");
  b.output("y", {3});
  b.output("z", {3});
  CompileOptions options;
  options.expose_intermediates = true;
  auto compiled = compile(b, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().exposed_values, (std::vector<std::string>{"a", "r"}));

  Tensor x = Tensor::empty(DType::Float32, {3}).value();
  const std::vector<float> xv = {2.0f, 1.0f, -4.0f};
  std::copy(xv.begin(), xv.end(), x.data_as<float>());
  const std::vector<Tensor> out = testing::run_compiled(*compiled, {x});
  ASSERT_EQ(out.size(), 4u);  // y, z, then a, r
  const float a[3] = {5.0f, -2.0f, -1.5f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(out[2].data_as<float>()[i], a[i]) << i;
    EXPECT_FLOAT_EQ(out[3].data_as<float>()[i], std::max(a[i], 0.0f)) << i;
    EXPECT_FLOAT_EQ(out[0].data_as<float>()[i], std::max(a[i], 0.0f) * xv[i]) << i;
    EXPECT_FLOAT_EQ(out[1].data_as<float>()[i], -out[0].data_as<float>()[i]) << i;
  }
  // Off by default: the model's outputs only.
  auto plain = compile(b);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->summary().exposed_values.empty());
  EXPECT_EQ(testing::run_compiled(*plain, {x}).size(), 2u);
}

TEST_F(CompilerTest, ProgressReportsEveryPhase) {
  OnnxBuilder b;
  b.input("x", {4});
  b.node("Relu", {"x"}, {"y"}, "r");
  b.output("y", {4});
  std::vector<std::string> phases;
  CompileOptions options;
  options.progress = [&](const compiler::Progress& p) { phases.emplace_back(p.phase); };
  ASSERT_TRUE(compile(b, options).ok());
  EXPECT_EQ(phases, (std::vector<std::string>{"import", "infer", "optimize", "partition", "lower",
                                              "place", "plan"}));
}

TEST_F(CompilerTest, CompilationIsDeterministic) {
  OnnxBuilder b;
  b.input("x", {5, 6});
  b.initializer("w", {6, 6}, iota_floats(36));
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w"}, {"y"}, "mm2");
  b.output("y", {5, 6});
  auto one = compile(b)->serialize();
  auto two = compile(b)->serialize();
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(*one, *two);
}

// --- Partitioning through the test backend -------------------------------------------------

OnnxBuilder partition_model() {
  // x -> Relu -> Add(w) -> [MatMul on the cpu] -> Relu -> Mul(x2) -> y
  OnnxBuilder b;
  b.input("x", {4, 4});
  b.initializer("w", {4, 4}, iota_floats(16));
  b.initializer("m", {4, 4}, iota_floats(16, 0.05f));
  b.node("Relu", {"x"}, {"a"}, "relu1");
  b.node("Add", {"a", "w"}, {"b"}, "add");
  b.node("MatMul", {"b", "m"}, {"c"}, "matmul");
  b.node("Relu", {"c"}, {"d"}, "relu2");
  b.node("Mul", {"d", "x"}, {"y"}, "mul");
  b.output("y", {4, 4});
  return b;
}

TEST_F(CompilerTest, PartitionsSurroundTheCpuNodeAndRunCorrectly) {
  testing::TestBackendCompiler backend;
  CompileOptions options;
  options.backends = {&backend};
  OnnxBuilder b = partition_model();
  auto compiled = compile(b, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().delegate_calls, 2u);
  EXPECT_EQ(compiled->summary().kernel_calls, 1u);
  EXPECT_EQ(compiled->summary().copies, 0u);

  std::mt19937 rng(8);
  Tensor x = testing::random_tensor(rng, {4, 4});
  auto with = run(b, {x}, options);
  auto without = run(b, {x});
  ASSERT_EQ(with.size(), 1u);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_LT(testing::relative_error(with[0].data_as<float>(), without[0].data_as<float>(), 16),
            1e-6);
  EXPECT_GE(testing::test_backend_stats().executes, 2);
  EXPECT_EQ(testing::test_backend_stats().last_specs["nodes"], "2");
}

TEST_F(CompilerTest, PartitionsAreMaximalAndAcyclic) {
  // Two independent elementwise chains joined at the end: all five nodes form one partition
  // because nothing outside sits between them.
  OnnxBuilder b;
  b.input("x", {8});
  b.input("z", {8});
  b.node("Relu", {"x"}, {"a"}, "a");
  b.node("Relu", {"z"}, {"c"}, "c");
  b.node("Mul", {"a", "a"}, {"b"}, "b");
  b.node("Add", {"c", "c"}, {"d"}, "d");
  b.node("Add", {"b", "d"}, {"y"}, "y");
  b.output("y", {8});
  auto graph = compiler::import_onnx_bytes(b.bytes(), "t", ".", {});
  ASSERT_TRUE(graph.ok());
  ASSERT_TRUE(compiler::infer_and_fold(*graph).ok());
  testing::TestBackendCompiler backend;
  compiler::BackendCompiler* list[] = {&backend};
  auto result = compiler::partition_graph(*graph, list);
  ASSERT_EQ(result.partitions.size(), 1u);
  EXPECT_EQ(result.partitions[0].nodes.size(), 5u);
  EXPECT_EQ(result.partitions[0].inputs.size(), 2u);
  EXPECT_EQ(result.partitions[0].outputs.size(), 1u);

  // With a CPU node whose input comes from the first chain and whose output feeds the join, the
  // partition must split (one group cannot be both before and after the CPU node).
  OnnxBuilder c;
  c.input("x", {8});
  c.node("Relu", {"x"}, {"a"}, "a");
  c.node("Tanh", {"a"}, {"t"}, "cpu");  // not claimed
  c.node("Mul", {"a", "a"}, {"b"}, "b");
  c.node("Add", {"b", "t"}, {"y"}, "join");
  c.output("y", {8});
  auto g2 = compiler::import_onnx_bytes(c.bytes(), "t", ".", {});
  ASSERT_TRUE(g2.ok());
  ASSERT_TRUE(compiler::infer_and_fold(*g2).ok());
  auto r2 = compiler::partition_graph(*g2, list);
  // Every partition input is produced before the partition's first node.
  for (const auto& p : r2.partitions) {
    const auto first = std::find(r2.order.begin(), r2.order.end(), p.nodes.front());
    for (int v : p.inputs) {
      const int producer = g2->values[v].producer;
      if (producer < 0) continue;
      EXPECT_LT(std::find(r2.order.begin(), r2.order.end(), producer), first);
    }
  }
  EXPECT_EQ(r2.partitions.size(), 2u);
}

TEST_F(CompilerTest, ABlobWhoseDeviceCannotBeReadIsACompileError) {
  testing::TestBackendCompiler backend;
  backend.unreadable_blobs = true;
  CompileOptions options;
  options.backends = {&backend};
  auto r = compile(partition_model(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Error::InvalidProgram);
  EXPECT_NE(
      r.status().message().find("cannot read the device its test_elementwise blob was built for"),
      std::string::npos)
      << r.status().to_string();
}

TEST_F(CompilerTest, DelegateBoundaryTensorsTakeTheLabelOfTheirPartition) {
  testing::TestBackendCompiler backend;
  CompileOptions options;
  options.backends = {&backend};
  auto compiled = compile(partition_model(), options);
  ASSERT_TRUE(compiled.ok());
  ASSERT_EQ(compiled->summary().partitions.size(), 2u);
  for (const auto& [name, label] : compiled->summary().partitions) EXPECT_EQ(label, "cpu") << name;
}

// --- Memory planning ------------------------------------------------------------------------

TEST(MemoryPlanTest, NoTwoLiveBuffersOverlapAndOffsetsAreAligned) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<compiler::BufferRequest> reqs;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      compiler::BufferRequest r;
      r.bytes = rng() % 5000;
      r.device = (rng() % 4 == 0) ? Device::cuda(static_cast<int16_t>(rng() % 2)) : Device::cpu();
      r.first = static_cast<int>(rng() % 40) - 1;
      r.last = r.first + static_cast<int>(rng() % 10);
      reqs.push_back(r);
    }
    const compiler::MemoryPlan plan = compiler::plan_memory(reqs);
    for (int i = 0; i < n; ++i) {
      const auto& arena = plan.arenas[plan.arena[i]];
      EXPECT_EQ(arena.device, reqs[i].device);
      EXPECT_EQ(plan.offset[i] % compiler::kTensorAlignment, 0u);
      EXPECT_LE(plan.offset[i] + reqs[i].bytes, arena.size);
      for (int j = i + 1; j < n; ++j) {
        if (plan.arena[i] != plan.arena[j]) continue;
        const bool live_together = reqs[i].first <= reqs[j].last && reqs[j].first <= reqs[i].last;
        const bool share_bytes = plan.offset[i] < plan.offset[j] + reqs[j].bytes &&
                                 plan.offset[j] < plan.offset[i] + reqs[i].bytes;
        EXPECT_FALSE(live_together && share_bytes)
            << "trial " << trial << " buffers " << i << ", " << j;
      }
    }
    // Deterministic.
    const compiler::MemoryPlan again = compiler::plan_memory(reqs);
    EXPECT_EQ(plan.offset, again.offset);
  }
}

// Layout ops as views: a Reshape / Squeeze / Unsqueeze / Flatten / Identity of an intermediate
// shares its input's bytes (and the chain of them does), while a Reshape of a method input gets
// its own (a caller may overwrite inputs between calls); the results are unchanged.
TEST_F(CompilerTest, LayoutOpsOfIntermediatesAreViews) {
  OnnxBuilder b;
  b.input("x", {2, 6});
  b.initializer_int64("shape", {2}, {3, 4});
  b.initializer_int64("axes", {1}, {0});
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Reshape", {"r", "shape"}, {"v"}, "reshape");
  b.node("Unsqueeze", {"v", "axes"}, {"u"}, "unsqueeze");
  b.node("Flatten", {"u"}, {"f"}, "flatten");
  b.node("Identity", {"f"}, {"i"}, "identity");
  b.node("Neg", {"i"}, {"y"}, "neg");
  b.node("Reshape", {"x", "shape"}, {"xv"}, "reshape_input");
  b.node("Neg", {"xv"}, {"z"}, "neg_input");
  b.output("y", {1, 12});
  b.output("z", {3, 4});
  CompileOptions options;
  options.optimize = false;  // the graph as written
  auto compiled = compile(b, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto bytes = compiled->serialize();
  ASSERT_TRUE(bytes.ok());
  auto file = format::ProgramFile::parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const fb::Method& m = *file->program().methods()->Get(0);
  std::map<std::string, uint64_t> offset;
  for (const fb::Value* v : *m.values()) {
    if (const fb::Tensor* t = v->value_as_Tensor(); t && t->name()) {
      offset[t->name()->str()] = t->offset();
    }
  }
  for (const char* view : {"v", "u", "f", "i"}) EXPECT_EQ(offset.at(view), offset.at("r")) << view;
  EXPECT_NE(offset.at("xv"), offset.at("x"));
  EXPECT_NE(offset.at("y"), offset.at("r"));

  std::mt19937 rng(5);
  const Tensor x = testing::random_tensor(rng, {2, 6}, -1.0f, 1.0f);
  const std::vector<Tensor> out = testing::run_compiled(*compiled, {x});
  ASSERT_EQ(out.size(), 2u);
  for (int k = 0; k < 12; ++k) {
    const float xk = x.data_as<float>()[k];
    EXPECT_EQ(out[0].data_as<float>()[k], -std::max(xk, 0.0f)) << k;
    EXPECT_EQ(out[1].data_as<float>()[k], -xk) << k;
  }
}

TEST(MemoryPlanTest, ReusesMemoryAcrossDisjointLifetimes) {
  std::vector<compiler::BufferRequest> reqs = {
      {1000, Device::cpu(), 0, 1}, {1000, Device::cpu(), 2, 3}, {1000, Device::cpu(), 4, 5}};
  const compiler::MemoryPlan plan = compiler::plan_memory(reqs);
  ASSERT_EQ(plan.arenas.size(), 1u);
  EXPECT_EQ(plan.arenas[0].size, 1024u);  // 1000 rounded up to 256-byte alignment
}

// Dynamic shapes (docs/dynamic_shapes.md): a model that is valid at some sizes of its range only
// (a Reshape to a target the exporter fixed) is refused at compile, naming the node and the
// sizes at which it fails, never compiled into a program that is wrong at some call.
TEST_F(CompilerTest, ADynamicModelValidAtSomeSizesOnlyIsRefusedNamingTheNodeAndTheSizes) {
  OnnxBuilder b;
  b.input("x", {-1, 4});
  b.initializer_int64("target", {2}, {1, 8});
  b.node("Reshape", {"x", "target"}, {"y"}, "baked");
  b.output("y", {1, 8});
  CompileOptions options;
  options.dims = {{"N", 1, 2, 0, {}}};
  auto r = compile(b, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Error::NotSupported);
  for (const char* needle :
       {"Reshape (node 'baked')", "not valid at every size", "with N=1", "--dim", "--shape"}) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << needle << " in " << r.status().message();
  }
  // Fixed at the one size it is valid at, it compiles.
  options.dims.clear();
  options.input_shapes = {{"x", {2, 4}}};
  EXPECT_TRUE(compile(b, options).ok());
}

// A backend that builds blobs for one shape (the test backend; the CUDA engine builds dynamic
// ones) gets no dynamic model: it is refused with the flags that fix it.
TEST_F(CompilerTest, ADynamicModelForAStaticBackendIsRefusedWithTheFlagsThatFixIt) {
  OnnxBuilder b;
  b.input("x", {-1, 4});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", {-1, 4});
  testing::TestBackendCompiler backend;
  CompileOptions options;
  options.backends = {&backend};
  options.dims = {{"N", 1, 8, 0, {}}};
  auto r = compile(b, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Error::NotSupported);
  for (const char* needle : {"dynamic dimensions (N in 1..8)",
                             "the 'test_elementwise' backend does not run dynamic shapes yet",
                             "--device cpu", "--shape x=<N>x4"}) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << needle << " in " << r.status().message();
  }
  // The same model for the CPU compiles, and runs at several sizes.
  options.backends.clear();
  auto compiled = compile(b, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto bytes = compiled->serialize();
  ASSERT_TRUE(bytes.ok());
  auto program = runtime::Program::load_bytes(*bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto module = extension::Module::from_program(*program);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  std::mt19937 rng(3);
  for (int64_t n : {8, 1, 5}) {
    Tensor x = testing::random_tensor(rng, {n, 4});
    auto y = module->run({x});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_EQ((*y)[0].sizes(), (std::vector<int64_t>{n, 4}));
    for (int64_t i = 0; i < n * 4; ++i) {
      EXPECT_EQ((*y)[0].data_as<float>()[i], std::max(0.0f, x.data_as<float>()[i]));
    }
  }
}

}  // namespace
}  // namespace baton
