// Where a program table fails FlatBuffers' verification (the verifier itself says only that it
// fails).
#include <string>

#include "format/program_file.h"
#include "format/program_file_internal.h"

namespace baton::format::detail {
namespace {

// FlatBuffers' verifier says only that a buffer fails, not where. After a failure this repeats
// the verification one table at a time, down to a method's values, instructions, operators,
// delegates and arenas, and names the first element that fails. Each step verifies what it reads
// before reading it (a field's offset before the vector it points to, a vector before its
// elements), so it is as safe on a hostile buffer as the verifier itself.
class StructureLocator {
 public:
  StructureLocator(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  std::string locate() const {
    const auto root_offset = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data_);
    if (root_offset < 8 || root_offset >= size_) {
      return fmt::format("the root offset ({} in a {}-byte table)", root_offset, size_);
    }
    const fb::Program* program = fb::GetProgram(data_);
    const auto* root = as_table(program);
    if (!start_ok(root)) return "the root table (Program)";
    if (auto at = in_tables<fb::Method>(
            root, fb::Program::VT_METHODS, "methods", [&] { return program->methods(); },
            [&](const fb::Method& m, std::string path) {
              return locate_method(m, std::move(path));
            })) {
      return *at;
    }
    if (!vector_ok<fb::Segment>(root, fb::Program::VT_SEGMENTS)) return "program.segments";
    if (!string_ok(root, fb::Program::VT_PRODUCER)) return "program.producer";
    return "the root table (Program)";
  }

 private:
  template <typename T>
  static const flatbuffers::Table* as_table(const T* t) {
    return reinterpret_cast<const flatbuffers::Table*>(t);
  }

  bool start_ok(const flatbuffers::Table* t) const {
    flatbuffers::Verifier v(data_, size_, kMaxDepth, kMaxTables);
    return v.VerifyTableStart(reinterpret_cast<const uint8_t*>(t));
  }

  template <typename T>
  bool vector_ok(const flatbuffers::Table* t, flatbuffers::voffset_t field) const {
    flatbuffers::Verifier v(data_, size_, kMaxDepth, kMaxTables);
    return v.VerifyTableStart(reinterpret_cast<const uint8_t*>(t)) && t->VerifyOffset(v, field) &&
           v.VerifyVector(t->GetPointer<const flatbuffers::Vector<T>*>(field));
  }

  bool string_ok(const flatbuffers::Table* t, flatbuffers::voffset_t field) const {
    flatbuffers::Verifier v(data_, size_, kMaxDepth, kMaxTables);
    return v.VerifyTableStart(reinterpret_cast<const uint8_t*>(t)) && t->VerifyOffset(v, field) &&
           v.VerifyString(t->GetPointer<const flatbuffers::String*>(field));
  }

  template <typename T>
  bool verifies(const T& table) const {
    flatbuffers::Verifier v(data_, size_, kMaxDepth, kMaxTables);
    return table.Verify(v);
  }

  // The path of the first element of a vector-of-tables field that fails (`inner` goes deeper
  // into it), or nothing when the whole field verifies.
  template <typename T, typename Get, typename Inner>
  std::optional<std::string> in_tables(const flatbuffers::Table* owner,
                                       flatbuffers::voffset_t field, const std::string& path,
                                       Get get, Inner inner) const {
    if (!vector_ok<flatbuffers::Offset<T>>(owner, field)) return path;
    const flatbuffers::Vector<flatbuffers::Offset<T>>* list = get();
    for (uint32_t k = 0; k < vsize(list); ++k) {
      if (!verifies(*list->Get(k))) return inner(*list->Get(k), fmt::format("{}[{}]", path, k));
    }
    return std::nullopt;
  }

  template <typename T, typename Get>
  std::optional<std::string> in_tables(const flatbuffers::Table* owner,
                                       flatbuffers::voffset_t field, const std::string& path,
                                       Get get) const {
    return in_tables<T>(owner, field, path, get, [](const T&, std::string p) { return p; });
  }

  std::string locate_method(const fb::Method& m, std::string path) const {
    const auto* t = as_table(&m);
    if (!start_ok(t)) return path;
    if (!string_ok(t, fb::Method::VT_NAME)) return path + ".name";
    path += fmt::format(" ('{}')", str(m.name()));
    using M = fb::Method;
    if (auto at =
            in_tables<fb::Value>(t, M::VT_VALUES, path + ".values", [&] { return m.values(); }))
      return *at;
    if (auto at = in_tables<fb::Instruction>(t, M::VT_INSTRUCTIONS, path + ".instructions",
                                             [&] { return m.instructions(); }))
      return *at;
    if (auto at = in_tables<fb::Operator>(t, M::VT_OPERATORS, path + ".operators",
                                          [&] { return m.operators(); }))
      return *at;
    if (auto at = in_tables<fb::Delegate>(t, M::VT_DELEGATES, path + ".delegates",
                                          [&] { return m.delegates(); }))
      return *at;
    if (auto at =
            in_tables<fb::Arena>(t, M::VT_ARENAS, path + ".arenas", [&] { return m.arenas(); }))
      return *at;
    if (!vector_ok<int32_t>(t, M::VT_INPUTS)) return path + ".inputs";
    if (!vector_ok<int32_t>(t, M::VT_OUTPUTS)) return path + ".outputs";
    return path;
  }

  const uint8_t* data_;
  size_t size_;
};

}  // namespace

std::string locate_structure_failure(const uint8_t* data, size_t size) {
  return StructureLocator(data, size).locate();
}

}  // namespace baton::format::detail
