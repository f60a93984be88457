#include "backends/cuda/builder/lowering.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_version.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>

#include "backends/cuda/builder/nvrtc_compile.h"
#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "baton/core/file.h"
#include "baton/core/tensor.h"
#include "compiler/memory_plan.h"

namespace baton::cuda {
namespace {

constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;  // cuBLASLt's recommendation on Hopper

int64_t numel(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

DType operand_dtype_of(Precision p) {
  switch (p) {
    case Precision::FP16:
      return DType::Float16;
    case Precision::BF16:
      return DType::BFloat16;
    default:
      return DType::Float32;
  }
}

// fp16 engines keep activations in fp16 (half the bytes; its 10-bit mantissa keeps models within
// 3e-3). bf16's 8-bit mantissa would add a rounding at every step, so bf16 engines keep
// activations in fp32 and round only what feeds a GEMM.
DType activation_dtype_of(Precision p) {
  return p == Precision::FP16 ? DType::Float16 : DType::Float32;
}

void append_as(std::vector<uint8_t>& out, const std::vector<float>& values, DType dtype) {
  for (float f : values) {
    if (dtype == DType::Float32) {
      const auto* b = reinterpret_cast<const uint8_t*>(&f);
      out.insert(out.end(), b, b + 4);
    } else {
      const uint16_t h = dtype == DType::Float16 ? float_to_half(f) : float_to_bfloat16(f);
      out.push_back(static_cast<uint8_t>(h & 0xff));
      out.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
}

// Whether `strides` lay `sizes` out densely in some order of the dimensions (a transpose of a
// row-major block: no gaps, no overlaps).
bool dense_permutation(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<size_t> order;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1) order.push_back(d);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  int64_t expect = 1;
  for (size_t i = order.size(); i-- > 0;) {
    if (strides[order[i]] != expect) return false;
    expect *= sizes[order[i]];
  }
  return true;
}

// Which of kernel `name`'s first `count` pointer parameters it writes: those not declared const
// (every generator declares what it only reads `const T* __restrict__`). All of them when the
// signature cannot be read, which only makes find_size_only_steps more careful.
std::vector<bool> written_parameters(const std::string& code, const std::string& name,
                                     size_t count) {
  std::vector<bool> all(count, true);
  const size_t open = code.find(" " + name + "(");
  if (open == std::string::npos) return all;
  std::vector<std::string> params(1);
  int depth = 0;
  for (size_t i = open + name.size() + 2; i < code.size(); ++i) {
    const char ch = code[i];
    if (ch == ')' && depth == 0) break;
    if (ch == '(' || ch == '<') ++depth;
    if (ch == ')' || ch == '>') --depth;
    if (ch == ',' && depth == 0) {
      params.emplace_back();
      continue;
    }
    params.back() += ch;
  }
  if (params.size() < count) return all;
  std::vector<bool> writes(count);
  for (size_t p = 0; p < count; ++p) {
    const size_t first = params[p].find_first_not_of(' ');
    writes[p] = first == std::string::npos || params[p].compare(first, 6, "const ") != 0;
  }
  return writes;
}

}  // namespace

uint64_t Lowering::Slot::bytes() const {
  return static_cast<uint64_t>(numel(sizes)) * dtype_size(dtype);
}

Lowering::Lowering(const compiler::Graph& graph, const compiler::Partition& partition,
                   const EngineTarget& target)
    : g_(graph),
      p_(partition),
      t_(target),
      operand_(operand_dtype_of(target.precision)),
      activation_(activation_dtype_of(target.precision)),
      next_synthetic_(static_cast<int>(graph.values.size())) {
  assign_slots();
}

bool Lowering::is_constant(int v) const {
  return v >= 0 && v < static_cast<int>(g_.values.size()) && g_.values[v].constant != nullptr;
}

void Lowering::assign_slots() {
  // Bindings: the partition's inputs, then its outputs, numbered in that order.
  int b = 0;
  for (const std::vector<int>* list : {&p_.inputs, &p_.outputs}) {
    for (int v : *list) {
      Slot s;
      s.kind = Slot::Kind::Binding;
      s.binding = b++;
      s.dtype = g_.values[v].dtype;
      s.sizes = g_.values[v].sizes;
      slots_[v] = s;
    }
  }
  for (int idx : p_.nodes) {
    for (int v : g_.nodes[idx].inputs) {
      if (v >= 0) consumers_[v].push_back(idx);
    }
  }
  for (int v : p_.outputs) outputs_.insert(v);
  const std::set<int> squares = activation_ == DType::Float16 ? squared_values() : std::set<int>{};
  for (int idx : p_.nodes) {
    for (int v : g_.nodes[idx].outputs) {
      consumers_[v];  // every output has an entry
      if (slots_.count(v)) continue;
      Slot s;
      s.kind = Slot::Kind::Scratch;
      const DType t = g_.values[v].dtype;
      const bool floating = t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16;
      // Integer and bool values (indices, masks) keep their type; squares stay float32 (above).
      s.dtype = !floating             ? t
                : squares.count(v)    ? DType::Float32
                : feeds_only_gemms(v) ? operand_
                                      : activation_;
      s.sizes = g_.values[v].sizes;
      slots_[v] = s;
    }
  }
}

// In an fp16 engine, a square and the sums, means and shifts of it stay float32: RMSNorm's and
// T5's variance, mean(x * x), overflows fp16's largest value (65504) once activations pass 256,
// which a deep model's residual stream does (a 22-layer LLaMA with random weights: every logit
// NaN), while PyTorch computes that variance in float32. The chain is x * x (or Pow), then
// ReduceMean / ReduceSum / Add / Sub / Mul / Div of it; a square root or reciprocal brings the
// range back, so what follows is stored in fp16 again.
std::set<int> Lowering::squared_values() const {
  std::set<int> out;
  for (int idx : p_.nodes) {  // in graph order: producers first
    const compiler::IrNode& n = g_.nodes[idx];
    if (n.outputs.empty() || n.domain != "") continue;
    const auto input_squared = [&] {
      for (int v : n.inputs) {
        if (out.count(v)) return true;
      }
      return false;
    };
    const bool square = (n.op_type == "Mul" && n.inputs.size() == 2 && n.inputs[0] >= 0 &&
                         n.inputs[0] == n.inputs[1]) ||
                        n.op_type == "Pow" || n.op_type == "ReduceSumSquare";
    const bool carries = n.op_type == "ReduceMean" || n.op_type == "ReduceSum" ||
                         n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" ||
                         n.op_type == "Div";
    if (square || (carries && input_squared())) out.insert(n.outputs[0]);
  }
  return out;
}

// A value read only as a GEMM operand is stored in the operand dtype right away, so no cast
// kernel is needed before the GEMM.
bool Lowering::feeds_only_gemms(int v) const {
  const auto it = consumers_.find(v);
  if (it == consumers_.end() || it->second.empty() || outputs_.count(v)) return false;
  for (int c : it->second) {
    const compiler::IrNode& n = g_.nodes[c];
    const OpLowering* lowering = find_lowering(n.op_type, n.domain);
    if (lowering == nullptr) return false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == v && !(lowering->operand_inputs & (1u << i))) return false;
    }
  }
  return true;
}

int Lowering::root(int v) const {
  while (slots_.at(v).kind == Slot::Kind::Alias) v = slots_.at(v).root;
  return v;
}

int Lowering::read(int v) const {
  const auto it = redirect_.find(v);
  return it == redirect_.end() ? v : it->second;
}

DType Lowering::dtype_of(int v) const { return slot(read(v)).dtype; }
const std::vector<int64_t>& Lowering::sizes_of(int v) const { return slot(read(v)).sizes; }
bool Lowering::bound_in_place(int in, int out) const {
  return std::find(p_.in_place.begin(), p_.in_place.end(), std::make_pair(in, out)) !=
         p_.in_place.end();
}

bool Lowering::is_binding(int v) const { return slots_.at(read(v)).kind == Slot::Kind::Binding; }

bool Lowering::channels_last(int v) const {
  v = read(v);
  return slots_.at(v).view_strides.empty() && slot(v).channels_last;
}

bool Lowering::set_channels_last(int v) {
  Slot& s = slots_.at(root(v));
  if (s.kind != Slot::Kind::Scratch || s.sizes.size() != 4) return false;
  s.channels_last = true;
  return true;
}

std::vector<int64_t> Lowering::strides_of(int v) const {
  // The value's own shape (a view has its own), the layout of the bytes it names.
  v = read(v);
  const Slot& s = slots_.at(v);
  if (!s.view_strides.empty()) return s.view_strides;
  std::vector<int64_t> strides(s.sizes.size(), 1);
  if (slot(v).channels_last) {
    // N, H, W, C in memory.
    strides[1] = 1;
    strides[3] = s.sizes[1];
    strides[2] = s.sizes[3] * s.sizes[1];
    strides[0] = s.sizes[2] * strides[2];
    return strides;
  }
  for (size_t d = s.sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * s.sizes[d];
  return strides;
}

int64_t Lowering::view_offset(int v) const { return slots_.at(read(v)).view_offset; }

bool Lowering::strided(int v) const {
  v = read(v);
  const Slot& own = slots_.at(v);
  if (own.view_strides.empty() && own.view_offset == 0) return false;
  const uint64_t start = static_cast<uint64_t>(own.view_offset) * dtype_size(slot(v).dtype);
  if (start % kEngineAlignment != 0) return true;
  return !own.view_strides.empty() && !contiguous(own.sizes, own.view_strides);
}

void Lowering::gather_into(int src, int dst) {
  TypedKernel k;
  k.name = kernel_name(channels_last(src) ? "to_nchw" : "gather");
  k.sizes = slots_.at(read(src)).sizes;
  k.out = slot(dst).dtype;
  k.expression = "{0}";
  k.inputs.push_back({slot(read(src)).dtype, strides_of(src), 0});
  LaunchShape launch;
  KernelArgs args = kernel_args();
  std::string code = generate_typed(k, &launch, &args);
  add_kernel(k.name, std::move(code), launch, {src, dst}, args);
}

int Lowering::row_major_copy(int v) {
  const auto key = std::make_tuple(v, -1, int64_t{0});
  if (auto it = layout_cache_.find(key); it != layout_cache_.end()) return it->second;
  const int out = new_scratch(slot(v).dtype, slots_.at(v).sizes);
  gather_into(v, out);
  layout_cache_[key] = out;
  return out;
}

int Lowering::row_major(int v) {
  v = read(v);
  return channels_last(v) || strided(v) ? row_major_copy(v) : v;
}

Result<int> Lowering::channels_last_copy(int v, DType dtype, int64_t channels) {
  v = read(v);
  if (is_constant(v)) v = weight(v, activation_);
  const std::vector<int64_t> s = slots_.at(v).sizes;
  BATON_CHECK_OR_RETURN(s.size() == 4 && channels >= s[1], Internal,
                        "a channels-last copy of a {}-D value with {} channels was asked for",
                        s.size(), channels);
  if (slot(v).channels_last && channels == s[1]) return ensure(v, dtype);  // keeps the layout
  const auto key = std::make_tuple(v, static_cast<int>(dtype), channels);
  if (auto it = layout_cache_.find(key); it != layout_cache_.end()) return it->second;
  const std::vector<int64_t> st = strides_of(v);
  const int out = new_scratch(dtype, {s[0], channels, s[2], s[3]});
  slots_.at(out).channels_last = true;
  const int64_t count = s[0] * s[2] * s[3] * channels;
  const std::string name = kernel_name("to_nhwc");
  KernelArgs args = kernel_args();
  const std::string index = fmt::format(
      "    const long long p = {}, c = i - p * {};\n"
      "    const long long q = {}, w = p - q * {};\n"
      "    const long long n = {}, h = q - n * {};\n",
      args.quotient("i", channels, count), args.value(channels), args.quotient("p", s[3], count),
      args.value(s[3]), args.quotient("q", s[2], count), args.value(s[2]));
  const std::string read =
      fmt::format("c < {} ? to_f(x[n * {} + c * {} + h * {} + w * {}]) : 0.0f", args.value(s[1]),
                  args.value(st[0]), args.value(st[1]), args.value(st[2]), args.value(st[3]));
  const std::string total = args.value(count);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const {}* __restrict__ x, "
      "{}* __restrict__ y{}) {{\n"
      "  baton_for_each({}, [&](long long i) {{\n"
      "{}"
      "    st(&y[i], {});\n"
      "  }});\n}}\n",
      kBlock, name, device_type_name(slot(v).dtype), device_type_name(dtype), args.parameter(),
      total, index, read);
  add_kernel(name, std::move(code), grid_stride_launch(count), {v, out}, args);
  layout_cache_[key] = out;
  return out;
}

void Lowering::read_row_major_inputs(int index, bool channels_last_ok, bool strided_ok) {
  redirect_.clear();
  for (int v : g_.nodes[index].inputs) {
    if (v < 0 || is_constant(v)) continue;
    if ((!channels_last_ok && channels_last(v)) || (!strided_ok && strided(v)))
      redirect_[v] = row_major_copy(v);
  }
}

const std::vector<int>& Lowering::consumers(int v) const {
  static const std::vector<int> kNone;
  const auto it = consumers_.find(v);
  return it == consumers_.end() ? kNone : it->second;
}

int Lowering::derived(const std::string& key) const {
  const auto it = derived_.find(key);
  return it == derived_.end() ? -1 : it->second;
}

int Lowering::single_consumer(int v) const {
  const auto it = consumers_.find(v);
  if (it == consumers_.end() || it->second.size() != 1 || outputs_.count(v)) return -1;
  return it->second[0];
}

std::vector<float> Lowering::constant_floats(int v) const {
  const compiler::IrValue& iv = g_.values[v];
  const auto n = static_cast<size_t>(numel(iv.sizes));
  std::vector<float> out(n);
  const uint8_t* p = iv.constant->data();
  for (size_t i = 0; i < n; ++i) {
    switch (iv.dtype) {
      case DType::Float16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = half_to_float(h);
        break;
      }
      case DType::BFloat16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bfloat16_to_float(h);
        break;
      }
      case DType::Float64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
        break;
      }
      default:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
    }
  }
  return out;
}

