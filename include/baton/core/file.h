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

// What write_file_atomically does with a symbolic link at PATH. Replace (the default): the link
// itself is replaced by the new file, and the file it pointed to is never written; for every file
// Baton names itself or writes as a report (outputs.json, traces, profiles, .npy outputs,
// compare's work files), so that a link planted where Baton will write cannot redirect it.
// Follow: the link is kept and the regular file it leads to is replaced; only for the program a
// user names with `baton compile -o` (a link to the deployed program updates it in place).
enum class LinkAtPath { Replace, Follow };

// Every file Baton writes goes through this one writer: programs, .npy outputs, reports, traces,
// kernel dumps. It writes bytes to a temporary file of a unique name next to PATH (created
// exclusively, never through a symbolic link) and renames it to PATH, so a failure never leaves
// a partial file and readers see the old or the new file, never a mix. PATH must name a regular
// file, a symbolic link or nothing (a link is replaced, or with LinkAtPath::Follow followed to its
// target, which must then be a regular file): a directory, a device such as /dev/full, a FIFO or a
// socket is refused by name before anything is written. An existing file keeps its permission bits.
// Errors: IoError.
Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                             LinkAtPath links = LinkAtPath::Replace);
// Whether write_file_atomically could write PATH, checked without writing: what it refuses
// (directories, devices, FIFOs, sockets, dangling links), a folder that does not exist or is not
// writable, a file that is not writable. For refusing a bad output before long work.
Status check_file_writable(const std::string& path, LinkAtPath links = LinkAtPath::Replace);
// write_file_atomically for text.
inline Status write_file_atomically(const std::string& path, std::string_view text) {
  return write_file_atomically(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace baton
