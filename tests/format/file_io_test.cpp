// Program files on disk: loading refuses anything but a regular file (a FIFO used to block the
// loader forever).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "baton/core/file.h"
#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "testing/fifo.h"
#include "testing/sample_programs.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory per test.
class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("baton_file_io_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Names in the directory, to prove no temporary file is left behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

  static std::string contents(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  const std::vector<uint8_t> bytes_ = {1, 2, 3, 4, 5};
  fs::path dir_;
};

// ---- Program::load_file

TEST_F(FileTest, LoadingAFifoIsRefusedWithoutBlocking) {
  testing::FifoWatchdog fifo(path("program.fifo"));
  ASSERT_TRUE(fifo.created());
  auto r = runtime::Program::load_file(fifo.path());
  EXPECT_FALSE(fifo.fired()) << "load_file blocked on the FIFO";
  ASSERT_EQ(r.code(), Error::IoError);
  EXPECT_NE(r.status().message().find("program '" + fifo.path() +
                                      "' is a FIFO (named pipe), not a regular file"),
            std::string::npos)
      << r.status().to_string();
}

TEST_F(FileTest, LoadingADeviceIsRefusedByName) {
  auto r = runtime::Program::load_file("/dev/zero");
  ASSERT_EQ(r.code(), Error::IoError);
  EXPECT_NE(r.status().message().find("'/dev/zero' is a character device, not a regular file"),
            std::string::npos)
      << r.status().to_string();
}

// ---- read_regular_file, the helper the compiler reads models with

TEST_F(FileTest, ReadRegularFileReadsTheWholeFile) {
  ASSERT_TRUE(format::write_file_atomically(path("a.bin"), bytes_).ok());
  auto r = read_regular_file(path("a.bin"), 100, "test data");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, bytes_);
}

TEST_F(FileTest, ReadRegularFileRefusesFilesOverTheLimitBeforeReading) {
  ASSERT_TRUE(format::write_file_atomically(path("a.bin"), bytes_).ok());
  auto r = read_regular_file(path("a.bin"), 4, "ONNX model");
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("ONNX model '" + path("a.bin") +
                                      "' is 5 bytes, more than the 4 bytes accepted for it"),
            std::string::npos)
      << r.status().to_string();
}

TEST_F(FileTest, ReadRegularFileRefusesDirectoriesDevicesAndFifos) {
  auto dir = read_regular_file(dir_.string(), 1 << 20, "ONNX model");
  ASSERT_EQ(dir.code(), Error::IoError);
  EXPECT_NE(dir.status().message().find("is a directory, not a regular file"), std::string::npos)
      << dir.status().to_string();
  auto dev = read_regular_file("/dev/zero", 1 << 20, "ONNX model");
  ASSERT_EQ(dev.code(), Error::IoError);
  EXPECT_NE(dev.status().message().find("ONNX model '/dev/zero' is a character device"),
            std::string::npos)
      << dev.status().to_string();
  testing::FifoWatchdog fifo(path("model.fifo"));
  auto pipe = read_regular_file(fifo.path(), 1 << 20, "ONNX model");
  EXPECT_FALSE(fifo.fired());
  ASSERT_EQ(pipe.code(), Error::IoError);
  EXPECT_NE(pipe.status().message().find("is a FIFO (named pipe)"), std::string::npos);
}

// Sizes a file or a model chose: more than the host has is an error naming them, never
// std::bad_alloc (under ASan too: the asan preset sets allocator_may_return_null=1).
TEST_F(FileTest, AllocateBytesReportsOutOfMemory) {
  for (const uint64_t bytes : {uint64_t{1} << 62, ~uint64_t{0}}) {
    auto r = allocate_bytes(bytes, "initializer 'huge'");
    ASSERT_EQ(r.code(), Error::OutOfMemory);
    EXPECT_NE(r.status().message().find(fmt::format("{} bytes for initializer 'huge'", bytes)),
              std::string::npos)
        << r.status().to_string();
  }
  auto small = allocate_bytes(5, "initializer 'w'");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, std::vector<uint8_t>(5, 0));
}

TEST_F(FileTest, ReadRegularFileSaysWhyItsLimitIsSet) {
  ASSERT_TRUE(format::write_file_atomically(path("a.bin"), bytes_).ok());
  auto r = read_regular_file(path("a.bin"), 4, "ONNX model", "protobufs are limited to 4 bytes");
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(
      r.status().message().find(
          "is 5 bytes, more than the 4 bytes accepted for it: protobufs are limited to 4 bytes"),
      std::string::npos)
      << r.status().to_string();
}

}  // namespace
}  // namespace baton