int Lowering::add_weights(const std::vector<float>& values, DType dtype,
                          std::vector<int64_t> sizes) {
  weights_.resize(align_up(weights_.size(), kEngineAlignment));
  Slot s;
  s.kind = Slot::Kind::Weights;
  s.dtype = dtype;
  s.sizes = std::move(sizes);
  s.offset = weights_.size();
  append_as(weights_, values, dtype);
  slots_[next_synthetic_] = s;
  return next_synthetic_++;
}

int Lowering::weight(int v, DType dtype) {
  const auto key = std::make_pair(v, static_cast<int>(dtype));
  if (auto it = weight_cache_.find(key); it != weight_cache_.end()) return it->second;
  const int id = add_weights(constant_floats(v), dtype, g_.values[v].sizes);
  weight_cache_[key] = id;
  return id;
}

int Lowering::new_scratch(DType dtype, std::vector<int64_t> sizes) {
  Slot s;
  s.kind = Slot::Kind::Scratch;
  s.dtype = dtype;
  s.sizes = std::move(sizes);
  slots_[next_synthetic_] = s;
  return next_synthetic_++;
}

int Lowering::raw_weight(int v) {
  const auto key = std::make_pair(v, -1);
  if (auto it = weight_cache_.find(key); it != weight_cache_.end()) return it->second;
  const compiler::IrValue& iv = g_.values[v];
  weights_.resize(align_up(weights_.size(), kEngineAlignment));
  Slot s;
  s.kind = Slot::Kind::Weights;
  s.dtype = iv.dtype;
  s.sizes = iv.sizes;
  s.offset = weights_.size();
  weights_.insert(weights_.end(), iv.constant->data(), iv.constant->data() + s.bytes());
  slots_[next_synthetic_] = s;
  weight_cache_[key] = next_synthetic_;
  return next_synthetic_++;
}

