#include "format/program_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/program_file_internal.h"

// Header-only XXH3 (Debian's libxxhash-dev): the runtime links no xxhash library.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "baton/core/check.h"
#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "baton/core/file.h"
#include "baton/core/tensor.h"

namespace baton::format {

using namespace detail;

namespace {

// What segment `index` of a verified program holds, for messages: the delegates whose blob it is
// and the constants it stores.
std::string segment_contents(const fb::Program& program, uint32_t index) {
  std::vector<std::string> parts;
  for (const fb::Method* m : *program.methods()) {
    for (uint32_t d = 0; d < vsize(m->delegates()); ++d) {
      const fb::Delegate* del = m->delegates()->Get(d);
      if (static_cast<uint32_t>(del->blob_segment()) != index) continue;
      parts.push_back(fmt::format("the blob of method '{}' delegate {} ('{}', backend '{}')",
                                  str(m->name()), d, str(del->name()), str(del->backend())));
    }
    size_t constants = 0;
    std::string_view first;
    for (const fb::Value* v : *m->values()) {
      const fb::Tensor* t = v->value_as_Tensor();
      if (t == nullptr || t->allocation() != fb::AllocationKind::Constant ||
          static_cast<uint32_t>(t->constant_segment()) != index) {
        continue;
      }
      if (constants++ == 0) first = str(t->name());
    }
    if (constants > 0) {
      parts.push_back(fmt::format("constants of method '{}': {} tensor{}, the first '{}'",
                                  str(m->name()), constants, constants == 1 ? "" : "s", first));
    }
  }
  if (parts.empty()) return "unused";
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

constexpr char kSkipChecksumsHint[] =
    "the file was damaged after it was written: copy or compile it again (loading with checksums "
    "off, `baton run --no-checksums` or LoadOptions::verify_checksums = false, skips this check "
    "but not the others)";

}  // namespace

uint64_t table_checksum(std::span<const uint8_t> file, uint64_t segment_base_offset) {
  uint8_t header[kHeaderSize];
  std::memcpy(header, file.data(), kHeaderSize);
  std::memset(header + kTableChecksumOffset, 0, sizeof(uint64_t));
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header, kHeaderSize);
  XXH3_64bits_update(&state, file.data() + kHeaderSize, segment_base_offset - kHeaderSize);
  return XXH3_64bits_digest(&state);
}

std::span<const uint8_t> ProgramFile::segment(int index) const {
  const fb::Segment* s = program_->segments()->Get(index);
  return bytes_.subspan(header_.segment_base_offset + s->offset(), s->size());
}

std::string_view parse_stage_name(ParseStage stage) {
  switch (stage) {
    case ParseStage::Nothing:
      return "nothing";
    case ParseStage::HeaderAccepted:
      return "header";
    case ParseStage::TableVerified:
      return "table";
    case ParseStage::SemanticPass:
      return "semantic";
    case ParseStage::Complete:
      return "complete";
  }
  return "unknown";
}

Result<ProgramFile> ProgramFile::parse(std::span<const uint8_t> bytes,
                                       const ParseOptions& options) {
  ParseStage ignored = ParseStage::Nothing;
  ParseStage& reached = options.reached != nullptr ? *options.reached : ignored;
  reached = ParseStage::Nothing;
  BATON_CHECK_OR_RETURN(bytes.size() >= kHeaderSize, InvalidProgram,
                        "file is {} bytes, smaller than the {}-byte header: empty, truncated, or "
                        "not a Baton program",
                        bytes.size(), kHeaderSize);
  BATON_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(bytes.data()) % 8 == 0, InvalidArgument,
                        "program bytes at address {} are not 8-byte aligned in memory (map the "
                        "file, or copy it into aligned storage: Program::load_bytes does)",
                        static_cast<const void*>(bytes.data()));
  ProgramFile file;
  file.bytes_ = bytes;
  std::memcpy(&file.header_, bytes.data(), kHeaderSize);
  const FileHeader& h = file.header_;
  BATON_CHECK_OR_RETURN(std::memcmp(h.magic, kFileMagic, sizeof kFileMagic) == 0, InvalidProgram,
                        "not a Baton program: the file starts with bytes {} instead of 'BATONPRG' "
                        "(byte offset 0)",
                        hex_prefix(bytes, 8));
  BATON_CHECK_OR_RETURN(h.format_version >= kMinFormatVersion, NotSupported,
                        "program format version {} (header byte offset 12) is older than this "
                        "runtime's version {} ({}): recompile the model with this version of "
                        "baton (baton compile MODEL.onnx -o FILE)",
                        h.format_version, kMinFormatVersion,
                        h.format_version < 2 ? "checksums and recorded delegate devices"
                                             : "recorded delegate devices");
  BATON_CHECK_OR_RETURN(h.format_version <= kFormatVersion, NotSupported,
                        "program format version {} (header byte offset 12) is newer than this "
                        "runtime's version {}: use the baton that compiled it, or recompile the "
                        "model with this version of baton",
                        h.format_version, kFormatVersion);
  BATON_CHECK_OR_RETURN(h.header_size == kHeaderSize, InvalidProgram,
                        "header_size = {} (byte offset 8), expected {}", h.header_size,
                        kHeaderSize);
  BATON_CHECK_OR_RETURN(h.file_size == bytes.size(), InvalidProgram,
                        "the header (byte offset 48) says the file is {} bytes but it is {} bytes: "
                        "the file is truncated or has trailing data",
                        h.file_size, bytes.size());
  // FlatBuffers addresses at most 2 GiB (its verifier asserts it); the writer never goes beyond.
  BATON_CHECK_OR_RETURN(h.flatbuffer_size < (uint64_t{1} << 31), InvalidProgram,
                        "flatbuffer_size = {} (header byte offset 24) exceeds FlatBuffers' 2 GiB "
                        "limit: the file is corrupt",
                        h.flatbuffer_size);
  uint64_t fb_end = 0;
  BATON_CHECK_OR_RETURN(h.flatbuffer_offset >= kHeaderSize && h.flatbuffer_offset % 8 == 0 &&
                            !add_overflows(h.flatbuffer_offset, h.flatbuffer_size, &fb_end) &&
                            fb_end <= bytes.size(),
                        InvalidProgram,
                        "flatbuffer range [{}, {} + {}) (header byte offsets 16 and 24) is "
                        "misaligned or outside the {}-byte file",
                        h.flatbuffer_offset, h.flatbuffer_offset, h.flatbuffer_size, bytes.size());
  uint64_t seg_end = 0;
  BATON_CHECK_OR_RETURN(
      h.segment_base_offset >= fb_end && h.segment_base_offset % kSegmentAlignment == 0 &&
          !add_overflows(h.segment_base_offset, h.segment_data_size, &seg_end) &&
          seg_end <= bytes.size(),
      InvalidProgram,
      "segment area [{}, {} + {}) (header byte offsets 32 and 40) is misaligned, "
      "overlaps the flatbuffer, or lies outside the {}-byte file",
      h.segment_base_offset, h.segment_base_offset, h.segment_data_size, bytes.size());
  if (options.verify_checksums) {
    const uint64_t found = table_checksum(bytes, h.segment_base_offset);
    BATON_CHECK_OR_RETURN(found == h.table_checksum, InvalidProgram,
                          "the header and program table (file bytes [0, {})) hash to 0x{:016x} "
                          "but the header's table_checksum (byte offset 56) is 0x{:016x}: {}",
                          h.segment_base_offset, found, h.table_checksum, kSkipChecksumsHint);
  }

