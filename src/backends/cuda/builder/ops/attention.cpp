// Baton's Attention (ops/attention.cpp) on the GPU, as three steps that work in every precision:
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

#include "backends/cuda/builder/ops/registry.h"
#include "backends/cuda/builder/ops/row_launch.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
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

// Row-major and batched (contiguous batches): D[b] (m x n) = alpha * X[b] (m x k) W[b] (k x n),
// W stored n x k when `w_transposed`. In cuBLASLt's column-major terms that is D^T = W^T X^T: its A
// is W, its B is X, its m and n are our n and m (as in gemm.cpp). Operands in the engine's
// operand dtype, D in `d_dtype`.
GemmStep batched_gemm(const Lowering& ctx, DType d_dtype, int64_t batches, int64_t m, int64_t n,
                      int64_t k, bool w_transposed, float alpha) {
  GemmStep g{};
  g.a_dtype = g.b_dtype = static_cast<uint8_t>(ctx.operand_dtype());
  g.c_dtype = g.d_dtype = g.bias_dtype = static_cast<uint8_t>(d_dtype);
  g.trans_a = w_transposed ? 1 : 0;
  g.epilogue = static_cast<uint8_t>(GemmEpilogue::None);
  g.compute = static_cast<uint8_t>(ctx.target().precision);
  g.batch = static_cast<uint32_t>(batches);
  g.m = n;
  g.n = m;
  g.k = k;
  g.lda = w_transposed ? k : n;
  g.ldb = k;
  g.ldc = g.ldd = n;
  g.stride_a = batches > 1 ? k * n : 0;
  g.stride_b = batches > 1 ? m * k : 0;
  g.stride_c = g.stride_d = batches > 1 ? m * n : 0;
  g.alpha = alpha;
  return g;
}

Status lower(Lowering& ctx, int index) {
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
  BATON_ASSIGN_OR_RETURN(const int q_val, ctx.ensure(q, operand));
  BATON_ASSIGN_OR_RETURN(const int k_val, ctx.ensure(k, operand));
  BATON_ASSIGN_OR_RETURN(const int v_val, ctx.ensure(v, operand));

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
  const RowLaunch rl = row_launch(batches * sq, sk);
  const std::string name = ctx.kernel_name("attention_softmax");
  const std::string mask_param =
      mask_val >= 0 ? fmt::format("const {}* __restrict__ mask, ", mask_type) : "";
  std::string code = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const float* __restrict__ s, {}{}* "
      "__restrict__ p) {{\n"
      "  constexpr long long sizes[{}] = {};\n"
      "  constexpr long long strides[{}] = {};\n"
      "  baton_attention_softmax<{}, {}, {}>(s, {}, p, {}LL, {}LL, sizes, strides, {}LL, {}, "
      "{});\n}}\n",
      rl.launch.block, name, mask_param, device_type_name(operand), row_sizes.size(),
      int_list(row_sizes), row_strides.size(), int_list(row_strides), mask_kind,
      rl.warp ? "true" : "false", row_sizes.size(),
      mask_val >= 0 ? "mask" : "(const float*)nullptr", batches * sq, sk, col_stride,
      float_literal(static_cast<float>(node.attr_float("mask_fill"))),
      node.attr_int("nan_to_zero") != 0 ? "true" : "false");
  std::vector<int> operands = {scores};
  if (mask_val >= 0) operands.push_back(mask_val);
  operands.push_back(probs);
  ctx.add_kernel(name, std::move(code), rl.launch, std::move(operands));

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

const OpLowering kAttentionLowering{"Attention", &supports, &lower, 0b111, "baton"};

}  // namespace baton::cuda
