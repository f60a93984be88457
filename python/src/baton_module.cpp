// The `baton._baton` extension module (nanobind): compile, load, run and inspect Baton programs
// from Python, with tensors passed through DLPack. python/baton/__init__.py is the public face;
// docs/python.md documents the API.
//
// Tensors: an input is anything nanobind's ndarray takes (every object with __dlpack__: NumPy,
// PyTorch CPU and CUDA tensors, CuPy). It is bound as it is (Method::bind_input: no copy) when it
// is C-contiguous; the CUDA delegate then reads device memory on its GPU in place and stages host
// memory itself (or refuses it in strict mode), as from C++. Outputs are allocated on the device
// the program puts them on (or are the caller's buffers) and come back as NumPy arrays (host) or
// DLPack-capable ndarrays (device) that own Baton's allocation: no copy either way.
//
// Threads: the GIL is released while the program executes; calls on one Module are serialized by
// its own mutex (a Method runs one call at a time). Errors raise baton.BatonError with Baton's
// message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/compiler/request.h"
#include "baton/core/check.h"
#include "baton/core/log.h"
#include "baton/extension/generate.h"
#include "baton/extension/inspect.h"
#include "baton/extension/module.h"
#include "baton/extension/triton_repo.h"
#include "baton/runtime/device_allocator.h"
#ifdef BATON_PYTHON_WITH_CUDA
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "baton/cuda/green_context.h"
#include "baton/cuda/stream_guard.h"
#endif

namespace nb = nanobind;

namespace baton::python {
namespace {

// What a Baton error becomes: baton.BatonError (a RuntimeError) with Baton's message.
struct BatonFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(const Status& status) {
  if (!status.ok()) throw BatonFailure(status.to_string());
}
template <typename T>
T value_or_raise(Result<T> result) {
  if (!result.ok()) throw BatonFailure(result.status().to_string());
  return std::move(result).value();
}

// ---- log messages go to Python's `logging` (logger "baton") -------------------------------------
void log_to_python(LogLevel level, std::string_view component, std::string_view message, void*) {
  if (!Py_IsInitialized()) return;
  nb::gil_scoped_acquire gil;
  try {
    static const int kPythonLevel[] = {10, 20, 30, 40, 50};  // DEBUG INFO WARNING ERROR CRITICAL
    nb::object logger = nb::module_::import_("logging").attr("getLogger")("baton");
    logger.attr("log")(kPythonLevel[static_cast<int>(level)], "%s: %s",
                       nb::str(component.data(), component.size()),
                       nb::str(message.data(), message.size()));
  } catch (...) {
    // A message Python cannot take (the interpreter is shutting down) is dropped.
    PyErr_Clear();
  }
}

// ---- dtypes and devices between DLPack and Baton ------------------------------------------------
// Every Baton dtype and its DLPack (type code, bits); one table read both ways.
struct DTypePair {
  DType baton;
  nb::dlpack::dtype_code code;
  uint8_t bits;
};
constexpr DTypePair kDTypes[] = {
    {DType::Float32, nb::dlpack::dtype_code::Float, 32},
    {DType::Float16, nb::dlpack::dtype_code::Float, 16},
    {DType::Float64, nb::dlpack::dtype_code::Float, 64},
    {DType::BFloat16, nb::dlpack::dtype_code::Bfloat, 16},
    {DType::Int64, nb::dlpack::dtype_code::Int, 64},
    {DType::Int32, nb::dlpack::dtype_code::Int, 32},
    {DType::Int16, nb::dlpack::dtype_code::Int, 16},
    {DType::Int8, nb::dlpack::dtype_code::Int, 8},
    {DType::UInt8, nb::dlpack::dtype_code::UInt, 8},
    {DType::Bool, nb::dlpack::dtype_code::Bool, 8},
};

std::optional<DType> dtype_of(nb::dlpack::dtype t) {
  for (const DTypePair& p : kDTypes) {
    if (t.lanes == 1 && t.code == static_cast<uint8_t>(p.code) && t.bits == p.bits) return p.baton;
  }
  return std::nullopt;
}

nb::dlpack::dtype dlpack_dtype(DType d) {
  for (const DTypePair& p : kDTypes) {
    if (p.baton == d) return nb::dlpack::dtype{static_cast<uint8_t>(p.code), p.bits, 1};
  }
  return nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 32, 1};
}

// A str or os.PathLike argument as a path.
std::string fspath(nb::handle path) {
  return nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(path));
}