  reached = ParseStage::HeaderAccepted;
  const uint8_t* fb_data = bytes.data() + h.flatbuffer_offset;
  BATON_CHECK_OR_RETURN(
      h.flatbuffer_size >= 8 && fb::ProgramBufferHasIdentifier(fb_data), InvalidProgram,
      "the flatbuffer at byte offset {} ({} bytes) does not carry the 'BTNP' "
      "identifier at its bytes 4..8 (found {})",
      h.flatbuffer_offset, h.flatbuffer_size,
      h.flatbuffer_size >= 8 ? hex_prefix(bytes.subspan(h.flatbuffer_offset + 4), 4)
                             : std::string("nothing"));
  flatbuffers::Verifier verifier(fb_data, h.flatbuffer_size, kMaxDepth, kMaxTables);
  if (!fb::VerifyProgramBuffer(verifier)) {
    return BATON_ERROR(InvalidProgram,
                       "the flatbuffer at byte offsets [{}, {}) fails FlatBuffers' structural "
                       "verification in {} (an offset or length points outside the table, or a "
                       "field is misaligned): the file is corrupt",
                       h.flatbuffer_offset, fb_end,
                       locate_structure_failure(fb_data, h.flatbuffer_size));
  }
  reached = ParseStage::TableVerified;
  const fb::Program* program = fb::GetProgram(fb_data);
  file.program_ = program;
  BATON_CHECK_OR_RETURN(program->version() == h.format_version, InvalidProgram,
                        "program.version = {} disagrees with the header's format version {}",
                        program->version(), h.format_version);

