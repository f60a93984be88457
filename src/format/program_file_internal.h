// What the program file's parts share (program_file.cpp parses, method_verifier.cpp checks each
// method, locate.cpp names where a table fails FlatBuffers' verifier). Internal to baton_format.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "baton/core/check.h"
#include "baton/core/error.h"
#include "flatbuffers/flatbuffers.h"
#include "program_generated.h"

namespace baton::format::detail {

// Flatbuffer verifier limits: deep enough for the schema, large enough for models with hundreds
// of thousands of values, small enough that a hostile file cannot make verification quadratic.
constexpr unsigned kMaxDepth = 64;
constexpr unsigned kMaxTables = 1u << 28;
// Largest arena or constant this format accepts (1 PiB): keeps every offset sum far from overflow.
constexpr uint64_t kMaxBytes = uint64_t{1} << 50;

inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}

inline std::string_view str(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

// Only for vectors check_aligned has passed.
inline std::span<const int64_t> span_of(const flatbuffers::Vector<int64_t>* v) {
  return v == nullptr ? std::span<const int64_t>() : std::span<const int64_t>(v->data(), v->size());
}

template <typename T>
inline uint32_t vsize(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// FlatBuffers' verifier checks that a vector's 4-byte length is aligned, not its elements: a
// hand-made file can put 8-byte elements (int64 sizes, doubles, segment records) 4 bytes off, and
// the runtime reads them in place through typed pointers. `base` is the start of the file.
template <typename T>
Status check_aligned(const flatbuffers::Vector<T>* v, const uint8_t* base,
                     const std::string& field) {
  constexpr size_t kAlign = 8;  // every vector this is called for holds 8-byte fields
  if (vsize(v) == 0) return Status();
  const uint8_t* data = v->Data();
  BATON_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(data) % kAlign == 0, InvalidProgram,
                        "{}: its {} elements (8-byte fields) start at file byte offset {}, which "
                        "is not a multiple of {} (FlatBuffers writers align them; the file is "
                        "corrupt or hand-made)",
                        field, v->size(), data - base, kAlign);
  return Status();
}

inline std::string hex_prefix(std::span<const uint8_t> bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < bytes.size(); ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

// Checks everything the runtime will rely on in method `method_index` of a program whose
// structure FlatBuffers verified (method_verifier.cpp). `file_begin` is the start of the file.
Status verify_method(const fb::Method& method, int method_index, const fb::Program& program,
                     const uint8_t* file_begin);

// After FlatBuffers' verifier refused the table at `data`, the first element that fails
// (locate.cpp), e.g. "methods[0].values[3]".
std::string locate_structure_failure(const uint8_t* data, size_t size);

}  // namespace baton::format::detail