// DLPack's device of a tensor as Baton's: CPU (and CUDA pinned host memory) is the host, CUDA
// (and managed) memory is that GPU. Other devices are refused.
Device device_of(const nb::ndarray<>& a, const std::string& what) {
  switch (a.device_type()) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:
      return Device::cpu();
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      return Device::cuda(static_cast<int16_t>(a.device_id()));
    default:
      throw BatonFailure(fmt::format(
          "{} lives on DLPack device type {}, which Baton does not run on (CPU and CUDA only)",
          what, a.device_type()));
  }
}

// A borrowed view of a DLPack tensor; `sizes` backs the view's span.
TensorView view_of(const nb::ndarray<>& a, std::vector<int64_t>& sizes, const std::string& what) {
  const std::optional<DType> dtype = dtype_of(a.dtype());
  if (!dtype) {
    throw BatonFailure(
        fmt::format("{} has a DLPack dtype (code {}, {} bits, {} lanes) Baton has "
                    "no type for",
                    what, a.dtype().code, a.dtype().bits, a.dtype().lanes));
  }
  sizes.assign(a.ndim(), 0);
  int64_t expected = 1;
  bool contiguous = true;
  for (size_t i = a.ndim(); i-- > 0;) {
    sizes[i] = static_cast<int64_t>(a.shape(i));
    if (sizes[i] != 1 && a.stride(i) != expected) contiguous = false;
    expected *= sizes[i];
  }
  if (!contiguous) {
    throw BatonFailure(
        fmt::format("{} is not C-contiguous (a transposed or sliced view): Baton binds memory as "
                    "it is, without "
                    "copying; pass a contiguous copy (numpy.ascontiguousarray(x), x.contiguous())",
                    what));
  }
  return TensorView{a.data(), *dtype, sizes, device_of(a, what)};
}

// A Baton tensor in device memory, owned from Python: it speaks the DLPack protocol
// (__dlpack__ / __dlpack_device__), so torch.from_dlpack, cupy.from_dlpack and others take it
// without a copy, as often as they like (each __dlpack__ hands out a new capsule that keeps this
// object, and so the memory, alive).
// rows(start, stop) makes a view of some leading rows: it holds the array it was taken from (its
// base), so the memory outlives every view and capsule (how Triton's model.py hands each request
// its part of a batch's output without a copy).
struct DeviceArray {
  Tensor tensor;  // the memory, for an array a call returned
  // For a view: where its elements start inside base's memory, and its sizes.
  void* part_data = nullptr;
  std::vector<int64_t> part_sizes;
  nb::object base;

  TensorView view() const {
    if (!base.is_valid()) return tensor.view();
    const TensorView whole = nb::cast<DeviceArray&>(base).view();
    return TensorView{part_data, whole.dtype, part_sizes, whole.device};
  }
};

nb::object dlpack_capsule(nb::handle self) {
  const TensorView t = nb::cast<DeviceArray&>(self).view();
  std::vector<size_t> shape(t.sizes.begin(), t.sizes.end());
  return nb::cast(nb::ndarray<>(t.data, shape.size(), shape.data(), self, nullptr,
                                dlpack_dtype(t.dtype), nb::device::cuda::value, t.device.index));
}

DeviceArray device_rows(nb::handle self, int64_t start, int64_t stop) {
  const TensorView t = nb::cast<DeviceArray&>(self).view();
  if (t.sizes.empty()) throw nb::value_error("rows() needs an array of at least one dimension");
  const int64_t n = t.sizes[0];
  if (start < 0 || stop < start || stop > n) {
    throw nb::index_error(
        fmt::format("rows({}, {}) of an array of {} rows: need 0 <= start <= stop <= {}", start,
                    stop, n, n)
            .c_str());
  }
  const auto row = static_cast<int64_t>(n == 0 ? 0 : t.nbytes() / static_cast<size_t>(n));
  DeviceArray v;
  v.part_data = static_cast<uint8_t*>(t.data) + start * row;
  v.part_sizes.assign(t.sizes.begin(), t.sizes.end());
  v.part_sizes[0] = stop - start;
  v.base = nb::borrow(self);
  return v;
}

// A Baton tensor as a Python object owning it: a NumPy array for host memory, a DeviceArray for
// device memory.
nb::object to_python(Tensor tensor) {
  if (!tensor.device().is_cpu()) return nb::cast(DeviceArray{std::move(tensor)});
  auto* owned = new Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(owned->sizes().begin(), owned->sizes().end());
  return nb::cast(nb::ndarray<nb::numpy>(owned->data(), shape.size(), shape.data(), owner, nullptr,
                                         dlpack_dtype(owned->dtype()), nb::device::cpu::value, 0));
}

