// Extension: Module (load a program, run a method on tensors), .npy I/O, and the program
// description `baton inspect` prints (with each registered backend describing its blobs).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "baton/baton.h"
#include "baton/core/file.h"
#include "baton/extension/inspect.h"
#include "baton/extension/module.h"
#include "baton/extension/npy.h"
#include "format/program_file.h"
#include "testing/fifo.h"
#include "testing/program_builder.h"
#include "testing/program_fixture.h"
#include "testing/random.h"
#include "testing/sample_programs.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

using runtime::Program;
using testing::make_add_relu_program;

using ModuleTest = testing::ProgramTest;

class InspectTest : public ModuleTest {
 protected:
  // The description of the program `bytes`, parsed without exceptions; null (and a test failure)
  // when it does not load, is not described or is not a JSON object.
  nlohmann::json describe(const std::vector<uint8_t>& bytes) {
    auto program = load(bytes);
    if (!program) return nlohmann::json();
    auto text = extension::describe_program_json(*program);
    EXPECT_TRUE(text.ok()) << text.status().to_string();
    if (!text.ok()) return nlohmann::json();
    auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << *text;
    return j.is_object() ? j : nlohmann::json();
  }
};

TEST_F(ModuleTest, RunsIntoCallerBuffers) {
  auto p = make_add_relu_program(true);
  auto module = extension::Module::from_program(load(p.builder.bytes())).value();
  std::vector<float> x = {-1.0f, 2.0f, 0.5f, 1.0f, -3.0f, 0.25f}, out(6, 0.0f);
  ASSERT_TRUE(module
                  .run({TensorView{x.data(), DType::Float32, sizes_, Device::cpu()}},
                       {TensorView{out.data(), DType::Float32, sizes_, Device::cpu()}})
                  .ok());
  const auto want = testing::add_relu_reference(p, x);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[i], want[i]);
  const Status s = module.run({}, {});
  EXPECT_NE(s.message().find("takes 1 inputs and 1 outputs, got 0 and 0"), std::string::npos);
}

// run(tensors) after run(views): the outputs go to the method's own memory again, never to the
// caller buffers of the earlier call (which the caller may have freed by then).
TEST_F(ModuleTest, RunIntoNewTensorsForgetsEarlierCallerBuffers) {
  auto p = make_add_relu_program(true);
  auto module = extension::Module::from_program(load(p.builder.bytes())).value();
  std::vector<float> x = {-1.0f, 2.0f, 0.5f, 1.0f, -3.0f, 0.25f}, earlier(6, 0.0f);
  ASSERT_TRUE(module
                  .run({TensorView{x.data(), DType::Float32, sizes_, Device::cpu()}},
                       {TensorView{earlier.data(), DType::Float32, sizes_, Device::cpu()}})
                  .ok());
  std::fill(earlier.begin(), earlier.end(), -7.0f);
  x[0] = 4.0f;
  Tensor input = Tensor::empty(DType::Float32, {2, 3}).value();
  std::copy(x.begin(), x.end(), input.data_as<float>());
  auto outputs = module.run({input});
  ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
  const auto want = testing::add_relu_reference(p, x);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ((*outputs)[0].data_as<float>()[i], want[i]);
  for (float v : earlier) EXPECT_EQ(v, -7.0f);
}