Result<int> Lowering::ensure(int v, DType dtype) {
  if (is_constant(v)) return weight(v, dtype);
  v = read(v);
  if (slot(v).dtype == dtype && !strided(v)) return v;
  const auto key = std::make_pair(v, static_cast<int>(dtype));
  if (auto it = cast_cache_.find(key); it != cast_cache_.end()) return it->second;
  if (strided(v)) {
    const Slot& own = slots_.at(v);
    const int out = new_scratch(dtype, own.sizes);
    if (!own.view_strides.empty() && dense_permutation(own.sizes, own.view_strides) &&
        (static_cast<uint64_t>(own.view_offset) * dtype_size(slot(v).dtype)) % kEngineAlignment ==
            0) {
      // A transposed view of a dense block: converted in memory order, keeping its layout.
      slots_.at(out).view_strides = own.view_strides;
      add_cast(v, out, dtype);
    } else {
      gather_into(v, out);
    }
    cast_cache_[key] = out;
    return out;
  }
  const int out = new_scratch(dtype, slot(v).sizes);
  slots_.at(out).channels_last = slot(v).channels_last;  // a cast keeps the layout
  add_cast(v, out, dtype);
  cast_cache_[key] = out;
  return out;
}

void Lowering::alias(int out, int in) {
  in = read(in);
  if (slots_.at(out).kind == Slot::Kind::Binding) {
    in = row_major(in);
    // The result must land in the caller's binding.
    if (slot(in).dtype == slots_.at(out).dtype) {
      add_copy(in, out);
    } else {
      add_cast(in, out, slots_.at(out).dtype);
    }
    return;
  }
  if (strided(in)) in = row_major_copy(in);
  Slot& s = slots_.at(out);
  s.kind = Slot::Kind::Alias;
  s.root = root(in);
  s.channels_last = slot(in).channels_last;
  s.view_offset = slots_.at(in).view_offset;  // a row-major view at an aligned offset
}