  reached = ParseStage::SemanticPass;
  BATON_TRY(check_aligned(program->segments(), bytes.data(), "program.segments"));
  for (uint32_t i = 0; i < vsize(program->segments()); ++i) {
    const fb::Segment* s = program->segments()->Get(i);
    uint64_t end = 0;
    BATON_CHECK_OR_RETURN(!add_overflows(s->offset(), s->size(), &end) &&
                              end <= h.segment_data_size && s->offset() % kSegmentAlignment == 0,
                          InvalidProgram,
                          "segments[{}] = [{}, {} + {}) is misaligned or outside the {}-byte "
                          "segment area",
                          i, s->offset(), s->offset(), s->size(), h.segment_data_size);
  }
  BATON_CHECK_OR_RETURN(vsize(program->methods()) > 0, InvalidProgram,
                        "program.methods is empty: the program has no method to run");
  // Names are checked for uniqueness through a hash map: comparing every pair made loading a
  // program of 100,000 methods take 36 s.
  std::unordered_map<std::string_view, uint32_t> names;
  names.reserve(program->methods()->size());
  for (uint32_t i = 0; i < program->methods()->size(); ++i) {
    const fb::Method* m = program->methods()->Get(i);
    BATON_CHECK_OR_RETURN(!str(m->name()).empty(), InvalidProgram,
                          "methods[{}].name is missing (empty)", i);
    const auto [it, added] = names.emplace(str(m->name()), i);
    BATON_CHECK_OR_RETURN(added, InvalidProgram, "methods[{}] and methods[{}] are both named '{}'",
                          it->second, i, str(m->name()));
    BATON_TRY(verify_method(*m, static_cast<int>(i), *program, bytes.data()));
  }
  if (options.verify_checksums) {
    std::vector<std::span<const uint8_t>> segments(vsize(program->segments()));
    for (uint32_t i = 0; i < segments.size(); ++i) segments[i] = file.segment(static_cast<int>(i));
    const std::vector<uint64_t> sums = segment_checksums(segments, options.checksum_threads);
    for (uint32_t i = 0; i < segments.size(); ++i) {
      const fb::Segment* s = program->segments()->Get(i);
      const uint64_t found = sums[i];
      const uint64_t begin = h.segment_base_offset + s->offset();
      BATON_CHECK_OR_RETURN(found == s->checksum(), InvalidProgram,
                            "segments[{}] ({}) at file bytes [{}, {}) hashes to 0x{:016x} but "
                            "its recorded checksum is 0x{:016x}: {}",
                            i, segment_contents(*program, i), begin, begin + s->size(), found,
                            s->checksum(), kSkipChecksumsHint);
    }
  }
  reached = ParseStage::Complete;
  return file;
}

Result<std::vector<uint8_t>> serialize_program(fb::ProgramT& program,
                                               std::span<const std::span<const uint8_t>> segments) {
  bool stateful = false;
  for (const auto& m : program.methods) stateful = stateful || !m->state.empty();
  program.version = stateful ? kFormatVersion : kStatelessFormatVersion;
  program.segments.clear();
  const std::vector<uint64_t> sums = segment_checksums(segments);
  uint64_t cursor = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    program.segments.emplace_back(cursor, segments[i].size(), sums[i]);
    cursor = align_up(cursor + segments[i].size(), kSegmentAlignment);
  }
  const uint64_t segment_data_size = cursor;

  flatbuffers::FlatBufferBuilder builder(1 << 16);
  builder.Finish(fb::Program::Pack(builder, &program), fb::ProgramIdentifier());
  const uint64_t fb_size = builder.GetSize();
  BATON_CHECK_OR_RETURN(fb_size < (uint64_t{1} << 31), NotSupported,
                        "the program table is {} bytes, over flatbuffers' 2 GiB limit", fb_size);

  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, sizeof kFileMagic);
  h.header_size = kHeaderSize;
  h.format_version = program.version;
  h.flatbuffer_offset = kHeaderSize;
  h.flatbuffer_size = fb_size;
  h.segment_base_offset = align_up(kHeaderSize + fb_size, kSegmentAreaAlignment);
  h.segment_data_size = segment_data_size;
  h.file_size = h.segment_base_offset + segment_data_size;

  std::vector<uint8_t> out(h.file_size, 0);
  std::memcpy(out.data() + h.flatbuffer_offset, builder.GetBufferPointer(), fb_size);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].empty()) continue;
    std::memcpy(out.data() + h.segment_base_offset + program.segments[i].offset(),
                segments[i].data(), segments[i].size());
  }
  std::memcpy(out.data(), &h, sizeof h);
  h.table_checksum = table_checksum(out, h.segment_base_offset);
  std::memcpy(out.data() + kTableChecksumOffset, &h.table_checksum, sizeof h.table_checksum);
  return out;
}

}  // namespace baton::format
