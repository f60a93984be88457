// Reading files that must be regular files: programs, models, .npy inputs.
//
// A path given on a command line can name a directory, a device (/dev/zero never ends), a FIFO
// (opening one blocks until a writer appears) or a socket. RegularFile refuses all of them by
// name before reading a byte, and reads the file's size once: every later size check is against
// that number, so a file cannot make a reader allocate more than it holds.
//
// Errors: IoError (cannot open, not a regular file, read failed or the file shrank while being
// read), InvalidArgument (larger than the caller's limit), OutOfMemory (no memory for the bytes).
// Each names the path and what the caller was reading ("program", "ONNX model", "input").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton {

// An open regular file (read-only, close-on-exec). Move-only; closes the descriptor when destroyed.
class RegularFile {
 public:
  // Opens PATH without blocking (a FIFO cannot stall the open) and refuses anything that is not a
  // regular file. `what` says what the file is for, in messages: "program", "input".
  static Result<RegularFile> open(const std::string& path, std::string_view what);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  // The size fstat reported when the file was opened.
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Reads exactly out.size() bytes at `offset`; IoError when the file is shorter than that now.
  Status read_at(uint64_t offset, std::span<uint8_t> out) const;

 private:
  RegularFile(int fd, uint64_t size, std::string path, std::string what)
      : fd_(fd), size_(size), path_(std::move(path)), what_(std::move(what)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
  std::string what_;
};

// "a directory", "a character device", "a FIFO", ... for a stat mode (what a path is instead of a
// regular file, for messages).
std::string_view file_kind_name(unsigned mode);

// The whole of the regular file PATH, refused (before anything is allocated) when it is larger
// than `max_bytes`; `limit_note` says why that limit, in that message ("ONNX protobufs are limited
// to 2 GiB"). `what` as for RegularFile::open. OutOfMemory when the host cannot hold the file.
Result<std::vector<uint8_t>> read_regular_file(const std::string& path, uint64_t max_bytes,
                                               std::string_view what,
                                               std::string_view limit_note = {});

// `bytes` zero bytes for `what` ("initializer 'w'", "ONNX model 'm.onnx'"), or OutOfMemory naming
// both, never std::bad_alloc: for buffers whose size a file or a model chose.
Result<std::vector<uint8_t>> allocate_bytes(uint64_t bytes, std::string_view what);

}  // namespace baton