void Lowering::view(int out, int in, std::vector<int64_t> strides, int64_t offset) {
  in = read(in);
  Slot v;
  v.kind = Slot::Kind::Alias;
  v.root = root(in);
  v.dtype = slot(in).dtype;
  v.sizes = slots_.at(out).sizes;
  v.view_strides = std::move(strides);
  v.view_offset = slots_.at(in).view_offset + offset;
  if (slots_.at(out).kind == Slot::Kind::Binding) {
    const int tmp = next_synthetic_++;
    slots_[tmp] = std::move(v);
    gather_into(tmp, out);
    return;
  }
  slots_.at(out) = std::move(v);
}

std::string Lowering::kernel_name(const char* what) const {
  return fmt::format("k{}_{}", kernel_names_.size(), what);
}

KernelArgs Lowering::kernel_args() const {
  return KernelArgs(t_.options.kernel_sizes == KernelSizes::Code);
}

void Lowering::add_kernel(const std::string& name, std::string code, const LaunchShape& launch,
                          std::vector<int> operands, const KernelArgs& args) {
  Planned step;
  step.args = args.values();
  step.record.kind = static_cast<uint32_t>(StepKind::Kernel);
  step.record.kernel.kernel = static_cast<uint32_t>(kernel_names_.size());
  step.record.kernel.num_operands = static_cast<uint32_t>(operands.size());
  step.launch = launch;
  step.record.kernel.grid[0] = launch.grid;
  step.record.kernel.grid[1] = step.record.kernel.grid[2] = 1;
  step.record.kernel.block[0] = launch.block;
  step.record.kernel.block[1] = step.record.kernel.block[2] = 1;
  step.operands = std::move(operands);
  for (int& v : step.operands) v = read(v);
  // From sm_90 on, the kernel waits for its predecessor's grid as its first statement, and so
  // may start early (KernelStep::flags).
  if (t_.sm_arch >= 90) {
    const size_t entry = code.find(" " + name + "(");
    const size_t line = entry == std::string::npos ? entry : code.rfind('\n', entry);
    const bool global = entry != std::string::npos &&
                        code.find("__global__", line == std::string::npos ? 0 : line) < entry;
    const size_t body = global ? code.find(") {\n", entry) : std::string::npos;
    if (body != std::string::npos) {
      code.insert(body + 4, "  baton_wait_for_predecessor();\n");
      step.record.kernel.flags |= kKernelWaitsForPredecessor;
    }
  }
  step.writes = written_parameters(code, name, step.operands.size());
  // Models repeat layers: a kernel whose source differs from an earlier one only by its name is
  // that kernel (compile time grows with the number of distinct kernels, not of steps).
  std::string body = code;
  for (size_t at = body.find(name); at != std::string::npos; at = body.find(name, at)) {
    body.replace(at, name.size(), "@kernel@");
  }
  const auto [it, added] =
      kernel_by_body_.emplace(std::move(body), static_cast<uint32_t>(kernel_names_.size()));
  step.record.kernel.kernel = it->second;
  if (added) {
    kernel_names_.push_back(name);
    kernel_sources_.push_back(std::move(code));
    // One source, one signature: a step sharing the kernel passes as many of each.
    kernel_params_.emplace_back(static_cast<uint32_t>(step.operands.size()),
                                static_cast<uint32_t>(step.args.size()));
  }
  steps_.push_back(std::move(step));
}

