// Gemm, MatMul and Baton's Linear on the GPU: one cuBLASLt GEMM each, with a bias (Gemm's C
// vector, Linear's B) and a Linear's activation in cuBLASLt's epilogue (ReLU, tanh-GELU). The
// optimizer decides what is fused (matmul-add: a MatMul's bias Add becomes a Linear; fuse-linear:
// a following Relu or Gelu becomes its `activation`); this file only reads the node. An exact
// (erf) GELU after the bias makes the GEMM a cuDNN matmul with both in its graph, in fp16 and bf16
// engines (cudnn_gelu below; the build option gemm_gelu=kernel keeps cuBLASLt and a GELU kernel
// after it).
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
// That gather is a pass over the whole result (405 µs of GPT-2's 2.92 ms at 8 x 512 on an H200),
// but the way without it is slower still: B stored transposed ([N, K], aligned rows) and the
// float32 result written in place with its 50257-element rows made cuBLASLt choose a kernel that
// took 3.08 ms for the projection alone (5.0 ms in all; 975fe54, bench/RESULTS.md).
#include <algorithm>
#include <string_view>

#include "backends/cuda/builder/ops/registry.h"
#include "baton/core/check.h"
#include "ops/activation.h"
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

// The product of a Gemm, MatMul or Linear as one (batched) GEMM: row-major Y [M, N] = A' [M, K]
// B' [K, N] for `batch` batches (A' and B' transposed as Gemm's transA and transB ask), MatMul's
// 1-D operands promoted. A's batch dimensions fold into M when B has none.
struct Geometry {
  int a = -1, b = -1;
  bool ta = false, tb = false;
  int64_t m = 0, k = 0, n = 0, batch = 1, stride_a = 0, stride_b = 0;
  float alpha = 1.0f, beta = 1.0f;
};

Result<Geometry> geometry_of(const Lowering& ctx, const compiler::IrNode& node) {
  Geometry g;
  const bool gemm = node.op_type == "Gemm";
  g.a = node.inputs[0];
  g.b = node.inputs[1];
  g.alpha = gemm ? static_cast<float>(node.attr_float("alpha")) : 1.0f;
  g.beta = gemm ? static_cast<float>(node.attr_float("beta")) : 1.0f;
  g.ta = gemm && node.attr_int("transA") != 0;
  g.tb = (gemm && node.attr_int("transB") != 0) ||
         (node.op_type == "Linear" && node.attr_int("transW") != 0);
  std::vector<int64_t> as = ctx.value(g.a).sizes, bs = ctx.value(g.b).sizes;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  g.m = g.ta ? as[as.size() - 1] : as[as.size() - 2];
  g.k = g.ta ? as[as.size() - 2] : as[as.size() - 1];
  g.n = g.tb ? bs[bs.size() - 2] : bs[bs.size() - 1];
  const std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  if (b_batch.empty()) {
    g.m *= ops::product(a_batch);  // [..., M, K] x [K, N]: one GEMM over all rows
  } else if (a_batch.empty()) {
    g.batch = ops::product(b_batch);
    g.stride_b = g.k * g.n;
  } else if (a_batch == b_batch) {
    g.batch = ops::product(a_batch);
    g.stride_a = g.m * g.k;
    g.stride_b = g.k * g.n;
  } else {
    return BATON_ERROR(Internal, "{}: batch broadcasting the builder does not handle",
                       node.describe());
  }
  return g;
}

// Row-major Y[M, N] = A'[M, K] B'[K, N] is column-major Y^T[N, M] = B'^T A'^T: cuBLASLt's A is
// our B, its B is our A, and its m, n are our N, M (N padded to `ldn`). The bias runs along
// cuBLASLt's rows.
GemmStep gemm_step(const Geometry& g, DType operand, DType d_dtype, int64_t ldn,
                   GemmEpilogue epilogue, float c_beta, Precision precision) {
  GemmStep gs{};
  gs.a_dtype = gs.b_dtype = static_cast<uint8_t>(operand);
  gs.c_dtype = gs.d_dtype = gs.bias_dtype = static_cast<uint8_t>(d_dtype);
  gs.trans_a = g.tb ? 1 : 0;
  gs.trans_b = g.ta ? 1 : 0;
  gs.epilogue = static_cast<uint8_t>(epilogue);
  gs.compute = static_cast<uint8_t>(precision);
  gs.batch = static_cast<uint32_t>(g.batch);
  gs.m = ldn;
  gs.n = g.m;
  gs.k = g.k;
  gs.lda = g.tb ? g.k : ldn;
  gs.ldb = g.ta ? g.m : g.k;
  gs.ldc = gs.ldd = ldn;
  gs.stride_a = g.stride_b;
  gs.stride_b = g.stride_a;
  gs.stride_c = gs.stride_d = g.batch > 1 ? g.m * g.n : 0;
  gs.alpha = g.alpha;
  gs.beta = c_beta;
  return gs;
}