// The CUDA stream a `stream=` argument names: an int (a cudaStream_t's value), an object with
// `cuda_stream` (torch.cuda.Stream) or `__cuda_stream__` (the CUDA stream protocol: CuPy, CUDA
// Python), or `ptr`/`handle` attributes holding one.
uintptr_t stream_handle(nb::handle stream) {
  if (nb::isinstance<nb::int_>(stream)) return nb::cast<uintptr_t>(stream);
  if (nb::hasattr(stream, "cuda_stream")) return nb::cast<uintptr_t>(stream.attr("cuda_stream"));
  if (nb::hasattr(stream, "__cuda_stream__")) {
    nb::object pair = stream.attr("__cuda_stream__")();
    return nb::cast<uintptr_t>(pair[1]);
  }
  throw BatonFailure(
      "stream= takes an int (a cudaStream_t), a torch.cuda.Stream, or an object with "
      "__cuda_stream__ (CuPy, CUDA Python)");
}

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;  // a dynamic tensor's largest
  std::string device;
  // Per dimension: "" when static, else its expression over the program's symbols ("batch").
  std::vector<std::string> dims;
  std::string repr() const {
    return fmt::format("TensorSpec(name='{}', dtype='{}', shape={}, device='{}')", name, dtype,
                       shape_to_string(shape), device);
  }
};

TensorSpec spec_of(const runtime::TensorInfo& info, const std::vector<runtime::Method::Dim>& dims) {
  TensorSpec s{std::string(info.name),
               std::string(dtype_name(info.dtype)),
               std::vector<int64_t>(info.sizes.begin(), info.sizes.end()),
               info.device.to_string(),
               {}};
  for (const runtime::Method::Dim& d : dims) s.dims.push_back(d.expr);
  return s;
}

// ---- Module
// --------------------------------------------------------------------------------------
// A shape given by its symbols, {"batch": 1, "sequence": 16}, as Method::prepare_shape takes it.
std::vector<runtime::SymbolSize> symbol_sizes(const std::map<std::string, int64_t>& sizes) {
  std::vector<runtime::SymbolSize> out;
  for (const auto& [name, size] : sizes) out.push_back(runtime::SymbolSize{name, size});
  return out;
}