void Lowering::add_library_step(const StepRecord& record, std::array<int, 5> operands) {
  Planned step;
  step.record = record;
  step.operands.assign(operands.begin(), operands.end());
  // GEMMs and attention write operand 3 (D, O), convolutions operand 4 (y).
  step.writes.assign(operands.size(), false);
  step.writes[record.kind == static_cast<uint32_t>(StepKind::Conv) ? 4 : 3] = true;
  for (int& v : step.operands) v = v < 0 ? v : read(v);
  steps_.push_back(std::move(step));
}

void Lowering::add_gemm(const GemmStep& gemm, std::array<int, 5> operands) {
  StepRecord r{};
  r.kind = static_cast<uint32_t>(StepKind::Gemm);
  r.gemm = gemm;
  add_library_step(r, operands);
}

void Lowering::add_matmul(const GemmStep& gemm, std::array<int, 5> operands) {
  StepRecord r{};
  r.kind = static_cast<uint32_t>(StepKind::Matmul);
  r.gemm = gemm;
  add_library_step(r, operands);
}

void Lowering::add_conv(const ConvStep& conv, std::array<int, 5> operands) {
  StepRecord r{};
  r.kind = static_cast<uint32_t>(StepKind::Conv);
  r.conv = conv;
  add_library_step(r, operands);
}

void Lowering::add_sdpa(const SdpaStep& sdpa, std::array<int, 5> operands) {
  StepRecord r{};
  r.kind = static_cast<uint32_t>(StepKind::Sdpa);
  r.sdpa = sdpa;
  add_library_step(r, operands);
}

void Lowering::add_copy(int src, int dst) {
  Planned step;
  step.record.kind = static_cast<uint32_t>(StepKind::Copy);
  step.operands = {read(src), read(dst)};
  step.writes = {false, true};
  steps_.push_back(std::move(step));
}

void Lowering::add_cast(int src, int dst, DType dtype) {
  FusedKernel k;
  k.name = kernel_name("cast");
  k.sizes_vary = dynamic();
  // Element by element in memory order: source and destination share one layout.
  k.sizes = {numel(slots_.at(read(src)).sizes)};
  k.inputs.push_back({slot(read(src)).dtype, {1}});
  k.ops.push_back({std::string(kCopyExpression), 0, 0});
  k.outputs.push_back({dtype, 0});
  LaunchShape launch;
  KernelArgs args = kernel_args();
  std::string code = generate_fused(k, &launch, &args);
  add_kernel(k.name, std::move(code), launch, {src, dst}, args);
}