// Row-major strides of `sizes` whose rows are `np` elements apart (a padded result).
std::vector<int64_t> padded_strides(const std::vector<int64_t>& sizes, int64_t np) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t i = sizes.size() - 1; i-- > 0;)
    strides[i] = (i + 2 == sizes.size() ? np : strides[i + 1] * sizes[i + 1]);
  return strides;
}

// Whether the exact (erf) GELU of a Linear runs in its GEMM as a cuDNN matmul
// (StepKind::Matmul): in fp16 and bf16 engines (cuDNN's fused matmuls take 16-bit operands), one
// GEMM of one batch, no C matrix, alpha 1, the output stored in the operand dtype, and no operand
// read or written in a caller's buffer (cuDNN's plans are chosen on aligned buffers, and unlike
// cuBLASLt steps there is no algorithm kept for a caller's unaligned memory). cuBLASLt has only
// the tanh GELU, so otherwise the GELU is a kernel of its own after a bias epilogue, as the build
// option gemm_gelu=kernel asks. Measured on an H100, the same programs built both ways: ViT-B/16
// 0.509 -> 0.490 ms, BERT-base 0.483 -> 0.461 with up to 16 of cuDNN's plans timed (engine.cpp);
// with only the heuristics' first four, BERT was 5% slower.
bool cudnn_gelu(const Lowering& ctx, const Geometry& g, int out) {
  // A dynamic engine takes it too, its plan built per shape (ExecutionContext::fit_cudnn) from
  // the plan timed for the declared OPT shape or the largest sizes. With the heuristics' first
  // plan instead, full-size BERT-base fp16 had run at 1.02-1.19 of the same dynamic program with
  // cuBLASLt and a GELU kernel (`90d6abc`); with the timed plan it runs at 0.93-1.01 of it, and
  // its twelve GELU kernels are gone (H200; bench/RESULTS.md).
  if (ctx.target().options.gemm_gelu == GemmGelu::Kernel || !ctx.cudnn_fusions()) return false;
  const Precision p = ctx.target().precision;
  if (p != Precision::FP16 && p != Precision::BF16) return false;
  // A binding of another dtype is read through a cast copy (Lowering::ensure).
  auto in_place = [&](int v) {
    return !ctx.is_constant(v) && ctx.is_binding(v) && ctx.dtype_of(v) == ctx.operand_dtype();
  };
  return g.batch == 1 && g.alpha == 1.0f && ctx.dtype_of(out) == ctx.operand_dtype() &&
         !in_place(g.a) && !in_place(g.b) && !ctx.is_binding(out);
}

// The epilogue the GEMM step itself applies: the bias, and the node's activation (a Linear's,
// from the fuse-linear pass) where cuBLASLt or cuDNN has it; None for an activation it leaves to
// a kernel after it.
GemmEpilogue epilogue_of(const Lowering& ctx, const Geometry& g, const ops::Activation& act,
                         bool has_bias, int c_matrix, int out) {
  const GemmEpilogue plain = has_bias ? GemmEpilogue::Bias : GemmEpilogue::None;
  if (act.op == "Relu") return has_bias ? GemmEpilogue::BiasRelu : GemmEpilogue::Relu;
  if (act.op == "GeluTanh" && has_bias) return GemmEpilogue::BiasGeluTanh;
  if (act.op == "Gelu" && has_bias && c_matrix < 0 && cudnn_gelu(ctx, g, out))
    return GemmEpilogue::BiasGeluErf;
  return plain;
}

