#include "compiler/onnx_tensor.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <optional>
#include <utility>

#include "baton/core/check.h"
#include "baton/core/file.h"

namespace baton::compiler {
namespace {

// Copies a typed repeated field (already checked to hold `numel` elements) into `out`.
template <typename Field>
void copy_field(const Field& field, DType dtype, int64_t numel, std::vector<uint8_t>& out) {
  const size_t es = dtype_size(dtype);
  for (int64_t i = 0; i < numel; ++i) {
    const auto v = field.Get(static_cast<int>(i));
    uint8_t* dst = out.data() + i * es;
    switch (dtype) {
      case DType::Float32: {
        const float x = static_cast<float>(v);
        std::memcpy(dst, &x, 4);
        break;
      }
      case DType::Float64: {
        const double x = static_cast<double>(v);
        std::memcpy(dst, &x, 8);
        break;
      }
      case DType::Int64: {
        const int64_t x = static_cast<int64_t>(v);
        std::memcpy(dst, &x, 8);
        break;
      }
      case DType::Int32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(dst, &x, 4);
        break;
      }
      case DType::Int16:
      case DType::Float16:
      case DType::BFloat16: {
        const uint16_t x = static_cast<uint16_t>(v);
        std::memcpy(dst, &x, 2);
        break;
      }
      case DType::Int8:
      case DType::UInt8:
      case DType::Bool: {
        const uint8_t x = static_cast<uint8_t>(v);
        *dst = x;
        break;
      }
    }
  }
}

// The typed field an inline tensor of `dtype` keeps its values in, and how many it holds.
std::pair<std::string_view, int64_t> inline_field(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return {"float_data", proto.float_data_size()};
    case DType::Float64:
      return {"double_data", proto.double_data_size()};
    case DType::Int64:
      return {"int64_data", proto.int64_data_size()};
    default:
      return {"int32_data", proto.int32_data_size()};
  }
}

Result<uint64_t> parse_number(const std::string& text, const std::string& key,
                              const std::string& what) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  BATON_CHECK_OR_RETURN(
      ec == std::errc() && end == text.data() + text.size() && !text.empty(), InvalidArgument,
      "{}: external data '{}' is '{}', not a non-negative integer byte count", what, key, text);
  return value;
}

// Whether `path` is `dir` or lies below it (both absolute and canonical).
bool lies_within(const std::filesystem::path& path, const std::filesystem::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // the trailing "" of "dir/"
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

// Reads `nbytes` of external data, after checking the location stays inside the model's folder
// (with symlinks followed: a link inside the folder to a file outside it is refused too), that
// it is a regular file, and that it holds the bytes (so a damaged model cannot make Baton
// allocate what it lacks).
Result<std::shared_ptr<std::vector<uint8_t>>> read_external(const onnx::TensorProto& proto,
                                                            const std::filesystem::path& base_dir,
                                                            uint64_t nbytes,
                                                            const std::string& what) {
  namespace fs = std::filesystem;
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") {
      BATON_ASSIGN_OR_RETURN(offset, parse_number(kv.value(), "offset", what));
    }
    if (kv.key() == "length") {
      BATON_ASSIGN_OR_RETURN(length, parse_number(kv.value(), "length", what));
    }
  }
  BATON_CHECK_OR_RETURN(!location.empty(), InvalidArgument,
                        "{}: external data without a 'location' entry", what);
  const fs::path relative(location);
  const bool escapes =
      relative.is_absolute() || std::any_of(relative.begin(), relative.end(),
                                            [](const fs::path& part) { return part == ".."; });
  BATON_CHECK_OR_RETURN(!escapes, InvalidArgument,
                        "{}: external data location '{}' leaves the model's folder; ONNX requires "
                        "a relative path below it (move the data file next to the model)",
                        what, location);
  BATON_CHECK_OR_RETURN(!length || *length == nbytes, InvalidArgument,
                        "{}: external data length {} differs from the {} bytes its dims need", what,
                        *length, nbytes);
  const fs::path folder = base_dir.empty() ? fs::path(".") : base_dir;
  const fs::path path = folder / relative;
  // The text of the location stays inside; where it leads, with every symlink followed, must too.
  std::error_code ec;
  const fs::path real_folder = fs::canonical(folder, ec);
  BATON_CHECK_OR_RETURN(!ec, IoError, "{}: cannot resolve the model's folder '{}': {}", what,
                        folder.string(), ec.message());
  const fs::path real_path = fs::canonical(path, ec);
  BATON_CHECK_OR_RETURN(!ec, IoError,
                        "{}: cannot open external data file '{}' (keep it next to the model): {}",
                        what, path.string(), ec.message());
  BATON_CHECK_OR_RETURN(lies_within(real_path, real_folder), InvalidArgument,
                        "{}: external data location '{}' resolves (through a symbolic link) to "
                        "'{}', outside the model's folder '{}'; copy the data file into the folder "
                        "instead of linking it",
                        what, location, real_path.string(), real_folder.string());
  // Opened by its resolved path: the bytes read are those of the file checked above.
  BATON_ASSIGN_OR_RETURN(const RegularFile file,
                         RegularFile::open(real_path.string(), what + ": external data file"));
  uint64_t end = 0;
  BATON_CHECK_OR_RETURN(!__builtin_add_overflow(offset, nbytes, &end) && end <= file.size(),
                        InvalidArgument,
                        "{}: external data file '{}' has {} bytes, fewer than offset {} + {} bytes",
                        what, path.string(), file.size(), offset, nbytes);
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, allocate_bytes(nbytes, what));
  BATON_TRY(file.read_at(offset, bytes));
  return std::make_shared<std::vector<uint8_t>>(std::move(bytes));
}

}  // namespace

