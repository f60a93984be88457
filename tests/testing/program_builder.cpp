#include "testing/program_builder.h"

#include <cstring>
#include <stdexcept>

namespace baton::testing {
namespace {

uint64_t nbytes(DType dtype, const std::vector<int64_t>& sizes) {
  uint64_t n = dtype_size(dtype);
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

}  // namespace

ProgramBuilder::ProgramBuilder() {
  auto m = std::make_unique<fb::MethodT>();
  m->name = "forward";
  program_.methods.push_back(std::move(m));
  program_.producer = "ProgramBuilder";
}

int ProgramBuilder::add(fb::ValueKindUnion value) {
  auto v = std::make_unique<fb::ValueT>();
  v->value = std::move(value);
  method().values.push_back(std::move(v));
  return static_cast<int>(method().values.size()) - 1;
}

int ProgramBuilder::arena_for(Device device) {
  auto& arenas = method().arenas;
  for (size_t i = 0; i < arenas.size(); ++i) {
    if (static_cast<int>(arenas[i]->device_type) == static_cast<int>(device.type) &&
        arenas[i]->device_index == device.index) {
      return static_cast<int>(i);
    }
  }
  auto a = std::make_unique<fb::ArenaT>();
  a->device_type = static_cast<fb::DeviceType>(device.type);
  a->device_index = device.index;
  arenas.push_back(std::move(a));
  return static_cast<int>(arenas.size()) - 1;
}

int ProgramBuilder::tensor(const std::string& name, DType dtype, std::vector<int64_t> sizes,
                           Device device) {
  const int index = unplanned_tensor(name, dtype, sizes, device);
  fb::TensorT& t = tensor_at(index);
  const int arena = arena_for(device);
  fb::ArenaT& a = *method().arenas[arena];
  t.allocation = fb::AllocationKind::Arena;
  t.arena = arena;
  t.offset = a.size;
  a.size += (nbytes(dtype, sizes) + 63) / 64 * 64;
  return index;
}

int ProgramBuilder::unplanned_tensor(const std::string& name, DType dtype,
                                     std::vector<int64_t> sizes, Device device) {
  fb::TensorT t;
  t.name = name;
  t.dtype = static_cast<fb::ScalarType>(dtype);
  for (size_t d = 0; d < sizes.size(); ++d) t.dim_order.push_back(static_cast<uint8_t>(d));
  t.sizes = std::move(sizes);
  t.device_type = static_cast<fb::DeviceType>(device.type);
  t.device_index = device.index;
  fb::ValueKindUnion u;
  u.Set(std::move(t));
  return add(std::move(u));
}

int ProgramBuilder::constant(const std::string& name, DType dtype, std::vector<int64_t> sizes,
                             std::vector<uint8_t> bytes) {
  if (bytes.size() != nbytes(dtype, sizes)) throw std::invalid_argument("constant size mismatch");
  const int index = unplanned_tensor(name, dtype, sizes);
  if (constant_segment_ < 0) {
    constant_segment_ = static_cast<int>(segments_.size());
    segments_.emplace_back();
  }
  auto& seg = segments_[constant_segment_];
  seg.resize((seg.size() + 63) / 64 * 64);
  fb::TensorT& t = tensor_at(index);
  t.allocation = fb::AllocationKind::Constant;
  t.constant_segment = constant_segment_;
  t.offset = seg.size();
  seg.insert(seg.end(), bytes.begin(), bytes.end());
  return index;
}

int ProgramBuilder::constant_floats(const std::string& name, std::vector<int64_t> sizes,
                                    const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return constant(name, DType::Float32, std::move(sizes), std::move(bytes));
}

int ProgramBuilder::constant_int64s(const std::string& name, std::vector<int64_t> sizes,
                                    const std::vector<int64_t>& values) {
  std::vector<uint8_t> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return constant(name, DType::Int64, std::move(sizes), std::move(bytes));
}

int ProgramBuilder::int_value(int64_t v) {
  fb::ValueKindUnion u;
  fb::IntT x;
  x.value = v;
  u.Set(std::move(x));
  return add(std::move(u));
}

int ProgramBuilder::float_value(double v) {
  fb::ValueKindUnion u;
  fb::FloatT x;
  x.value = v;
  u.Set(std::move(x));
  return add(std::move(u));
}

int ProgramBuilder::string_value(const std::string& v) {
  fb::ValueKindUnion u;
  fb::StringT x;
  x.value = v;
  u.Set(std::move(x));
  return add(std::move(u));
}

int ProgramBuilder::ints_value(std::vector<int64_t> v) {
  fb::ValueKindUnion u;
  fb::IntListT x;
  x.items = std::move(v);
  u.Set(std::move(x));
  return add(std::move(u));
}

int ProgramBuilder::null_value() {
  fb::ValueKindUnion u;
  u.Set(fb::NullT());
  return add(std::move(u));
}

int ProgramBuilder::op(const std::string& name, int opset) {
  auto o = std::make_unique<fb::OperatorT>();
  o->name = name;
  o->opset = opset;
  method().operators.push_back(std::move(o));
  return static_cast<int>(method().operators.size()) - 1;
}

void ProgramBuilder::kernel(int op, std::vector<int> inputs, std::vector<int> attrs,
                            std::vector<int> outputs, const std::string& node) {
  fb::KernelCallT k;
  k.operator_ = op;
  k.inputs = std::move(inputs);
  k.attributes = std::move(attrs);
  k.outputs = std::move(outputs);
  k.name = node;
  auto ins = std::make_unique<fb::InstructionT>();
  ins->instruction.Set(std::move(k));
  method().instructions.push_back(std::move(ins));
}

int ProgramBuilder::delegate(const std::string& backend,
                             std::vector<std::pair<std::string, std::string>> specs,
                             std::vector<uint8_t> blob, const std::string& name, Device device) {
  auto d = std::make_unique<fb::DelegateT>();
  d->backend = backend;
  d->name = name;
  d->device_type = static_cast<fb::DeviceType>(device.type);
  d->device_index = device.index;
  for (auto& [k, v] : specs) {
    auto cs = std::make_unique<fb::CompileSpecT>();
    cs->key = k;
    cs->value.assign(v.begin(), v.end());
    d->compile_specs.push_back(std::move(cs));
  }
  d->blob_segment = static_cast<int>(segments_.size());
  segments_.push_back(std::move(blob));
  method().delegates.push_back(std::move(d));
  return static_cast<int>(method().delegates.size()) - 1;
}

void ProgramBuilder::delegate_call(int delegate, std::vector<int> inputs,
                                   std::vector<int> outputs) {
  fb::DelegateCallT c;
  c.delegate = delegate;
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  auto ins = std::make_unique<fb::InstructionT>();
  ins->instruction.Set(std::move(c));
  method().instructions.push_back(std::move(ins));
}

void ProgramBuilder::copy(int src, int dst) {
  fb::DeviceCopyT c;
  c.src = src;
  c.dst = dst;
  auto ins = std::make_unique<fb::InstructionT>();
  ins->instruction.Set(std::move(c));
  method().instructions.push_back(std::move(ins));
}

std::vector<uint8_t> ProgramBuilder::bytes() const {
  std::vector<std::span<const uint8_t>> spans;
  for (const auto& s : segments_) spans.emplace_back(s);
  auto out = format::serialize_program(program_, spans);
  if (!out.ok()) throw std::runtime_error(out.status().to_string());
  return std::move(out).value();
}

}  // namespace baton::testing
