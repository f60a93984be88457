// Helpers for the CPU kernel tests: host tensors that own their bytes, an OpTester that builds an
// OpCall by hand and drives infer_op -> schema.create -> Kernel::run as the loader does, and
// comparisons against double-precision references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "baton/runtime/operator.h"
#include "baton/runtime/value.h"
#include "kernels/cpu/kernels.h"

// Asserts that a Status (or Result) is ok, printing its message otherwise.
#define BATON_ASSERT_OK(expr)                                                   \
  do {                                                                          \
    const ::baton::Status baton_assert_status_ = (expr).status();               \
    ASSERT_TRUE(baton_assert_status_.ok()) << baton_assert_status_.to_string(); \
  } while (0)

namespace baton::testing {

// The kernels under test, registered once into a registry of their own.
inline const runtime::OpRegistry& kernel_registry() {
  static const runtime::OpRegistry* registry = [] {
    auto* r = new runtime::OpRegistry();
    kernels::cpu::register_all(*r);
    return r;
  }();
  return *registry;
}

// A dense host tensor owned by the test. `has_data` false makes a shape-only tensor (data ==
// nullptr, as the compiler passes non-constant inputs to infer).
struct HostTensor {
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::vector<uint64_t> storage;  // 8-byte aligned
  bool has_data = true;

  HostTensor() = default;
  HostTensor(DType dt, std::vector<int64_t> s) : dtype(dt), sizes(std::move(s)) {
    storage.assign((nbytes() + 7) / 8 + 1, 0);
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(storage.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(storage.data());
  }
  template <typename T>
  std::vector<T> values() const {
    return std::vector<T>(data<T>(), data<T>() + numel());
  }
  TensorView view() {
    return TensorView{has_data ? static_cast<void*>(storage.data()) : nullptr, dtype, sizes,
                      Device::cpu()};
  }
};

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  if constexpr (std::is_same_v<T, double>) return DType::Float64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
  if constexpr (std::is_same_v<T, int8_t>) return DType::Int8;
  if constexpr (std::is_same_v<T, uint16_t>) return DType::Float16;  // raw 2-byte words
}

template <typename T>
HostTensor make_tensor(std::vector<int64_t> sizes, const std::vector<T>& values) {
  HostTensor t(dtype_of<T>(), std::move(sizes));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  if (!values.empty()) std::memcpy(t.data<T>(), values.data(), values.size() * sizeof(T));
  return t;
}

// A 1-D int64 tensor (Reshape's shape, Squeeze's and Unsqueeze's axes).
inline HostTensor int64s(const std::vector<int64_t>& values) {
  return make_tensor<int64_t>({static_cast<int64_t>(values.size())}, values);
}

inline HostTensor shape_only(DType dtype, std::vector<int64_t> sizes) {
  HostTensor t(dtype, std::move(sizes));
  t.has_data = false;
  return t;
}

// Uniform in [lo, hi); with `min_abs` > 0 the magnitude is at least min_abs (random sign kept).
inline HostTensor random_floats(std::mt19937& rng, std::vector<int64_t> sizes, float lo = -1.0f,
                                float hi = 1.0f, float min_abs = 0.0f) {
  HostTensor t(DType::Float32, std::move(sizes));
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = dist(rng);
    while (std::fabs(v) < min_abs) v = dist(rng);
    p[i] = v;
  }
  return t;
}

// Uniform integers in [lo, hi], skipping 0 when `nonzero`.
template <typename T>
HostTensor random_ints(std::mt19937& rng, std::vector<int64_t> sizes, int64_t lo, int64_t hi,
                       bool nonzero = false) {
  HostTensor t(dtype_of<T>(), std::move(sizes));
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = dist(rng);
    while (nonzero && v == 0) v = dist(rng);
    p[i] = static_cast<T>(v);
  }
  return t;
}

// Random bytes of any dtype (for the data-movement ops, which copy bits).
inline HostTensor random_bytes(std::mt19937& rng, DType dtype, std::vector<int64_t> sizes) {
  HostTensor t(dtype, std::move(sizes));
  auto* p = reinterpret_cast<uint8_t*>(t.storage.data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng() & 0xff);
  return t;
}

inline std::vector<double> to_double(const HostTensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::Float32:
        out[i] = t.data<float>()[i];
        break;
      case DType::Int32:
        out[i] = static_cast<double>(t.data<int32_t>()[i]);
        break;
      case DType::Int64:
        out[i] = static_cast<double>(t.data<int64_t>()[i]);
        break;
      default:
        ADD_FAILURE() << "to_double: unexpected dtype";
        return out;
    }
  }
  return out;
}

// ---- Index arithmetic for references -----------------------------------------------------------

