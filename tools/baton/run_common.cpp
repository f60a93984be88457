#include "run_common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "baton/core/check.h"
#include "baton/core/text.h"
#include "baton/extension/inspect.h"
#include "baton/extension/npy.h"
#include "baton/runtime/device_allocator.h"

namespace baton::tool {
namespace {

Result<Tensor> random_input(const runtime::TensorInfo& info, std::mt19937& rng) {
  BATON_ASSIGN_OR_RETURN(Tensor t,
                         Tensor::empty(info.dtype, {info.sizes.begin(), info.sizes.end()}));
  const int64_t n = t.numel();
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> integer(0, 9);
  for (int64_t i = 0; i < n; ++i) {
    switch (info.dtype) {
      case DType::Float32:
        t.data_as<float>()[i] = real(rng);
        break;
      case DType::Float64:
        t.data_as<double>()[i] = real(rng);
        break;
      case DType::Float16:
        t.data_as<uint16_t>()[i] = float_to_half(real(rng));
        break;
      case DType::BFloat16:
        t.data_as<uint16_t>()[i] = float_to_bfloat16(real(rng));
        break;
      case DType::Int64:
        t.data_as<int64_t>()[i] = integer(rng);
        break;
      case DType::Int32:
        t.data_as<int32_t>()[i] = integer(rng);
        break;
      case DType::Int16:
        t.data_as<int16_t>()[i] = static_cast<int16_t>(integer(rng));
        break;
      case DType::Int8:
        t.data_as<int8_t>()[i] = static_cast<int8_t>(integer(rng));
        break;
      case DType::UInt8:
        t.data_as<uint8_t>()[i] = static_cast<uint8_t>(integer(rng));
        break;
      case DType::Bool:
        t.data_as<uint8_t>()[i] = static_cast<uint8_t>(integer(rng) & 1);
        break;
    }
  }
  return t;
}

}  // namespace

Result<std::vector<int64_t>> parse_index_list(std::string_view text, std::string_view flag,
                                              std::string_view what) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    BATON_CHECK_OR_RETURN(
        !item.empty() && ec == std::errc() && end == item.data() + item.size() && v >= 0,
        InvalidArgument, "{}: '{}' is not {} (integers >= 0, comma-separated: {} 0,1,2)", flag,
        item, what, flag);
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

Result<std::vector<runtime::BackendOption>> parse_load_options(
    const std::vector<std::string>& args) {
  std::vector<runtime::BackendOption> out;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    BATON_CHECK_OR_RETURN(eq != std::string::npos && eq > 0, InvalidArgument,
                          "--load-option '{}' is not KEY=VALUE (e.g. cuda_graphs=0)", a);
    out.push_back({a.substr(0, eq), a.substr(eq + 1)});
  }
  return out;
}

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double element_as_double(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::Float32:
      return t.data_as<const float>()[i];
    case DType::Float64:
      return t.data_as<const double>()[i];
    case DType::Float16:
      return half_to_float(t.data_as<const uint16_t>()[i]);
    case DType::BFloat16:
      return bfloat16_to_float(t.data_as<const uint16_t>()[i]);
    case DType::Int64:
      return static_cast<double>(t.data_as<const int64_t>()[i]);
    case DType::Int32:
      return t.data_as<const int32_t>()[i];
    case DType::Int16:
      return t.data_as<const int16_t>()[i];
    case DType::Int8:
      return t.data_as<const int8_t>()[i];
    case DType::UInt8:
      return t.data_as<const uint8_t>()[i];
    case DType::Bool:
      return t.data_as<const uint8_t>()[i];
  }
  return 0.0;
}

TensorStats tensor_stats(const TensorView& t) {
  TensorStats s;
  double lo = INFINITY, hi = -INFINITY, sum = 0.0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double v = element_as_double(t, i);
    if (i < 4) s.first.push_back(v);
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  s.min = lo;
  s.max = hi;
  s.mean = n > s.nan ? sum / static_cast<double>(n - s.nan) : NAN;
  return s;
}

std::string summarize(const TensorView& t) {
  const int64_t n = t.numel();
  if (n == 0) return "empty";
  const TensorStats s = tensor_stats(t);
  std::string head;
  for (size_t i = 0; i < s.first.size(); ++i)
    head += fmt::format("{}{:.6g}", i ? ", " : "", s.first[i]);
  std::string out = fmt::format("min {:.6g}  max {:.6g}  mean {:.6g}  first [{}{}]", s.min, s.max,
                                s.mean, head, n > 4 ? ", ..." : "");
  if (s.nan) out += fmt::format("  ({} NaN)", s.nan);
  return out;
}