class PyModule {
 public:
  explicit PyModule(extension::Module module) : module_(std::move(module)) {
    runtime::Method& m = module_.method();
    for (size_t i = 0; i < m.num_inputs(); ++i) {
      inputs_.push_back(spec_of(m.input_info(i), m.input_dims(i)));
    }
    for (size_t i = 0; i < m.num_outputs(); ++i) {
      outputs_.push_back(spec_of(m.output_info(i), m.output_dims(i)));
    }
    dynamic_ = m.num_symbols() > 0;
  }

  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }

  // Method::prepare_shape, serialized with the calls.
  void prepare_shape(const std::map<std::string, int64_t>& sizes) {
    const std::vector<runtime::SymbolSize> parts = symbol_sizes(sizes);
    Status st;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      st = module_.method().prepare_shape(parts);
    }
    check(st);
  }

  // State (docs/state.md): each kept tensor's name and the output that updates it.
  std::vector<std::pair<std::string, std::string>> state() {
    std::lock_guard<std::mutex> lock(mutex_);
    const runtime::Method& m = module_.method();
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < m.num_states(); ++i) {
      out.emplace_back(std::string(m.state_info(i).name), std::string(m.state_update_name(i)));
    }
    return out;
  }

  // Method::reset_state, serialized with the calls.
  void reset_state() {
    Status st;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      st = module_.method().reset_state();
    }
    check(st);
  }

  // extension::generate (docs/generate.md), serialized with the calls: the new tokens, the time to
  // the first token and each later token's, in milliseconds.
  nb::dict generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, int64_t eos,
                    bool reset, int64_t start_position, float temperature, float top_p,
                    uint64_t seed) {
    extension::GenerateOptions options;
    options.prompt = prompt;
    options.max_new_tokens = max_new_tokens;
    options.eos_token = eos;
    options.reset = reset;
    options.start_position = start_position;
    options.temperature = temperature;
    options.top_p = top_p;
    options.seed = seed;
    Result<extension::GenerateResult> r = Status();
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      r = extension::generate(module_.method(), options);
    }
    check(r.status());
    nb::dict out;
    out["tokens"] = r->tokens;
    out["first_token_ms"] = r->first_token_ms;
    out["token_ms"] = r->token_ms;
    out["prefill_calls"] = r->prefill_calls;
    return out;
  }

  // Inputs in order (`positional`) or by name (`named`), never both; `out` optional buffers.
  std::vector<nb::object> run(const std::vector<nb::ndarray<>>& positional,
                              const std::map<std::string, nb::ndarray<>>& named,
                              const std::optional<std::vector<nb::ndarray<>>>& out,
                              nb::handle stream) {
    const std::vector<nb::ndarray<>> inputs = order_inputs(positional, named);
    std::vector<std::vector<int64_t>> input_sizes(inputs.size());
    std::vector<TensorView> input_views;
    for (size_t i = 0; i < inputs.size(); ++i) {
      input_views.push_back(
          view_of(inputs[i], input_sizes[i], fmt::format("input {} '{}'", i, inputs_[i].name)));
    }
    if (dynamic_ && out) {
      // (Method::bind_output takes memory for a dynamic output's largest sizes, but the arrays
      // returned would not have the call's shapes.)
      throw BatonFailure(
          "out= with a dynamic program is not supported: its outputs' shapes are known only once "
          "it ran; call it without out= and it returns arrays of the call's shapes");
    }
    if (dynamic_) return run_dynamic(input_views, stream);
    // Outputs: the caller's buffers, or new tensors on the devices the program puts them on.
    std::vector<nb::object> results;
    std::vector<std::vector<int64_t>> output_sizes(outputs_.size());
    std::vector<TensorView> output_views;
    if (out) {
      if (out->size() != outputs_.size()) {
        throw BatonFailure(fmt::format("out= has {} buffers; the program has {} outputs",
                                       out->size(), outputs_.size()));
      }
      for (size_t i = 0; i < out->size(); ++i) {
        output_views.push_back(
            view_of((*out)[i], output_sizes[i],
                    fmt::format("out[{}] for output '{}'", i, outputs_[i].name)));
        results.push_back(nb::cast((*out)[i]));
      }
    } else {
      runtime::Method& m = module_.method();
      for (size_t i = 0; i < outputs_.size(); ++i) {
        const runtime::TensorInfo info = m.output_info(i);
        Tensor t = value_or_raise(runtime::allocate_tensor(
            info.dtype, std::vector<int64_t>(info.sizes.begin(), info.sizes.end()), info.device));
        output_views.push_back(t.view());
        results.push_back(to_python(std::move(t)));
      }
    }
    last_input_pointers_.clear();
    for (const TensorView& v : input_views) {
      last_input_pointers_.push_back(reinterpret_cast<uintptr_t>(v.data));
    }
    const bool has_stream = stream.is_valid() && !stream.is_none();
    const uintptr_t handle = has_stream ? stream_handle(stream) : 0;
    Status status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      status = execute(input_views, output_views, has_stream, handle);
    }
    check(status);
    return results;
  }

  // A dynamic program's outputs have the call's shapes, known once it ran: the method computes
  // into its own memory and the results are copied out into new arrays. With stream=, the call and
  // the copies of device outputs are enqueued on that stream (host outputs are copied
  // synchronously; allocating the new arrays may wait for the device, as cudaMalloc can); the
  // caller synchronizes the stream before reading.
  std::vector<nb::object> run_dynamic(const std::vector<TensorView>& input_views,
                                      nb::handle stream) {
    const bool has_stream = stream.is_valid() && !stream.is_none();
    const uintptr_t handle = has_stream ? stream_handle(stream) : 0;
    last_input_pointers_.clear();
    for (const TensorView& v : input_views) {
      last_input_pointers_.push_back(reinterpret_cast<uintptr_t>(v.data));
    }
    std::vector<Tensor> outputs;
    Status status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      status = under_stream(has_stream, handle, [&]() -> Status {
        runtime::Method& m = module_.method();
        for (size_t i = 0; i < input_views.size(); ++i) BATON_TRY(m.bind_input(i, input_views[i]));
        BATON_TRY(m.execute());
        for (size_t i = 0; i < m.num_outputs(); ++i) {
          const TensorView o = m.output(i);
          BATON_ASSIGN_OR_RETURN(
              Tensor t,
              runtime::allocate_tensor(
                  o.dtype, std::vector<int64_t>(o.sizes.begin(), o.sizes.end()), o.device));
          BATON_TRY(runtime::copy_tensor(t.view(), o));
          outputs.push_back(std::move(t));
        }
        return Status();
      });
    }
    check(status);
    std::vector<nb::object> results;
    for (Tensor& t : outputs) results.push_back(to_python(std::move(t)));
    return results;
  }

  // The addresses the last run bound as its inputs (tests compare them with the callers' arrays).
  const std::vector<uintptr_t>& last_input_pointers() const { return last_input_pointers_; }

  // The runtime's copy counters and each delegate's monitoring counters (zero-copy and staged
  // calls, staged bytes), e.g. {"copies.host_to_device": 0, "delegate0.staged_calls": 0}.
  std::map<std::string, uint64_t> counters() {
    std::lock_guard<std::mutex> lock(mutex_);
    runtime::Method& m = module_.method();
    const runtime::Method::CopyCounts c = m.copy_counts();
    std::map<std::string, uint64_t> out = {{"copies.host_to_device", c.host_to_device},
                                           {"copies.device_to_host", c.device_to_host},
                                           {"copies.device_to_device", c.device_to_device},
                                           {"copies.bytes", c.bytes}};
    for (size_t d = 0; d < m.num_delegates(); ++d) {
      for (const auto& [name, value] : m.delegate_counters(d)) {
        out[fmt::format("delegate{}.{}", d, name)] = value;
      }
    }
    return out;
  }

 private:
  std::vector<nb::ndarray<>> order_inputs(const std::vector<nb::ndarray<>>& positional,
                                          const std::map<std::string, nb::ndarray<>>& named) const {
    if (!positional.empty() && !named.empty()) {
      throw BatonFailure("pass the inputs either in order or by name, not both");
    }
    if (named.empty()) {
      if (positional.size() != inputs_.size()) {
        throw BatonFailure(fmt::format("the program takes {} inputs ({}); {} were given",
                                       inputs_.size(), names(inputs_), positional.size()));
      }
      return positional;
    }
    std::vector<nb::ndarray<>> ordered;
    for (const TensorSpec& s : inputs_) {
      auto it = named.find(s.name);
      if (it == named.end()) {
        throw BatonFailure(
            fmt::format("input '{}' is missing; the program takes {}", s.name, names(inputs_)));
      }
      ordered.push_back(it->second);
    }
    for (const auto& [name, value] : named) {
      bool known = false;
      for (const TensorSpec& s : inputs_) known = known || s.name == name;
      if (!known) {
        throw BatonFailure(
            fmt::format("the program has no input '{}'; its inputs are {}", name, names(inputs_)));
      }
    }
    return ordered;
  }

  static std::string names(const std::vector<TensorSpec>& specs) {
    std::string out;
    for (const TensorSpec& s : specs) out += fmt::format("{}'{}'", out.empty() ? "" : ", ", s.name);
    return out;
  }

  Status execute(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                 bool has_stream, uintptr_t handle) {
    return under_stream(has_stream, handle, [&] { return module_.run(inputs, outputs); });
  }

  // `work` with the caller's CUDA stream (a cudaStream_t's value) as the calling thread's current
  // stream when there is one, as a StreamGuard makes it.
  template <typename Work>
  static Status under_stream(bool has_stream, uintptr_t handle, Work&& work) {
    if (!has_stream) return work();
#ifdef BATON_PYTHON_WITH_CUDA
    cuda::StreamGuard guard(reinterpret_cast<cudaStream_t>(handle));
    return work();
#else
    (void)handle;
    return BATON_ERROR(NotSupported,
                       "stream= needs Baton's CUDA backend; this baton package was built without "
                       "CUDA");
#endif
  }

  extension::Module module_;
  std::vector<TensorSpec> inputs_, outputs_;
  bool dynamic_ = false;
  std::vector<uintptr_t> last_input_pointers_;
  std::mutex mutex_;
};

