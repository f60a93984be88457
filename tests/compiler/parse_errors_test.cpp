// A model that is not one, or a damaged one, gets a message saying what is wrong with it: empty,
// not protobuf, trailing garbage, a nested field that does not parse, no graph, no ir_version.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "compiler/robustness.h"

namespace baton::testing {
namespace {

TEST_F(RobustnessTest, ParseErrorsSayWhatIsWrong) {
  auto r = compile(std::vector<uint8_t>{});
  expect_error(r.status(), Error::InvalidArgument, "is empty (0 bytes), not an ONNX model");

  r = compile(std::vector<uint8_t>{'h', 'i', '!', 0xff, 0x13});
  expect_error(r.status(), Error::InvalidArgument, "not an ONNX model");
  expect_error(r.status(), Error::InvalidArgument, "breaks at byte offset 2 of 5");

  OnnxBuilder zero_ir = relu_model();
  zero_ir.model().set_ir_version(0);
  r = compile(zero_ir);
  expect_error(r.status(), Error::InvalidArgument,
               "has ir_version 0: ModelProto field 'ir_version' is 0");
  zero_ir.model().clear_ir_version();
  r = compile(zero_ir);
  expect_error(r.status(), Error::InvalidArgument,
               "has ir_version 0: ModelProto field 'ir_version' is missing");
  zero_ir.model().set_ir_version(-3);
  r = compile(zero_ir);
  expect_error(r.status(), Error::InvalidArgument, "has ir_version -3");

  OnnxBuilder no_graph = relu_model();
  no_graph.model().clear_graph();
  r = compile(no_graph);
  expect_error(r.status(), Error::InvalidArgument,
               "is an ONNX model (ir_version 8) without a graph: ModelProto field 'graph' is "
               "missing");

  // A valid model followed by bytes that are not protobuf fields.
  std::vector<uint8_t> trailing = relu_model().bytes();
  const size_t model_size = trailing.size();
  for (uint8_t c : {0xff, 0xff, 0xff, 0x00}) trailing.push_back(c);
  r = compile(trailing);
  expect_error(r.status(), Error::InvalidArgument,
               fmt::format("its first {} bytes are an ONNX model, but the bytes from offset {}",
                           model_size, model_size));

  // A graph whose bytes are cut inside a node: the top level walks, the graph does not parse.
  OnnxBuilder damaged = relu_model();
  std::string graph;
  damaged.model().graph().SerializeToString(&graph);
  graph.resize(graph.size() - 3);
  onnx::ModelProto shell;
  shell.set_ir_version(8);
  std::string model;
  shell.SerializeToString(&model);
  model += '\x3a';  // field 7 (graph), length-delimited
  model += static_cast<char>(graph.size());
  model += graph;
  ASSERT_LT(graph.size(), 128u);
  r = compile(std::vector<uint8_t>(model.begin(), model.end()));
  expect_error(r.status(), Error::InvalidArgument,
               "is a damaged ONNX model: its field 'graph' (ModelProto field 7");
  expect_error(r.status(), Error::InvalidArgument, "does not parse as an onnx.GraphProto");
}

// Fields that parse but hold values Baton refuses: the message names the field and the value.
TEST_F(RobustnessTest, RejectedFieldsAreNamedWithTheirValues) {
  // An int64 opset version is checked before it is narrowed: 2^32 + 17 is not opset 17.
  OnnxBuilder opset = relu_model();
  opset.model().mutable_opset_import(0)->set_version((int64_t{1} << 32) + 17);
  auto r = compile(opset);
  expect_error(r.status(), Error::InvalidArgument,
               "ModelProto field 'opset_import' gives domain '' version 4294967313");
  opset.model().mutable_opset_import(0)->set_version(-1);
  expect_error(compile(opset).status(), Error::InvalidArgument, "version -1");

  OnnxBuilder no_outputs = relu_model();
  no_outputs.model().mutable_graph()->clear_output();
  expect_error(compile(no_outputs).status(), Error::InvalidArgument,
               "has no graph outputs (GraphProto field 'output' is empty)");

  OnnxBuilder two_outputs;
  two_outputs.input("x", {1});
  auto& c = two_outputs.node("Constant", {}, {"c", "d"}, "const");
  OnnxBuilder::attr_float(c, "value_float", 1.0f);
  two_outputs.node("Add", {"x", "c"}, {"y"}, "add");
  two_outputs.output("y", {1});
  expect_error(compile(two_outputs).status(), Error::InvalidArgument,
               "Constant node 'const' has 2 outputs (c, d)");
}

// A NaN (or infinite) edge in a constant tf_crop_and_resize roi is refused at compile time,
// naming the node: at 52eb145 it reached floor(NaN) converted to int64 in the CPU kernel, and every
// output silently read element 0.
TEST_F(RobustnessTest, ResizeRefusesANonFiniteCropBox) {
  for (const float bad : {std::nanf(""), INFINITY}) {
    OnnxBuilder b(13);
    b.input("x", {1, 1, 4, 4});
    b.initializer("roi", {8}, {0, 0, 0, 0, 1, 1, bad, 1});
    b.initializer("scales", {4}, {1, 1, 2, 2});
    auto& n = b.node("Resize", {"x", "roi", "scales"}, {"y"}, "crop");
    auto* mode = n.add_attribute();
    mode->set_name("coordinate_transformation_mode");
    mode->set_type(onnx::AttributeProto::STRING);
    mode->set_s("tf_crop_and_resize");
    auto* interp = n.add_attribute();
    interp->set_name("mode");
    interp->set_type(onnx::AttributeProto::STRING);
    interp->set_s("linear");
    b.output("y", {1, 1, 8, 8});
    const auto compiled = compile(b);
    ASSERT_FALSE(compiled.ok()) << bad;
    expect_error(compiled.status(), Error::InvalidArgument, "'roi' value 6 (end of axis 2)");
    EXPECT_NE(compiled.status().message().find("crop"), std::string::npos)
        << compiled.status().to_string();
  }
}

// Element types newer than the ONNX library Baton builds against are named, not printed as
// "22 ()" (52eb145).
TEST_F(RobustnessTest, UnsupportedElementTypesAreNamed) {
  for (const auto& [code, name] : std::vector<std::pair<int, std::string>>{
           {22, "INT4"}, {21, "UINT4"}, {17, "FLOAT8E4M3FN"}, {23, "FLOAT4E2M1"}, {8, "STRING"}}) {
    OnnxBuilder b;
    b.input("x", {2}, code);
    b.node("Identity", {"x"}, {"y"}, "id");
    b.output("y", {2}, code);
    const auto compiled = compile(b);
    ASSERT_FALSE(compiled.ok());
    expect_error(compiled.status(), Error::NotSupported,
                 fmt::format("has ONNX element type {} ({})", code, name));
  }
}

}  // namespace
}  // namespace baton::testing
