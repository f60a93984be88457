#include "baton/runtime/program.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "baton/core/check.h"
#include "baton/core/file.h"
#include "runtime/program_impl.h"

namespace baton::runtime {

Program::Impl::~Impl() {
  if (mapped != nullptr) munmap(mapped, mapped_size);
  std::free(owned);
}

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::~Program() = default;

// Program's constructor is private; its friend parses the bytes and builds one.
struct ProgramFactory {
  static Result<std::shared_ptr<const Program>> finish_load(std::unique_ptr<Program::Impl> impl,
                                                            std::string_view origin,
                                                            const LoadOptions& options) {
    format::ParseOptions parse;
    parse.verify_checksums = options.verify_checksums;
    parse.checksum_threads = options.checksum_threads;
    auto parsed = format::ProgramFile::parse(impl->bytes, parse);
    if (!parsed.ok()) {
      return Status(parsed.code(), fmt::format("{}: {}", origin, parsed.status().message()));
    }
    impl->file = std::move(parsed).value();
    return std::shared_ptr<const Program>(new Program(std::move(impl)));
  }
};

Result<std::shared_ptr<const Program>> Program::load_file(const std::string& path,
                                                          const LoadOptions& options) {
  return out_of_memory_as_error("loading program", path,
                                [&] { return load_file_impl(path, options); });
}

Result<std::shared_ptr<const Program>> Program::load_file_impl(const std::string& path,
                                                               const LoadOptions& options) {
  // A regular file only: mapping a FIFO or a device fails or blocks, and a directory is no program.
  BATON_ASSIGN_OR_RETURN(RegularFile file, RegularFile::open(path, "program"));
  auto impl = std::make_unique<Impl>();
  impl->origin = path;
  const size_t size = static_cast<size_t>(file.size());
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    BATON_CHECK_OR_RETURN(p != MAP_FAILED, IoError, "cannot map program '{}' ({} bytes): {}", path,
                          size, std::strerror(errno));
    impl->mapped = p;
    impl->mapped_size = size;
    impl->bytes = {static_cast<const uint8_t*>(p), size};
  }
  return ProgramFactory::finish_load(std::move(impl), path, options);
}

Result<std::shared_ptr<const Program>> Program::load_bytes(std::span<const uint8_t> bytes,
                                                           const LoadOptions& options) {
  return out_of_memory_as_error("loading program", "<memory>",
                                [&] { return load_bytes_impl(bytes, options); });
}

Result<std::shared_ptr<const Program>> Program::load_bytes_impl(std::span<const uint8_t> bytes,
                                                                const LoadOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->origin = "<memory>";
  if (!bytes.empty()) {
    const size_t rounded = (bytes.size() + 4095) / 4096 * 4096;
    impl->owned = std::aligned_alloc(4096, rounded);
    BATON_CHECK_OR_RETURN(impl->owned != nullptr, OutOfMemory,
                          "out of host memory copying a {}-byte program", bytes.size());
    std::memcpy(impl->owned, bytes.data(), bytes.size());
    impl->bytes = {static_cast<const uint8_t*>(impl->owned), bytes.size()};
  }
  return ProgramFactory::finish_load(std::move(impl), "<memory>", options);
}

size_t Program::num_methods() const { return impl_->file.program().methods()->size(); }

std::string_view Program::method_name(size_t index) const {
  if (index >= num_methods()) return {};
  return impl_->file.program().methods()->Get(static_cast<uint32_t>(index))->name()->string_view();
}

std::string_view Program::producer() const {
  const auto* p = impl_->file.program().producer();
  return p ? p->string_view() : std::string_view();
}

size_t Program::file_size() const { return impl_->bytes.size(); }

std::string_view Program::origin() const { return impl_->origin; }

std::span<const uint8_t> Program::bytes() const { return impl_->bytes; }

}  // namespace baton::runtime
