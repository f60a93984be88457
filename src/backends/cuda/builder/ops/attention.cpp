// Baton's Attention (ops/attention.cpp) on the GPU.
//
// fp16 and bf16 engines run it as one cuDNN fused attention step (SdpaStep, flash attention) when
// cuDNN can take it: rank 3 or 4, head dimensions multiples of 8 up to 128, and no mask or any
// mask as an additive bias (a boolean mask becomes 0 / mask_fill), materialized once per mask as a
// contiguous [B or 1, H or 1, Sq, Sk] tensor. A constant causal mask also goes through the bias:
// the engine format has SdpaMask::Causal (cuDNN's own causal mask, no bias tensor), but the
// builder does not emit it until it has been checked on a GPU. Q, K and V are read through their
// strides, so the transposes and splits in front of them are views (no copies); the output is
// written straight into the buffer of a following Transpose(0, 2, 1, 3), which then costs nothing.
//
// Dynamic engines take it too: cuDNN builds a plan for one shape, so the engine builds one per
// shape a call runs at (ExecutionContext::fit_cudnn), as it does for convolutions.
//
// Otherwise (fp32 and tf32 engines, other shapes) as three steps that work in every precision:
//   1. S = scale * Q K^T      one strided-batched cuBLASLt GEMM over the leading dimensions, Q and
//                             K in the engine's operand dtype, S in float32 scratch (softmax's
//                             input keeps its precision: a bf16 S would shift P by 1e-2)
//   2. P = softmax(mask(S))   one generated kernel, a warp or a block per row
//                             (device/attention.cuh): the additive or boolean mask read through
//                             broadcast strides, the softmax in float, NaN -> 0 when nan_to_zero;
//                             P in the operand dtype
//   3. Y = P V                a second strided-batched GEMM
#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <optional>

#include "backends/cuda/builder/ops/registry.h"
#include "backends/cuda/builder/ops/row_launch.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "format/program_file.h"
#include "ops/shape.h"

