// The .npy reader as an attacker writes the file: extension::read_npy, which takes a path, reads
// a memory file (memfd) that holds the input. A file that reads is written back with write_npy
// and read again: the round trip must give the same dtype, shape and bytes.
//
// Why a memory file rather than a bytes-level entry point: read_npy is the API users call, and
// a memfd costs a few system calls per input (docs/robustness.md has the measurement), so no
// hook in src/ is needed.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "baton/core/log.h"
#include "baton/extension/npy.h"

namespace {

int input_fd = -1;
std::string input_path;
std::string roundtrip_path;

[[noreturn]] void fail(const char* what, const std::string& message) {
  std::fprintf(stderr, "baton fuzz: %s: %s\n", what, message.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::set_log_level(baton::LogLevel::Off);
  input_fd = memfd_create("fuzz_npy_input", MFD_CLOEXEC);
  if (input_fd < 0) fail("memfd_create", std::strerror(errno));
  input_path = "/proc/self/fd/" + std::to_string(input_fd);
  // write_npy writes PATH.tmp and renames it, so the round trip needs a real folder.
  const char* shm = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  roundtrip_path = std::string(shm) + "/baton_fuzz_npy_" + std::to_string(::getpid()) + ".npy";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (::ftruncate(input_fd, 0) != 0) fail("ftruncate", std::strerror(errno));
  if (size != 0 && ::pwrite(input_fd, data, size, 0) != static_cast<ssize_t>(size)) {
    fail("pwrite", std::strerror(errno));
  }
  auto tensor = baton::extension::read_npy(input_path);
  if (!tensor.ok()) {
    if (tensor.code() == baton::Error::Internal) fail("read_npy", tensor.status().message());
    return 0;
  }
  const baton::Status written = baton::extension::write_npy(roundtrip_path, tensor->view());
  if (!written.ok()) fail("write_npy of a tensor read_npy returned", written.message());
  auto back = baton::extension::read_npy(roundtrip_path);
  // Removed at once: a process that ends (libFuzzer exits without running destructors) leaves
  // no file behind, and campaigns start thousands of processes.
  std::remove(roundtrip_path.c_str());
  if (!back.ok()) fail("read_npy of what write_npy wrote", back.status().message());
  if (back->dtype() != tensor->dtype() || back->sizes() != tensor->sizes() ||
      back->nbytes() != tensor->nbytes() ||
      (tensor->nbytes() != 0 && std::memcmp(back->data(), tensor->data(), tensor->nbytes()) != 0)) {
    fail("round trip", "write_npy then read_npy changed the tensor");
  }
  return 0;
}
