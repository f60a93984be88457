// Gemm, MatMul and Baton's Linear on the GPU: one cuBLASLt GEMM each, with a bias (Gemm's C
// vector, Linear's B: a MatMul's bias Add becomes a Linear in the optimizer) and a following ReLU
// or tanh-GELU fused into cuBLASLt's epilogue when nothing else reads the intermediate values. An
// exact (erf) GELU after the bias makes the GEMM a cuDNN matmul with both in its graph, in fp16
// and bf16 engines (cudnn_gelu below; the build option gemm_gelu=kernel keeps cuBLASLt).
//
// A Linear with split outputs (Q, K and V fused by the qkv pass) is one GEMM into a scratch of
// all N columns; each output is a view of its columns (a strided view: attention reads it as it
// is, other readers get a row-major copy).
//
// A large GEMM whose N is not a multiple of 8 (GPT-2's vocabulary projection: N = 50257) gets its
// constant B and bias padded with zero columns to the next multiple of 8 and writes a result with
// that row pitch: cuBLASLt's fast kernels need 16-byte-aligned rows, and without them it falls
// back to an sm75 CUTLASS kernel (135 µs of GPT-2's 0.8 ms on an H100). The
// result is a view of the padded rows; a partition output is gathered into the caller's buffer.
#include <algorithm>
#include <string_view>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "format/program_file.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

// MatMul's operands after promoting 1-D ones: A [..., M, K], B [..., K, N]. The GPU takes batch
// dimensions on one side only, or equal on both (cuBLASLt's strided batches).
bool supports_matmul(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!float_tensors_only(graph, node)) return false;
  std::vector<int64_t> a = graph.values[node.inputs[0]].sizes,
                       b = graph.values[node.inputs[1]].sizes;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const std::vector<int64_t> ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  return bb.empty() || ab.empty() || ab == bb;
}

// A runtime C must have the result's shape (a constant C is materialized at build time).
bool supports_gemm(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!float_tensors_only(graph, node)) return false;
  if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
    const compiler::IrValue& c = graph.values[node.inputs[2]];
    if (!c.constant && c.sizes != graph.values[node.outputs[0]].sizes) return false;
  }
  return true;
}

// Linear (compiler/passes/matmul_add.cpp) with a constant or absent bias, and one output or
// several (`splits`: a fused Q/K/V projection, compiler/passes/qkv.cpp).
bool supports_linear(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (!float_tensors_only(graph, node)) return false;
  return node.inputs.size() < 3 || node.inputs[2] < 0 || graph.values[node.inputs[2]].constant;
}

// N's padding: to a multiple of 8 elements, for GEMMs of at least 2^24 multiply-adds (below that,
// the gather a padded partition output needs costs about what the padding saves).
constexpr int64_t kPadMultiple = 8;
constexpr int64_t kPadMinMacs = int64_t{1} << 24;

// B [K, N] (or [N, K] when transposed) with zero columns (rows) added up to `np`.
std::vector<float> pad_columns(const std::vector<float>& b, int64_t k, int64_t nn, int64_t np,
                               bool transposed) {
  std::vector<float> out(static_cast<size_t>(k * np), 0.0f);
  if (transposed) {
    std::copy(b.begin(), b.end(), out.begin());  // the added rows come last
    return out;
  }
  for (int64_t i = 0; i < k; ++i) std::copy_n(b.begin() + i * nn, nn, out.begin() + i * np);
  return out;
}

