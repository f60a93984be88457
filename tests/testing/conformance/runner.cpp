#include "testing/conformance/runner.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "baton/extension/module.h"
#include "ops/op_def.h"
#include "runtime/kernel.h"
#include "testing/onnx_builder.h"

namespace baton::testing {
namespace {

uint64_t seed_of(const Case& c) { return std::hash<std::string>{}(c.op + "/" + c.label); }

bool is_float(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

// The values of input `i`: floats on a 1/32 grid in [lo, hi] (8 significant bits: exact in
// bfloat16, float16, float32 and float64), integers for integer dtypes.
// CaseInput::distinct_over / distinct_axis: indices without repeats, each negative at random.
std::vector<double> distinct_indices(const CaseInput& in, std::mt19937_64& rng) {
  const int64_t n = *checked_numel(in.sizes);
  std::vector<double> out(static_cast<size_t>(n));
  std::bernoulli_distribution negative(0.5);
  if (!in.distinct_over.empty()) {
    // Distinct flat positions in the addressed sizes, decoded into k coordinates each.
    const std::vector<int64_t>& dims = in.distinct_over;
    const auto k = static_cast<int64_t>(dims.size());
    std::vector<int64_t> positions(static_cast<size_t>(*checked_numel(dims)));
    std::iota(positions.begin(), positions.end(), 0);
    std::shuffle(positions.begin(), positions.end(), rng);
    for (int64_t t = 0; t < n / k; ++t) {
      int64_t rest = positions[static_cast<size_t>(t)];
      for (int64_t a = k; a-- > 0;) {
        const int64_t c = rest % dims[a];
        rest /= dims[a];
        out[static_cast<size_t>(t * k + a)] = static_cast<double>(negative(rng) ? c - dims[a] : c);
      }
    }
    return out;
  }
  // Along the axis: each line of `sizes` takes a prefix of a shuffled 0..extent-1.
  const auto axis = static_cast<size_t>(in.distinct_axis);
  int64_t inner = 1;
  for (size_t d = axis + 1; d < in.sizes.size(); ++d) inner *= in.sizes[d];
  const int64_t m = in.sizes[axis];
  std::vector<int64_t> line(static_cast<size_t>(in.distinct_extent));
  for (int64_t start = 0; start < n; ++start) {
    if ((start / inner) % m != 0) continue;  // one line per (outer, inner) position
    std::iota(line.begin(), line.end(), 0);
    std::shuffle(line.begin(), line.end(), rng);
    for (int64_t j = 0; j < m; ++j) {
      const int64_t c = line[static_cast<size_t>(j)];
      out[static_cast<size_t>(start + j * inner)] =
          static_cast<double>(negative(rng) ? c - in.distinct_extent : c);
    }
  }
  return out;
}

std::vector<double> values_of(const Case& c, size_t i, DType t) {
  const CaseInput& in = c.inputs[i];
  const int64_t n = *checked_numel(in.sizes);
  std::mt19937_64 rng(seed_of(c) + 7919 * i);
  std::vector<double> out(static_cast<size_t>(n));
  const bool integer = !is_float(t);
  const double scale = integer ? 1.0 : 32.0;
  double lo = in.lo, hi = in.hi;
  if (t == DType::UInt8) lo = std::max(lo, 0.0);
  const auto klo = static_cast<int64_t>(std::ceil(lo * scale));
  const auto khi = static_cast<int64_t>(std::floor(hi * scale));
  if (!in.distinct_over.empty() || in.distinct_axis >= 0) return distinct_indices(in, rng);
  std::uniform_int_distribution<int64_t> dist(klo, khi);
  for (double& v : out) {
    do {
      v = static_cast<double>(dist(rng)) / scale;
    } while (std::fabs(v) < in.min_abs || (integer && in.min_abs > 0 && v == 0.0));
  }
  return out;
}

void store(void* dst, DType t, int64_t i, double v) {
  switch (t) {
    case DType::Float32:
      static_cast<float*>(dst)[i] = static_cast<float>(v);
      break;
    case DType::Float64:
      static_cast<double*>(dst)[i] = v;
      break;
    case DType::Float16:
      static_cast<uint16_t*>(dst)[i] = float_to_half(static_cast<float>(v));
      break;
    case DType::BFloat16:
      static_cast<uint16_t*>(dst)[i] = float_to_bfloat16(static_cast<float>(v));
      break;
    // Integers through int64, so out-of-range values wrap instead of being undefined.
    case DType::Int8:
      static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      break;
    case DType::Int16:
      static_cast<int16_t*>(dst)[i] = static_cast<int16_t>(static_cast<int64_t>(v));
      break;
    case DType::Int32:
      static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case DType::Int64:
      static_cast<int64_t*>(dst)[i] = static_cast<int64_t>(v);
      break;
    case DType::UInt8:
      static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      break;
    case DType::Bool:
      static_cast<uint8_t*>(dst)[i] = v != 0.0;
      break;
  }
}

double load(const void* src, DType t, int64_t i) {
  switch (t) {
    case DType::Float32:
      return static_cast<const float*>(src)[i];
    case DType::Float64:
      return static_cast<const double*>(src)[i];
    case DType::Float16:
      return half_to_float(static_cast<const uint16_t*>(src)[i]);
    case DType::BFloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(src)[i]);
    case DType::Int8:
      return static_cast<const int8_t*>(src)[i];
    case DType::Int16:
      return static_cast<const int16_t*>(src)[i];
    case DType::Int32:
      return static_cast<const int32_t*>(src)[i];
    case DType::Int64:
      return static_cast<double>(static_cast<const int64_t*>(src)[i]);
    case DType::UInt8:
      return static_cast<const uint8_t*>(src)[i];
    case DType::Bool:
      return static_cast<const uint8_t*>(src)[i];
  }
  return 0.0;
}

Tensor make_tensor(const std::vector<int64_t>& sizes, DType t, const std::vector<double>& v) {
  Tensor tensor = Tensor::empty(t, sizes).value();
  for (size_t i = 0; i < v.size(); ++i) store(tensor.data(), t, static_cast<int64_t>(i), v[i]);
  return tensor;
}

void set_attribute(onnx::NodeProto& n, const std::string& name, const ops::AttrValue& a) {
  auto* attr = n.add_attribute();
  attr->set_name(name);
  switch (a.kind) {
    case ops::AttrKind::Int:
      attr->set_type(onnx::AttributeProto::INT);
      attr->set_i(a.i);
      break;
    case ops::AttrKind::Float:
      attr->set_type(onnx::AttributeProto::FLOAT);
      attr->set_f(static_cast<float>(a.f));
      break;
    case ops::AttrKind::String:
      attr->set_type(onnx::AttributeProto::STRING);
      attr->set_s(a.s);
      break;
    case ops::AttrKind::Ints:
      attr->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) attr->add_ints(v);
      break;
    case ops::AttrKind::Floats:
      attr->set_type(onnx::AttributeProto::FLOATS);
      for (double v : a.floats) attr->add_floats(static_cast<float>(v));
      break;
    case ops::AttrKind::Tensor: {
      attr->set_type(onnx::AttributeProto::TENSOR);
      auto* t = attr->mutable_t();
      t->set_data_type(static_cast<int>(a.tensor.dtype));
      for (int64_t d : a.tensor.sizes) t->add_dims(d);
      if (a.tensor.data) t->set_raw_data(a.tensor.data->data(), a.tensor.data->size());
      break;
    }
  }
}

// The model of `c` with T = t, where `values(i)` gives input i's values.
CaseModel build(const Case& c, DType t,
                const std::function<std::vector<double>(size_t, DType)>& values) {
  OnnxBuilder b(c.opset);
  if (!c.domain.empty()) {
    auto* imp = b.model().add_opset_import();
    imp->set_domain(c.domain);
    imp->set_version(1);
  }
  CaseModel m;
  std::vector<std::string> names;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const CaseInput& in = c.inputs[i];
    const std::string name = fmt::format("in{}", i);
    if (in.absent) {
      names.emplace_back();
      continue;
    }
    names.push_back(name);
    const DType dt = in.dtype.value_or(t);
    if (in.int64s && dt == DType::Int32) {
      std::vector<int32_t> narrow(in.int64s->begin(), in.int64s->end());
      auto* init = b.graph().add_initializer();
      init->set_name(name);
      init->set_data_type(static_cast<int>(dt));
      for (int64_t d : in.sizes) init->add_dims(d);
      init->set_raw_data(narrow.data(), narrow.size() * sizeof(int32_t));
      continue;
    }
    if (in.int64s) {
      b.initializer_int64(name, in.sizes, *in.int64s);
      continue;
    }
    if (in.floats) {
      const DType ft = in.dtype.value_or(DType::Float32);
      const Tensor tensor = make_tensor(in.sizes, ft, *in.floats);
      auto* init = b.graph().add_initializer();
      init->set_name(name);
      init->set_data_type(static_cast<int>(ft));
      for (int64_t d : in.sizes) init->add_dims(d);
      init->set_raw_data(tensor.data(), tensor.nbytes());
      continue;
    }
    const std::vector<double> v = values(i, dt);
    const Tensor tensor = make_tensor(in.sizes, dt, v);
    if (in.constant) {
      auto* init = b.graph().add_initializer();
      init->set_name(name);
      init->set_data_type(static_cast<int>(dt));
      for (int64_t d : in.sizes) init->add_dims(d);
      init->set_raw_data(tensor.data(), tensor.nbytes());
    } else {
      b.input(name, in.sizes, static_cast<int>(dt));
      m.inputs.push_back(tensor);
    }
  }
  std::vector<std::string> outs;
  for (size_t o = 0; o < c.outputs; ++o) outs.push_back(fmt::format("out{}", o));
  auto& n = b.node(c.op, names, outs, "node", c.domain);
  for (const auto& [name, value] : c.attrs) set_attribute(n, name, value);
  for (const std::string& o : outs) b.output(o, {}, static_cast<int>(t));
  const std::vector<uint8_t> bytes = b.bytes();
  m.onnx = bytes;
  return m;
}

}  // namespace