void Lowering::add_epilogue(int y, int residual, const std::string& activation, int out, int bias) {
  if (channels_last(y)) set_channels_last(out);
  // Element by element in `out`'s memory order: N, H, W, C for a channels-last `out`.
  const size_t rank = slots_.at(read(out)).sizes.size();
  std::vector<size_t> order(rank);
  for (size_t d = 0; d < rank; ++d) order[d] = d;
  if (channels_last(out)) order = {0, 2, 3, 1};
  auto along = [&](const std::vector<int64_t>& v) {
    std::vector<int64_t> r;
    for (size_t d : order) r.push_back(v[d]);
    return r;
  };
  FusedKernel k;
  k.name = kernel_name("epilogue");
  k.sizes_vary = dynamic();
  k.sizes = along(slots_.at(read(out)).sizes);
  k.inputs.push_back({slot(y).dtype, along(strides_of(y))});
  std::vector<int> operands = {y};
  int value = 0;  // the operand the next op reads: input 0, or op -1 - k's result
  if (bias >= 0) {
    // Stride 0 along every dimension but the channels (dimension 1).
    std::vector<int64_t> strides(rank, 0);
    strides[1] = 1;
    k.inputs.push_back({slot(bias).dtype, along(strides)});
    operands.push_back(bias);
    k.ops.push_back({"({a} + {b})", value, static_cast<int>(k.inputs.size()) - 1});
    value = -static_cast<int>(k.ops.size());
  }
  if (residual >= 0) {
    k.inputs.push_back({slot(residual).dtype, along(strides_of(residual))});
    operands.push_back(residual);
    k.ops.push_back({"({a} + {b})", value, static_cast<int>(k.inputs.size()) - 1});
    value = -static_cast<int>(k.ops.size());
  }
  k.ops.push_back({activation, value, 0});
  k.outputs.push_back({slot(out).dtype, static_cast<int>(k.ops.size()) - 1});
  operands.push_back(out);
  LaunchShape launch;
  KernelArgs args = kernel_args();
  std::string code = generate_fused(k, &launch, &args);
  add_kernel(k.name, std::move(code), launch, std::move(operands), args);
}

BufferRef Lowering::ref_of(int v) const {
  const Slot& s = slot(v);
  const Slot& own = slots_.at(v);
  BufferRef r{};
  r.bytes = s.bytes();
  switch (s.kind) {
    case Slot::Kind::Binding:
      r.space = static_cast<uint32_t>(Space::Binding);
      r.index = static_cast<uint32_t>(s.binding);
      break;
    case Slot::Kind::Weights:
      r.space = static_cast<uint32_t>(Space::Weights);
      r.offset = s.offset;
      break;
    default:
      r.space = static_cast<uint32_t>(Space::Scratch);
      r.offset = s.offset;
      break;
  }
  if (!own.view_strides.empty() || own.view_offset != 0) {
    // A view: from its first element to its last.
    const uint64_t elem = dtype_size(s.dtype);
    const std::vector<int64_t> strides = strides_of(v);
    int64_t last = 0;
    for (size_t d = 0; d < own.sizes.size(); ++d) last += (own.sizes[d] - 1) * strides[d];
    r.offset += static_cast<uint64_t>(own.view_offset) * elem;
    r.bytes = static_cast<uint64_t>(last + 1) * elem;
  }
  return r;
}

const std::vector<int64_t>& Lowering::upper_sizes_of(int v) const {
  // A probe lowers the same partition as its upper lowering, in the same order, so its synthetic
  // values have the same ids there.
  // The value's own (logical) sizes, a view's included: not those of the row-major copy a
  // lowering may read in its place, which exists only while that lowering runs.
  if (upper_ != nullptr && upper_->slots_.count(v) > 0) return upper_->slots_.at(v).sizes;
  return slots_.at(v).sizes;
}

Result<compiler::LoweredPartition> Lowering::finish() {
  BATON_ASSIGN_OR_RETURN(EngineDescription e, describe());
  return compile(std::move(e));
}