TEST_F(ModuleTest, RunChecksCountAndCopiesOutputs) {
  auto p = make_add_relu_program(true);
  auto module = extension::Module::from_program(load(p.builder.bytes()));
  ASSERT_TRUE(module.ok());
  auto none = module->run({});
  EXPECT_EQ(none.code(), Error::InvalidArgument);
  EXPECT_NE(none.status().message().find("takes 1 inputs ('x' float32 [2, 3]), got 0"),
            std::string::npos)
      << none.status().to_string();
  std::mt19937 rng(11);
  Tensor x = testing::random_tensor(rng, {2, 3});
  auto out = module->run({x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 1u);
  const std::vector<float> xs(x.data_as<float>(), x.data_as<float>() + 6);
  const auto want = testing::add_relu_reference(p, xs);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ((*out)[0].data_as<float>()[i], want[i]);
  // The returned tensor is a copy: running again does not change it.
  const float before = (*out)[0].data_as<float>()[0];
  Tensor x2 = testing::random_tensor(rng, {2, 3}, 5.0f, 6.0f);
  ASSERT_TRUE(module->run({x2}).ok());
  EXPECT_EQ((*out)[0].data_as<float>()[0], before);
}

TEST_F(ModuleTest, ProgramsLoadedFromAFileMapTheirConstants) {
  auto p = make_add_relu_program(true);
  const std::string path = ::testing::TempDir() + "/add_relu.baton";
  ASSERT_TRUE(write_file_atomically(path, p.builder.bytes()).ok());
  auto module = extension::Module::load(path);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  EXPECT_EQ(module->program().method_name(0), "forward");
  EXPECT_EQ(module->program().producer(), "ProgramBuilder");
  std::mt19937 rng(5);
  Tensor x = testing::random_tensor(rng, {2, 3});
  auto out = module->run({x});
  ASSERT_TRUE(out.ok());
  const std::vector<float> xs(x.data_as<float>(), x.data_as<float>() + 6);
  const auto want = testing::add_relu_reference(p, xs);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ((*out)[0].data_as<float>()[i], want[i]);
}

TEST(NpyTest, RoundTripsEveryDtype) {
  const std::string dir = ::testing::TempDir();
  for (DType dtype : {DType::Float32, DType::Float16, DType::Int64, DType::Int32, DType::Bool,
                      DType::Float64, DType::UInt8, DType::Int8, DType::Int16}) {
    for (std::vector<int64_t> sizes : {std::vector<int64_t>{}, std::vector<int64_t>{5},
                                       std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{0, 3}}) {
      Tensor t = Tensor::empty(dtype, sizes).value();
      auto* bytes = static_cast<uint8_t*>(t.data());
      for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
      if (dtype == DType::Bool) {
        for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
      }
      const std::string path = dir + "/t.npy";
      ASSERT_TRUE(extension::write_npy(path, t.view()).ok());
      auto back = extension::read_npy(path);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      EXPECT_EQ(back->dtype(), dtype);
      EXPECT_EQ(back->sizes(), sizes);
      EXPECT_EQ(std::memcmp(back->data(), t.data(), t.nbytes()), 0);
    }
  }
}

// `baton run --input` paths are read with read_npy: a directory, a device (/dev/zero used to be
// read until memory ran out) or a FIFO (it used to block forever) is refused by name.
TEST(NpyTest, RefusesAnythingButARegularFile) {
  auto dir = extension::read_npy(::testing::TempDir());
  ASSERT_EQ(dir.code(), Error::IoError);
  EXPECT_NE(dir.status().message().find("is a directory, not a regular file"), std::string::npos)
      << dir.status().to_string();

  auto zero = extension::read_npy("/dev/zero");
  ASSERT_EQ(zero.code(), Error::IoError);
  EXPECT_NE(zero.status().message().find("input '/dev/zero' is a character device, not a regular "
                                         "file"),
            std::string::npos)
      << zero.status().to_string();

  testing::FifoWatchdog fifo(::testing::TempDir() + "/input.fifo");
  ASSERT_TRUE(fifo.created());
  auto pipe = extension::read_npy(fifo.path());
  EXPECT_FALSE(fifo.fired()) << "read_npy blocked on the FIFO";
  ASSERT_EQ(pipe.code(), Error::IoError);
  EXPECT_NE(pipe.status().message().find("is a FIFO (named pipe), not a regular file"),
            std::string::npos)
      << pipe.status().to_string();
}

// The header's sizes are checked against the file's size before anything is allocated: a small
// file claiming a huge header or a huge array is refused, not read or allocated.
TEST(NpyTest, HeaderAndDataSizesAreCheckedAgainstTheFileSize) {
  const std::string path = ::testing::TempDir() + "/claims.npy";
  auto write = [&](const std::string& text) {
    std::vector<uint8_t> b(text.begin(), text.end());
    ASSERT_TRUE(write_file_atomically(path, b).ok());
  };
  // Version 2 header length 0xffffffff in a 20-byte file.
  write(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12) + "{'descr':");
  auto r = extension::read_npy(path);
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("the header says 4294967295 bytes but the file has 9"),
            std::string::npos)
      << r.status().to_string();
  // 2^40 float32 elements in a file of a few dozen bytes.
  const std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
  write(std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header);
  r = extension::read_npy(path);
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("has 0 data bytes but float32 [1099511627776] needs "
                                      "4398046511104"),
            std::string::npos)
      << r.status().to_string();
}

