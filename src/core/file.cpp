#include "baton/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "baton/core/check.h"

namespace baton {

std::string_view file_kind_name(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFIFO:
      return "a FIFO (named pipe)";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
  }
  return "not a regular file";
}

Result<RegularFile> RegularFile::open(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever if none comes.
  // It changes nothing for the regular files this accepts.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  BATON_CHECK_OR_RETURN(fd >= 0, IoError, "cannot open '{}' ({}): {}", path, what,
                        std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return BATON_ERROR(IoError, "cannot stat {} '{}': {}", what, path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return BATON_ERROR(IoError, "{} '{}' is {}, not a regular file: give the path of a file", what,
                       path, file_kind_name(st.st_mode));
  }
  return RegularFile(fd, static_cast<uint64_t>(st.st_size), path, std::string(what));
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      path_(std::move(other.path_)),
      what_(std::move(other.what_)) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status RegularFile::read_at(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    BATON_CHECK_OR_RETURN(n >= 0, IoError, "reading {} '{}' at byte offset {}: {}", what_, path_,
                          offset + done, std::strerror(errno));
    BATON_CHECK_OR_RETURN(n > 0, IoError,
                          "{} '{}' ended at byte offset {} while reading {} bytes at offset {}: "
                          "the file shrank while it was being read",
                          what_, path_, offset + done, out.size(), offset);
    done += static_cast<size_t>(n);
  }
  return Status();
}

Result<std::vector<uint8_t>> read_regular_file(const std::string& path, uint64_t max_bytes,
                                               std::string_view what, std::string_view limit_note) {
  BATON_ASSIGN_OR_RETURN(RegularFile file, RegularFile::open(path, what));
  BATON_CHECK_OR_RETURN(file.size() <= max_bytes, InvalidArgument,
                        "{} '{}' is {} bytes, more than the {} bytes accepted for it{}{}", what,
                        path, file.size(), max_bytes, limit_note.empty() ? "" : ": ", limit_note);
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                         allocate_bytes(file.size(), fmt::format("{} '{}'", what, path)));
  BATON_TRY(file.read_at(0, bytes));
  return bytes;
}

Result<std::vector<uint8_t>> allocate_bytes(uint64_t bytes, std::string_view what) {
  // The size came from outside: running out of memory is an error to report to the caller. The
  // non-throwing probe comes first because AddressSanitizer aborts the process on a failed
  // throwing new instead of throwing std::bad_alloc (with allocator_may_return_null=1 the
  // non-throwing form returns null); a large probe is an mmap and munmap of untouched pages.
  if (bytes <= std::vector<uint8_t>().max_size()) {
    void* probe = ::operator new(static_cast<size_t>(bytes), std::nothrow);
    if (probe != nullptr) {
      ::operator delete(probe);
      try {
        return std::vector<uint8_t>(static_cast<size_t>(bytes));
      } catch (const std::bad_alloc&) {
      }
    }
  }
  return BATON_ERROR(OutOfMemory, "out of host memory allocating {} bytes for {}", bytes, what);
}

}  // namespace baton