std::vector<DType> case_dtypes(const Case& c) {
  if (!c.dtypes.empty()) return c.dtypes;
  const ops::OpDef* def = ops::op_registry().find(c.op, c.domain, c.domain.empty() ? c.opset : 1);
  const runtime::KernelDef* kernel = runtime::kernel_registry().find(c.op, c.domain);
  std::vector<DType> out;
  if (def == nullptr || kernel == nullptr) return out;
  const ops::TypeConstraint* t = def->constraint(def->input_slot(0).type);
  for (DType d : t->types.list()) {
    // Inputs of T get d; inputs with a fixed dtype keep it.
    std::vector<DType> ins;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (!c.inputs[i].absent) ins.push_back(c.inputs[i].dtype.value_or(d));
    }
    if (runtime::kernel_takes(*kernel, *def, ins, {}, nullptr)) out.push_back(d);
  }
  return out;
}

CaseModel build_case(const Case& c, DType t) {
  return build(c, t, [&](size_t i, DType dt) { return values_of(c, i, dt); });
}

CaseOutcome run_case(const CaseModel& model, compiler::BackendCompiler* backend) {
  CaseOutcome out;
  compiler::CompileOptions options;
  if (backend != nullptr) {
    options.backends.push_back(backend);
  }
  auto compiled = compiler::compile_bytes(model.onnx, options);
  if (!compiled.ok()) {
    out.status = compiled.status();
    return out;
  }
  out.summary = compiled->summary();
  auto bytes = compiled->serialize();
  if (!bytes.ok()) {
    out.status = bytes.status();
    return out;
  }
  auto program = runtime::Program::load_bytes(*bytes);
  if (!program.ok()) {
    out.status = program.status();
    return out;
  }
  auto module = extension::Module::from_program(*program);
  if (!module.ok()) {
    out.status = module.status();
    return out;
  }
  auto outputs = module->run(model.inputs);
  if (!outputs.ok()) {
    out.status = outputs.status();
    return out;
  }
  out.outputs = std::move(outputs).value();
  return out;
}