// The node's C input: a bias row (beta folded in), or a C matrix (a constant one materialized
// at [M, N]), with the beta that scales it.
struct CInput {
  std::vector<float> bias;
  bool has_bias = false;
  int matrix = -1;
  float beta = 0.0f;
};
CInput c_input_of(Lowering& ctx, const compiler::IrNode& n, const Geometry& g, DType dtype) {
  CInput r;
  const int c = n.op_type != "MatMul" && n.inputs.size() > 2 ? n.inputs[2] : -1;
  if (c < 0) return r;
  const compiler::IrValue& cv = ctx.value(c);
  const std::vector<int64_t>& cs = cv.sizes;
  const bool row =
      (cs.size() == 1 && cs[0] == g.n) || (cs.size() == 2 && cs[0] == 1 && cs[1] == g.n);
  if (cv.constant && row) {
    r.bias = ctx.constant_floats(c);
    for (float& x : r.bias) x *= g.beta;
    r.has_bias = true;
  } else if (cv.constant) {
    // Materialized: beta * C broadcast to [M, N].
    std::vector<float> full(static_cast<size_t>(g.m * g.n));
    const std::vector<float> src = ctx.constant_floats(c);
    const int64_t rows = cs.size() == 2 ? cs[0] : 1, cols = cs.empty() ? 1 : cs.back();
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j)
        full[i * g.n + j] = g.beta * src[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
    r.matrix = ctx.add_weights(full, dtype, {g.m, g.n});
    r.beta = 1.0f;
  } else {
    r.matrix = c;
    r.beta = g.beta;
  }
  return r;
}

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  BATON_ASSIGN_OR_RETURN(const Geometry g, geometry_of(ctx, n));
  const bool split = n.op_type == "Linear" && n.outputs.size() > 1;
  ops::Activation act;
  if (n.op_type == "Linear") {
    BATON_ASSIGN_OR_RETURN(
        act, ops::make_activation(n.attr_string("activation"), n.attr_floats("activation_params"),
                                  n.describe()));
  }
  int out = n.outputs[0];
  if (split) {
    // One result of all N columns, in the operand dtype when every output is stored in it (fp16
    // engines), else in float32 (what cuBLASLt writes); the outputs become views of it below.
    bool operand_outputs = true;
    for (int o : n.outputs) operand_outputs &= o < 0 || ctx.dtype_of(o) == ctx.operand_dtype();
    std::vector<int64_t> sizes = ctx.value(n.outputs[0]).sizes;
    sizes.back() = g.n;
    out = ctx.new_scratch(operand_outputs ? ctx.operand_dtype() : DType::Float32, sizes);
  }
  CInput c = c_input_of(ctx, n, g, ctx.dtype_of(out));
  const GemmEpilogue epilogue = epilogue_of(ctx, g, act, c.has_bias, c.matrix, out);
  const bool act_in_step = epilogue != GemmEpilogue::None && epilogue != GemmEpilogue::Bias;
  const bool act_kernel = !act.none() && !act_in_step;

  const DType operand = ctx.operand_dtype();
  // cuBLASLt (32-bit compute) writes float32, or the operands' own 16-bit type: a float16
  // program output of an fp32 engine (a model exported in fp16) goes through a float32 result and
  // a cast; an activation the step does not take is a kernel after it.
  const int result = out;
  const bool direct =
      !act_kernel && (ctx.dtype_of(out) == DType::Float32 || ctx.dtype_of(out) == operand);
  if (!direct) {
    const DType written = ctx.dtype_of(out) == operand ? operand : DType::Float32;
    out = ctx.new_scratch(written, ctx.value(result).sizes);
  }
  const DType d_dtype = ctx.dtype_of(out);
  // Pad N (see the top of this file): a constant B, one batch, no C matrix, the result written
  // as cuBLASLt computes it.
  // In a dynamic engine the rows are those at its maxima, so that every size pads alike (one
  // engine cannot pad at some sizes and not at others: its steps and weights would differ). Only
  // the rows vary with the sizes, so they grow as the output does (a static engine: g.m itself;
  // a scalar or 1-D output, a dot product or a matrix times a vector, included).
  const int64_t np = (g.n + kPadMultiple - 1) / kPadMultiple * kPadMultiple;
  const int64_t here = ops::product(ctx.value(n.outputs[0]).sizes);
  const int64_t upper_m =
      here > 0 ? g.m * ops::product(ctx.upper_sizes_of(n.outputs[0])) / here : g.m;
  const bool pad = !split && np != g.n && ctx.is_constant(g.b) && g.batch == 1 && c.matrix < 0 &&
                   direct && upper_m * g.n * g.k >= kPadMinMacs;
  const int64_t ldn = pad ? np : g.n;
  BATON_ASSIGN_OR_RETURN(const int a_val, ctx.ensure(g.a, operand));
  int b_op = -1, d = out;
  if (pad) {
    b_op = ctx.add_weights(pad_columns(ctx.constant_floats(g.b), g.k, g.n, np, g.tb), operand,
                           g.tb ? std::vector<int64_t>{np, g.k} : std::vector<int64_t>{g.k, np});
    if (c.has_bias) c.bias.resize(static_cast<size_t>(np), 0.0f);
    d = ctx.new_scratch(d_dtype, {g.m, np});
  } else {
    BATON_ASSIGN_OR_RETURN(b_op, ctx.ensure(g.b, operand));
  }
  int c_val = -1;
  if (c.matrix >= 0) {
    BATON_ASSIGN_OR_RETURN(c_val, ctx.ensure(c.matrix, d_dtype));
  }
  const int bias_val = c.has_bias ? ctx.add_weights(c.bias, d_dtype, {ldn}) : -1;
  GemmStep gs = gemm_step(g, operand, d_dtype, ldn, epilogue, c_val >= 0 ? c.beta : 0.0f,
                          ctx.target().precision);
  gs.has_c = c_val >= 0 ? 1 : 0;
  if (epilogue == GemmEpilogue::BiasGeluErf) {
    ctx.add_matmul(gs, {b_op, a_val, -1, d, bias_val});
  } else {
    ctx.add_gemm(gs, {b_op, a_val, c_val, d, bias_val});
  }
  if (pad) ctx.view(out, d, padded_strides(ctx.value(out).sizes, np), 0);
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
  if (act_kernel) {
    ctx.add_epilogue(out, -1, activation_expression(act), result);
  } else if (!direct) {
    ctx.add_cast(out, result, ctx.dtype_of(result));
  }
  return Status();
}

}  // namespace

const OpLowering kGemmLowering{"Gemm", &supports_gemm, &lower, 0b11};
const OpLowering kMatMulLowering{"MatMul", &supports_matmul, &lower, 0b11};
const OpLowering kLinearLowering{"Linear", &supports_linear, &lower, 0b11, "baton"};

}  // namespace baton::cuda
