#include "format/program_file.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "baton/core/check.h"
#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "baton/core/tensor.h"

namespace baton::format {
namespace {

// Flatbuffer verifier limits: deep enough for the schema, large enough for models with hundreds
// of thousands of values, small enough that a hostile file cannot make verification quadratic.
constexpr unsigned kMaxDepth = 64;
constexpr unsigned kMaxTables = 1u << 28;
// Largest arena or constant this format accepts (1 PiB): keeps every offset sum far from overflow.
constexpr uint64_t kMaxBytes = uint64_t{1} << 50;

bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}

std::string_view str(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

template <typename T>
uint32_t vsize(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// Walks one method and checks everything the runtime will rely on.
class MethodVerifier {
 public:
  MethodVerifier(const fb::Method& method, int method_index, const fb::Program& program)
      : m_(method), program_(program) {
    where_ = fmt::format("methods[{}] ('{}')", method_index, str(method.name()));
  }

  Status run() {
    BATON_TRY(verify_arenas());
    BATON_TRY(verify_values());
    BATON_TRY(verify_io());
    BATON_TRY(verify_operators());
    BATON_TRY(verify_delegates());
    BATON_TRY(verify_instructions());
    return Status();
  }

 private:
  Status verify_device(fb::DeviceType type, int16_t index, const std::string& field) {
    const int code = static_cast<int>(type);
    BATON_CHECK_OR_RETURN(is_valid_device_type(code), InvalidProgram,
                          "{}: device_type = {} is not a known device type (0 = cpu, 1 = cuda)",
                          field, code);
    BATON_CHECK_OR_RETURN(index >= 0 && index <= kMaxDeviceIndex, InvalidProgram,
                          "{}: device_index = {} is out of range [0, {}]", field, index,
                          kMaxDeviceIndex);
    BATON_CHECK_OR_RETURN(type != fb::DeviceType::CPU || index == 0, InvalidProgram,
                          "{}: a cpu device must have device_index 0, found {}", field, index);
    return Status();
  }

  Status verify_arenas() {
    for (uint32_t i = 0; i < vsize(m_.arenas()); ++i) {
      const fb::Arena* a = m_.arenas()->Get(i);
      const std::string field = fmt::format("{}.arenas[{}]", where_, i);
      BATON_TRY(verify_device(a->device_type(), a->device_index(), field));
      BATON_CHECK_OR_RETURN(a->size() <= kMaxBytes, InvalidProgram,
                            "{}.size = {} exceeds the format's limit of {} bytes", field, a->size(),
                            kMaxBytes);
    }
    return Status();
  }

  Status verify_tensor(const fb::Tensor& t, const std::string& field) {
    const int dtype_code = static_cast<int>(t.dtype());
    BATON_CHECK_OR_RETURN(is_valid_dtype(dtype_code), InvalidProgram,
                          "{}.dtype = {} is not a known element type", field, dtype_code);
    const uint32_t rank = vsize(t.sizes());
    BATON_CHECK_OR_RETURN(rank <= static_cast<uint32_t>(kMaxRank), InvalidProgram,
                          "{}.sizes has rank {}, more than the supported {}", field, rank,
                          kMaxRank);
    for (uint32_t d = 0; d < rank; ++d) {
      BATON_CHECK_OR_RETURN(t.sizes()->Get(d) >= 0, InvalidProgram, "{}.sizes[{}] = {} is negative",
                            field, d, t.sizes()->Get(d));
    }
    std::span<const int64_t> sizes(t.sizes() ? t.sizes()->data() : nullptr, rank);
    auto nbytes = checked_nbytes(static_cast<DType>(dtype_code), sizes);
    BATON_CHECK_OR_RETURN(nbytes.has_value() && *nbytes <= kMaxBytes, InvalidProgram,
                          "{}.sizes {}: the element count or byte size overflows", field,
                          shape_to_string(sizes));
    if (uint32_t n = vsize(t.dim_order()); n != 0) {
      BATON_CHECK_OR_RETURN(n == rank, InvalidProgram,
                            "{}.dim_order has {} entries for a rank-{} tensor", field, n, rank);
      for (uint32_t d = 0; d < n; ++d) {
        BATON_CHECK_OR_RETURN(t.dim_order()->Get(d) == d, NotSupported,
                              "{}.dim_order[{}] = {}: only row-major (contiguous) tensors are "
                              "supported by this runtime",
                              field, d, t.dim_order()->Get(d));
      }
    }
    BATON_TRY(verify_device(t.device_type(), t.device_index(), field));
    // Kernels read elements through typed pointers: the bytes must start on an element boundary.
    const size_t element = dtype_size(static_cast<DType>(dtype_code));
    BATON_CHECK_OR_RETURN(t.allocation() == fb::AllocationKind::None || t.offset() % element == 0,
                          InvalidProgram,
                          "{}.offset = {} is not a multiple of the {}-byte {} element", field,
                          t.offset(), element, dtype_name(static_cast<DType>(dtype_code)));
    switch (t.allocation()) {
      case fb::AllocationKind::None:
        break;
      case fb::AllocationKind::Constant: {
        const int seg = t.constant_segment();
        BATON_CHECK_OR_RETURN(seg >= 0 && static_cast<uint32_t>(seg) < vsize(program_.segments()),
                              InvalidProgram, "{}.constant_segment = {} is out of range [0, {})",
                              field, seg, vsize(program_.segments()));
        const uint64_t seg_size = program_.segments()->Get(seg)->size();
        uint64_t end = 0;
        BATON_CHECK_OR_RETURN(!add_overflows(t.offset(), *nbytes, &end) && end <= seg_size,
                              InvalidProgram,
                              "{}: constant bytes [{}, {} + {}) lie outside segment {} of {} bytes",
                              field, t.offset(), t.offset(), *nbytes, seg, seg_size);
        BATON_CHECK_OR_RETURN(t.device_type() == fb::DeviceType::CPU, InvalidProgram,
                              "{}: constants must live on the cpu, found {}", field,
                              device_of(t).to_string());
        break;
      }
      case fb::AllocationKind::Arena: {
        const int arena = t.arena();
        BATON_CHECK_OR_RETURN(arena >= 0 && static_cast<uint32_t>(arena) < vsize(m_.arenas()),
                              InvalidProgram, "{}.arena = {} is out of range [0, {})", field, arena,
                              vsize(m_.arenas()));
        const fb::Arena* a = m_.arenas()->Get(arena);
        uint64_t end = 0;
        BATON_CHECK_OR_RETURN(!add_overflows(t.offset(), *nbytes, &end) && end <= a->size(),
                              InvalidProgram,
                              "{}: bytes [{}, {} + {}) lie outside arena {} of {} bytes", field,
                              t.offset(), t.offset(), *nbytes, arena, a->size());
        BATON_CHECK_OR_RETURN(
            a->device_type() == t.device_type() && a->device_index() == t.device_index(),
            InvalidProgram, "{} is on {} but its arena {} is on {}", field,
            device_of(t).to_string(), arena, device_of(*a).to_string());
        break;
      }
      default:
        return BATON_ERROR(InvalidProgram, "{}.allocation = {} is not a known allocation kind",
                           field, static_cast<int>(t.allocation()));
    }
    return Status();
  }

  Status verify_values() {
    for (uint32_t i = 0; i < vsize(m_.values()); ++i) {
      const fb::Value* v = m_.values()->Get(i);
      const std::string field = fmt::format("{}.values[{}]", where_, i);
      // FlatBuffers' verifier accepts a union whose type is set but whose table is absent.
      BATON_CHECK_OR_RETURN(v->value() != nullptr || v->value_type() == fb::ValueKind::NONE,
                            InvalidProgram,
                            "{}: the value's {} table is missing (the file is damaged or was "
                            "written by a faulty tool; compile the model again)",
                            field, fb::EnumNameValueKind(v->value_type()));
      switch (v->value_type()) {
        case fb::ValueKind::Null:
        case fb::ValueKind::Int:
        case fb::ValueKind::Float:
          break;
        case fb::ValueKind::String:
          BATON_CHECK_OR_RETURN(v->value_as_String()->value() != nullptr, InvalidProgram,
                                "{}: string value is missing its text", field);
          break;
        case fb::ValueKind::IntList:
        case fb::ValueKind::FloatList:
          break;
        case fb::ValueKind::Tensor:
          BATON_TRY(verify_tensor(
              *v->value_as_Tensor(),
              fmt::format("{} (tensor '{}')", field, str(v->value_as_Tensor()->name()))));
          break;
        default:
          return BATON_ERROR(InvalidProgram, "{}: value kind {} is not known", field,
                             static_cast<int>(v->value_type()));
      }
    }
    return Status();
  }

  const fb::Tensor* tensor_at(int index) const {
    if (index < 0 || static_cast<uint32_t>(index) >= vsize(m_.values())) return nullptr;
    return m_.values()->Get(index)->value_as_Tensor();
  }

  Status check_index(int index, const std::string& field) {
    BATON_CHECK_OR_RETURN(index >= 0 && static_cast<uint32_t>(index) < vsize(m_.values()),
                          InvalidProgram, "{} = {} is out of range [0, {})", field, index,
                          vsize(m_.values()));
    return Status();
  }

  Status check_tensor(int index, const std::string& field) {
    BATON_TRY(check_index(index, field));
    BATON_CHECK_OR_RETURN(tensor_at(index) != nullptr, InvalidProgram,
                          "{} = {} refers to a value that is not a tensor", field, index);
    return Status();
  }

  // A tensor an instruction writes must be planned memory (never a read-only constant).
  Status check_writable(int index, const std::string& field) {
    BATON_TRY(check_tensor(index, field));
    BATON_CHECK_OR_RETURN(tensor_at(index)->allocation() == fb::AllocationKind::Arena,
                          InvalidProgram,
                          "{} = {} (tensor '{}') is written by the instruction but is not in an "
                          "arena",
                          field, index, str(tensor_at(index)->name()));
    return Status();
  }

  // A tensor that is read (by an instruction, or by the caller as a method output) must have
  // storage, unless it is a method input the caller binds.
  Status check_readable(int index, const std::string& field, std::string_view reader) {
    BATON_TRY(check_tensor(index, field));
    const bool is_input =
        m_.inputs() != nullptr &&
        std::find(m_.inputs()->begin(), m_.inputs()->end(), index) != m_.inputs()->end();
    BATON_CHECK_OR_RETURN(is_input || tensor_at(index)->allocation() != fb::AllocationKind::None,
                          InvalidProgram, "{} = {} (tensor '{}') is read {} but has no storage",
                          field, index, str(tensor_at(index)->name()), reader);
    return Status();
  }

  // Method inputs are arena memory that set_input copies into, or memory the caller binds (never
  // a read-only constant); method outputs have storage the caller can read.
  Status verify_io() {
    for (uint32_t i = 0; i < vsize(m_.inputs()); ++i) {
      const int v = m_.inputs()->Get(i);
      const std::string field = fmt::format("{}.inputs[{}]", where_, i);
      BATON_TRY(check_tensor(v, field));
      BATON_CHECK_OR_RETURN(tensor_at(v)->allocation() != fb::AllocationKind::Constant,
                            InvalidProgram,
                            "{} = {} (tensor '{}') is a constant; a method input must be in an "
                            "arena or have no storage",
                            field, v, str(tensor_at(v)->name()));
    }
    for (uint32_t i = 0; i < vsize(m_.outputs()); ++i) {
      BATON_TRY(check_readable(m_.outputs()->Get(i), fmt::format("{}.outputs[{}]", where_, i),
                               "as a method output"));
    }
    return Status();
  }

  Status verify_operators() {
    for (uint32_t i = 0; i < vsize(m_.operators()); ++i) {
      BATON_CHECK_OR_RETURN(!str(m_.operators()->Get(i)->name()).empty(), InvalidProgram,
                            "{}.operators[{}].name is missing", where_, i);
    }
    return Status();
  }

  Status verify_delegates() {
    for (uint32_t i = 0; i < vsize(m_.delegates()); ++i) {
      const fb::Delegate* d = m_.delegates()->Get(i);
      const std::string field = fmt::format("{}.delegates[{}] ('{}')", where_, i, str(d->name()));
      BATON_CHECK_OR_RETURN(!str(d->backend()).empty(), InvalidProgram, "{}.backend is missing",
                            field);
      for (uint32_t k = 0; k < vsize(d->compile_specs()); ++k) {
        BATON_CHECK_OR_RETURN(d->compile_specs()->Get(k)->key() != nullptr, InvalidProgram,
                              "{}.compile_specs[{}].key is missing", field, k);
      }
      const int seg = d->blob_segment();
      BATON_CHECK_OR_RETURN(seg != -1, InvalidProgram,
                            "{} (backend '{}') has no blob (blob_segment = -1): the program was "
                            "written without the partition's lowered engine; recompile the model",
                            field, str(d->backend()));
      BATON_CHECK_OR_RETURN(seg >= 0 && static_cast<uint32_t>(seg) < vsize(program_.segments()),
                            InvalidProgram, "{}.blob_segment = {} is out of range [0, {})", field,
                            seg, vsize(program_.segments()));
    }
    return Status();
  }

  template <typename T>
  Status each(const flatbuffers::Vector<int32_t>* list, const std::string& field, T&& check) {
    for (uint32_t k = 0; k < vsize(list); ++k) {
      BATON_TRY(check(list->Get(k), fmt::format("{}[{}]", field, k)));
    }
    return Status();
  }

  Status verify_instructions() {
    for (uint32_t i = 0; i < vsize(m_.instructions()); ++i) {
      const fb::Instruction* ins = m_.instructions()->Get(i);
      const std::string field = fmt::format("{}.instructions[{}]", where_, i);
      BATON_CHECK_OR_RETURN(
          ins->instruction() != nullptr || ins->instruction_type() == fb::InstructionKind::NONE,
          InvalidProgram,
          "{}: the instruction's {} table is missing (the file is damaged or was written by a "
          "faulty tool; compile the model again)",
          field, fb::EnumNameInstructionKind(ins->instruction_type()));
      switch (ins->instruction_type()) {
        case fb::InstructionKind::KernelCall: {
          const fb::KernelCall* k = ins->instruction_as_KernelCall();
          BATON_CHECK_OR_RETURN(
              k->operator_() >= 0 && static_cast<uint32_t>(k->operator_()) < vsize(m_.operators()),
              InvalidProgram, "{}.operator = {} is out of range [0, {})", field, k->operator_(),
              vsize(m_.operators()));
          BATON_TRY(each(k->inputs(), field + ".inputs", [&](int v, const std::string& f) {
            BATON_TRY(check_index(v, f));
            if (m_.values()->Get(v)->value_type() == fb::ValueKind::Null) return Status();
            return check_readable(v, f, "by the instruction");
          }));
          BATON_TRY(each(k->attributes(), field + ".attributes", [&](int v, const std::string& f) {
            BATON_TRY(check_index(v, f));
            BATON_CHECK_OR_RETURN(tensor_at(v) == nullptr, InvalidProgram,
                                  "{} = {} is a tensor; attributes are scalars, lists or strings",
                                  f, v);
            return Status();
          }));
          BATON_TRY(each(k->outputs(), field + ".outputs",
                         [&](int v, const std::string& f) { return check_writable(v, f); }));
          break;
        }
        case fb::InstructionKind::DelegateCall: {
          const fb::DelegateCall* d = ins->instruction_as_DelegateCall();
          BATON_CHECK_OR_RETURN(
              d->delegate() >= 0 && static_cast<uint32_t>(d->delegate()) < vsize(m_.delegates()),
              InvalidProgram, "{}.delegate = {} is out of range [0, {})", field, d->delegate(),
              vsize(m_.delegates()));
          BATON_TRY(each(d->inputs(), field + ".inputs", [&](int v, const std::string& f) {
            return check_readable(v, f, "by the instruction");
          }));
          BATON_TRY(each(d->outputs(), field + ".outputs",
                         [&](int v, const std::string& f) { return check_writable(v, f); }));
          break;
        }
        case fb::InstructionKind::DeviceCopy: {
          const fb::DeviceCopy* c = ins->instruction_as_DeviceCopy();
          BATON_TRY(check_readable(c->src(), field + ".src", "by the instruction"));
          BATON_TRY(check_writable(c->dst(), field + ".dst"));
          const fb::Tensor* s = tensor_at(c->src());
          const fb::Tensor* d = tensor_at(c->dst());
          const bool same_sizes =
              vsize(s->sizes()) == vsize(d->sizes()) &&
              (vsize(s->sizes()) == 0 || std::memcmp(s->sizes()->data(), d->sizes()->data(),
                                                     sizeof(int64_t) * vsize(s->sizes())) == 0);
          BATON_CHECK_OR_RETURN(s->dtype() == d->dtype() && same_sizes, InvalidProgram,
                                "{}: copy from '{}' to '{}' changes dtype or shape", field,
                                str(s->name()), str(d->name()));
          break;
        }
        default:
          return BATON_ERROR(InvalidProgram, "{}: instruction kind {} is not known", field,
                             static_cast<int>(ins->instruction_type()));
      }
    }
    return Status();
  }

  const fb::Method& m_;
  const fb::Program& program_;
  std::string where_;
};

std::string hex_prefix(std::span<const uint8_t> bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < bytes.size(); ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

}  // namespace

std::span<const uint8_t> ProgramFile::segment(int index) const {
  const fb::Segment* s = program_->segments()->Get(index);
  return bytes_.subspan(header_.segment_base_offset + s->offset(), s->size());
}

Result<ProgramFile> ProgramFile::parse(std::span<const uint8_t> bytes) {
  BATON_CHECK_OR_RETURN(bytes.size() >= kHeaderSize, InvalidProgram,
                        "file is {} bytes, smaller than the {}-byte header: empty, truncated, or "
                        "not a Baton program",
                        bytes.size(), kHeaderSize);
  BATON_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(bytes.data()) % 8 == 0, InvalidArgument,
                        "program bytes must be 8-byte aligned in memory");
  ProgramFile file;
  file.bytes_ = bytes;
  std::memcpy(&file.header_, bytes.data(), kHeaderSize);
  const FileHeader& h = file.header_;
  BATON_CHECK_OR_RETURN(std::memcmp(h.magic, kFileMagic, sizeof kFileMagic) == 0, InvalidProgram,
                        "not a Baton program: the file starts with bytes {} instead of 'BATONPRG' "
                        "(byte offset 0)",
                        hex_prefix(bytes, 8));
  BATON_CHECK_OR_RETURN(h.format_version == kFormatVersion, NotSupported,
                        "program format version {} (header byte offset 12); this runtime reads "
                        "version {}: recompile the model with this version of baton",
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

  const uint8_t* fb_data = bytes.data() + h.flatbuffer_offset;
  BATON_CHECK_OR_RETURN(
      h.flatbuffer_size >= 8 && fb::ProgramBufferHasIdentifier(fb_data), InvalidProgram,
      "the flatbuffer at byte offset {} lacks the 'BTNP' identifier", h.flatbuffer_offset);
  flatbuffers::Verifier verifier(fb_data, h.flatbuffer_size, kMaxDepth, kMaxTables);
  BATON_CHECK_OR_RETURN(fb::VerifyProgramBuffer(verifier), InvalidProgram,
                        "the flatbuffer at byte offsets [{}, {}) fails structural verification "
                        "(an offset or length points outside it): the file is corrupt",
                        h.flatbuffer_offset, fb_end);
  const fb::Program* program = fb::GetProgram(fb_data);
  file.program_ = program;
  BATON_CHECK_OR_RETURN(program->version() == kFormatVersion, InvalidProgram,
                        "program.version = {} disagrees with the header's format version {}",
                        program->version(), kFormatVersion);

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
                        "the program has no methods");
  for (uint32_t i = 0; i < program->methods()->size(); ++i) {
    const fb::Method* m = program->methods()->Get(i);
    BATON_CHECK_OR_RETURN(!str(m->name()).empty(), InvalidProgram, "methods[{}].name is missing",
                          i);
    for (uint32_t j = 0; j < i; ++j) {
      BATON_CHECK_OR_RETURN(str(program->methods()->Get(j)->name()) != str(m->name()),
                            InvalidProgram, "methods[{}] and methods[{}] are both named '{}'", j, i,
                            str(m->name()));
    }
    BATON_TRY(MethodVerifier(*m, static_cast<int>(i), *program).run());
  }
  return file;
}

Result<std::vector<uint8_t>> serialize_program(fb::ProgramT& program,
                                               std::span<const std::span<const uint8_t>> segments) {
  program.version = kFormatVersion;
  program.segments.clear();
  uint64_t cursor = 0;
  for (const auto& seg : segments) {
    program.segments.emplace_back(cursor, seg.size());
    cursor = align_up(cursor + seg.size(), kSegmentAlignment);
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
  h.format_version = kFormatVersion;
  h.flatbuffer_offset = kHeaderSize;
  h.flatbuffer_size = fb_size;
  h.segment_base_offset = align_up(kHeaderSize + fb_size, kSegmentAreaAlignment);
  h.segment_data_size = segment_data_size;
  h.file_size = h.segment_base_offset + segment_data_size;

  std::vector<uint8_t> out(h.file_size, 0);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + h.flatbuffer_offset, builder.GetBufferPointer(), fb_size);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].empty()) continue;
    std::memcpy(out.data() + h.segment_base_offset + program.segments[i].offset(),
                segments[i].data(), segments[i].size());
  }
  return out;
}

Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  // A name of our own, so concurrent writers of one path cannot trip over each other's file.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    BATON_CHECK_OR_RETURN(out.good(), IoError, "cannot open '{}' for writing: {}", tmp,
                          std::strerror(errno));
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) {
      out.close();
      std::remove(tmp.c_str());
      return BATON_ERROR(IoError, "writing {} bytes to '{}' failed (disk full?)", bytes.size(),
                         tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return BATON_ERROR(IoError, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
  return Status();
}

}  // namespace baton::format
