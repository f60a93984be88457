// Program files on disk: loading refuses anything but a regular file (a FIFO used to block the
// loader forever).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  ASSERT_TRUE(write_file_atomically(path("a.bin"), bytes_).ok());
  auto r = read_regular_file(path("a.bin"), 100, "test data");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, bytes_);
}

TEST_F(FileTest, ReadRegularFileRefusesFilesOverTheLimitBeforeReading) {
  ASSERT_TRUE(write_file_atomically(path("a.bin"), bytes_).ok());
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
  ASSERT_TRUE(write_file_atomically(path("a.bin"), bytes_).ok());
  auto r = read_regular_file(path("a.bin"), 4, "ONNX model", "protobufs are limited to 4 bytes");
  ASSERT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(
      r.status().message().find(
          "is 5 bytes, more than the 4 bytes accepted for it: protobufs are limited to 4 bytes"),
      std::string::npos)
      << r.status().to_string();
}

// ---- write_file_atomically (compile -o, .npy outputs): only a regular file is ever replaced

TEST_F(FileTest, CheckingAnOutputPathWritesNothingAndRefusesWhatWritingWould) {
  // Writable: a new file in an existing folder, an existing regular file. Nothing is created.
  EXPECT_TRUE(check_file_writable(path("new.baton")).ok());
  EXPECT_TRUE(entries().empty());
  { std::ofstream(path("old.baton")) << "old"; }
  EXPECT_TRUE(check_file_writable(path("old.baton")).ok());
  EXPECT_EQ(contents(path("old.baton")), "old");
  // Refused, by name: a missing folder, a directory, a device.
  Status s = check_file_writable(path("missing/new.baton"));
  EXPECT_EQ(s.code(), Error::IoError);
  EXPECT_NE(s.message().find("the folder '" + path("missing") + "' does not exist"),
            std::string::npos)
      << s.to_string();
  s = check_file_writable(dir_.string());
  EXPECT_NE(s.message().find("it is a directory, not a regular file"), std::string::npos)
      << s.to_string();
  s = check_file_writable("/dev/null");
  EXPECT_NE(s.message().find("it is a character device"), std::string::npos) << s.to_string();
  EXPECT_EQ(entries(), std::vector<std::string>{"old.baton"});
}

TEST_F(FileTest, WritingCreatesANewFileAndLeavesNoTemporary) {
  ASSERT_TRUE(write_file_atomically(path("new.baton"), bytes_).ok());
  EXPECT_EQ(contents(path("new.baton")), std::string(bytes_.begin(), bytes_.end()));
  EXPECT_EQ(entries(), std::vector<std::string>{"new.baton"});
}