// Which kernel steps of a dynamic engine compute from sizes alone: they read only weights and
// what earlier such steps wrote, and write only values no step touched before them. Exporters
// write such chains ahead of the first layer (position ids from a Range over the sequence
// length, the indices and comparisons that build an attention mask's shape); a static engine
// folds them at compile, a dynamic one would otherwise run them at every call, a dozen tiny
// kernels of a few microseconds each. Their results (in `roots`) must stay small, since the
// runtime keeps a copy per shape: steps are taken in order while the block stays within
// kMaxSizeOnlyBytes at the largest sizes.
std::set<size_t> Lowering::find_size_only_steps(std::set<int>* roots) const {
  // Values no step may keep in the block: written again by a step that is not flagged (a Concat
  // split into several kernels writes its output in parts; an in-place update writes over a
  // copy). Each found sends the analysis round again without them.
  std::set<int> excluded;
  for (;;) {
    roots->clear();
    std::set<size_t> found;
    uint64_t block = 0;
    for (size_t i = 0; i < steps_.size(); ++i) {
      const Planned& step = steps_[i];
      if (step.record.kind != static_cast<uint32_t>(StepKind::Kernel)) continue;
      std::set<int> written;
      bool size_only = true;
      for (size_t o = 0; o < step.operands.size() && size_only; ++o) {
        const int v = step.operands[o];
        if (v < 0) continue;
        const int r = root(v);
        const Slot& s = slots_.at(r);
        if (step.writes[o]) {
          // Only values no step touched before, in scratch.
          size_only =
              s.kind == Slot::Kind::Scratch && s.first == static_cast<int>(i) && !excluded.count(r);
          written.insert(r);
        } else {
          // Reads of weights and of what earlier flagged kernels wrote.
          size_only = s.kind == Slot::Kind::Weights || roots->count(r) > 0;
        }
      }
      if (!size_only || written.empty()) continue;
      uint64_t bytes = 0;
      for (int r : written) bytes += align_up(slots_.at(r).bytes(), kEngineAlignment);
      if (block + bytes > kMaxSizeOnlyBytes) continue;
      block += bytes;
      roots->insert(written.begin(), written.end());
      found.insert(i);
    }
    // No step left to run at every call may write into the block: its values would then change
    // after the block was filled (or be left half written).
    bool clean = true;
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (found.count(i)) continue;
      const Planned& step = steps_[i];
      for (size_t o = 0; o < step.operands.size(); ++o) {
        const int v = step.operands[o];
        if (v < 0 || !step.writes[o] || !roots->count(root(v))) continue;
        excluded.insert(root(v));
        clean = false;
      }
    }
    if (clean) return found;
  }
}

