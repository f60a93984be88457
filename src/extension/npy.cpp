#include "baton/extension/npy.h"

#include <cstring>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/file.h"
#include "format/program_file.h"

namespace baton::extension {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct NpyType {
  std::string_view descr;
  DType dtype;
};

constexpr NpyType kTypes[] = {
    {"<f4", DType::Float32}, {"<f2", DType::Float16}, {"<f8", DType::Float64},
    {"<i8", DType::Int64},   {"<i4", DType::Int32},   {"<i2", DType::Int16},
    {"|i1", DType::Int8},    {"|u1", DType::UInt8},   {"|b1", DType::Bool},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// The value of `key` in the header's Python dict literal: a parenthesized tuple, or the text up to
// the next comma or closing brace.
// The key may be quoted either way (Python accepts both). A key that appears twice is refused by
// the caller through `repeated` (Python would take the last; a reader must not guess).
std::string_view dict_entry(std::string_view header, std::string_view key,
                            bool* repeated = nullptr) {
  size_t pos = std::string_view::npos;
  size_t quoted_size = key.size() + 2;
  int found = 0;
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = quote + std::string(key) + quote;
    for (size_t at = header.find(quoted); at != std::string_view::npos;
         at = header.find(quoted, at + 1)) {
      ++found;
      if (pos == std::string_view::npos) pos = at;
    }
  }
  if (repeated != nullptr) *repeated = found > 1;
  if (pos == std::string_view::npos) return {};
  pos = header.find(':', pos + quoted_size);
  if (pos == std::string_view::npos) return {};
  std::string_view rest = trim(header.substr(pos + 1));
  if (!rest.empty() && rest.front() == '(') {
    const size_t close = rest.find(')');
    return close == std::string_view::npos ? std::string_view() : rest.substr(0, close + 1);
  }
  return trim(rest.substr(0, rest.find_first_of(",}")));
}

}  // namespace

