#include "backends/cuda/builder/engine_builder.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_version.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "backends/cuda/builder/codegen.h"
#include "backends/cuda/builder/nvrtc_compile.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/memory_plan.h"

namespace baton::cuda {
namespace {

using compiler::Graph;
using compiler::IrNode;
using compiler::IrValue;

constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;  // cuBLASLt's recommendation on Hopper

// Elementwise ops, fused into generated kernels, and the operation each one becomes.
const std::map<std::string, FusedOp::Kind> kElementwise = {
    {"Add", FusedOp::Kind::Add},   {"Sub", FusedOp::Kind::Sub},
    {"Mul", FusedOp::Kind::Mul},   {"Div", FusedOp::Kind::Div},
    {"Pow", FusedOp::Kind::Pow},   {"Sqrt", FusedOp::Kind::Sqrt},
    {"Erf", FusedOp::Kind::Erf},   {"Relu", FusedOp::Kind::Relu},
    {"Tanh", FusedOp::Kind::Tanh}, {"Sigmoid", FusedOp::Kind::Sigmoid},
    {"Gelu", FusedOp::Kind::Gelu}};
const std::set<std::string> kViews = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"};
const std::set<std::string> kOthers = {"Gemm", "MatMul", "Softmax", "Transpose", "Concat"};

int64_t numel(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}


// A constant data operand's values (supports() admits float32 data operands only).
std::vector<float> constant_as_floats(const IrValue& v) {
  std::vector<float> out(static_cast<size_t>(numel(v.sizes)));
  std::memcpy(out.data(), v.constant->data(), out.size() * sizeof(float));
  return out;
}

// Row-major strides of `in` broadcast to `out` (0 along broadcast dimensions).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t s = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t d_in = in.size() - 1 - k;
    const size_t d_out = out.size() - 1 - k;
    strides[d_out] = in[d_in] == 1 ? 0 : s;
    s *= in[d_in];
  }
  return strides;
}

// The dtype of GEMM operands (weights and activations fed to the tensor cores).
DType operand_dtype(Precision p) {
  switch (p) {
    case Precision::FP16:
      return DType::Float16;
    case Precision::BF16:
      return DType::BFloat16;
    default:
      return DType::Float32;
  }
}