TEST_F(FileTest, WritingReplacesARegularFileAndKeepsItsPermissions) {
  { std::ofstream(path("old.baton")) << "old contents, longer than the new ones"; }
  ASSERT_EQ(::chmod(path("old.baton").c_str(), 0640), 0);
  ASSERT_TRUE(write_file_atomically(path("old.baton"), bytes_).ok());
  EXPECT_EQ(contents(path("old.baton")), std::string(bytes_.begin(), bytes_.end()));
  struct stat st {};
  ASSERT_EQ(::stat(path("old.baton").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(entries(), std::vector<std::string>{"old.baton"});
}

// LinkAtPath::Follow (compile -o): the file a link leads to is replaced and the link stays a link.
TEST_F(FileTest, WritingThroughASymlinkReplacesItsTarget) {
  { std::ofstream(path("target.baton")) << "old"; }
  fs::create_symlink(path("target.baton"), path("link.baton"));
  ASSERT_TRUE(write_file_atomically(path("link.baton"), bytes_, LinkAtPath::Follow).ok());
  EXPECT_TRUE(fs::is_symlink(path("link.baton")));
  EXPECT_EQ(contents(path("target.baton")), std::string(bytes_.begin(), bytes_.end()));
  EXPECT_EQ(entries(), (std::vector<std::string>{"link.baton", "target.baton"}));
}

TEST_F(FileTest, WritingRefusesADirectoryByName) {
  fs::create_directory(path("out.baton"));
  const Status s = write_file_atomically(path("out.baton"), bytes_);
  ASSERT_EQ(s.code(), Error::IoError);
  EXPECT_NE(s.message().find("refusing to write '" + path("out.baton") +
                             "': it is a directory, not a regular file"),
            std::string::npos)
      << s.to_string();
  EXPECT_TRUE(fs::is_directory(path("out.baton")));
  EXPECT_EQ(entries(), std::vector<std::string>{"out.baton"});
}

// As root, renaming over /dev/full turned the device into a regular file.
TEST_F(FileTest, WritingRefusesADeviceByName) {
  const Status s = write_file_atomically("/dev/full", bytes_);
  ASSERT_EQ(s.code(), Error::IoError);
  EXPECT_NE(
      s.message().find("refusing to write '/dev/full': it is a character device, not a regular "
                       "file"),
      std::string::npos)
      << s.to_string();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(FileTest, WritingRefusesAFifoByNameWithoutBlocking) {
  testing::FifoWatchdog fifo(path("out.fifo"));
  ASSERT_TRUE(fifo.created());
  const Status s = write_file_atomically(fifo.path(), bytes_);
  EXPECT_FALSE(fifo.fired());
  ASSERT_EQ(s.code(), Error::IoError);
  EXPECT_NE(s.message().find("it is a FIFO (named pipe), not a regular file"), std::string::npos)
      << s.to_string();
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(entries(), std::vector<std::string>{"out.fifo"});
}

TEST_F(FileTest, WritingRefusesALinkToADirectoryOrToNothing) {
  fs::create_directory(path("dir"));
  fs::create_directory_symlink(path("dir"), path("to_dir.baton"));
  Status s = write_file_atomically(path("to_dir.baton"), bytes_, LinkAtPath::Follow);
  ASSERT_EQ(s.code(), Error::IoError);
  EXPECT_NE(s.message().find("is a directory, not a regular file"), std::string::npos)
      << s.to_string();
  fs::create_symlink(path("missing"), path("dangling.baton"));
  s = write_file_atomically(path("dangling.baton"), bytes_, LinkAtPath::Follow);
  ASSERT_EQ(s.code(), Error::IoError);
  EXPECT_NE(s.message().find("symbolic link that does not lead to a file"), std::string::npos)
      << s.to_string();
  EXPECT_TRUE(fs::is_symlink(path("dangling.baton")));
  EXPECT_EQ(entries(), (std::vector<std::string>{"dangling.baton", "dir", "to_dir.baton"}));
}

// The default (every report and every file Baton names itself): a link planted at the path is
// replaced by the new file, and the file it pointed to keeps its contents.
TEST_F(FileTest, ALinkAtThePathIsReplacedNotWrittenThrough) {
  { std::ofstream(path("victim")) << "precious"; }
  fs::create_symlink(path("victim"), path("trace.json"));
  ASSERT_TRUE(write_file_atomically(path("trace.json"), bytes_).ok());
  EXPECT_FALSE(fs::is_symlink(path("trace.json")));
  EXPECT_EQ(contents(path("trace.json")), std::string(bytes_.begin(), bytes_.end()));
  EXPECT_EQ(contents(path("victim")), "precious");
  EXPECT_TRUE(check_file_writable(path("victim")).ok());
}

// Links planted at the names a writer could use for its temporary file (the old PATH.tmp, and
// PATH.tmp.<pid>.<n> for the next few counts) are never followed: the write either goes to a
// fresh name or fails, and the files they point to keep their contents.
TEST_F(FileTest, LinksPlantedAtTemporaryNamesAreNeverFollowed) {
  { std::ofstream(path("victim")) << "precious"; }
  fs::create_symlink(path("victim"), path("out.json.tmp"));
  for (int n = 0; n < 64; ++n) {
    fs::create_symlink(path("victim"), path(fmt::format("out.json.tmp.{}.{}", ::getpid(), n)));
  }
  for (int i = 0; i < 4; ++i) (void)write_file_atomically(path("out.json"), bytes_);
  EXPECT_EQ(contents(path("victim")), "precious");
}

}  // namespace
}  // namespace baton
