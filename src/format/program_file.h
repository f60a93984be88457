// The program file: a fixed header, the flatbuffer (schema/program.fbs), then aligned data
// segments. docs/format.md is the byte-level description.
//
// ProgramFile::parse verifies a whole file before anything reads it: the header, the flatbuffer
// verifier, and a semantic pass (indices in range, segments inside the file, element counts and
// byte sizes that cannot overflow, argument kinds, devices that match their arenas). Any problem
// is an Error::InvalidProgram whose message names the field and the offending value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"
#include "program_generated.h"

namespace baton::format {

inline constexpr char kFileMagic[8] = {'B', 'A', 'T', 'O', 'N', 'P', 'R', 'G'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kHeaderSize = 64;
// Segment data starts on a page boundary so the file can be mapped and each segment is aligned
// for any element type (and for device uploads).
inline constexpr uint64_t kSegmentAreaAlignment = 4096;
inline constexpr uint64_t kSegmentAlignment = 64;

// Little-endian on disk; all offsets are from the start of the file.
struct FileHeader {
  char magic[8];
  uint32_t header_size;
  uint32_t format_version;
  uint64_t flatbuffer_offset;
  uint64_t flatbuffer_size;
  uint64_t segment_base_offset;
  uint64_t segment_data_size;
  uint64_t file_size;
  uint64_t reserved;
};
static_assert(sizeof(FileHeader) == kHeaderSize);

class ProgramFile {
 public:
  ProgramFile() = default;
  // Verifies `bytes` completely. The bytes must outlive the ProgramFile and stay 8-byte aligned.
  static Result<ProgramFile> parse(std::span<const uint8_t> bytes);

  const FileHeader& header() const { return header_; }
  const fb::Program& program() const { return *program_; }
  // Verified: inside the file.
  std::span<const uint8_t> segment(int index) const;
  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  std::span<const uint8_t> bytes_;
  FileHeader header_{};
  const fb::Program* program_ = nullptr;
};

// Serializes `program` followed by `segments`. Sets `program.version` and `program.segments` (the
// segment table it writes) first; nothing else of `program` changes.
Result<std::vector<uint8_t>> serialize_program(fb::ProgramT& program,
                                               std::span<const std::span<const uint8_t>> segments);

// Writes bytes to a temporary file next to PATH and renames it to PATH, so a failure never leaves
// a partial file and readers see the old or the new file, never a mix.
Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);

// The device of a tensor or arena of a parsed (so verified) program.
template <typename T>
Device device_of(const T& t) {
  return Device{static_cast<DeviceType>(t.device_type()), t.device_index()};
}

}  // namespace baton::format