std::string onnx_elem_type_name(int code) {
  // onnx.proto's TensorProto.DataType, in order (ONNX 1.19).
  static constexpr const char* kNames[] = {
      "UNDEFINED",      "FLOAT",    "UINT8",        "INT8",           "UINT16",
      "INT16",          "INT32",    "INT64",        "STRING",         "BOOL",
      "FLOAT16",        "DOUBLE",   "UINT32",       "UINT64",         "COMPLEX64",
      "COMPLEX128",     "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",    "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return "an element type this Baton does not know";
}

Result<OnnxTensor> read_onnx_tensor(const onnx::TensorProto& proto,
                                    const std::filesystem::path& base_dir,
                                    const std::string& what) {
  OnnxTensor t;
  t.name = proto.name();
  BATON_CHECK_OR_RETURN(is_valid_dtype(proto.data_type()), NotSupported,
                        "{} has ONNX element type {} ({}), which Baton does not support", what,
                        proto.data_type(), onnx_elem_type_name(proto.data_type()));
  t.dtype = static_cast<DType>(proto.data_type());
  t.sizes.assign(proto.dims().begin(), proto.dims().end());
  BATON_CHECK_OR_RETURN(proto.segment().begin() == 0 && proto.segment().end() == 0, NotSupported,
                        "{} is a segmented tensor, which Baton does not support", what);
  const auto numel = checked_numel(t.sizes);
  const auto nbytes = checked_nbytes(t.dtype, t.sizes);
  BATON_CHECK_OR_RETURN(numel && nbytes, InvalidArgument,
                        "{} has invalid dims {}: a negative size, or the product of its nonzero "
                        "dims (or its size in bytes) overflows 64 bits",
                        what, shape_to_string(t.sizes));
  BATON_CHECK_OR_RETURN(t.sizes.size() <= static_cast<size_t>(kMaxRank), NotSupported,
                        "{} has rank {} (dims {}); Baton supports rank <= {}", what, t.sizes.size(),
                        shape_to_string(t.sizes), kMaxRank);
  // Every path checks the data is really there before allocating what the dims claim.
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    BATON_ASSIGN_OR_RETURN(t.data, read_external(proto, base_dir, *nbytes, what));
    return t;
  }
  if (proto.has_raw_data()) {
    BATON_CHECK_OR_RETURN(proto.raw_data().size() == *nbytes, InvalidArgument,
                          "{}: raw_data has {} bytes but {} {} needs {}", what,
                          proto.raw_data().size(), dtype_name(t.dtype), shape_to_string(t.sizes),
                          *nbytes);
    BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, allocate_bytes(*nbytes, what));
    if (*nbytes != 0) std::memcpy(bytes.data(), proto.raw_data().data(), *nbytes);
    t.data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    return t;
  }
  const auto [field, count] = inline_field(proto, t.dtype);
  BATON_CHECK_OR_RETURN(count == *numel, InvalidArgument,
                        "{}: {} holds {} elements but the dims {} say {}", what, field, count,
                        shape_to_string(t.sizes), *numel);
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, allocate_bytes(*nbytes, what));
  switch (t.dtype) {
    case DType::Float32:
      copy_field(proto.float_data(), t.dtype, *numel, bytes);
      break;
    case DType::Float64:
      copy_field(proto.double_data(), t.dtype, *numel, bytes);
      break;
    case DType::Int64:
      copy_field(proto.int64_data(), t.dtype, *numel, bytes);
      break;
    default:
      copy_field(proto.int32_data(), t.dtype, *numel, bytes);
      break;
  }
  t.data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return t;
}

Result<OnnxTensor> load_onnx_tensor_file(const std::string& path) {
  BATON_ASSIGN_OR_RETURN(
      const std::vector<uint8_t> bytes,
      read_regular_file(path, INT_MAX - 1, "tensor file",
                        "serialized TensorProtos are limited to 2 GiB by protobuf"));
  onnx::TensorProto proto;
  BATON_CHECK_OR_RETURN(proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
                        InvalidArgument, "'{}' is not a serialized ONNX TensorProto", path);
  return read_onnx_tensor(proto, std::filesystem::path(path).parent_path(),
                          fmt::format("tensor file '{}'", path));
}

}  // namespace baton::compiler