// ---- compile ------------------------------------------------------------------------------------
nb::object compile(nb::handle model, std::optional<std::string> output, const std::string& device,
                   std::optional<std::string> precision, std::optional<std::string> arch,
                   const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& io,
                   bool strict_staging, bool optimize,
                   const std::vector<std::string>& disable_passes,
                   std::optional<std::string> target_device, size_t max_partition_nodes,
                   bool expose_intermediates,
                   const std::vector<std::pair<std::string, std::string>>& cuda_options,
                   uint64_t max_fold_bytes, uint64_t max_total_fold_bytes, double max_fold_work,
                   uint64_t max_arena_bytes,
                   const std::map<std::string, std::vector<int64_t>>& dims,
                   const std::map<std::string, std::string>& same_dims, const std::string& fallback,
                   const std::vector<std::string>& state, const std::string& sample) {
  // The CLI's compile flags, checked by the same function (baton/compiler/request.h).
  compiler::CompileRequest r;
  r.spelling = compiler::CompileRequest::Spelling::Python;
  r.device = device;
  r.precision = precision.value_or("");
  r.arch = arch.value_or("");
  r.io = io;
  r.target_device = target_device.value_or("");
  r.max_partition_nodes = max_partition_nodes;
  r.strict_staging = strict_staging;
  r.optimize = optimize;
  r.disabled_passes = disable_passes;
  r.expose_intermediates = expose_intermediates;
  r.fallback = fallback;
  r.state = state;
  r.sample = sample;
  r.max_fold_bytes = max_fold_bytes;
  r.max_total_fold_bytes = max_total_fold_bytes;
  r.max_fold_work = max_fold_work;
  r.max_arena_bytes = max_arena_bytes;
  for (const auto& [name, sizes] : shapes) r.input_shapes.push_back({name, sizes});
  for (const auto& [name, range] : dims) {
    // (MIN, MAX) or (MIN, MAX, OPT), as --dim NAME=MIN..MAX[@OPT] takes them.
    if (range.size() != 2 && range.size() != 3) {
      throw BatonFailure(fmt::format(
          "dims=: '{}' needs (MIN, MAX) or (MIN, MAX, OPT), got {} numbers", name, range.size()));
    }
    const std::string text = fmt::format("{}={}..{}{}", name, range[0], range[1],
                                         range.size() == 3 ? fmt::format("@{}", range[2]) : "");
    Result<compiler::DimRange> d = compiler::parse_dim_range(text);
    if (!d.ok()) throw BatonFailure(fmt::format("dims=: {}", d.status().message()));
    r.dims.push_back(*d);
  }
  // dims={"s6": "s33"}: the same dimension as another (--dim s6=s33).
  for (const auto& [name, other] : same_dims) {
    Result<compiler::DimRange> d = compiler::parse_dim_range(name + "=" + other);
    if (!d.ok()) throw BatonFailure(fmt::format("dims=: {}", d.status().message()));
    r.dims.push_back(*d);
  }
  for (const auto& [key, value] : cuda_options) r.cuda_options.push_back(key + "=" + value);
  compiler::CompileSetup setup = value_or_raise(compiler::make_compile_setup(r));
  const compiler::CompileOptions& options = setup.options;

  if (output) check(compiler::check_output_path(*output));  // before any time is spent
  // A path (str or os.PathLike), or an onnx.ModelProto (serialized here).
  std::optional<std::string> path;
  nb::bytes serialized;
  if (nb::isinstance<nb::str>(model) || nb::hasattr(model, "__fspath__")) {
    path = fspath(model);
  } else if (nb::hasattr(model, "SerializeToString")) {
    serialized = nb::cast<nb::bytes>(model.attr("SerializeToString")());
  } else {
    throw BatonFailure("model= takes a path to an .onnx file or an onnx.ModelProto");
  }
  Result<compiler::CompiledProgram> program = Status();
  {
    nb::gil_scoped_release release;
    if (path) {
      program = compiler::compile_file(*path, options);
    } else {
      const auto* data = reinterpret_cast<const uint8_t*>(serialized.c_str());
      program = compiler::compile_bytes(std::span<const uint8_t>(data, serialized.size()), options);
    }
  }
  compiler::CompiledProgram compiled = value_or_raise(std::move(program));
  if (output) {
    check(compiled.write(*output));
    return nb::str(output->c_str());
  }
  const std::vector<uint8_t> bytes = value_or_raise(compiled.serialize());
  return nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

PyModule* load(nb::handle program, const std::string& method, unsigned threads,
               bool verify_checksums,
               const std::vector<std::pair<std::string, std::string>>& backend_options,
               const std::vector<std::map<std::string, int64_t>>& prepare_shapes,
               const std::string& device_map) {
  runtime::MethodOptions method_options;
  method_options.threads = threads;
  method_options.device_map = value_or_raise(runtime::parse_device_map(device_map));
  for (const auto& [key, value] : backend_options)
    method_options.backend_options.push_back({key, value});
  for (const auto& shape : prepare_shapes) {
    method_options.prepare_shapes.push_back(symbol_sizes(shape));
  }
  runtime::LoadOptions load_options;
  load_options.verify_checksums = verify_checksums;
  std::shared_ptr<const runtime::Program> loaded;
  if (nb::isinstance<nb::bytes>(program)) {
    nb::bytes b = nb::borrow<nb::bytes>(program);
    const auto* data = reinterpret_cast<const uint8_t*>(b.c_str());
    loaded = value_or_raise(
        runtime::Program::load_bytes(std::span<const uint8_t>(data, b.size()), load_options));
  } else {
    const std::string path = fspath(program);
    loaded = value_or_raise(runtime::Program::load_file(path, load_options));
  }
  return new PyModule(
      value_or_raise(extension::Module::from_program(std::move(loaded), method, method_options)));
}

nb::dict triton_repo(nb::handle program, nb::handle out_dir, const std::string& name,
                     int64_t max_batch, const std::vector<int64_t>& preferred,
                     int64_t queue_delay_us, int instances, const std::vector<int64_t>& gpus,
                     const std::vector<std::string>& python_path, unsigned threads,
                     bool overwrite) {
  extension::TritonRepoOptions o;
  o.name = name;
  o.max_batch = max_batch;
  o.preferred_batch_sizes = preferred;
  o.queue_delay_us = queue_delay_us;
  o.instances = instances;
  o.gpus = gpus;
  o.python_path = python_path;
  o.threads = threads;
  o.overwrite = overwrite;
  const extension::TritonRepoResult r =
      value_or_raise(extension::write_triton_repo(fspath(program), fspath(out_dir), o));
  nb::dict d;
  d["model_dir"] = r.model_dir;
  d["max_batch_size"] = r.max_batch_size;
  d["batch_symbol"] = r.batch_symbol;
  d["files"] = r.files;
  return d;
}

nb::object inspect(nb::handle program) {
  const std::string path = fspath(program);
  const std::string json = value_or_raise(extension::describe_program_json(path));
  return nb::module_::import_("json").attr("loads")(nb::str(json.c_str(), json.size()));
}

}  // namespace
}  // namespace baton::python