namespace baton::cuda {
namespace {

bool tensor_ok(const compiler::IrValue& v, bool allow_bool) {
  const bool float_type =
      v.dtype == DType::Float32 || v.dtype == DType::Float16 || v.dtype == DType::BFloat16;
  const auto n = checked_numel(v.sizes);
  return (float_type || (allow_bool && v.dtype == DType::Bool)) &&
         v.sizes.size() <= kEngineMaxRank && n.has_value() && *n > 0;
}

// Float Q, K, V and Y with at least one element each (so D, Sk > 0), a float or bool Mask.
bool supports(const compiler::Graph& graph, const compiler::IrNode& node) {
  if (node.inputs.size() < 3 || node.outputs.size() != 1 || node.outputs[0] < 0) return false;
  for (size_t i = 0; i < 3; ++i) {
    if (node.inputs[i] < 0 || !tensor_ok(graph.values[node.inputs[i]], false)) return false;
  }
  if (!tensor_ok(graph.values[node.outputs[0]], false)) return false;
  const int mask = node.inputs.size() > 3 ? node.inputs[3] : -1;
  if (mask >= 0 && !tensor_ok(graph.values[mask], true)) return false;
  // One row of scores per warp or block.
  const std::vector<int64_t>& q = graph.values[node.inputs[0]].sizes;
  return ops::product(q, 0, q.size() - 1) <= INT_MAX;
}

// --- cuDNN's fused attention --------------------------------------------------------------------

constexpr int64_t kMaxSdpaHeadDim = 128;

// One of Q, K, V as cuDNN reads it: in the operand dtype, its last dimension (`contiguous_dim`)
// with stride 1, its start and other strides 16-byte aligned; `value` is the value to bind.
struct SdpaOperand {
  int value = -1;
  std::array<int64_t, 3> strides{};  // batch, head, sequence
};

bool sdpa_layout(const Lowering& ctx, int v, DType dtype, size_t contiguous_dim) {
  if (ctx.dtype_of(v) != dtype) return false;
  const std::vector<int64_t> st = ctx.strides_of(v);
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  if (st[contiguous_dim] != 1 || (ctx.view_offset(v) * elem) % 16 != 0) return false;
  for (size_t d = 0; d < st.size(); ++d) {
    if (d != contiguous_dim && (st[d] * elem) % 16 != 0) return false;
  }
  return true;
}

// `v` [B, H, S, X] (rank 4) or [B, S, X] (rank 3); K stored [.., X, S] when `transposed`. Copied
// row-major when its layout does not suit cuDNN; nullopt when even that does not (a transposed K
// stored row-major).
Result<std::optional<SdpaOperand>> sdpa_operand(Lowering& ctx, int v, DType dtype,
                                                bool transposed) {
  const size_t r = ctx.value(v).sizes.size();
  const size_t seq = transposed ? r - 1 : r - 2, last = transposed ? r - 2 : r - 1;
  int x = ctx.is_constant(v) ? ctx.weight(v, dtype) : v;
  if (!sdpa_layout(ctx, x, dtype, last)) {
    BATON_ASSIGN_OR_RETURN(x, ctx.ensure(x, dtype));
    if (!sdpa_layout(ctx, x, dtype, last)) return std::optional<SdpaOperand>();
  }
  const std::vector<int64_t> st = ctx.strides_of(x);
  SdpaOperand out;
  out.value = x;
  out.strides = {st[0], r == 4 ? st[1] : st[0], st[seq]};
  return std::optional<SdpaOperand>(out);
}

// Whether cuDNN's fused attention takes `node` in this engine (before anything is emitted).
bool sdpa_applies(const Lowering& ctx, const compiler::IrNode& node) {
  const DType operand = ctx.operand_dtype();
  if (operand != DType::Float16 && operand != DType::BFloat16) return false;
  // A dynamic engine builds the step's plan per shape (ExecutionContext::fit_cudnn), unless its
  // fused steps did not follow its sizes (lower_dynamic's second attempt).
  if (!ctx.cudnn_fusions()) return false;
  const std::vector<int64_t>& qs = ctx.value(node.inputs[0]).sizes;
  const size_t r = qs.size();
  if (r != 3 && r != 4) return false;
  const int64_t d = qs[r - 1], dv = ctx.value(node.inputs[2]).sizes[r - 1];
  if (d % 8 != 0 || dv % 8 != 0 || d > kMaxSdpaHeadDim || dv > kMaxSdpaHeadDim) return false;
  const int mask = node.inputs.size() > 3 ? node.inputs[3] : -1;
  if (mask >= 0) {
    // The bias broadcasts over batch and heads whole or not at all.
    const std::vector<int64_t>& ms = ctx.value(mask).sizes;
    for (size_t j = 2; j < ms.size() && j < r; ++j) {
      const int64_t m = ms[ms.size() - 1 - j], q = qs[r - 1 - j];
      if (m != 1 && m != q) return false;
    }
  }
  // A transposed K must be a view whose D dimension is contiguous.
  const int k = node.inputs[1];
  return node.attr_int("k_transposed") == 0 || ctx.is_constant(k) || ctx.strides_of(k)[r - 2] == 1;
}

// The additive bias cuDNN reads for `mask`: contiguous [bb, bh, Sq, Sk] in `dtype`, made once per
// mask and shape (or the mask itself when it is stored that way).
int sdpa_bias(Lowering& ctx, const compiler::IrNode& node, int64_t bb, int64_t bh, int64_t sq,
              int64_t sk, DType dtype) {
  const int mask = node.inputs[3];
  const bool boolean = node.attr_string("mask_kind") != "add";
  const float fill = static_cast<float>(node.attr_float("mask_fill"));
  const std::string key = fmt::format("sdpa_bias {} {} {} {} {} {} {}", mask, boolean, fill, bb, bh,
                                      sq, static_cast<int>(dtype));
  if (const int known = ctx.derived(key); known >= 0) return known;
  const std::vector<int64_t> want = {bb, bh, sq, sk};
  // An additive mask computed in the engine that already is that bias (BERT's and GPT-2's Where
  // output, in the activation dtype, [1, 1, Sq, Sk] row-major): read where it is, no copy. Not a
  // caller's buffer: cuDNN's plans are chosen on aligned memory.
  if (!boolean && !ctx.is_constant(mask) && !ctx.is_binding(mask) && ctx.dtype_of(mask) == dtype &&
      ctx.value(mask).sizes == want && !ctx.strided(mask) && ctx.view_offset(mask) == 0 &&
      ctx.strides_of(mask) == std::vector<int64_t>{bh * sq * sk, sq * sk, sk, 1}) {
    ctx.remember(key, mask);
    return mask;
  }
  const int src = ctx.is_constant(mask)
                      ? (boolean ? ctx.raw_weight(mask) : ctx.weight(mask, DType::Float32))
                      : mask;
  const std::vector<int64_t> sizes = {bb, bh, sq, sk};
  TypedKernel k;
  k.sizes = sizes;
  k.out = dtype;
  k.expression = boolean ? fmt::format("({{0}} ? 0.0f : {})", float_literal(fill)) : "{0}";
  // The mask broadcasts against the attention's [B, H, Sq, Sk] (rank 4) or [B, Sq, Sk] (rank 3,
  // no head dimension: stride 0 there).
  const size_t rank = ctx.value(node.inputs[0]).sizes.size();
  std::vector<int64_t> strides =
      broadcast_strides(ctx.value(mask).sizes, ctx.strides_of(src), rank);
  if (rank == 3) strides.insert(strides.begin() + 1, 0);
  k.inputs.push_back({ctx.dtype_of(src), std::move(strides), 0});
  const int bias = ctx.new_scratch(dtype, sizes);
  add_typed_kernel(ctx, "attention_bias", std::move(k), {src, bias});
  ctx.remember(key, bias);
  return bias;
}

// The Transpose reading the attention's output [B, H, Sq, Dv], when it is the output's only reader
// (directly, or through a view op such as Reshape to the same shape that nothing else reads:
// TorchScript's GPT-2 writes one, `reshape` is then set to it) and keeps Dv last ((0, 2, 1, 3) for
// BERT and GPT-2, (2, 0, 1, 3) for torch's MultiheadAttention): the attention then writes the
// transposed layout itself.
int transpose_reader(const Lowering& ctx, int y, DType dtype, int* reshape) {
  *reshape = -1;
  int reader = ctx.single_consumer(y);
  if (reader < 0) return -1;
  if (const compiler::IrNode& r = ctx.node(reader);
      format::is_view_op(r.domain, r.op_type) &&
      ctx.value(r.outputs[0]).sizes == ctx.value(y).sizes) {
    *reshape = reader;
    reader = ctx.single_consumer(r.outputs[0]);
    if (reader < 0) return -1;
  }
  const compiler::IrNode& t = ctx.node(reader);
  if (t.op_type != "Transpose" || !t.domain.empty() || t.attr_ints("perm").size() != 4 ||
      t.attr_ints("perm")[3] != 3 || ctx.dtype_of(t.outputs[0]) != dtype ||
      ctx.strided(t.outputs[0]))
    return -1;
  return reader;
}

Result<bool> lower_sdpa(Lowering& ctx, int index) {
  const compiler::IrNode& node = ctx.node(index);
  if (!sdpa_applies(ctx, node)) return false;
  const DType dtype = ctx.operand_dtype();
  const int q_in = node.inputs[0], k_in = node.inputs[1], v_in = node.inputs[2];
  const int mask = node.inputs.size() > 3 ? node.inputs[3] : -1;
  const bool kt = node.attr_int("k_transposed") != 0;
  const std::vector<int64_t>& qs = ctx.value(q_in).sizes;
  const size_t r = qs.size();
  const int64_t b = qs[0], h = r == 4 ? qs[1] : 1, sq = qs[r - 2], d = qs[r - 1];
  const int64_t sk = kt ? ctx.value(k_in).sizes[r - 1] : ctx.value(k_in).sizes[r - 2];
  const int64_t dv = ctx.value(v_in).sizes[r - 1];

  BATON_ASSIGN_OR_RETURN(const std::optional<SdpaOperand> q, sdpa_operand(ctx, q_in, dtype, false));
  BATON_ASSIGN_OR_RETURN(const std::optional<SdpaOperand> k, sdpa_operand(ctx, k_in, dtype, kt));
  BATON_ASSIGN_OR_RETURN(const std::optional<SdpaOperand> v, sdpa_operand(ctx, v_in, dtype, false));
  if (!q || !k || !v) return false;  // checked by sdpa_applies; the copies then go unused

  SdpaStep a{};
  a.dtype = static_cast<uint8_t>(dtype);
  a.scale = static_cast<float>(node.attr_float("scale"));
  a.b = static_cast<uint32_t>(b);
  a.h = static_cast<uint32_t>(h);
  a.sq = static_cast<uint32_t>(sq);
  a.sk = static_cast<uint32_t>(sk);
  a.d = static_cast<uint32_t>(d);
  a.dv = static_cast<uint32_t>(dv);
  std::copy(q->strides.begin(), q->strides.end(), a.q_strides);
  std::copy(k->strides.begin(), k->strides.end(), a.k_strides);
  std::copy(v->strides.begin(), v->strides.end(), a.v_strides);
  int bias = -1;
  if (mask < 0) {
    a.mask = static_cast<uint8_t>(SdpaMask::None);
  } else {
    const std::vector<int64_t>& ms = ctx.value(mask).sizes;
    auto broadcast_dim = [&](size_t from_right) {
      return ms.size() >= from_right + 1 && ms[ms.size() - 1 - from_right] != 1;
    };
    a.mask = static_cast<uint8_t>(SdpaMask::Bias);
    a.bias_batch = r == 4 ? broadcast_dim(3) : broadcast_dim(2);
    a.bias_heads = r == 4 && broadcast_dim(2);
    bias = sdpa_bias(ctx, node, a.bias_batch ? b : 1, a.bias_heads ? h : 1, sq, sk, dtype);
  }

  // The output: straight into a following Transpose(0, 2, 1, 3)'s buffer, into Y, or into scratch
  // and then cast to Y.
  const int y = node.outputs[0];
  int o = y;
  int reshape = -1;
  const int reader = r == 4 ? transpose_reader(ctx, y, dtype, &reshape) : -1;
  if (reader >= 0) {
    // Y's dimension perm[i] is the transposed value's dimension i.
    const compiler::IrNode& t = ctx.node(reader);
    const std::vector<int64_t>& perm = t.attr_ints("perm");
    const std::vector<int64_t> t_strides = ctx.strides_of(t.outputs[0]);
    std::vector<int64_t> strides(4);
    for (size_t i = 0; i < 4; ++i) strides[static_cast<size_t>(perm[i])] = t_strides[i];
    ctx.view(y, t.outputs[0], std::move(strides), 0);
    ctx.absorb(reader);
    if (reshape >= 0) ctx.absorb(reshape);
  } else if (ctx.dtype_of(y) != dtype) {
    o = ctx.new_scratch(dtype, ctx.value(y).sizes);
  }
  const std::vector<int64_t> os = ctx.strides_of(o);
  a.o_strides[0] = os[0];
  a.o_strides[1] = r == 4 ? os[1] : os[0];
  a.o_strides[2] = os[r - 2];
  ctx.add_sdpa(a, {q->value, k->value, v->value, o, bias});
  if (o != y) ctx.add_cast(o, y, ctx.dtype_of(y));
  return true;
}

// --- the composite lowering -------------------------------------------------------------------

Status lower(Lowering& ctx, int index) {
  BATON_ASSIGN_OR_RETURN(const bool fused, lower_sdpa(ctx, index));
  if (fused) return Status();
  const compiler::IrNode& node = ctx.node(index);
  const int q = node.inputs[0], k = node.inputs[1], v = node.inputs[2];
  const int mask = node.inputs.size() > 3 ? node.inputs[3] : -1;
  const std::vector<int64_t>& qs = ctx.value(q).sizes;
  const size_t r = qs.size();
  const bool kt = node.attr_int("k_transposed") != 0;
  const int64_t sq = qs[r - 2], d = qs[r - 1];
  const int64_t sk = kt ? ctx.value(k).sizes[r - 1] : ctx.value(k).sizes[r - 2];
  const int64_t dv = ctx.value(v).sizes[r - 1];
  const int64_t batches = ops::product(qs, 0, r - 2);
  const DType operand = ctx.operand_dtype();
  // The batched GEMMs read row-major operands.
  auto gemm_operand = [&](int x) -> Result<int> {
    BATON_ASSIGN_OR_RETURN(const int converted, ctx.ensure(x, operand));
    return ctx.row_major(converted);
  };
  BATON_ASSIGN_OR_RETURN(const int q_val, gemm_operand(q));
  BATON_ASSIGN_OR_RETURN(const int k_val, gemm_operand(k));
  BATON_ASSIGN_OR_RETURN(const int v_val, gemm_operand(v));

  // S = scale * Q K^T: K is read transposed unless it is already stored [D, Sk].
  const int scores = ctx.new_scratch(DType::Float32, {batches, sq, sk});
  ctx.add_gemm(batched_gemm(ctx, DType::Float32, batches, sq, sk, d, !kt,
                            static_cast<float>(node.attr_float("scale"))),
               {k_val, q_val, -1, scores, -1});

  // The mask and the softmax.
  const std::string& kind = node.attr_string("mask_kind");
  const int mask_kind = mask < 0 ? 0 : kind == "add" ? 1 : 2;
  const int probs = ctx.new_scratch(operand, {batches, sq, sk});
  std::vector<int64_t> row_sizes(qs.begin(), qs.end() - 1);  // batch dimensions and Sq
  std::vector<int64_t> row_strides(row_sizes.size(), 0);
  int64_t col_stride = 0;
  int mask_val = -1;
  std::string mask_type = "float";
  if (mask_kind != 0) {
    if (mask_kind == 2) {
      mask_val = ctx.is_constant(mask) ? ctx.raw_weight(mask) : mask;
      mask_type = "unsigned char";  // bool bytes
    } else {
      mask_val = ctx.is_constant(mask) ? ctx.weight(mask, DType::Float32) : mask;
      mask_type = std::string(device_type_name(ctx.dtype_of(mask_val)));
    }
    // Right-aligned against the scores [..., Sq, Sk], 0 where it broadcasts.
    const std::vector<int64_t> strides =
        broadcast_strides(ctx.value(mask).sizes, ctx.strides_of(mask_val), r);
    row_strides.assign(strides.begin(), strides.end() - 1);
    col_stride = strides[r - 1];
  }
  const RowLaunch rl = row_launch(batches * sq, sk, ops::product(ctx.upper_sizes_of(q), 0, r - 1));
  const std::string name = ctx.kernel_name("attention_softmax");
  const std::string mask_param =
      mask_val >= 0 ? fmt::format("const {}* __restrict__ mask, ", mask_type) : "";
  // Sizes and strides are arguments (the mask's offset divides once per row, not per element).
  KernelArgs args = ctx.kernel_args();
  const std::string arrays = args.array("sizes", row_sizes) + args.array("strides", row_strides);
  const std::string rows_arg = args.value(batches * sq), sk_arg = args.value(sk),
                    col_stride_arg = args.value(col_stride);
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const float* __restrict__ s, {}{}* "
      "__restrict__ p{}) {{\n{}"
      "  baton_attention_softmax<{}, {}, {}>(s, {}, p, {}, {}, sizes, strides, {}, {}, "
      "{});\n}}\n",
      rl.launch.block, name, mask_param, device_type_name(operand), args.parameter(), arrays,
      mask_kind, rl.warp ? "true" : "false", row_sizes.size(),
      mask_val >= 0 ? "mask" : "(const float*)nullptr", rows_arg, sk_arg, col_stride_arg,
      float_literal(static_cast<float>(node.attr_float("mask_fill"))),
      node.attr_int("nan_to_zero") != 0 ? "true" : "false");
  std::vector<int> operands = {scores};
  if (mask_val >= 0) operands.push_back(mask_val);
  operands.push_back(probs);
  ctx.add_kernel(name, std::move(code), rl.launch, std::move(operands), args);

  // Y[Sq, Dv] = P[Sq, Sk] V[Sk, Dv]: cuBLASLt's A is V, its B is P. cuBLASLt writes float32 or the
  // operand dtype; another output dtype goes through a float32 result and a cast (gemm.cpp).
  const int y = node.outputs[0];
  const bool direct = ctx.dtype_of(y) == DType::Float32 || ctx.dtype_of(y) == operand;
  const int out = direct ? y : ctx.new_scratch(DType::Float32, ctx.value(y).sizes);
  const DType d_dtype = ctx.dtype_of(out);
  ctx.add_gemm(batched_gemm(ctx, d_dtype, batches, sq, dv, sk, false, 1.0f),
               {v_val, probs, -1, out, -1});
  if (!direct) ctx.add_cast(out, y, ctx.dtype_of(y));
  return Status();
}

}  // namespace

const OpLowering kAttentionLowering{"Attention",
                                    &supports,
                                    &lower,
                                    0b111,
                                    "baton",
                                    /*layout_aware=*/false,
                                    /*strided=*/true};

}  // namespace baton::cuda