Result<std::pair<std::string, std::vector<int64_t>>> parse_shape_flag(const std::string& text,
                                                                      std::string_view flag) {
  const size_t eq = text.rfind('=');
  BATON_CHECK_OR_RETURN(eq != std::string::npos && eq > 0 && eq + 1 < text.size(), InvalidArgument,
                        "{} '{}' must look like NAME=D0xD1x... (e.g. input=8x16)", flag, text);
  std::pair<std::string, std::vector<int64_t>> out;
  out.first = text.substr(0, eq);
  const std::string dims = text.substr(eq + 1);
  size_t start = 0;
  while (start <= dims.size()) {
    const size_t end = std::min(dims.find('x', start), dims.size());
    const std::string part = dims.substr(start, end - start);
    char* stop = nullptr;
    const long long v = std::strtoll(part.c_str(), &stop, 10);
    BATON_CHECK_OR_RETURN(!part.empty() && *stop == '\0' && v >= 0, InvalidArgument,
                          "{} '{}': '{}' is not a non-negative dimension", flag, text, part);
    out.second.push_back(v);
    start = end + 1;
  }
  return out;
}

size_t input_index(const runtime::Method& method, std::string_view name) {
  size_t index = method.num_inputs();
  for (size_t i = 0; i < method.num_inputs(); ++i) {
    if (method.input_info(i).name == name) index = i;
  }
  return index;
}

std::string input_names(const runtime::Method& method) {
  std::string names;
  for (size_t i = 0; i < method.num_inputs(); ++i) {
    names += fmt::format("{}'{}'", i ? ", " : "", printable_text(method.input_info(i).name));
  }
  return names;
}

std::string input_shape_text(const runtime::Method& method, size_t index) {
  const std::vector<runtime::Method::Dim> dims = method.input_dims(index);
  const bool dynamic = std::any_of(dims.begin(), dims.end(),
                                   [](const runtime::Method::Dim& d) { return !d.expr.empty(); });
  if (!dynamic) return shape_to_string(method.input_info(index).sizes);
  std::string out = "[";
  for (size_t a = 0; a < dims.size(); ++a) {
    out += (a == 0 ? "" : ", ") + (dims[a].expr.empty() ? std::to_string(dims[a].max)
                                                        : fmt::format("{} in {}..{}", dims[a].expr,
                                                                      dims[a].min, dims[a].max));
  }
  return out + "]";
}

