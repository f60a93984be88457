// The model must be a regular file of a size protobuf can parse: a directory, /dev/zero, a FIFO
// and an oversized file are refused by name, before anything is read (core's RegularFile and
// read_regular_file, as the compiler uses them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/robustness.h"
#include "testing/fifo.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

TEST_F(RobustnessTest, ModelPathsThatAreNotRegularFilesAreRefusedByName) {
  auto r = compiler::compile_file(dir_.string(), {});
  expect_error(r.status(), Error::IoError, "is a directory, not a regular file");
  r = compiler::compile_file("/dev/zero", {});
  expect_error(r.status(), Error::IoError,
               "ONNX model '/dev/zero' is a character device, not a regular file");
  FifoWatchdog fifo((dir_ / "model.fifo").string());
  ASSERT_TRUE(fifo.created());
  r = compiler::compile_file(fifo.path(), {});
  EXPECT_FALSE(fifo.fired()) << "compile_file blocked opening a FIFO";
  expect_error(r.status(), Error::IoError, "is a FIFO (named pipe), not a regular file");
  r = compiler::compile_file((dir_ / "missing.onnx").string(), {});
  expect_error(r.status(), Error::IoError, "missing.onnx' (ONNX model): No such file");
}

TEST_F(RobustnessTest, ModelsOverProtobufsLimitAreRefusedWithoutReadingThem) {
  // A sparse file: 2 GiB of holes costs no disk and, refused by its size, no memory.
  const fs::path big = dir_ / "big.onnx";
  { std::ofstream(big).put('x'); }
  fs::resize_file(big, uint64_t{1} << 31);
  auto r = compiler::compile_file(big.string(), {});
  expect_error(r.status(), Error::InvalidArgument,
               "is 2147483648 bytes, more than the 2147483646 bytes accepted for it: ONNX "
               "protobufs are limited to 2 GiB");
  // A regular model file still compiles.
  const fs::path good = dir_ / "good.onnx";
  const auto bytes = relu_model().bytes();
  std::ofstream(good, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  r = compiler::compile_file(good.string(), {});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
}

}  // namespace
}  // namespace baton::testing