NB_MODULE(_baton, m) {
  using namespace baton::python;
  m.doc() = "Baton's extension module; use the `baton` package (python/baton/__init__.py)";
  baton::register_builtins();
#ifdef BATON_PYTHON_WITH_CUDA
  baton::cuda::register_backend();
  baton::cuda::register_compiler();
#endif
  baton::set_log_callback(&log_to_python, nullptr);
  // No messages into a finalizing interpreter.
  nb::module_::import_("atexit").attr("register")(
      nb::cpp_function([] { baton::set_log_callback(nullptr, nullptr); }));

  static nb::exception<BatonFailure> error(m, "BatonError", PyExc_RuntimeError);
  (void)error;

  nb::class_<TensorSpec>(m, "TensorSpec")
      .def_ro("name", &TensorSpec::name)
      .def_ro("dtype", &TensorSpec::dtype, "numpy's spelling: 'float32', 'int64', ...")
      .def_ro("shape", &TensorSpec::shape, "the sizes; a dynamic tensor's largest")
      .def_ro("device", &TensorSpec::device, "'cpu' or 'cuda:N'")
      .def_prop_ro(
          "dims",
          [](const TensorSpec& s) {
            nb::list out;
            for (size_t d = 0; d < s.dims.size(); ++d) {
              if (s.dims[d].empty()) {
                out.append(s.shape[d]);
              } else {
                out.append(s.dims[d]);
              }
            }
            return out;
          },
          "per dimension: its size, or for a dynamic one its expression ('batch')")
      .def("__repr__", &TensorSpec::repr);

  nb::class_<DeviceArray>(m, "DeviceArray",
                          "An output in GPU memory; torch.from_dlpack(x) and cupy.from_dlpack(x) "
                          "take it without a copy")
      .def("__dlpack__", [](nb::handle self, nb::kwargs) { return dlpack_capsule(self); })
      .def("__dlpack_device__",
           [](const DeviceArray& a) {
             return nb::make_tuple(static_cast<int>(nb::device::cuda::value),
                                   static_cast<int>(a.view().device.index));
           })
      .def_prop_ro("shape",
                   [](const DeviceArray& a) {
                     const baton::TensorView v = a.view();
                     return std::vector<int64_t>(v.sizes.begin(), v.sizes.end());
                   })
      .def_prop_ro(
          "dtype",
          [](const DeviceArray& a) { return std::string(baton::dtype_name(a.view().dtype)); })
      .def_prop_ro("device", [](const DeviceArray& a) { return a.view().device.to_string(); })
      .def_prop_ro("data_ptr",
                   [](const DeviceArray& a) { return reinterpret_cast<uintptr_t>(a.view().data); })
      .def("rows", &device_rows, nb::arg("start"), nb::arg("stop"),
           "Rows start..stop-1 of the leading dimension, as a DeviceArray sharing this one's "
           "memory (no copy; it keeps this array alive)")
      .def("__repr__", [](const DeviceArray& a) -> std::string {
        const baton::TensorView v = a.view();
        return fmt::format("baton.DeviceArray(shape={}, dtype='{}', device='{}')",
                           baton::shape_to_string(v.sizes), baton::dtype_name(v.dtype),
                           v.device.to_string());
      });

  nb::class_<PyModule>(m, "Module")
      .def_prop_ro("inputs", &PyModule::inputs)
      .def_prop_ro("outputs", &PyModule::outputs)
      .def("counters", &PyModule::counters)
      .def("prepare_shape", &PyModule::prepare_shape, nb::arg("sizes"))
      .def_prop_ro("state", &PyModule::state)
      .def("reset_state", &PyModule::reset_state)
      .def("generate", &PyModule::generate)
      .def_prop_ro("_last_input_pointers", &PyModule::last_input_pointers)
      .def("_run", &PyModule::run, nb::arg("positional"), nb::arg("named"), nb::arg("out").none(),
           nb::arg("stream").none());

  m.def("compile", &compile, nb::arg("model"), nb::arg("output").none() = nb::none(),
        nb::arg("device") = "cpu", nb::arg("precision").none() = nb::none(),
        nb::arg("arch").none() = nb::none(),
        nb::arg("shapes") = std::map<std::string, std::vector<int64_t>>(), nb::arg("io") = "host",
        nb::arg("strict_staging") = false, nb::arg("optimize") = true,
        nb::arg("disable_passes") = std::vector<std::string>(),
        nb::arg("target_device").none() = nb::none(), nb::arg("max_partition_nodes") = 0,
        nb::arg("expose_intermediates") = false,
        nb::arg("cuda_options") = std::vector<std::pair<std::string, std::string>>(),
        nb::arg("max_fold_bytes") = baton::compiler::CompileOptions{}.max_fold_bytes,
        nb::arg("max_total_fold_bytes") = baton::compiler::CompileOptions{}.max_total_fold_bytes,
        nb::arg("max_fold_work") = baton::compiler::CompileOptions{}.max_fold_work,
        nb::arg("max_arena_bytes") = baton::compiler::CompileOptions{}.max_arena_bytes,
        nb::arg("dims") = std::map<std::string, std::vector<int64_t>>(),
        nb::arg("same_dims") = std::map<std::string, std::string>(), nb::arg("fallback") = "warn",
        nb::arg("state") = std::vector<std::string>(), nb::arg("sample") = "");
  m.def("load", &load, nb::arg("program"), nb::arg("method") = "forward", nb::arg("threads") = 0u,
        nb::arg("verify_checksums") = true,
        nb::arg("load_options") = std::vector<std::pair<std::string, std::string>>(),
        nb::arg("prepare_shapes") = std::vector<std::map<std::string, int64_t>>(),
        nb::arg("device_map") = "", nb::rv_policy::take_ownership);
  m.def("inspect", &inspect, nb::arg("program"));
  m.def("triton_repo", &triton_repo, nb::arg("program"), nb::arg("out_dir"), nb::arg("name"),
        nb::arg("max_batch"), nb::arg("preferred"), nb::arg("queue_delay_us"), nb::arg("instances"),
        nb::arg("gpus"), nb::arg("python_path"), nb::arg("threads"), nb::arg("overwrite"));
  m.def("has_cuda", [] {
#ifdef BATON_PYTHON_WITH_CUDA
    return true;
#else
    return false;
#endif
  });

#ifdef BATON_PYTHON_WITH_CUDA
  nb::class_<baton::cuda::GreenContext>(m, "_GreenContext")
      .def_prop_ro("stream",
                   [](const baton::cuda::GreenContext& g) {
                     return reinterpret_cast<uintptr_t>(g.stream());
                   })
      .def_prop_ro("sms", &baton::cuda::GreenContext::sm_count);
  m.def(
      "_green_context",
      [](int sms, int device) {
        return new baton::cuda::GreenContext(
            value_or_raise(baton::cuda::GreenContext::create(device, sms)));
      },
      nb::arg("sms"), nb::arg("device") = 0, nb::rv_policy::take_ownership);
#endif
}