namespace {

// Whether a tensor of `sizes` can be input `index`: its static dimensions equal, its dynamic
// ones anything (the runtime checks their ranges and agreement when the input is set).
bool fits_input(const runtime::Method& method, size_t index, std::span<const int64_t> sizes) {
  const std::vector<runtime::Method::Dim> dims = method.input_dims(index);
  if (dims.size() != sizes.size()) return false;
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a].expr.empty() && dims[a].max != sizes[a]) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<Tensor>> load_inputs(const std::vector<std::string>& args, unsigned seed,
                                        runtime::Method& method,
                                        const std::vector<std::string>& shapes) {
  const size_t n = method.num_inputs();
  std::vector<Tensor> inputs(n);
  std::vector<std::string> source(n);
  size_t next_positional = 0;
  for (const std::string& arg : args) {
    size_t index = n;
    std::string file = arg;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      const std::string name = arg.substr(0, eq);
      index = input_index(method, name);
      if (index < n) {
        file = arg.substr(eq + 1);
      } else if (std::error_code ec; !std::filesystem::exists(arg, ec)) {
        // Not an input name, and not a file whose name happens to contain '='.
        return BATON_ERROR(InvalidArgument,
                           "--input {}: the program has no input named '{}' "
                           "(its inputs: {})",
                           arg, name, input_names(method));
      }
    }
    if (index == n) {
      while (next_positional < n && !source[next_positional].empty()) ++next_positional;
      BATON_CHECK_OR_RETURN(next_positional < n, InvalidArgument,
                            "--input {}: the program takes only {} input(s) and all are given "
                            "already (or '{}' is not an input name)",
                            arg, n, arg.substr(0, arg.find('=')));
      index = next_positional;
    }
    const runtime::TensorInfo info = method.input_info(index);
    BATON_CHECK_OR_RETURN(source[index].empty(), InvalidArgument,
                          "input '{}' is given twice (--input {} and --input {})", info.name,
                          source[index], arg);
    BATON_ASSIGN_OR_RETURN(Tensor t, extension::read_npy(file));
    const bool same = t.dtype() == info.dtype && fits_input(method, index, t.sizes());
    BATON_CHECK_OR_RETURN(same, InvalidArgument,
                          "--input {}: input {} ('{}') expects {} {}, but '{}' holds {} {}", arg,
                          index, info.name, dtype_name(info.dtype), input_shape_text(method, index),
                          file, dtype_name(t.dtype()), shape_to_string(t.sizes()));
    inputs[index] = std::move(t);
    source[index] = arg;
  }
  // --shape: the sizes of random inputs.
  std::vector<std::optional<std::vector<int64_t>>> random_sizes(n);
  for (const std::string& s : shapes) {
    BATON_ASSIGN_OR_RETURN(auto shape, parse_shape_flag(s, "--shape"));
    const size_t index = input_index(method, shape.first);
    if (index == n) {
      return BATON_ERROR(InvalidArgument,
                         "--shape {}: the program has no input named '{}' (its inputs: {})", s,
                         shape.first, input_names(method));
    }
    BATON_CHECK_OR_RETURN(source[index].empty(), InvalidArgument,
                          "--shape {}: input '{}' is read from '{}'; --shape sets the shape of "
                          "random inputs only",
                          s, shape.first, source[index]);
    BATON_CHECK_OR_RETURN(fits_input(method, index, shape.second), InvalidArgument,
                          "--shape {}: input {} ('{}') has shape {}", s, index, shape.first,
                          input_shape_text(method, index));
    random_sizes[index] = std::move(shape.second);
  }
  std::mt19937 rng(seed);
  std::string missing;
  for (size_t i = 0; i < n; ++i) {
    if (!source[i].empty()) continue;
    runtime::TensorInfo info = method.input_info(i);
    if (!args.empty()) {
      missing += fmt::format("{}'{}' {} {}", missing.empty() ? "" : ", ", info.name,
                             dtype_name(info.dtype), input_shape_text(method, i));
      continue;
    }
    if (random_sizes[i]) info.sizes = *random_sizes[i];
    BATON_ASSIGN_OR_RETURN(inputs[i], random_input(info, rng));
  }
  BATON_CHECK_OR_RETURN(missing.empty(), InvalidArgument,
                        "missing --input for {} (give every input, or none for random inputs)",
                        missing);
  return inputs;
}

std::vector<Device> gpus_needed(const runtime::Program& program,
                                std::span<const runtime::DeviceMapping> device_map) {
  std::vector<Device> out;
  Result<std::string> text = extension::describe_program_json(program);
  if (!text.ok()) return out;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("methods")) return out;
  auto add = [&](const nlohmann::json& v) {
    if (!v.is_string()) return;
    std::optional<Device> d = Device::parse(v.get<std::string>());
    for (const runtime::DeviceMapping& m : device_map) {
      if (d && m.from == *d) {
        d = m.to;
        break;
      }
    }
    if (d && d->is_cuda() && std::find(out.begin(), out.end(), *d) == out.end()) out.push_back(*d);
  };
  for (const auto& m : j["methods"]) {
    if (m.value("name", "") != "forward") continue;
    for (const auto& a : m.value("arenas", nlohmann::json::array()))
      add(a.value("device", nlohmann::json()));
    for (const auto& d : m.value("delegates", nlohmann::json::array()))
      add(d.value("target_device", nlohmann::json()));
  }
  return out;
}

std::string duration_text(double ms) {
  if (ms < 0.1) return fmt::format("{:.1f} us", ms * 1000.0);
  return fmt::format("{:.3f} ms", ms);
}

Result<Tensor> output_to_host(const runtime::Method& method, size_t index) {
  const TensorView out = method.output(index);
  BATON_ASSIGN_OR_RETURN(Tensor host,
                         Tensor::empty(out.dtype, {out.sizes.begin(), out.sizes.end()}));
  BATON_TRY(runtime::copy_tensor(host.view(), out));
  return host;
}

std::string output_file_name(size_t index, std::string_view tensor_name) {
  std::string name;
  for (const char c : model_name(tensor_name)) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    name += keep ? c : '_';
  }
  return name.empty() ? fmt::format("output_{}.npy", index)
                      : fmt::format("output_{}_{}.npy", index, name);
}

}  // namespace baton::tool