Result<Tensor> read_npy(const std::string& path) {
  // A regular file only (a directory, /dev/zero or a FIFO is refused by name), whose size is read
  // once: the header and the data are checked against it before anything is allocated.
  BATON_ASSIGN_OR_RETURN(RegularFile file, RegularFile::open(path, "input"));
  const uint64_t file_size = file.size();
  uint8_t prefix[12] = {};
  BATON_CHECK_OR_RETURN(file_size >= 10, InvalidArgument,
                        "'{}' is not a .npy file: it is {} bytes, shorter than any .npy header",
                        path, file_size);
  BATON_TRY(file.read_at(0, std::span<uint8_t>(prefix, file_size >= 12 ? 12 : 10)));
  BATON_CHECK_OR_RETURN(std::memcmp(prefix, kMagic, 6) == 0, InvalidArgument,
                        "'{}' is not a .npy file (no \\x93NUMPY magic)", path);
  const int major = prefix[6];
  uint64_t header_len = 0;
  uint64_t header_start = 0;
  if (major == 1) {
    header_len = prefix[8] | static_cast<uint64_t>(prefix[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    BATON_CHECK_OR_RETURN(file_size >= 12, InvalidArgument, "'{}' is truncated", path);
    uint32_t len = 0;
    std::memcpy(&len, prefix + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return BATON_ERROR(NotSupported, "'{}' is .npy format version {}, not 1, 2 or 3", path, major);
  }
  BATON_CHECK_OR_RETURN(header_len <= file_size - header_start, InvalidArgument,
                        "'{}' is truncated inside its header: the header says {} bytes but the "
                        "file has {} after the {}-byte prefix",
                        path, header_len, file_size - header_start, header_start);
  std::vector<char> header_bytes(static_cast<size_t>(header_len));
  BATON_TRY(file.read_at(
      header_start,
      std::span<uint8_t>(reinterpret_cast<uint8_t*>(header_bytes.data()), header_bytes.size())));
  const std::string_view header(header_bytes.data(), header_bytes.size());

  std::string_view descr = dict_entry(header, "descr");
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"')) {
    descr = descr.substr(1, descr.size() - 2);
  }
  if (descr == "=f4" || descr == "f4") descr = "<f4";
  const NpyType* type = nullptr;
  for (const NpyType& t : kTypes) {
    if (t.descr == descr) type = &t;
  }
  BATON_CHECK_OR_RETURN(type != nullptr, NotSupported,
                        "'{}' holds dtype '{}'; supported: float32, float16, float64, int64, "
                        "int32, int16, int8, uint8, bool (little-endian)",
                        path, descr);
  // Only C order is read; anything but a plain False (True, 1, a missing or repeated key) would
  // be read as C order by mistake, transposing the data silently.
  bool repeated = false;
  const std::string_view fortran = dict_entry(header, "fortran_order", &repeated);
  BATON_CHECK_OR_RETURN(
      fortran != "True", NotSupported,
      "'{}' is in Fortran order ('fortran_order': True), which Baton does not read; save it with "
      "np.save(path, np.ascontiguousarray(a))",
      path);
  BATON_CHECK_OR_RETURN(fortran == "False" && !repeated, InvalidArgument,
                        "'{}' has {} 'fortran_order' in its header ({}); a .npy header says "
                        "'fortran_order': False (C order) or True",
                        path,
                        repeated          ? "a repeated"
                        : fortran.empty() ? "no"
                                          : "an unreadable",
                        header);
  std::string_view shape_text = dict_entry(header, "shape");
  BATON_CHECK_OR_RETURN(!shape_text.empty() && shape_text.front() == '(', InvalidArgument,
                        "'{}' has no shape in its header: {}", path, header);
  std::vector<int64_t> sizes;
  std::string_view rest = shape_text.substr(1);
  while (true) {
    rest = trim(rest);
    if (rest.empty() || rest.front() == ')') break;
    char* end = nullptr;
    const std::string number(rest.substr(0, rest.find_first_of(",)")));
    const long long v = std::strtoll(number.c_str(), &end, 10);
    BATON_CHECK_OR_RETURN(end != number.c_str() && v >= 0, InvalidArgument,
                          "'{}' has a malformed shape {}", path, shape_text);
    sizes.push_back(v);
    const size_t next = rest.find_first_of(",)");
    if (next == std::string_view::npos || rest[next] == ')') break;
    rest = rest.substr(next + 1);
  }
  const auto nbytes = checked_nbytes(type->dtype, sizes);
  BATON_CHECK_OR_RETURN(nbytes.has_value(), InvalidArgument, "'{}' has an impossible shape {}",
                        path, shape_to_string(sizes));
  const uint64_t data_start = header_start + header_len;
  BATON_CHECK_OR_RETURN(file_size - data_start == *nbytes, InvalidArgument,
                        "'{}' has {} data bytes but {} {} needs {}", path, file_size - data_start,
                        dtype_name(type->dtype), shape_to_string(sizes), *nbytes);
  BATON_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(type->dtype, sizes));
  if (*nbytes) {
    BATON_TRY(
        file.read_at(data_start, std::span<uint8_t>(static_cast<uint8_t*>(t.data()), *nbytes)));
  }
  return t;
}

Status write_npy(const std::string& path, const TensorView& tensor) {
  BATON_CHECK_OR_RETURN(tensor.device.is_cpu(), InvalidArgument,
                        "write_npy('{}'): the tensor is on {}; copy it to the host first", path,
                        tensor.device.to_string());
  std::string_view descr;
  for (const NpyType& t : kTypes) {
    if (t.dtype == tensor.dtype) descr = t.descr;
  }
  BATON_CHECK_OR_RETURN(!descr.empty(), NotSupported, "write_npy('{}'): dtype {} has no .npy type",
                        path, dtype_name(tensor.dtype));
  std::string shape = "(";
  for (size_t i = 0; i < tensor.sizes.size(); ++i) {
    shape += std::to_string(tensor.sizes[i]);
    if (tensor.sizes.size() == 1 || i + 1 < tensor.sizes.size()) shape += ",";
    if (i + 1 < tensor.sizes.size()) shape += " ";
  }
  shape += ")";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // Pad so magic (6) + version (2) + length (2) + header ends on a 64-byte boundary.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out;
  out.insert(out.end(), kMagic, kMagic + 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto* data = static_cast<const uint8_t*>(tensor.data);
  out.insert(out.end(), data, data + tensor.nbytes());
  return write_file_atomically(path, out);
}

}  // namespace baton::extension