inline std::vector<int64_t> unravel(int64_t flat, std::span<const int64_t> sizes) {
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = sizes[d] == 0 ? 0 : flat % sizes[d];
    flat = sizes[d] == 0 ? 0 : flat / sizes[d];
  }
  return index;
}

// Flat offset in a tensor of `sizes` that the output index `out_index` reads under numpy
// broadcasting (dimensions aligned right, size-1 dimensions repeated).
inline int64_t broadcast_offset(std::span<const int64_t> out_index,
                                std::span<const int64_t> sizes) {
  const size_t lead = out_index.size() - sizes.size();
  int64_t offset = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t i = sizes[d] == 1 ? 0 : out_index[lead + d];
    offset = offset * sizes[d] + i;
  }
  return offset;
}

inline int64_t numel_of(std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// ---- Driving one op ----------------------------------------------------------------------------

class OpTester {
 public:
  explicit OpTester(std::string_view op, std::string_view node_name = "node_1")
      : schema_(kernel_registry().find(op)), node_name_(node_name) {
    if (schema_ == nullptr) {
      ADD_FAILURE() << "op " << op << " is not registered";
      return;
    }
    for (const runtime::AttrSpec& spec : schema_->attrs) {
      runtime::Value v;
      if (!spec.required) {
        switch (spec.kind) {
          case runtime::ValueKind::Int:
            v = runtime::Value::from_int(spec.default_int);
            break;
          case runtime::ValueKind::Float:
            v = runtime::Value::from_float(spec.default_float);
            break;
          case runtime::ValueKind::String:
            v = runtime::Value::from_string(spec.default_string);
            break;
          case runtime::ValueKind::IntList:
            if (!spec.default_none) v = runtime::Value::from_ints({});
            break;
          case runtime::ValueKind::FloatList:
            if (!spec.default_none) v = runtime::Value::from_floats({});
            break;
          default:
            break;
        }
      }
      attrs_.push_back(v);
    }
  }

  const runtime::OpSchema& schema() const { return *schema_; }

  OpTester& input(HostTensor t) {
    tensors_.push_back(std::move(t));
    inputs_.push_back(runtime::Value::from_tensor(tensors_.back().view()));
    return *this;
  }
  OpTester& absent_input() {
    inputs_.push_back(runtime::Value::none());
    return *this;
  }
  HostTensor& input_tensor(size_t i) { return tensors_[tensor_index(i)]; }

  OpTester& attr(std::string_view name, int64_t v) {
    return set(name, runtime::Value::from_int(v));
  }
  OpTester& attr(std::string_view name, int v) { return attr(name, static_cast<int64_t>(v)); }
  OpTester& attr(std::string_view name, double v) {
    return set(name, runtime::Value::from_float(v));
  }
  OpTester& attr(std::string_view name, std::string v) {
    strings_.push_back(std::move(v));
    return set(name, runtime::Value::from_string(strings_.back()));
  }
  OpTester& attr(std::string_view name, std::vector<int64_t> v) {
    lists_.push_back(std::move(v));
    return set(name, runtime::Value::from_ints(lists_.back()));
  }
  OpTester& attr_none(std::string_view name) { return set(name, runtime::Value::none()); }

  // infer_op on the call as built so far; fills metas().
  Status infer() {
    build_call();
    metas_.assign(static_cast<size_t>(schema_->num_outputs), runtime::TensorMeta{});
    return runtime::infer_op(*schema_, call_, metas_);
  }

  // infer, allocate the outputs (filled with a 0x7f pattern so unwritten elements show), create
  // and run once.
  Status run() {
    BATON_TRY(infer());
    outputs_.clear();
    output_values_.clear();
    for (const runtime::TensorMeta& meta : metas_) {
      outputs_.emplace_back(meta.dtype, meta.sizes);
      std::memset(outputs_.back().storage.data(), 0x7f, outputs_.back().storage.size() * 8);
    }
    for (HostTensor& t : outputs_) output_values_.push_back(runtime::Value::from_tensor(t.view()));
    build_call();
    auto kernel = schema_->create(call_);
    if (!kernel.ok()) return std::move(kernel).status();
    kernel_ = std::move(kernel).value();
    return kernel_->run();
  }

  // Run the kernel again (after run()), e.g. after rebinding an input.
  Status rerun() { return kernel_->run(); }
  // Points input i's value at new storage (the kernel must read the pointer at every run).
  void rebind_input(size_t i, HostTensor t) {
    const size_t k = tensor_index(i);
    tensors_[k] = std::move(t);
    inputs_[i].tensor = tensors_[k].view();
  }

  // Points output i's value at new storage (filled with the 0x7f pattern).
  void rebind_output(size_t i) {
    HostTensor fresh(outputs_[i].dtype, outputs_[i].sizes);
    std::memset(fresh.storage.data(), 0x7f, fresh.storage.size() * 8);
    outputs_[i] = std::move(fresh);
    output_values_[i].tensor = outputs_[i].view();
  }
  size_t num_inputs() const { return inputs_.size(); }
  bool input_is_tensor(size_t i) const { return inputs_[i].is_tensor(); }

  const std::vector<runtime::TensorMeta>& metas() const { return metas_; }
  HostTensor& output(size_t i = 0) { return outputs_[i]; }
  runtime::Kernel* kernel() { return kernel_.get(); }

 private:
  OpTester& set(std::string_view name, runtime::Value v) {
    for (size_t i = 0; i < schema_->attrs.size(); ++i) {
      if (schema_->attrs[i].name == name) {
        attrs_[i] = v;
        return *this;
      }
    }
    ADD_FAILURE() << schema_->name << " has no attribute " << name;
    return *this;
  }

  size_t tensor_index(size_t input) const {
    size_t k = 0;
    for (size_t i = 0; i < input; ++i) k += inputs_[i].is_tensor() ? 1 : 0;
    return k;
  }

  void build_call() {
    input_ptrs_.clear();
    attr_ptrs_.clear();
    output_ptrs_.clear();
    for (runtime::Value& v : inputs_) input_ptrs_.push_back(&v);
    for (runtime::Value& v : attrs_) attr_ptrs_.push_back(&v);
    if (output_values_.empty()) {
      // infer only: placeholders so the output count matches.
      output_values_.assign(static_cast<size_t>(schema_->num_outputs), runtime::Value{});
    }
    for (runtime::Value& v : output_values_) output_ptrs_.push_back(&v);
    call_.inputs = input_ptrs_;
    call_.attrs = attr_ptrs_;
    call_.outputs = output_ptrs_;
    call_.node_name = node_name_;
  }

  const runtime::OpSchema* schema_;
  std::string node_name_;
  std::deque<HostTensor> tensors_;
  std::deque<runtime::Value> inputs_;
  std::deque<runtime::Value> attrs_;
  std::deque<std::string> strings_;
  std::deque<std::vector<int64_t>> lists_;
  std::deque<HostTensor> outputs_;
  std::deque<runtime::Value> output_values_;
  std::vector<runtime::Value*> input_ptrs_, attr_ptrs_, output_ptrs_;
  std::vector<runtime::TensorMeta> metas_;
  runtime::OpCall call_;
  std::unique_ptr<runtime::Kernel> kernel_;
};

// ---- Comparisons -------------------------------------------------------------------------------

// Elementwise |out - ref| <= atol + rtol * |ref| (NaN must match NaN).
inline void expect_close(const HostTensor& out, const std::vector<double>& ref, double rtol = 1e-5,
                         double atol = 1e-6) {
  ASSERT_EQ(out.dtype, DType::Float32);
  ASSERT_EQ(static_cast<size_t>(out.numel()), ref.size());
  const float* p = out.data<float>();
  int failures = 0;
  for (size_t i = 0; i < ref.size() && failures < 5; ++i) {
    const double a = p[i];
    const bool ok = std::isnan(ref[i]) ? std::isnan(a)
                                       : std::fabs(a - ref[i]) <= atol + rtol * std::fabs(ref[i]);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": got " << a << ", reference " << ref[i];
    }
  }
}