// Whether the exact (erf) GELU after this GEMM and its bias runs in the GEMM as a cuDNN matmul
// (StepKind::Matmul): in fp16 and bf16 engines (cuDNN's fused matmuls take 16-bit operands), one
// GEMM of one batch, no C matrix, alpha 1, the GELU's output stored in the operand dtype, and
// no operand read or written in a caller's buffer (cuDNN's plans are chosen on aligned buffers,
// and unlike cuBLASLt steps there is no algorithm kept for a caller's unaligned memory). cuBLASLt
// has only the tanh GELU, so otherwise the GELU is a kernel of its own after a bias epilogue, as
// the build option gemm_gelu=kernel asks. Measured on an H100, the same programs built both ways:
// ViT-B/16 0.509 -> 0.490 ms, BERT-base 0.483 -> 0.461 with up to 16 of cuDNN's plans timed
// (engine.cpp); with only the heuristics' first four, BERT was 5% slower.
bool cudnn_gelu(const Lowering& ctx, int a, int b, bool split, int64_t batch, int c_matrix,
                float alpha, int view, const compiler::IrNode& gelu) {
  if (ctx.target().options.gemm_gelu == GemmGelu::Kernel) return false;
  const Precision p = ctx.target().precision;
  if (p != Precision::FP16 && p != Precision::BF16) return false;
  // A binding of another dtype is read through a cast copy (Lowering::ensure).
  auto in_place = [&](int v) {
    return !ctx.is_constant(v) && ctx.is_binding(v) && ctx.dtype_of(v) == ctx.operand_dtype();
  };
  return !split && batch == 1 && c_matrix < 0 && alpha == 1.0f && view < 0 &&
         ctx.dtype_of(gelu.outputs[0]) == ctx.operand_dtype() && !in_place(a) && !in_place(b) &&
         !ctx.is_binding(gelu.outputs[0]);
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const bool gemm = n.op_type == "Gemm";
  const bool linear = n.op_type == "Linear";
  const bool split = linear && n.outputs.size() > 1;
  const int a = n.inputs[0];
  const int b = n.inputs[1];
  const int c = (gemm || linear) && n.inputs.size() > 2 ? n.inputs[2] : -1;
  const float alpha = gemm ? static_cast<float>(n.attr_float("alpha")) : 1.0f;
  const float beta = gemm ? static_cast<float>(n.attr_float("beta")) : 1.0f;
  const bool ta = gemm && n.attr_int("transA") != 0;
  const bool tb = gemm && n.attr_int("transB") != 0;
  std::vector<int64_t> as = ctx.value(a).sizes, bs = ctx.value(b).sizes;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t m = ta ? as[as.size() - 1] : as[as.size() - 2];
  const int64_t k = ta ? as[as.size() - 2] : as[as.size() - 1];
  const int64_t nn = tb ? bs[bs.size() - 2] : bs[bs.size() - 1];
  int64_t batch = 1, stride_a = 0, stride_b = 0;
  const std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  if (b_batch.empty()) {
    m *= ops::product(a_batch);  // [..., M, K] x [K, N]: one GEMM over all rows
  } else if (a_batch.empty()) {
    batch = ops::product(b_batch);
    stride_b = k * nn;
  } else if (a_batch == b_batch) {
    batch = ops::product(a_batch);
    stride_a = m * k;
    stride_b = k * nn;
  } else {
    return BATON_ERROR(Internal, "{}: batch broadcasting the builder does not handle",
                       n.describe());
  }

  int out = n.outputs[0];
  if (split) {
    // One result of all N columns, in the operand dtype when every output is stored in it (fp16
    // engines), else in float32 (what cuBLASLt writes); the outputs become views of it below.
    bool operand_outputs = true;
    for (int o : n.outputs) operand_outputs &= o < 0 || ctx.dtype_of(o) == ctx.operand_dtype();
    std::vector<int64_t> sizes = ctx.value(n.outputs[0]).sizes;
    sizes.back() = nn;
    out = ctx.new_scratch(operand_outputs ? ctx.operand_dtype() : DType::Float32, sizes);
  }
  std::vector<float> bias;
  bool has_bias = false;
  int c_matrix = -1;
  float c_beta = 0.0f;
  auto is_row_vector = [&](const std::vector<int64_t>& s) {
    return (s.size() == 1 && s[0] == nn) || (s.size() == 2 && s[0] == 1 && s[1] == nn);
  };
  if (c >= 0) {
    const compiler::IrValue& cv = ctx.value(c);
    if (cv.constant && is_row_vector(cv.sizes)) {
      bias = ctx.constant_floats(c);
      for (float& x : bias) x *= beta;
      has_bias = true;
    } else if (cv.constant) {
      // Materialized: beta * C broadcast to [M, N].
      std::vector<float> full(static_cast<size_t>(m * nn));
      const std::vector<float> src = ctx.constant_floats(c);
      const std::vector<int64_t> cs = cv.sizes;
      const int64_t rows = cs.size() == 2 ? cs[0] : 1, cols = cs.empty() ? 1 : cs.back();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < nn; ++j) {
          full[i * nn + j] = beta * src[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
        }
      }
      c_matrix = ctx.add_weights(full, ctx.dtype_of(out), {m, nn});
      c_beta = 1.0f;
    } else {
      c_matrix = c;
      c_beta = beta;
    }
  }
  // A MatMul's bias Add is fused by the optimizer (the matmul-add pass makes a Linear of them),
  // not here: a MatMul that reaches the lowering has none.
  GemmEpilogue epilogue = has_bias ? GemmEpilogue::Bias : GemmEpilogue::None;
  // The activation reads the result directly or through one view op (format::is_view_op) that
  // nothing else reads (TorchScript's GPT-2: Gemm, Reshape, Gelu); the GEMM then writes the
  // activation's output, whose bytes are the same row-major values under another shape.
  int act = split ? -1 : ctx.single_consumer(out), view = -1;
  if (act >= 0 && format::is_view_op(ctx.node(act).domain, ctx.node(act).op_type)) {
    view = act;
    act = ctx.single_consumer(ctx.node(act).outputs[0]);
  }
  if (act >= 0) {
    const compiler::IrNode& an = ctx.node(act);
    if (an.op_type == "Relu") {
      epilogue = has_bias ? GemmEpilogue::BiasRelu : GemmEpilogue::Relu;
    } else if (an.op_type == "Gelu" && an.attr_string("approximate") == "tanh" && has_bias) {
      epilogue = GemmEpilogue::BiasGeluTanh;
    } else if (an.op_type == "Gelu" && an.attr_string("approximate") != "tanh" && has_bias &&
               cudnn_gelu(ctx, a, b, split, batch, c_matrix, alpha, view, an)) {
      epilogue = GemmEpilogue::BiasGeluErf;
    }
  }
  const bool fused_act = epilogue == GemmEpilogue::BiasRelu || epilogue == GemmEpilogue::Relu ||
                         epilogue == GemmEpilogue::BiasGeluTanh ||
                         epilogue == GemmEpilogue::BiasGeluErf;
  if (fused_act) {
    ctx.absorb(act);
    if (view >= 0) ctx.absorb(view);
    out = ctx.node(act).outputs[0];
  }

  const DType operand = ctx.operand_dtype();
  // cuBLASLt (32-bit compute) writes float32, or the operands' own 16-bit type: a float16
  // program output of an fp32 engine (a model exported in fp16) goes through a float32 result and
  // a cast.
  const int result = out;
  const bool direct = ctx.dtype_of(out) == DType::Float32 || ctx.dtype_of(out) == operand;
  if (!direct) out = ctx.new_scratch(DType::Float32, ctx.value(result).sizes);
  const DType d_dtype = ctx.dtype_of(out);
  // Pad N (see the top of this file): a constant B, one batch, no C matrix, the result written
  // as cuBLASLt computes it.
  const int64_t np = (nn + kPadMultiple - 1) / kPadMultiple * kPadMultiple;
  const bool pad = !split && !(fused_act && view >= 0) && np != nn && ctx.is_constant(b) &&
                   batch == 1 && c_matrix < 0 && direct && m * nn * k >= kPadMinMacs;
  const int64_t ldn = pad ? np : nn;
  BATON_ASSIGN_OR_RETURN(const int a_val, ctx.ensure(a, operand));
  int b_op = -1, d = out;
  if (pad) {
    b_op = ctx.add_weights(pad_columns(ctx.constant_floats(b), k, nn, np, tb), operand,
                           tb ? std::vector<int64_t>{np, k} : std::vector<int64_t>{k, np});
    if (has_bias) bias.resize(static_cast<size_t>(np), 0.0f);
    d = ctx.new_scratch(d_dtype, {m, np});
  } else {
    BATON_ASSIGN_OR_RETURN(b_op, ctx.ensure(b, operand));
  }
  int c_val = -1;
  if (c_matrix >= 0) {
    BATON_ASSIGN_OR_RETURN(c_val, ctx.ensure(c_matrix, d_dtype));
  }
  const int bias_val = has_bias ? ctx.add_weights(bias, d_dtype, {ldn}) : -1;

  // Row-major Y[M, N] = A'[M, K] B'[K, N] is column-major Y^T[N, M] = B'^T A'^T: cuBLASLt's A
  // is our B, its B is our A, and its m, n are our N, M. The bias runs along cuBLASLt's rows.
  GemmStep gs{};
  gs.a_dtype = static_cast<uint8_t>(operand);
  gs.b_dtype = static_cast<uint8_t>(operand);
  gs.c_dtype = static_cast<uint8_t>(d_dtype);
  gs.d_dtype = static_cast<uint8_t>(d_dtype);
  gs.bias_dtype = static_cast<uint8_t>(d_dtype);
  gs.trans_a = tb ? 1 : 0;
  gs.trans_b = ta ? 1 : 0;
  gs.epilogue = static_cast<uint8_t>(epilogue);
  gs.has_c = c_val >= 0 ? 1 : 0;
  gs.compute = static_cast<uint8_t>(ctx.target().precision);
  gs.batch = static_cast<uint32_t>(batch);
  gs.m = ldn;
  gs.n = m;
  gs.k = k;
  gs.lda = tb ? k : ldn;
  gs.ldb = ta ? m : k;
  gs.ldc = ldn;
  gs.ldd = ldn;
  gs.stride_a = stride_b;
  gs.stride_b = stride_a;
  gs.stride_c = batch > 1 ? m * nn : 0;
  gs.stride_d = batch > 1 ? m * nn : 0;
  gs.alpha = alpha;
  gs.beta = c_val >= 0 ? c_beta : 0.0f;
  if (epilogue == GemmEpilogue::BiasGeluErf) {
    ctx.add_matmul(gs, {b_op, a_val, -1, d, bias_val});
  } else {
    ctx.add_gemm(gs, {b_op, a_val, c_val, d, bias_val});
  }
  if (pad) {
    // The result: the first N of each padded row.
    const std::vector<int64_t>& sizes = ctx.value(out).sizes;
    std::vector<int64_t> strides(sizes.size(), 1);
    for (size_t i = sizes.size() - 1; i-- > 0;)
      strides[i] = (i + 2 == sizes.size() ? np : strides[i + 1] * sizes[i + 1]);
    ctx.view(out, d, std::move(strides), 0);
  }
  if (split) {
    // Output i: columns [first, first + splits[i]) of every row.
    const std::vector<int64_t>& splits = n.attr_ints("splits");
    int64_t first = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] >= 0) ctx.view(n.outputs[i], d, ctx.strides_of(d), first);
      first += splits[i];
    }
    return Status();
  }
  if (!direct) ctx.add_cast(out, result, ctx.dtype_of(result));
  return Status();
}

}  // namespace

const OpLowering kGemmLowering{"Gemm", &supports_gemm, &lower, 0b11};
const OpLowering kMatMulLowering{"MatMul", &supports_matmul, &lower, 0b11};
const OpLowering kLinearLowering{"Linear", &supports_linear, &lower, 0b11, "baton"};

}  // namespace baton::cuda
