// Reading ONNX tensor data: inline fields, raw_data, external data. A damaged or hostile model
// is refused with a message naming the tensor and the problem, before anything is allocated for
// the sizes its dims claim.
#include "compiler/onnx_tensor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace baton {
namespace {

namespace fs = std::filesystem;

class OnnxTensorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("baton_onnx_tensor_{}", ::getpid());
    fs::create_directories(dir_ / "model");
    // 4 floats 1, 2, 3, 4 after an 8-byte prefix.
    std::ofstream out(dir_ / "model" / "weights.bin", std::ios::binary);
    const float values[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    out.write("PREFIX!!", 8);
    out.write(reinterpret_cast<const char*>(values), sizeof values);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static onnx::TensorProto floats(std::vector<int64_t> dims) {
    onnx::TensorProto t;
    t.set_name("w");
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    return t;
  }
  static onnx::TensorProto external(std::vector<int64_t> dims, const std::string& location,
                                    const std::string& offset, const std::string& length = "") {
    onnx::TensorProto t = floats(std::move(dims));
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    };
    add("location", location);
    if (!offset.empty()) add("offset", offset);
    if (!length.empty()) add("length", length);
    return t;
  }
  Status read(const onnx::TensorProto& t) {
    return compiler::read_onnx_tensor(t, dir_ / "model", "initializer 'w'").status();
  }
  void expect_error(const onnx::TensorProto& t, Error code, const std::string& needle) {
    const Status s = read(t);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  }

  fs::path dir_;
};

TEST_F(OnnxTensorTest, ExternalDataIsReadAtItsOffset) {
  auto t = compiler::read_onnx_tensor(external({2, 2}, "weights.bin", "8", "16"), dir_ / "model",
                                      "initializer 'w'");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  float got[4];
  std::memcpy(got, t->data->data(), sizeof got);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[3], 4.0f);
}

TEST_F(OnnxTensorTest, MalformedExternalNumbersAreNamed) {
  expect_error(external({2, 2}, "weights.bin", "eight"), Error::InvalidArgument,
               "initializer 'w': external data 'offset' is 'eight', not a non-negative integer");
  expect_error(external({2, 2}, "weights.bin", "8", "-16"), Error::InvalidArgument,
               "external data 'length' is '-16'");
  expect_error(external({2, 2}, "weights.bin", "8", "12"), Error::InvalidArgument,
               "external data length 12 differs from the 16 bytes its dims need");
}

TEST_F(OnnxTensorTest, ExternalLocationsOutsideTheModelFolderAreRefused) {
  for (const std::string location : {"../model/weights.bin", "/etc/passwd", "a/../../x.bin"}) {
    SCOPED_TRACE(location);
    expect_error(external({1}, location, "0"), Error::InvalidArgument, "leaves the model's folder");
  }
}

// Containment is checked where the path leads, not on its text: a symlink inside the model's
// folder to a file outside it would compile that file's bytes into the program.
TEST_F(OnnxTensorTest, ExternalDataSymlinksOutOfTheModelFolderAreRefused) {
  {
    std::ofstream secret(dir_ / "secret.bin", std::ios::binary);
    secret.write("SECRETSECRETSECR", 16);
  }
  fs::create_symlink(dir_ / "secret.bin", dir_ / "model" / "w.bin");
  expect_error(external({4}, "w.bin", "0"), Error::InvalidArgument,
               "resolves (through a symbolic link) to '" +
                   fs::canonical(dir_ / "secret.bin").string() + "', outside the model's folder");
  // A link to a folder outside, and a relative link climbing out.
  fs::create_directories(dir_ / "elsewhere");
  fs::copy_file(dir_ / "secret.bin", dir_ / "elsewhere" / "w.bin");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "model" / "sub");
  expect_error(external({4}, "sub/w.bin", "0"), Error::InvalidArgument,
               "outside the model's folder");
  fs::create_symlink("../secret.bin", dir_ / "model" / "up.bin");
  expect_error(external({4}, "up.bin", "0"), Error::InvalidArgument, "outside the model's folder");
  // A link that stays inside the folder is fine.
  fs::create_symlink("weights.bin", dir_ / "model" / "alias.bin");
  auto t = compiler::read_onnx_tensor(external({2, 2}, "alias.bin", "8", "16"), dir_ / "model",
                                      "initializer 'w'");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  float first = 0;
  std::memcpy(&first, t->data->data(), 4);
  EXPECT_EQ(first, 1.0f);
  // The model's folder may itself be reached through a link.
  fs::create_directory_symlink(dir_ / "model", dir_ / "model_link");
  t = compiler::read_onnx_tensor(external({2, 2}, "weights.bin", "8", "16"), dir_ / "model_link",
                                 "initializer 'w'");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
}

TEST_F(OnnxTensorTest, ExternalDataMustBeARegularFile) {
  fs::create_directories(dir_ / "model" / "folder.bin");
  expect_error(external({0}, "folder.bin", "0"), Error::IoError,
               "is a directory, not a regular file");
  const fs::path fifo = dir_ / "model" / "pipe.bin";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error(external({4}, "pipe.bin", "0"), Error::IoError,
               "is a FIFO (named pipe), not a regular file");
}

TEST_F(OnnxTensorTest, ExternalDataShorterThanTheDimsIsRefusedBeforeAllocating) {
  // Dims claiming 2^40 floats: refused from the file's size, not by allocating 4 TiB.
  expect_error(external({int64_t{1} << 40}, "weights.bin", "8"), Error::InvalidArgument,
               "external data file");
  expect_error(external({4}, "weights.bin", "16"), Error::InvalidArgument,
               "has 24 bytes, fewer than offset 16 + 16 bytes");
  expect_error(external({4}, "missing.bin", "0"), Error::IoError, "cannot open external data file");
}

TEST_F(OnnxTensorTest, InlineDataMustMatchTheDims) {
  onnx::TensorProto t = floats({int64_t{1} << 30});  // 4 GiB claimed, 2 values present
  t.add_float_data(1.0f);
  t.add_float_data(2.0f);
  expect_error(t, Error::InvalidArgument,
               "float_data holds 2 elements but the dims [1073741824] say 1073741824");
  onnx::TensorProto raw = floats({3});
  raw.set_raw_data(std::string(8, '\0'));
  expect_error(raw, Error::InvalidArgument, "raw_data has 8 bytes but float32 [3] needs 12");
}

TEST_F(OnnxTensorTest, SegmentedAndUnknownTypesAreNotSupported) {
  onnx::TensorProto t = floats({2});
  t.mutable_segment()->set_begin(0);
  t.mutable_segment()->set_end(1);
  expect_error(t, Error::NotSupported, "is a segmented tensor");
  onnx::TensorProto s = floats({2});
  s.set_data_type(onnx::TensorProto::STRING);
  expect_error(s, Error::NotSupported, "which Baton does not support");
}

}  // namespace
}  // namespace baton
