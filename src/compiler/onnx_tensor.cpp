#include "compiler/onnx_tensor.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>

#include "baton/core/check.h"

namespace baton::compiler {
namespace {

template <typename Field>
Status copy_field(const Field& field, DType dtype, int64_t numel, std::vector<uint8_t>& out,
                  const std::string& what, std::string_view field_name) {
  BATON_CHECK_OR_RETURN(static_cast<int64_t>(field.size()) == numel, InvalidArgument,
                        "{}: {} holds {} elements but the dims say {}", what, field_name,
                        field.size(), numel);
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
  return Status();
}

Status read_external(const onnx::TensorProto& proto, const std::filesystem::path& base_dir,
                     uint64_t nbytes, std::vector<uint8_t>& out, const std::string& what) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = std::stoull(kv.value());
    if (kv.key() == "length") length = std::stoll(kv.value());
  }
  BATON_CHECK_OR_RETURN(!location.empty(), InvalidArgument,
                        "{}: external data without a 'location' entry", what);
  BATON_CHECK_OR_RETURN(length < 0 || static_cast<uint64_t>(length) == nbytes, InvalidArgument,
                        "{}: external data length {} differs from the {} bytes its dims need", what,
                        length, nbytes);
  const std::filesystem::path path = base_dir / location;
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK_OR_RETURN(in.good(), IoError,
                        "{}: cannot open external data file '{}' (keep it next to the model)", what,
                        path.string());
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(nbytes));
  BATON_CHECK_OR_RETURN(in.good() || (nbytes == 0), IoError,
                        "{}: external data file '{}' ends before offset {} + {} bytes", what,
                        path.string(), offset, nbytes);
  return Status();
}

}  // namespace

Tensor OnnxTensor::to_tensor() const {
  auto t = Tensor::empty(dtype, sizes);
  if (!t.ok()) return Tensor();
  if (data && !data->empty()) std::memcpy(t->data(), data->data(), data->size());
  return std::move(t).value();
}

Result<OnnxTensor> read_onnx_tensor(const onnx::TensorProto& proto,
                                    const std::filesystem::path& base_dir,
                                    const std::string& what) {
  OnnxTensor t;
  t.name = proto.name();
  BATON_CHECK_OR_RETURN(
      is_valid_dtype(proto.data_type()), NotSupported,
      "{} has ONNX element type {} ({}), which Baton does not support", what, proto.data_type(),
      onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(proto.data_type())));
  t.dtype = static_cast<DType>(proto.data_type());
  t.sizes.assign(proto.dims().begin(), proto.dims().end());
  BATON_CHECK_OR_RETURN(proto.segment().begin() == 0 && proto.segment().end() == 0, NotSupported,
                        "{} is a segmented tensor, which Baton does not support", what);
  const auto numel = checked_numel(t.sizes);
  const auto nbytes = checked_nbytes(t.dtype, t.sizes);
  BATON_CHECK_OR_RETURN(numel && nbytes, InvalidArgument, "{} has invalid dims {}", what,
                        shape_to_string(t.sizes));
  const bool external = proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
  // Check the data is really there before allocating what the dims claim.
  if (!external && proto.has_raw_data()) {
    BATON_CHECK_OR_RETURN(proto.raw_data().size() == *nbytes, InvalidArgument,
                          "{}: raw_data has {} bytes but {} {} needs {}", what,
                          proto.raw_data().size(), dtype_name(t.dtype), shape_to_string(t.sizes),
                          *nbytes);
  }
  BATON_CHECK_OR_RETURN(external || proto.has_raw_data() || *numel <= (int64_t{1} << 31),
                        InvalidArgument, "{}: {} elements cannot be stored inline", what, *numel);
  auto bytes = std::make_shared<std::vector<uint8_t>>(*nbytes);
  if (external) {
    BATON_TRY(read_external(proto, base_dir, *nbytes, *bytes, what));
  } else if (proto.has_raw_data()) {
    std::memcpy(bytes->data(), proto.raw_data().data(), *nbytes);
  } else {
    switch (t.dtype) {
      case DType::Float32:
        BATON_TRY(copy_field(proto.float_data(), t.dtype, *numel, *bytes, what, "float_data"));
        break;
      case DType::Float64:
        BATON_TRY(copy_field(proto.double_data(), t.dtype, *numel, *bytes, what, "double_data"));
        break;
      case DType::Int64:
        BATON_TRY(copy_field(proto.int64_data(), t.dtype, *numel, *bytes, what, "int64_data"));
        break;
      default:
        BATON_TRY(copy_field(proto.int32_data(), t.dtype, *numel, *bytes, what, "int32_data"));
        break;
    }
  }
  t.data = std::move(bytes);
  return t;
}

Result<OnnxTensor> load_onnx_tensor_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK_OR_RETURN(in.good(), IoError, "cannot open '{}'", path);
  onnx::TensorProto proto;
  BATON_CHECK_OR_RETURN(proto.ParseFromIstream(&in), InvalidArgument,
                        "'{}' is not a serialized ONNX TensorProto", path);
  return read_onnx_tensor(proto, std::filesystem::path(path).parent_path(),
                          fmt::format("tensor file '{}'", path));
}

}  // namespace baton::compiler
