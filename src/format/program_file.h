// The program file: a fixed header, the flatbuffer (schema/program.fbs), then aligned data
// segments. docs/format.md is the byte-level description.
//
// ProgramFile::parse verifies a whole file before anything reads it: the header, the checksums
// (XXH3-64 of the header and table, and of every segment; skippable), the flatbuffer verifier,
// and a semantic pass (indices in range, segments inside the file, 8-byte vectors aligned,
// element counts and byte sizes that cannot overflow, argument kinds, devices that match their
// arenas, no instruction writing over its own inputs). Verification is linear in the size of the
// table. Any problem is an Error::InvalidProgram (NotSupported for another format version) whose
// message names the field and the offending value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"
#include "format/checksum.h"
#include "program_generated.h"

namespace baton::format {

inline constexpr char kFileMagic[8] = {'B', 'A', 'T', 'O', 'N', 'P', 'R', 'G'};
// Version 2 added the checksums (FileHeader.table_checksum, Segment.checksum). Version 1 files
// are refused with a message that says to recompile.
// 5: state (Method.state). 4: dynamic shapes (Method.symbols and size_exprs, Tensor.dims). 3:
// each Delegate records its device. 2: checksums.
inline constexpr uint32_t kFormatVersion = 5;
// A program without state is written as version 4, which readers from before state load: what
// they skip (Method.state) is empty. One with state is version 5, which they refuse by version
// instead of running its method with state they would never zero.
inline constexpr uint32_t kStatelessFormatVersion = 4;
// Version 3 files are version 4 files without dynamic shapes: still loaded.
inline constexpr uint32_t kMinFormatVersion = 3;
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
  // XXH3-64 of bytes [0, segment_base_offset) (header, table and padding) with these 8 bytes
  // read as zero.
  uint64_t table_checksum;
};
inline constexpr uint64_t kTableChecksumOffset = 56;
static_assert(sizeof(FileHeader) == kHeaderSize);

// How far ProgramFile::parse got before it returned: each stage is reached once every check before
// it has passed. HeaderAccepted: magic, version, sizes and ranges (and the table checksum, when
// verified); TableVerified: FlatBuffers' structural verification; SemanticPass: the segment table
// and the per-method semantic checks began; Complete: the file was accepted. The regression inputs
// of fuzz/regressions are checked against the stage their bug lived in, so that an input the
// format has outgrown (refused at the version check) cannot pass for a test.
enum class ParseStage : uint8_t { Nothing, HeaderAccepted, TableVerified, SemanticPass, Complete };
std::string_view parse_stage_name(ParseStage stage);

struct ParseOptions {
  // Hash the header and table and every segment and compare with the recorded checksums. Off,
  // nothing reads the segments' bytes (a mapped file stays untouched) and a damaged byte in a
  // segment goes unnoticed; every structural and semantic check still runs.
  bool verify_checksums = true;
  // Threads that hash the segments (format/checksum.h: segment_checksums; 0 = automatic).
  unsigned checksum_threads = 0;
  // When set, receives the last stage reached (diagnostics and tests).
  ParseStage* reached = nullptr;
};

class ProgramFile {
 public:
  ProgramFile() = default;
  // Verifies `bytes` completely. The bytes must outlive the ProgramFile and stay 8-byte aligned.
  static Result<ProgramFile> parse(std::span<const uint8_t> bytes,
                                   const ParseOptions& options = {});

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

// FileHeader.table_checksum of a file whose header's ranges are valid: the checksum of bytes
// [0, segment_base_offset) with the table_checksum field read as zero.
uint64_t table_checksum(std::span<const uint8_t> file, uint64_t segment_base_offset);

// Serializes `program` followed by `segments`. Sets `program.version` and `program.segments` (the
// segment table it writes, with each segment's checksum) first; nothing else of `program`
// changes.
Result<std::vector<uint8_t>> serialize_program(fb::ProgramT& program,
                                               std::span<const std::span<const uint8_t>> segments);

// The operators whose single output may lie exactly on their first input (a view): Reshape,
// Flatten, Squeeze, Unsqueeze and Identity of ai.onnx ("" or "ai.onnx"). The loader accepts that
// overlap for these alone, and the compiler's memory plan makes it for these alone.
inline bool is_view_op(std::string_view domain, std::string_view op) {
  return (domain.empty() || domain == "ai.onnx") &&
         (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
          op == "Identity");
}

// The operators that may write their output over their first input (same arena, same offset)
// when that input is a state value and the output its update (Method.state): ScatterND and
// ScatterElements of ai.onnx, whose kernels then scatter into the input's bytes instead of
// copying it first. The loader accepts that overlap for these alone.
inline bool is_in_place_op(std::string_view domain, std::string_view op) {
  return (domain.empty() || domain == "ai.onnx") && (op == "ScatterND" || op == "ScatterElements");
}

// The device of a tensor or arena of a parsed (so verified) program.
template <typename T>
Device device_of(const T& t) {
  return Device{static_cast<DeviceType>(t.device_type()), t.device_index()};
}

}  // namespace baton::format