TEST(NpyTest, RejectsBadFilesWithReasons) {
  const std::string path = ::testing::TempDir() + "/bad.npy";
  auto write = [&](const std::string& text) {
    std::vector<uint8_t> b(text.begin(), text.end());
    ASSERT_TRUE(write_file_atomically(path, b).ok());
  };
  write("hello");
  EXPECT_NE(extension::read_npy(path).status().message().find("not a .npy file"),
            std::string::npos);
  std::string header = "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }";
  write(std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header);
  EXPECT_EQ(extension::read_npy(path).code(), Error::NotSupported);
  header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
  write(std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header +
        std::string(16, '\0'));
  EXPECT_NE(extension::read_npy(path).status().message().find("Fortran order"), std::string::npos);
  header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  write(std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header +
        std::string(15, '\0'));
  EXPECT_NE(extension::read_npy(path).status().message().find("has 15 data bytes"),
            std::string::npos);
  EXPECT_EQ(extension::read_npy("/nonexistent.npy").code(), Error::IoError);
}

// Headers that Python reads as Fortran order (or cannot say) are never read as C order: at
// 52eb145 these were read as C order, a silent transpose.
TEST(NpyTest, OnlyAPlainFalseFortranOrderIsReadAsCOrder) {
  const std::string path = ::testing::TempDir() + "/order.npy";
  auto status_of = [&](const std::string& header) {
    const std::string text = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' +
                             header + std::string(16, '\0');
    EXPECT_TRUE(write_file_atomically(path, std::string_view(text)).ok());
    return extension::read_npy(path).status();
  };
  for (const char* header : {
           "{\"descr\": \"<f4\", \"fortran_order\": True, \"shape\": (2, 2), }",
           "{'descr': '<f4', 'fortran_order': 1, 'shape': (2, 2), }",
           "{'descr': '<f4', 'shape': (2, 2), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'fortran_order': True}",
       }) {
    const Status s = status_of(header);
    EXPECT_FALSE(s.ok()) << header;
    EXPECT_NE(s.message().find("fortran_order"), std::string::npos) << s.to_string();
  }
  EXPECT_TRUE(status_of("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 2)}").ok());
}

// The description of a program whose delegate belongs to the test backend: every part of the file,
// and the backend's own description of its blob (through BackendInterface::describe_blob).
TEST_F(InspectTest, AsksTheBackendToDescribeItsBlob) {
  auto p = make_add_relu_program(true);
  auto program = load(p.builder.bytes());
  ASSERT_TRUE(program);
  auto text = extension::describe_program_json(*program);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(testing::test_backend_stats().describes, 1);
  EXPECT_EQ(testing::test_backend_stats().inits, 0) << "describing must not initialize";
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["file"], "<memory>");
  EXPECT_EQ(j["producer"], "ProgramBuilder");
  EXPECT_EQ(j["file_size"], p.builder.bytes().size());
  ASSERT_EQ(j["methods"].size(), 1u);
  const auto& m = j["methods"][0];
  EXPECT_EQ(m["name"], "forward");
  EXPECT_EQ(m["instructions"].size(), 3u);
  EXPECT_EQ(m["instructions"][2]["kind"], "delegate");
  ASSERT_EQ(m["delegates"].size(), 1u);
  const auto& d = m["delegates"][0];
  EXPECT_EQ(d["backend"], testing::kTestBackendId);
  EXPECT_EQ(d["name"], "test_0");
  EXPECT_EQ(d["target_device"], "cpu");
  EXPECT_EQ(d["compile_specs"]["flavor"], "mul");
  EXPECT_EQ(d["engine"], nlohmann::json::parse(R"({"format": "TBE1", "inputs": 1, "outputs": 1,
      "constants": 1, "temporaries": 0, "elements": 6, "ops": ["mul 0 1 -> 2"]})"));
  // The test backend names no device or architecture.
  EXPECT_TRUE(d["engine_device"].is_null());
  EXPECT_TRUE(d["sm_arch"].is_null());
}