Result<EngineDescription> Lowering::describe() {
  BATON_CHECK_OR_RETURN(steps_.size() < (1u << 20), NotSupported, "partition '{}' is too large",
                        p_.name);
  // Scratch lifetimes, then one lifetime-based plan for all activations.
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int v : steps_[i].operands) {
      if (v < 0) continue;
      Slot& s = slots_.at(root(v));
      if (s.kind != Slot::Kind::Scratch) continue;
      s.first = std::min(s.first, static_cast<int>(i));
      s.last = std::max(s.last, static_cast<int>(i));
    }
  }
  // A dynamic engine's kernels that compute from sizes alone (size_only_steps) write their
  // results into a block of their own at the end of scratch, planned below.
  std::set<int> size_only_roots;
  if (upper_ != nullptr) {
    size_only_steps_ = upper_->size_only_steps_;
  } else if (dynamic()) {
    size_only_steps_ = find_size_only_steps(&size_only_roots);
  }
  std::vector<compiler::BufferRequest> requests;
  std::vector<int> request_slot;
  for (auto& [v, s] : slots_) {
    if (s.kind != Slot::Kind::Scratch || s.last < 0 || size_only_roots.count(v)) continue;
    requests.push_back(
        {s.bytes(), Device::cuda(static_cast<int16_t>(t_.device_id)), s.first, s.last});
    request_slot.push_back(v);
  }
  if (upper_ != nullptr) {
    // A probe takes its upper lowering's plan (planned for the largest sizes), as the dynamic
    // engine does at every size: only the sizes differ between the two.
    for (int v : request_slot) {
      const auto it = upper_->slots_.find(v);
      BATON_CHECK_OR_RETURN(it != upper_->slots_.end() && it->second.kind == Slot::Kind::Scratch,
                            NotSupported,
                            "partition '{}' lowers to different buffers at different sizes (value "
                            "{}): it cannot be one dynamic engine",
                            p_.name, v);
      slots_.at(v).offset = it->second.offset;
    }
    scratch_bytes_ = upper_->scratch_bytes_;
  } else {
    const compiler::MemoryPlan plan = compiler::plan_memory(requests, kEngineAlignment);
    for (size_t i = 0; i < requests.size(); ++i) {
      slots_.at(request_slot[i]).offset = plan.offset[i];
    }
    scratch_bytes_ = plan.arenas.empty() ? 0 : plan.arenas[0].size;
    // The size-only block: every value in it lives for the whole engine (the runtime gives each
    // shape's CUDA graph its own copy of the block, filled once when that graph is captured).
    for (int v : size_only_roots) {
      scratch_bytes_ = align_up(scratch_bytes_, kEngineAlignment);
      slots_.at(v).offset = scratch_bytes_;
      scratch_bytes_ += slots_.at(v).bytes();
    }
    scratch_bytes_ = align_up(scratch_bytes_, kEngineAlignment);
  }

  EngineDescription e;
  e.device_id = t_.device_id;
  e.sm_arch = t_.sm_arch;
  e.cuda_version = CUDART_VERSION;
  e.cublaslt_version = CUBLAS_VERSION;
  e.cudnn_version = CUDNN_VERSION;
  e.nvrtc_version = nvrtc_version();
  e.precision = t_.precision;
  for (int v : p_.inputs)
    e.bindings.push_back({g_.values[v].name, g_.values[v].dtype, false, g_.values[v].sizes});
  for (int v : p_.outputs)
    e.bindings.push_back({g_.values[v].name, g_.values[v].dtype, true, g_.values[v].sizes});
  e.scratch_bytes = scratch_bytes_;
  bool any_gemm = false;
  for (Planned& s : steps_) {
    switch (static_cast<StepKind>(s.record.kind)) {
      case StepKind::Gemm:
      case StepKind::Matmul: {
        // cuDNN's workspace is sized when the engine loads (its plan's own).
        any_gemm |= s.record.kind == static_cast<uint32_t>(StepKind::Gemm);
        GemmStep& gs = s.record.gemm;
        gs.a = ref_of(s.operands[0]);
        gs.b = ref_of(s.operands[1]);
        if (s.operands[2] >= 0) gs.c = ref_of(s.operands[2]);
        gs.d = ref_of(s.operands[3]);
        if (s.operands[4] >= 0) gs.bias = ref_of(s.operands[4]);
        break;
      }
      case StepKind::Kernel:
        BATON_CHECK_OR_RETURN(
            s.operands.size() <= kMaxKernelOperands && s.args.size() <= kMaxKernelArgs,
            NotSupported,
            "a kernel of partition '{}' has {} operands and {} arguments (at "
            "most {} and {})",
            p_.name, s.operands.size(), s.args.size(), kMaxKernelOperands, kMaxKernelArgs);
        for (size_t o = 0; o < s.operands.size(); ++o)
          s.record.kernel.operands[o] = ref_of(s.operands[o]);
        if (size_only_steps_.count(static_cast<size_t>(&s - steps_.data()))) {
          s.record.kernel.flags |= kKernelSizeOnly;
        }
        s.record.kernel.first_arg = static_cast<uint32_t>(e.args.size());
        s.record.kernel.num_args = static_cast<uint32_t>(s.args.size());
        e.args.insert(e.args.end(), s.args.begin(), s.args.end());
        break;
      case StepKind::Conv: {
        ConvStep& c = s.record.conv;
        c.x = ref_of(s.operands[0]);
        c.w = ref_of(s.operands[1]);
        if (s.operands[2] >= 0) c.bias = ref_of(s.operands[2]);
        if (s.operands[3] >= 0) c.residual = ref_of(s.operands[3]);
        c.y = ref_of(s.operands[4]);
        break;
      }
      case StepKind::Sdpa: {
        SdpaStep& a = s.record.sdpa;
        a.q = ref_of(s.operands[0]);
        a.k = ref_of(s.operands[1]);
        a.v = ref_of(s.operands[2]);
        a.o = ref_of(s.operands[3]);
        if (s.operands[4] >= 0) a.bias = ref_of(s.operands[4]);
        break;
      }
      case StepKind::Copy:
        s.record.copy.src = ref_of(s.operands[0]);
        s.record.copy.dst = ref_of(s.operands[1]);
        break;
    }
    e.steps.push_back(s.record);
  }
  e.workspace_bytes = any_gemm ? kWorkspaceBytes : 0;
  e.kernel_names = kernel_names_;
  e.kernel_params = kernel_params_;
  e.weights = std::move(weights_);  // describe() is called once, and the weights are large
  e.options = t_.options.recorded();
  return e;
}

Result<compiler::LoweredPartition> Lowering::compile(EngineDescription e) const {
  if (const std::string& dir = t_.options.dump_kernel_source; !dir.empty()) {
    // Debugging aid (the build option dump_kernel_source): the generated CUDA source of each
    // partition.
    // Through the one file writer: a dump folder shared with others (/tmp) cannot redirect it.
    std::string source = kernel_prelude();
    for (const std::string& k : kernel_sources_) source += k;
    BATON_TRY(write_file_atomically(dir + "/" + p_.name + ".cu", std::string_view(source)));
  }
  if (!kernel_names_.empty()) {
    BATON_ASSIGN_OR_RETURN(e.cubin,
                           compile_kernels_to_cubin(kernel_prelude(), kernel_sources_, t_.sm_arch,
                                                    "partition '" + p_.name + "'"));
  }
  BATON_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, write_engine_blob(e));
  const auto* header = reinterpret_cast<const EngineHeader*>(blob.data());
  compiler::LoweredPartition lp;
  auto spec = [&](const char* key, const std::string& value) {
    lp.compile_specs.emplace_back(key, std::vector<uint8_t>(value.begin(), value.end()));
  };
  spec("sm_arch", sm_arch_name(header->sm_arch));
  spec("precision", std::string(precision_name(static_cast<Precision>(header->precision))));
  lp.blob = std::move(blob);
  return lp;
}

}  // namespace baton::cuda