// The dtype activations are stored in between steps. fp16 keeps them in fp16 (half the bytes; its
// 10-bit mantissa keeps models within 3e-3). bf16's 8-bit mantissa would add a rounding at every
// step, so bf16 engines keep activations in fp32 and round only what feeds a GEMM.
DType activation_dtype(Precision p) {
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

class Lowering {
 public:
  Lowering(const Graph& g, const compiler::Partition& p, const EngineTarget& t)
      : g_(g),
        p_(p),
        t_(t),
        T_(operand_dtype(t.precision)),
        A_(activation_dtype(t.precision)),
        next_synthetic_(static_cast<int>(g.values.size())) {}

  Result<compiler::LoweredPartition> run() {
    BATON_TRY(assign_slots());
    std::vector<int> group;
    auto flush = [&]() -> Status {
      if (group.empty()) return Status();
      Status s = lower_fused(group);
      group.clear();
      return s;
    };
    for (int idx : p_.nodes) {
      if (absorbed_.count(idx)) continue;
      const IrNode& n = g_.nodes[idx];
      if (kElementwise.count(n.op_type)) {
        if (!group.empty() && joins(group, idx)) {
          group.push_back(idx);
        } else {
          BATON_TRY(flush());
          group.push_back(idx);
        }
        continue;
      }
      BATON_TRY(flush());
      if (kViews.count(n.op_type)) {
        BATON_TRY(lower_view(idx));
      } else if (n.op_type == "Gemm" || n.op_type == "MatMul") {
        BATON_TRY(lower_gemm(idx));
      } else if (n.op_type == "Softmax") {
        BATON_TRY(lower_softmax(idx));
      } else if (n.op_type == "Transpose") {
        BATON_TRY(lower_transpose(idx));
      } else if (n.op_type == "Concat") {
        BATON_TRY(lower_concat(idx));
      } else {
        return BATON_ERROR(Internal, "{} reached the CUDA builder unsupported", n.describe());
      }
    }
    BATON_TRY(flush());
    return finish();
  }

 private:
  struct Slot {
    enum class Kind { Binding, Scratch, Weights, Alias };
    Kind kind = Kind::Scratch;
    int binding = -1;
    int root = -1;
    uint64_t offset = 0;  // weights or (after planning) scratch
    DType dtype = DType::Float32;
    std::vector<int64_t> sizes;
    int first = INT_MAX;
    int last = -1;
    uint64_t bytes() const { return static_cast<uint64_t>(numel(sizes)) * dtype_size(dtype); }
  };

  struct Planned {
    StepRecord record{};
    std::vector<int> operands;  // value ids; -1 = unused (GEMM c / bias)
  };

  // --- slots ------------------------------------------------------------------------------

  Status assign_slots() {
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
    for (int v : p_.outputs) is_output_.insert(v);
    for (int idx : p_.nodes) {
      for (int v : g_.nodes[idx].outputs) {
        consumers_[v];  // every output has an entry
        if (slots_.count(v)) continue;
        Slot s;
        s.kind = Slot::Kind::Scratch;
        s.dtype = feeds_only_gemms(v) ? T_ : A_;
        s.sizes = g_.values[v].sizes;
        slots_[v] = s;
      }
    }
    return Status();
  }

  // A value read only as a GEMM operand is stored in the operand dtype right away, so no cast
  // kernel is needed before the GEMM.
  bool feeds_only_gemms(int v) const {
    const auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.empty() || is_output_.count(v)) return false;
    for (int c : it->second) {
      const IrNode& n = g_.nodes[c];
      const bool operand = (n.op_type == "MatMul" || n.op_type == "Gemm") &&
                           (n.inputs[0] == v || n.inputs[1] == v) &&
                           !(n.inputs.size() > 2 && n.inputs[2] == v);
      if (!operand) return false;
    }
    return true;
  }

  int root(int v) const {
    while (slots_.at(v).kind == Slot::Kind::Alias) v = slots_.at(v).root;
    return v;
  }
  const Slot& slot(int v) const { return slots_.at(root(v)); }

  int new_scratch(DType dtype, const std::vector<int64_t>& sizes) {
    Slot s;
    s.kind = Slot::Kind::Scratch;
    s.dtype = dtype;
    s.sizes = sizes;
    slots_[next_synthetic_] = s;
    return next_synthetic_++;
  }

  int add_weights(const std::vector<float>& values, DType dtype,
                  const std::vector<int64_t>& sizes) {
    weights_.resize((weights_.size() + kEngineAlignment - 1) / kEngineAlignment * kEngineAlignment);
    Slot s;
    s.kind = Slot::Kind::Weights;
    s.dtype = dtype;
    s.sizes = sizes;
    s.offset = weights_.size();
    append_as(weights_, values, dtype);
    slots_[next_synthetic_] = s;
    return next_synthetic_++;
  }

  // A constant as engine weights in `dtype` (converted once, then shared).
  int weight(int v, DType dtype) {
    const auto key = std::make_pair(v, static_cast<int>(dtype));
    if (auto it = weight_cache_.find(key); it != weight_cache_.end()) return it->second;
    const int id = add_weights(constant_as_floats(g_.values[v]), dtype, g_.values[v].sizes);
    weight_cache_[key] = id;
    return id;
  }

  // The value in `dtype`: itself, or a copy made by a cast kernel (made once).
  Result<int> ensure(int v, DType dtype) {
    if (v < static_cast<int>(g_.values.size()) && g_.values[v].constant) return weight(v, dtype);
    if (slot(v).dtype == dtype) return v;
    const auto key = std::make_pair(v, static_cast<int>(dtype));
    if (auto it = cast_cache_.find(key); it != cast_cache_.end()) return it->second;
    const int out = new_scratch(dtype, slot(v).sizes);
    add_cast(v, out, slot(v).sizes, dtype);
    cast_cache_[key] = out;
    return out;
  }

  // A kernel converting `src` (contiguous, `sizes`) into `dst` of `dtype`.
  void add_cast(int src, int dst, const std::vector<int64_t>& sizes, DType dtype) {
    FusedKernel k;
    k.name = next_kernel_name("cast");
    k.sizes = sizes;
    k.inputs.push_back({slot(src).dtype, broadcast_strides(k.sizes, k.sizes)});
    k.ops.push_back({FusedOp::Kind::Copy, 0, 0});
    k.outputs.push_back({dtype, 0});
    LaunchShape launch;
    add_kernel(k.name, generate_fused(k, &launch), launch, {src, dst});
  }

  // --- steps ------------------------------------------------------------------------------

  std::string next_kernel_name(const char* what) {
    return fmt::format("k{}_{}", kernel_names_.size(), what);
  }

  void add_kernel(const std::string& name, std::string code, const LaunchShape& launch,
                  std::vector<int> operands) {
    Planned step;
    step.record.kind = static_cast<uint32_t>(StepKind::Kernel);
    step.record.kernel.kernel = static_cast<uint32_t>(kernel_names_.size());
    step.record.kernel.num_operands = static_cast<uint32_t>(operands.size());
    step.record.kernel.grid[0] = launch.grid;
    step.record.kernel.grid[1] = step.record.kernel.grid[2] = 1;
    step.record.kernel.block[0] = launch.block;
    step.record.kernel.block[1] = step.record.kernel.block[2] = 1;
    step.operands = std::move(operands);
    kernel_names_.push_back(name);
    source_ += code;
    steps_.push_back(std::move(step));
  }

  void add_copy(int src, int dst) {
    Planned step;
    step.record.kind = static_cast<uint32_t>(StepKind::Copy);
    step.operands = {src, dst};
    steps_.push_back(std::move(step));
  }

  int single_consumer(int v) const {
    const auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1 || is_output_.count(v)) return -1;
    return it->second[0];
  }

  // An elementwise node joins the open group when it has the group's shape and reads something
  // the group produced (a contiguous run in execution order, so outside readers of the group's
  // results always come after the fused kernel).
  bool joins(const std::vector<int>& group, int idx) const {
    const IrNode& n = g_.nodes[idx];
    if (g_.values[n.outputs[0]].sizes != g_.values[g_.nodes[group[0]].outputs[0]].sizes)
      return false;
    for (int v : n.inputs) {
      for (int m : group) {
        if (g_.nodes[m].outputs[0] == v) return true;
      }
    }
    return false;
  }

  Status lower_fused(const std::vector<int>& group) {
    FusedKernel k;
    k.name = next_kernel_name("fused");
    k.sizes = g_.values[g_.nodes[group.back()].outputs[0]].sizes;
    std::map<int, int> ref;  // value -> operand reference in the kernel
    std::vector<int> operands;
    std::set<int> in_group;
    for (int idx : group) in_group.insert(idx);
    for (int idx : group) {
      const IrNode& n = g_.nodes[idx];
      int refs[2] = {0, 0};
      for (size_t i = 0; i < n.inputs.size() && i < 2; ++i) {
        const int v = n.inputs[i];
        if (auto it = ref.find(v); it != ref.end()) {
          refs[i] = it->second;
          continue;
        }
        const IrValue& iv = g_.values[v];
        FusedInput in;
        if (iv.constant && numel(iv.sizes) == 1) {
          in.literal = true;
          in.value = constant_as_floats(iv)[0];
        } else {
          const int src = iv.constant ? weight(v, A_) : v;
          in.dtype = slot(src).dtype;
          in.strides = broadcast_strides(iv.sizes, k.sizes);
          operands.push_back(src);
        }
        ref[v] = static_cast<int>(k.inputs.size());
        refs[i] = ref[v];
        k.inputs.push_back(in);
      }
      FusedOp op;
      op.a = refs[0];
      op.b = refs[1];
      op.kind = kElementwise.find(n.op_type)->second;  // groups hold elementwise ops only
      if (op.kind == FusedOp::Kind::Gelu && n.attr_string("approximate") == "tanh") {
        op.kind = FusedOp::Kind::GeluTanh;
      }
      ref[n.outputs[0]] = -1 - static_cast<int>(k.ops.size());
      k.ops.push_back(op);
    }
    // Results anything outside the group reads are stored; the rest stay in registers.
    for (int idx : group) {
      const int v = g_.nodes[idx].outputs[0];
      bool needed = is_output_.count(v) > 0;
      for (int c : consumers_[v]) needed = needed || (!in_group.count(c) && !absorbed_.count(c));
      if (!needed) continue;
      k.outputs.push_back({slot(v).dtype, -1 - ref[v]});
      operands.push_back(v);
    }
    LaunchShape launch;
    std::string code = generate_fused(k, &launch);
    add_kernel(k.name, std::move(code), launch, std::move(operands));
    return Status();
  }

  Status lower_view(int idx) {
    const IrNode& n = g_.nodes[idx];
    const int in = n.inputs[0];
    const int out = n.outputs[0];
    if (slots_.at(out).kind == Slot::Kind::Binding) {
      // The result must land in the caller's binding.
      if (slot(in).dtype == slots_.at(out).dtype) {
        add_copy(in, out);
        return Status();
      }
      add_cast(in, out, g_.values[out].sizes, slots_.at(out).dtype);
      return Status();
    }
    Slot& s = slots_.at(out);
    s.kind = Slot::Kind::Alias;
    s.root = root(in);
    return Status();
  }

  Status lower_gemm(int idx) {
    const IrNode& n = g_.nodes[idx];
    const bool gemm = n.op_type == "Gemm";
    const int a = n.inputs[0];
    const int b = n.inputs[1];
    const int c = gemm && n.inputs.size() > 2 ? n.inputs[2] : -1;
    const float alpha = gemm ? static_cast<float>(n.attr_float("alpha")) : 1.0f;
    const float beta = gemm ? static_cast<float>(n.attr_float("beta")) : 1.0f;
    const bool ta = gemm && n.attr_int("transA") != 0;
    const bool tb = gemm && n.attr_int("transB") != 0;
    std::vector<int64_t> as = g_.values[a].sizes, bs = g_.values[b].sizes;
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    int64_t m = ta ? as[as.size() - 1] : as[as.size() - 2];
    const int64_t k = ta ? as[as.size() - 2] : as[as.size() - 1];
    const int64_t nn = tb ? bs[bs.size() - 2] : bs[bs.size() - 1];
    int64_t batch = 1, stride_a = 0, stride_b = 0;
    const std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
    if (b_batch.empty()) {
      m *= numel(a_batch);  // [..., M, K] x [K, N]: one GEMM over all rows
    } else if (a_batch.empty()) {
      batch = numel(b_batch);
      stride_b = k * nn;
    } else if (a_batch == b_batch) {
      batch = numel(a_batch);
      stride_a = m * k;
      stride_b = k * nn;
    } else {
      return BATON_ERROR(Internal, "{}: batch broadcasting the builder does not handle",
                         n.describe());
    }

    // Fuse a bias (Gemm's C vector, or a following Add of a constant vector) and a following
    // ReLU or tanh-GELU into cuBLASLt's epilogue, when nothing else reads the intermediate.
    int out = n.outputs[0];
    std::vector<float> bias;
    bool has_bias = false;
    int c_matrix = -1;
    float c_beta = 0.0f;
    auto is_row_vector = [&](const std::vector<int64_t>& s) {
      return (s.size() == 1 && s[0] == nn) || (s.size() == 2 && s[0] == 1 && s[1] == nn);
    };
    if (c >= 0) {
      const IrValue& cv = g_.values[c];
      if (cv.constant && is_row_vector(cv.sizes)) {
        bias = constant_as_floats(cv);
        for (float& x : bias) x *= beta;
        has_bias = true;
      } else if (cv.constant) {
        std::vector<float> full(static_cast<size_t>(m * nn));
        const std::vector<float> src = constant_as_floats(cv);
        const std::vector<int64_t> strides = broadcast_strides(cv.sizes, {m, nn});
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < nn; ++j)
            full[i * nn + j] = beta * src[i * strides[0] + j * strides[1]];
        }
        c_matrix = add_weights(full, slot(out).dtype, {m, nn});
        c_beta = 1.0f;
      } else {
        c_matrix = c;
        c_beta = beta;
      }
    } else if (!gemm) {
      const int add = single_consumer(out);
      if (add >= 0 && g_.nodes[add].op_type == "Add" && g_.nodes[add].partition == p_.index) {
        const IrNode& an = g_.nodes[add];
        const int other = an.inputs[0] == out ? an.inputs[1] : an.inputs[0];
        if (other != out && g_.values[other].constant && is_row_vector(g_.values[other].sizes) &&
            g_.values[an.outputs[0]].sizes == g_.values[out].sizes) {
          bias = constant_as_floats(g_.values[other]);
          has_bias = true;
          absorbed_.insert(add);
          out = an.outputs[0];
        }
      }
    }
    GemmEpilogue epilogue = has_bias ? GemmEpilogue::Bias : GemmEpilogue::None;
    if (const int act = single_consumer(out); act >= 0 && g_.nodes[act].partition == p_.index) {
      const IrNode& an = g_.nodes[act];
      if (an.op_type == "Relu") {
        epilogue = has_bias ? GemmEpilogue::BiasRelu : GemmEpilogue::Relu;
      } else if (an.op_type == "Gelu" && an.attr_string("approximate") == "tanh" && has_bias) {
        epilogue = GemmEpilogue::BiasGeluTanh;
      }
      if (epilogue == GemmEpilogue::BiasRelu || epilogue == GemmEpilogue::Relu ||
          epilogue == GemmEpilogue::BiasGeluTanh) {
        absorbed_.insert(act);
        out = an.outputs[0];
      }
    }

    const DType d_dtype = slot(out).dtype;
    BATON_ASSIGN_OR_RETURN(const int a_val, ensure(a, T_));
    BATON_ASSIGN_OR_RETURN(const int b_val, ensure(b, T_));
    int c_val = -1;
    if (c_matrix >= 0) {
      BATON_ASSIGN_OR_RETURN(c_val, ensure(c_matrix, d_dtype));
    }
    const int bias_val = has_bias ? add_weights(bias, d_dtype, {nn}) : -1;

    // Row-major Y[M, N] = A'[M, K] B'[K, N] is column-major Y^T[N, M] = B'^T A'^T: cuBLASLt's A
    // is our B, its B is our A, and its m, n are our N, M. The bias runs along cuBLASLt's rows.
    Planned step;
    step.record.kind = static_cast<uint32_t>(StepKind::Gemm);
    GemmStep& gs = step.record.gemm;
    gs.a_dtype = static_cast<uint8_t>(T_);
    gs.b_dtype = static_cast<uint8_t>(T_);
    gs.c_dtype = static_cast<uint8_t>(d_dtype);
    gs.d_dtype = static_cast<uint8_t>(d_dtype);
    gs.bias_dtype = static_cast<uint8_t>(d_dtype);
    gs.trans_a = tb ? 1 : 0;
    gs.trans_b = ta ? 1 : 0;
    gs.epilogue = static_cast<uint8_t>(epilogue);
    gs.has_c = c_val >= 0 ? 1 : 0;
    gs.compute = static_cast<uint8_t>(t_.precision);
    gs.batch = static_cast<uint32_t>(batch);
    gs.m = nn;
    gs.n = m;
    gs.k = k;
    gs.lda = tb ? k : nn;
    gs.ldb = ta ? m : k;
    gs.ldc = nn;
    gs.ldd = nn;
    gs.stride_a = stride_b;
    gs.stride_b = stride_a;
    gs.stride_c = batch > 1 ? m * nn : 0;
    gs.stride_d = batch > 1 ? m * nn : 0;
    gs.alpha = alpha;
    gs.beta = c_val >= 0 ? c_beta : 0.0f;
    step.operands = {b_val, a_val, c_val, out, bias_val};
    steps_.push_back(std::move(step));
    return Status();
  }

  Status lower_softmax(int idx) {
    const IrNode& n = g_.nodes[idx];
    const std::vector<int64_t>& s = g_.values[n.inputs[0]].sizes;
    const int64_t axis = n.attr_int("axis");  // canonical: in [0, rank)
    const int64_t outer = numel({s.begin(), s.begin() + axis});
    const int64_t inner = numel({s.begin() + axis + 1, s.end()});
    const int in = n.inputs[0], out = n.outputs[0];
    const std::string name = next_kernel_name("softmax");
    LaunchShape launch;
    std::string code =
        generate_softmax(name, slot(in).dtype, slot(out).dtype, outer, s[axis], inner, &launch);
    add_kernel(name, std::move(code), launch, {in, out});
    return Status();
  }

  Status lower_transpose(int idx) {
    const IrNode& n = g_.nodes[idx];
    const int in = n.inputs[0], out = n.outputs[0];
    const std::vector<int64_t>& s = g_.values[in].sizes;
    const std::vector<int64_t>& perm = n.attr_ints("perm");  // canonical: always present
    const std::string name = next_kernel_name("transpose");
    LaunchShape launch;
    std::string code = generate_transpose(name, slot(in).dtype, slot(out).dtype, s, perm, &launch);
    add_kernel(name, std::move(code), launch, {in, out});
    return Status();
  }

  Status lower_concat(int idx) {
    const IrNode& n = g_.nodes[idx];
    const int out = n.outputs[0];
    const std::vector<int64_t>& s = g_.values[out].sizes;
    const int64_t axis = n.attr_int("axis");  // canonical: in [0, rank)
    std::vector<int> operands;
    std::vector<DType> dtypes;
    std::vector<int64_t> axis_sizes;
    for (int v : n.inputs) {
      const int src = g_.values[v].constant ? weight(v, A_) : v;
      operands.push_back(src);
      dtypes.push_back(slot(src).dtype);
      axis_sizes.push_back(g_.values[v].sizes[axis]);
    }
    operands.push_back(out);
    const std::string name = next_kernel_name("concat");
    LaunchShape launch;
    std::string code =
        generate_concat(name, dtypes, slot(out).dtype, numel({s.begin(), s.begin() + axis}),
                        axis_sizes, numel({s.begin() + axis + 1, s.end()}), &launch);
    add_kernel(name, std::move(code), launch, std::move(operands));
    return Status();
  }

  // --- planning and serialization ----------------------------------------------------------

  BufferRef ref_of(int v) const {
    const Slot& s = slot(v);
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
    return r;
  }

  Result<compiler::LoweredPartition> finish() {
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
    std::vector<compiler::BufferRequest> requests;
    std::vector<int> request_slot;
    for (auto& [v, s] : slots_) {
      if (s.kind != Slot::Kind::Scratch || s.last < 0) continue;
      requests.push_back(
          {s.bytes(), Device::cuda(static_cast<int16_t>(t_.device_id)), s.first, s.last});
      request_slot.push_back(v);
    }
    const compiler::MemoryPlan plan = compiler::plan_memory(requests, kEngineAlignment);
    for (size_t i = 0; i < requests.size(); ++i) slots_.at(request_slot[i]).offset = plan.offset[i];

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
    e.scratch_bytes = plan.arenas.empty() ? 0 : plan.arenas[0].size;
    bool any_gemm = false;
    for (Planned& s : steps_) {
      switch (static_cast<StepKind>(s.record.kind)) {
        case StepKind::Gemm: {
          any_gemm = true;
          GemmStep& gs = s.record.gemm;
          gs.a = ref_of(s.operands[0]);
          gs.b = ref_of(s.operands[1]);
          if (s.operands[2] >= 0) gs.c = ref_of(s.operands[2]);
          gs.d = ref_of(s.operands[3]);
          if (s.operands[4] >= 0) gs.bias = ref_of(s.operands[4]);
          break;
        }
        case StepKind::Kernel:
          BATON_CHECK_OR_RETURN(s.operands.size() <= kMaxKernelOperands, NotSupported,
                                "a kernel of partition '{}' has {} operands (at most {})", p_.name,
                                s.operands.size(), kMaxKernelOperands);
          for (size_t o = 0; o < s.operands.size(); ++o)
            s.record.kernel.operands[o] = ref_of(s.operands[o]);
          break;
        case StepKind::Copy:
          s.record.copy.src = ref_of(s.operands[0]);
          s.record.copy.dst = ref_of(s.operands[1]);
          break;
      }
      e.steps.push_back(s.record);
    }
    e.workspace_bytes = any_gemm ? kWorkspaceBytes : 0;
    e.kernel_names = kernel_names_;
    e.weights = std::move(weights_);
    if (!kernel_names_.empty()) {
      BATON_ASSIGN_OR_RETURN(e.cubin, compile_to_cubin(kernel_prelude() + source_, t_.sm_arch,
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

  const Graph& g_;
  const compiler::Partition& p_;
  const EngineTarget& t_;
  const DType T_;  // GEMM operands and weights
  const DType A_;  // activations between steps
  int next_synthetic_;
  std::map<int, Slot> slots_;
  std::map<int, std::vector<int>> consumers_;
  std::set<int> is_output_;
  std::set<int> absorbed_;
  std::map<std::pair<int, int>, int> weight_cache_;
  std::map<std::pair<int, int>, int> cast_cache_;
  std::vector<Planned> steps_;
  std::vector<std::string> kernel_names_;
  std::string source_;
  std::vector<uint8_t> weights_;
};

bool float_tensor(const IrValue& v) {
  return v.dtype == DType::Float32 && v.sizes.size() <= kEngineMaxRank && numel(v.sizes) > 0;
}

}  // namespace

bool EngineBuilder::supports(const Graph& graph, const IrNode& node) const {
  if (!node.domain.empty()) return false;
  const std::string& op = node.op_type;
  if (!kElementwise.count(op) && !kViews.count(op) && !kOthers.count(op)) return false;
  for (int v : node.outputs) {
    if (v < 0 || !float_tensor(graph.values[v])) return false;
  }
  // Shape arguments (Reshape's shape, Squeeze/Unsqueeze axes) are compile-time constants.
  const size_t data_inputs =
      (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") ? 1 : node.inputs.size();
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int v = node.inputs[i];
    if (v < 0) continue;
    if (i >= data_inputs) {
      if (!graph.values[v].constant) return false;
      continue;
    }
    if (!float_tensor(graph.values[v])) return false;
  }
  if (op == "MatMul") {
    std::vector<int64_t> a = graph.values[node.inputs[0]].sizes,
                         b = graph.values[node.inputs[1]].sizes;
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    const std::vector<int64_t> ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    if (!(bb.empty() || ab.empty() || ab == bb)) return false;
  }
  if (op == "Gemm" && node.inputs.size() > 2 && node.inputs[2] >= 0) {
    const IrValue& c = graph.values[node.inputs[2]];
    if (!c.constant && c.sizes != graph.values[node.outputs[0]].sizes) return false;
  }
  if (op == "Concat" && node.inputs.size() > kMaxKernelOperands - 1) return false;
  return true;
}

Result<Device> EngineBuilder::blob_device(std::span<const uint8_t> blob) const {
  // The blob is a fresh std::vector here; parse a 64-byte aligned copy.
  std::vector<uint8_t> storage(blob.size() + 64);
  auto* aligned =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
  if (!blob.empty()) std::memcpy(aligned, blob.data(), blob.size());
  BATON_ASSIGN_OR_RETURN(EngineBlob parsed, EngineBlob::parse({aligned, blob.size()}));
  return Device::cuda(static_cast<int16_t>(parsed.header().device_id));
}

Result<compiler::LoweredPartition> EngineBuilder::lower(const Graph& graph,
                                                        const compiler::Partition& partition) {
  BATON_CHECK_OR_RETURN(target_.sm_arch >= 50, InvalidArgument,
                        "no SM architecture to build for (pass --arch sm_XY or build on a GPU)");
  return Lowering(graph, partition, target_).run();
}

}  // namespace baton::cuda