// ‖out − ref‖ / ‖ref‖ (0 when both are 0).
inline double norm_relative_error(const HostTensor& out, const std::vector<double>& ref) {
  const float* p = out.data<float>();
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = p[i] - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  if (norm == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(diff / norm);
}

inline void expect_norm_close(const HostTensor& out, const std::vector<double>& ref,
                              double bound = 1e-5) {
  ASSERT_EQ(static_cast<size_t>(out.numel()), ref.size());
  EXPECT_LE(norm_relative_error(out, ref), bound);
}

template <typename T>
void expect_equal_values(const HostTensor& out, const std::vector<T>& ref) {
  ASSERT_EQ(static_cast<size_t>(out.numel()), ref.size());
  const T* p = out.data<T>();
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(p[i], ref[i]) << "element " << i;
  }
}

// The error path: code, the op and node named in the message, and an expected fragment.
inline void expect_error(const Status& status, Error code, std::string_view op,
                         std::string_view fragment = {}) {
  EXPECT_EQ(status.code(), code) << status.to_string();
  EXPECT_NE(status.message().find(std::string(op) + " (node 'node_1')"), std::string::npos)
      << status.message();
  if (!fragment.empty()) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << status.message();
  }
}

inline std::string shape_str(std::span<const int64_t> sizes) { return shape_to_string(sizes); }

}  // namespace baton::testing