// A blob its backend rejects is described as the error (the rest of the program still is); a
// backend that is not registered leaves its blob undescribed.
TEST_F(InspectTest, ShowsRejectedBlobsAndSkipsUnknownBackends) {
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {2, 3});
  const int y = b.tensor("y", DType::Float32, {2, 3});
  const int z = b.tensor("z", DType::Float32, {2, 3});
  const int bad = b.delegate(testing::kTestBackendId, {}, {'j', 'u', 'n', 'k'}, "bad");
  const int elsewhere = b.delegate("not_registered", {}, {1, 2, 3}, "elsewhere");
  b.delegate_call(bad, {x}, {y});
  b.delegate_call(elsewhere, {y}, {z});
  b.inputs({x});
  b.outputs({z});
  const auto j = describe(b.bytes());
  ASSERT_TRUE(j.is_object());
  const auto& delegates = j["methods"][0]["delegates"];
  ASSERT_EQ(delegates.size(), 2u);
  ASSERT_TRUE(delegates[0].contains("engine"));
  const std::string error = delegates[0]["engine"].value("error", "");
  EXPECT_NE(error.find("InvalidProgram"), std::string::npos) << error;
  EXPECT_NE(error.find("TBE1 magic"), std::string::npos) << error;
  EXPECT_EQ(delegates[0]["blob_size"], 4);
  EXPECT_FALSE(delegates[1].contains("engine")) << delegates[1].dump();
  EXPECT_FALSE(delegates[1].contains("engine_device"));
  EXPECT_EQ(delegates[1]["backend"], "not_registered");
}

// Names are bytes: a model may name a node "NODE\xff\xfe". The description shows each byte that is
// not UTF-8 as \xNN (valid UTF-8 unchanged), so it is always valid JSON and the bytes stay visible.
TEST_F(InspectTest, NamesThatAreNotUtf8AreEscapedNotThrownAbout) {
  testing::ProgramBuilder b;
  const int x = b.tensor("x\xff", DType::Float32, {2, 3});
  const int y = b.tensor("\xcf\x89 ok", DType::Float32, {2, 3});  // valid UTF-8: omega
  const int z = b.tensor("z\xe2\x82", DType::Float32, {2, 3});    // a truncated sequence
  b.kernel(b.op("Relu"), {x}, {}, {y}, "NODE\xff\xfe");
  b.kernel(b.op("Relu"), {y}, {}, {z}, "\xed\xa0\x80surrogate");
  b.string_value("text\xc3\x28");
  b.inputs({x});
  b.outputs({z});
  const auto j = describe(b.bytes());
  ASSERT_TRUE(j.is_object());
  const auto& m = j["methods"][0];
  EXPECT_EQ(m["instructions"][0]["node"], "NODE\\xff\\xfe");
  EXPECT_EQ(m["instructions"][1]["node"], "\\xed\\xa0\\x80surrogate");
  std::vector<std::string> names;
  for (const auto& v : m["values"]) {
    if (v["kind"] == "tensor") names.push_back(v["name"]);
    if (v["kind"] == "string") {
      EXPECT_EQ(v["value"], "text\\xc3(");
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"x\\xff", "\xcf\x89 ok", "z\\xe2\\x82"}));
}

TEST_F(InspectTest, DescribesAFileByItsPathAndReportsLoadErrors) {
  auto p = make_add_relu_program(false);
  const std::string path = ::testing::TempDir() + "/inspect_me.baton";
  ASSERT_TRUE(write_file_atomically(path, p.builder.bytes()).ok());
  auto text = extension::describe_program_json(path);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["file"], path);
  EXPECT_TRUE(j["methods"][0]["delegates"].empty());
  EXPECT_EQ(testing::test_backend_stats().describes, 0);

  auto missing = extension::describe_program_json("/nonexistent/program.baton");
  EXPECT_EQ(missing.code(), Error::IoError);
  EXPECT_NE(missing.status().message().find("/nonexistent/program.baton"), std::string::npos);
  const std::string junk = ::testing::TempDir() + "/junk.baton";
  ASSERT_TRUE(write_file_atomically(junk, std::vector<uint8_t>(100, 7)).ok());
  EXPECT_EQ(extension::describe_program_json(junk).code(), Error::InvalidProgram);
}

}  // namespace
}  // namespace baton
