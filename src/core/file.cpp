#include "baton/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "baton/core/check.h"
#include "fmt/format.h"

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

namespace {

// The file write_file_atomically replaces: PATH, or the regular file a symbolic link PATH leads
// to. Anything else that exists at PATH is refused by name, before a byte is written.
Result<std::string> replaceable_target(const std::string& path, LinkAtPath links, struct stat* st,
                                       bool* exists) {
  *exists = false;
  if (::lstat(path.c_str(), st) != 0) {
    BATON_CHECK_OR_RETURN(errno == ENOENT, IoError, "cannot write '{}': {}", path,
                          std::strerror(errno));
    return path;
  }
  std::string target = path;
  // The link itself is replaced by the new file; whatever it pointed to is never touched.
  if (S_ISLNK(st->st_mode) && links == LinkAtPath::Replace) return path;
  if (S_ISLNK(st->st_mode)) {
    char* resolved = ::realpath(path.c_str(), nullptr);
    BATON_CHECK_OR_RETURN(resolved != nullptr, IoError,
                          "cannot write '{}': it is a symbolic link that does not lead to a file "
                          "({}); remove it or name another path",
                          path, std::strerror(errno));
    target = resolved;
    std::free(resolved);
    BATON_CHECK_OR_RETURN(::stat(target.c_str(), st) == 0, IoError, "cannot write '{}' ('{}'): {}",
                          path, target, std::strerror(errno));
  }
  BATON_CHECK_OR_RETURN(S_ISREG(st->st_mode), IoError,
                        "refusing to write '{}': it is {}, not a regular file (only a regular "
                        "file is replaced; name a new path or a regular file)",
                        target == path ? path : fmt::format("{}' -> '{}", path, target),
                        file_kind_name(st->st_mode));
  *exists = true;
  return target;
}

Status write_all(int fd, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), std::min<size_t>(bytes.size(), size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status(Error::IoError, std::strerror(n < 0 ? errno : EIO));
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return Status();
}

}  // namespace

Status check_file_writable(const std::string& path, LinkAtPath links) {
  struct stat st {};
  bool exists = false;
  BATON_ASSIGN_OR_RETURN(const std::string target, replaceable_target(path, links, &st, &exists));
  // The temporary file goes into the target's folder.
  const size_t slash = target.rfind('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : (slash == 0 ? "/" : target.substr(0, slash));
  struct stat d {};
  BATON_CHECK_OR_RETURN(::stat(dir.c_str(), &d) == 0 && S_ISDIR(d.st_mode), IoError,
                        "cannot write '{}': the folder '{}' does not exist (create it first: "
                        "mkdir -p {})",
                        path, dir, dir);
  BATON_CHECK_OR_RETURN(::access(dir.c_str(), W_OK) == 0, IoError,
                        "cannot write '{}': the folder '{}' is not writable ({})", path, dir,
                        std::strerror(errno));
  BATON_CHECK_OR_RETURN(!exists || ::access(target.c_str(), W_OK) == 0, IoError,
                        "cannot write '{}': the file is not writable ({})", path,
                        std::strerror(errno));
  return Status();
}

Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                             LinkAtPath links) {
  struct stat st {};
  bool exists = false;
  BATON_ASSIGN_OR_RETURN(const std::string target, replaceable_target(path, links, &st, &exists));
  // A name of our own beside the target (same file system, so the rename is atomic), created
  // exclusively and never through a link: concurrent writers of one path cannot trip over each
  // other's file, and a symbolic link planted at a predictable name (PATH.tmp) cannot make Baton
  // overwrite the file it points to.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", target, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  BATON_CHECK_OR_RETURN(fd >= 0, IoError, "cannot create '{}' to write '{}': {}", tmp, path,
                        std::strerror(errno));
  Status written = write_all(fd, bytes);
  // An existing file keeps its permissions (umask would otherwise apply to the new one).
  if (written.ok() && exists && ::fchmod(fd, st.st_mode & 07777) != 0) {
    written = Status(Error::IoError, std::strerror(errno));
  }
  // close reports errors some file systems only detect then (NFS, quota).
  if (::close(fd) != 0 && written.ok()) written = Status(Error::IoError, std::strerror(errno));
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return BATON_ERROR(IoError, "writing {} bytes to '{}' failed: {}", bytes.size(), tmp,
                       written.message());
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return BATON_ERROR(IoError, "cannot rename '{}' to '{}': {}", tmp, target, std::strerror(err));
  }
  return Status();
}

}  // namespace baton
