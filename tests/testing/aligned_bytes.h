// A 64-byte aligned copy of some bytes, the way a mapped program file or its segments present them
// to the parsers (which check alignment).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace baton::testing {

class AlignedBytes {
 public:
  explicit AlignedBytes(std::span<const uint8_t> bytes, size_t offset = 0)
      : storage_(
            static_cast<uint8_t*>(std::aligned_alloc(64, (bytes.size() + offset + 64) / 64 * 64))),
        size_(bytes.size()),
        offset_(offset) {
    if (size_) std::memcpy(storage_ + offset_, bytes.data(), size_);
  }
  ~AlignedBytes() { std::free(storage_); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;

  // `offset` bytes past a 64-byte boundary (0: aligned).
  std::span<const uint8_t> span() const { return {storage_ + offset_, size_}; }

 private:
  uint8_t* storage_;
  size_t size_;
  size_t offset_;
};

}  // namespace baton::testing