CaseOutcome run_reference(const Case& c, DType t) {
  // The dtype run's input values (what survives conversion to t), in float64.
  const CaseModel reference = build(c, DType::Float64, [&](size_t i, DType) {
    const DType seen = c.inputs[i].dtype.value_or(t);
    std::vector<double> v = values_of(c, i, seen);
    const Tensor typed = make_tensor(c.inputs[i].sizes, seen, v);
    for (size_t k = 0; k < v.size(); ++k) v[k] = load(typed.data(), seen, static_cast<int64_t>(k));
    return v;
  });
  return run_case(reference, nullptr);
}

double normalized_error(const Tensor& out, const Tensor& ref) {
  if (out.sizes() != ref.sizes()) return std::numeric_limits<double>::infinity();
  const int64_t n = out.numel();
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = load(out.data(), out.dtype(), i);
    double r = load(ref.data(), ref.dtype(), i);
    if (!is_float(out.dtype())) {
      // Integer results: the reference truncated and wrapped into the output type, exactly.
      Tensor cast = Tensor::empty(out.dtype(), {1}).value();
      store(cast.data(), out.dtype(), 0, static_cast<double>(static_cast<int64_t>(std::trunc(r))));
      r = load(cast.data(), out.dtype(), 0);
      if (a != r) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (std::isnan(a) || std::isnan(r)) {
      if (std::isnan(a) != std::isnan(r)) return std::numeric_limits<double>::infinity();
      continue;
    }
    diff += (a - r) * (a - r);
    norm += r * r;
  }
  if (norm == 0.0) return diff == 0.0 ? 0.0 : std::sqrt(diff);
  return std::sqrt(diff / norm);
}

double error_bound(DType t, const std::string& precision) {
  // The tensor type's own rounding (half an ulp of a few roundings), then the engine's: TF32 and
  // bfloat16 GEMM operands round to 10 and 7 bits.
  double bound = 1e-5;  // float32 (transcendental functions differ in the last bits)
  if (t == DType::Float64) bound = 1e-12;
  if (t == DType::Float16) bound = 2e-3;
  if (t == DType::BFloat16) bound = 1.6e-2;
  if (!is_float(t)) bound = 0.0;
  if (precision == "tf32" || precision == "fp16") bound = std::max(bound, 3e-3);
  if (precision == "bf16") bound = std::max(bound, 1.6e-2);
  return bound;
}

}  // namespace baton::testing
