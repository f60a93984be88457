// Helpers for the CPU kernel tests: host tensors that own their bytes, an OpTester that builds a
// call by hand and drives the op's definition (ops::infer) -> kernel create -> Kernel::run as the
// loader does, and comparisons against double-precision references.
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
#include "baton/runtime/value.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"
#include "runtime/kernel.h"
#include "runtime/thread_pool.h"

// Asserts that a Status (or Result) is ok, printing its message otherwise.
#define BATON_ASSERT_OK(expr)                                                   \
  do {                                                                          \
    const ::baton::Status baton_assert_status_ = (expr).status();               \
    ASSERT_TRUE(baton_assert_status_.ok()) << baton_assert_status_.to_string(); \
  } while (0)

namespace baton::testing {

// The kernels under test, registered once into a registry of their own.
inline const runtime::KernelRegistry& kernel_registry() {
  static const runtime::KernelRegistry* registry = [] {
    auto* r = new runtime::KernelRegistry();
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
  if constexpr (std::is_same_v<T, int16_t>) return DType::Int16;
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

// Random bool elements (bytes 0 and 1).
inline HostTensor random_bools(std::mt19937& rng, std::vector<int64_t> sizes) {
  HostTensor t(DType::Bool, std::move(sizes));
  auto* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(rng() & 1);
  return t;
}

// Random bytes of any dtype (for the data-movement ops, which copy bits).
inline HostTensor random_bytes(std::mt19937& rng, DType dtype, std::vector<int64_t> sizes) {
  HostTensor t(dtype, std::move(sizes));
  auto* p = reinterpret_cast<uint8_t*>(t.storage.data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng() & 0xff);
  return t;
}

// A float32 tensor's values in another float type (float16 and bfloat16 rounded to nearest).
inline HostTensor cast_floats(const HostTensor& f32, DType dtype) {
  if (dtype == DType::Float32) return f32;
  HostTensor t(dtype, f32.sizes);
  const float* src = f32.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
      case DType::Float16:
        t.data<uint16_t>()[i] = float_to_half(src[i]);
        break;
      case DType::BFloat16:
        t.data<uint16_t>()[i] = float_to_bfloat16(src[i]);
        break;
      case DType::Float64:
        t.data<double>()[i] = src[i];
        break;
      default:
        ADD_FAILURE() << "cast_floats: not a float type";
        return t;
    }
  }
  return t;
}

inline std::vector<double> to_double(const HostTensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::Float32:
        out[i] = t.data<float>()[i];
        break;
      case DType::Float64:
        out[i] = t.data<double>()[i];
        break;
      case DType::Float16:
        out[i] = half_to_float(t.data<uint16_t>()[i]);
        break;
      case DType::BFloat16:
        out[i] = bfloat16_to_float(t.data<uint16_t>()[i]);
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

// The newest opset Baton imports: OpTester uses the definitions in force there.
inline constexpr int kTestOpset = 21;

class OpTester {
 public:
  // `domain` "baton" for Baton's canonical ops (their opset is 1).
  explicit OpTester(std::string_view op, std::string_view node_name = "node_1",
                    int opset = kTestOpset, std::string_view domain = "")
      : def_(ops::op_registry().find(op, domain, domain.empty() ? opset : 1)),
        kernel_def_(kernel_registry().find(op, domain)),
        node_name_(node_name) {
    if (def_ == nullptr || kernel_def_ == nullptr) {
      ADD_FAILURE() << "op " << op << " has no definition or no kernel";
      return;
    }
    for (const ops::AttrDef& d : def_->attrs) {
      attrs_.push_back(d.presence == ops::AttrDef::Presence::Default
                           ? d.default_value
                           : ops::AttrValue::absent(d.kind));
    }
  }

  const ops::OpDef& def() const { return *def_; }

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

  OpTester& attr(std::string_view name, int64_t v) { return set(name, ops::AttrValue::of_int(v)); }
  OpTester& attr(std::string_view name, int v) { return attr(name, static_cast<int64_t>(v)); }
  OpTester& attr(std::string_view name, double v) { return set(name, ops::AttrValue::of_float(v)); }
  OpTester& attr(std::string_view name, std::string v) {
    return set(name, ops::AttrValue::of_string(std::move(v)));
  }
  OpTester& attr(std::string_view name, std::vector<double> v) {
    return set(name, ops::AttrValue::of_floats(std::move(v)));
  }
  OpTester& attr(std::string_view name, std::vector<int64_t> v) {
    return set(name, ops::AttrValue::of_ints(std::move(v)));
  }
  OpTester& set_attr_value(std::string_view name, ops::AttrValue v) {
    return set(name, std::move(v));
  }
  OpTester& attr_none(std::string_view name) {
    const int i = def_->attr_index(name);
    return set(name, ops::AttrValue::absent(i < 0 ? ops::AttrKind::Int : def_->attrs[i].kind));
  }
  // The thread pool the kernel is created with (default: none, everything on the calling thread).
  OpTester& pool(runtime::ThreadPool* p) {
    pool_ = p;
    return *this;
  }
  // Marks the call dynamic (KernelCall::dynamic): the kernel reserves for every smaller size.
  OpTester& dynamic() {
    dynamic_ = true;
    return *this;
  }
  // Marks input i a constant of the program (KernelCall::constant_inputs): the kernel may prepare
  // a copy of it at create, so a test that changes it afterwards must create the kernel again.
  OpTester& constant_input(size_t i) {
    constant_inputs_ |= uint64_t{1} << i;
    return *this;
  }
  // Sets the number of outputs the call has (default: the definition's minimum).
  OpTester& outputs(size_t n) {
    num_outputs_ = n;
    return *this;
  }

  // The definition's inference on the call as built so far; fills metas() and the canonical
  // attributes the kernel gets.
  Status infer() {
    std::vector<ops::InputInfo> infos;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      ops::InputInfo info;
      info.present = inputs_[i].is_tensor();
      if (info.present) {
        const TensorView& t = inputs_[i].tensor;
        info.dtype = t.dtype;
        info.sizes = t.sizes;
        info.data = t.data;
      }
      infos.push_back(info);
    }
    canonical_ = attrs_;
    metas_.assign(num_outputs_ ? num_outputs_ : def_->min_outputs(), ops::OutputInfo{});
    return ops::infer(*def_, node_name_, infos, canonical_, metas_);
  }

  // infer, allocate the outputs (filled with a 0x7f pattern so unwritten elements show), check
  // the kernel takes the dtypes, create and run once.
  Status run() {
    BATON_TRY(create());
    return kernel_->run();
  }

  // What the loader does before the first run: infer, bind the outputs, create the kernel.
  Status create() {
    BATON_TRY(infer());
    outputs_.clear();
    output_values_.clear();
    std::vector<DType> in_types, out_types;
    for (const runtime::Value& v : inputs_) {
      if (v.is_tensor()) in_types.push_back(v.tensor.dtype);
    }
    for (const ops::OutputInfo& meta : metas_) {
      outputs_.emplace_back(meta.dtype, meta.sizes);
      std::memset(outputs_.back().storage.data(), 0x7f, outputs_.back().storage.size() * 8);
      out_types.push_back(meta.dtype);
    }
    std::string why;
    if (!runtime::kernel_takes(*kernel_def_, *def_, in_types, out_types, &why)) {
      return Status(Error::NotSupported,
                    fmt::format("{} (node '{}'): {}", def_->name, node_name_, why));
    }
    for (HostTensor& t : outputs_) output_values_.push_back(runtime::Value::from_tensor(t.view()));
    attr_values_.clear();
    for (const ops::AttrValue& a : canonical_) attr_values_.push_back(runtime::attr_as_value(a));
    kernel_.reset();
    scratch_ = std::make_unique<runtime::ScratchPlan>();
    build_call();
    scratch_->begin_kernel(std::string(node_name_));
    auto kernel = kernel_def_->create(call_);
    if (!kernel.ok()) return std::move(kernel).status();
    kernel_ = std::move(kernel).value();
    BATON_TRY(scratch_->allocate());
    // Scratch holds whatever the previous kernel left: a pattern here makes a kernel that reads
    // scratch before writing it fail its comparison.
    scratch_->fill(std::byte{0x7f});
    return Status::ok_status();
  }

  // Dynamic shapes (Kernel::resize): rebinds the tensor inputs to `inputs` (in order; sizes at
  // most the ones the kernel was created at), the outputs to fresh storage of the sizes inference
  // gives for them (0x7f pattern), and calls the kernel's resize() unless it follows_sizes(). The
  // call's attributes stay the created ones.
  Status resize(std::vector<HostTensor> inputs) {
    size_t k = 0;
    for (size_t i = 0; i < inputs_.size() && k < inputs.size(); ++i) {
      if (inputs_[i].is_tensor()) rebind_input(i, std::move(inputs[k++]));
    }
    const std::vector<ops::AttrValue> created = canonical_;
    BATON_TRY(infer());
    if (!(canonical_ == created)) {
      return Status(Error::InvalidArgument, "the canonical attributes changed with the sizes");
    }
    for (size_t o = 0; o < metas_.size(); ++o) {
      HostTensor fresh(metas_[o].dtype, metas_[o].sizes);
      std::memset(fresh.storage.data(), 0x7f, fresh.storage.size() * 8);
      outputs_[o] = std::move(fresh);
      output_values_[o].tensor = outputs_[o].view();
    }
    // As the runtime does: a kernel that reads its sizes in run() is not resized per call.
    return kernel_->follows_sizes() ? Status::ok_status() : kernel_->resize();
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
  bool input_is_constant(size_t i) const { return ((constant_inputs_ >> i) & 1) != 0; }

  const std::vector<ops::OutputInfo>& metas() const { return metas_; }
  // The attributes after inference put them in canonical form.
  const std::vector<ops::AttrValue>& canonical_attrs() const { return canonical_; }
  HostTensor& output(size_t i = 0) { return outputs_[i]; }
  runtime::Kernel* kernel() { return kernel_.get(); }

 private:
  OpTester& set(std::string_view name, ops::AttrValue v) {
    const int i = def_->attr_index(name);
    if (i < 0) {
      ADD_FAILURE() << def_->name << " has no attribute " << name;
      return *this;
    }
    attrs_[static_cast<size_t>(i)] = std::move(v);
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
    for (runtime::Value& v : attr_values_) attr_ptrs_.push_back(&v);
    for (runtime::Value& v : output_values_) output_ptrs_.push_back(&v);
    call_.def = def_;
    call_.inputs = input_ptrs_;
    call_.attrs = attr_ptrs_;
    call_.outputs = output_ptrs_;
    call_.node_name = node_name_;
    call_.pool = pool_;
    call_.scratch = scratch_.get();
    call_.dynamic = dynamic_;
    call_.constant_inputs = constant_inputs_;
  }

  const ops::OpDef* def_;
  const runtime::KernelDef* kernel_def_;
  std::string node_name_;
  size_t num_outputs_ = 0;
  std::deque<HostTensor> tensors_;
  std::deque<runtime::Value> inputs_;
  std::vector<ops::AttrValue> attrs_;
  std::vector<ops::AttrValue> canonical_;
  std::deque<runtime::Value> attr_values_;
  std::deque<HostTensor> outputs_;
  std::deque<runtime::Value> output_values_;
  std::vector<runtime::Value*> input_ptrs_, attr_ptrs_, output_ptrs_;
  std::vector<ops::OutputInfo> metas_;
  runtime::KernelCall call_;
  std::unique_ptr<runtime::ScratchPlan> scratch_;  // the kernel's, made by create()
  runtime::ThreadPool* pool_ = nullptr;
  bool dynamic_ = false;
  uint64_t constant_inputs_ = 0;
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

// `op` over `inputs` run alone and again on `pool`: the same output bytes, and some of the work
// ran on the pool's workers (what a kernel that splits over a pool must give).
inline void expect_pool_gives_the_same_bits(const std::string& op,
                                            const std::vector<HostTensor>& inputs,
                                            runtime::ThreadPool& pool) {
  OpTester one(op);
  for (const HostTensor& x : inputs) one.input(x);
  BATON_ASSERT_OK(one.run());
  const uint64_t before = pool.dispatched();
  OpTester many(op);
  many.pool(&pool);
  for (const HostTensor& x : inputs) many.input(x);
  BATON_ASSERT_OK(many.run());
  EXPECT_GT(pool.dispatched(), before) << op << ": nothing ran on the workers";
  ASSERT_EQ(many.output().nbytes(), one.output().nbytes());
  EXPECT_EQ(std::memcmp(many.output().data<uint8_t>(), one.output().data<uint8_t>(),
                        one.output().nbytes()),
            0)
      << op << ": the pool changed the result";
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
