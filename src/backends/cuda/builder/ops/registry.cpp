#include "backends/cuda/builder/ops/registry.h"

#include "baton/core/tensor.h"
#include "ops/op_def.h"
#include "ops/shape.h"

namespace baton::cuda {

std::span<const OpLowering> op_lowerings() {
  // Every lowering, in one list: the op files' own, then the elementwise table's rows (and Gelu).
  static const std::vector<OpLowering> all = [] {
    std::vector<OpLowering> list = {kGemmLowering,           kMatMulLowering,
                                    kLinearLowering,         kSoftmaxLowering,
                                    kTransposeLowering,      kConcatLowering,
                                    kIdentityLowering,       kReshapeLowering,
                                    kFlattenLowering,        kSqueezeLowering,
                                    kUnsqueezeLowering,      kConvLowering,
                                    kLayerNormLowering,      kAddLayerNormLowering,
                                    kAttentionLowering,      kMaxPoolLowering,
                                    kAveragePoolLowering,    kReduceSumLowering,
                                    kReduceMeanLowering,     kReduceMaxLowering,
                                    kReduceMinLowering,      kGlobalAveragePoolLowering,
                                    kGlobalMaxPoolLowering,  kGatherLowering,
                                    kGatherNDLowering,       kWhereLowering,
                                    kCastLowering,           kExpandLowering,
                                    kSliceLowering,          kSplitLowering,
                                    kFusedConvLowering,      kGatherElementsLowering,
                                    kShapeLowering,          kRangeLowering,
                                    kBatchNormLowering,      kInstanceNormLowering,
                                    kGroupNormLowering,      kDepthToSpaceLowering,
                                    kSpaceToDepthLowering,   kPadLowering,
                                    kArgMaxLowering,         kArgMinLowering,
                                    kCumSumLowering,         kConvTransposeLowering,
                                    kResizeLowering,         kUpsampleLowering,
                                    kTopKLowering,           kScatterNDLowering,
                                    kScatterElementsLowering};
    for (const OpLowering& l : elementwise_lowerings()) list.push_back(l);
    return list;
  }();
  return all;
}

const OpLowering* find_lowering(std::string_view op, std::string_view domain) {
  for (const OpLowering& l : op_lowerings()) {
    if (l.op == op && l.domain == domain) return &l;
  }
  return nullptr;
}

bool float_tensors_only(const compiler::Graph& graph, const compiler::IrNode& node) {
  return tensors_of(graph, node, kFloatEngineTypes);
}

bool engine_tensors(const compiler::Graph& graph, const compiler::IrNode& node) {
  return tensors_of(graph, node, kEngineTypes);
}

std::vector<int64_t> constant_ints(const compiler::Graph& g, int v) {
  const compiler::IrValue& iv = g.values[v];
  return ops::int_values_of(iv.dtype, iv.constant->data(), *checked_numel(iv.sizes));
}

int operand_of(Lowering& ctx, int v) {
  if (!ctx.is_constant(v)) return v;
  const DType t = ctx.value(v).dtype;
  const bool floating = t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16;
  return floating ? ctx.weight(v, ctx.activation_dtype()) : ctx.raw_weight(v);
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& sizes,
                                       const std::vector<int64_t>& strides, size_t rank) {
  std::vector<int64_t> out(rank, 0);
  for (size_t j = 0; j < sizes.size(); ++j) {
    const size_t d_in = sizes.size() - 1 - j;
    out[rank - 1 - j] = sizes[d_in] == 1 ? 0 : strides[d_in];
  }
  return out;
}

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

TypedOperand typed_operand(Lowering& ctx, int v, const std::vector<int64_t>& sizes) {
  TypedOperand t;
  t.operand = operand_of(ctx, v);
  t.input.dtype = ctx.dtype_of(t.operand);
  t.input.strides = broadcast_strides(ctx.value(v).sizes, ctx.strides_of(t.operand), sizes.size());
  return t;
}

Status lower_broadcast(Lowering& ctx, int index, const char* what, std::string expression,
                       size_t inputs) {
  const compiler::IrNode& n = ctx.node(index);
  const int out = n.outputs[0];
  TypedKernel k;
  k.sizes = ctx.value(out).sizes;
  k.out = ctx.dtype_of(out);
  k.expression = std::move(expression);
  std::vector<int> operands;
  for (size_t i = 0; i < std::min(inputs, n.inputs.size()); ++i) {
    TypedOperand t = typed_operand(ctx, n.inputs[i], k.sizes);
    k.inputs.push_back(t.input);
    operands.push_back(t.operand);
  }
  operands.push_back(out);
  add_typed_kernel(ctx, what, std::move(k), std::move(operands));
  return Status();
}

void add_typed_kernel(Lowering& ctx, const char* what, TypedKernel k, std::vector<int> operands) {
  k.name = ctx.kernel_name(what);
  LaunchShape launch;
  KernelArgs args = ctx.kernel_args();
  std::string code = generate_typed(k, &launch, &args);
  ctx.add_kernel(k.name, std::move(code), launch, std::move(operands), args);
}

bool tensors_of(const compiler::Graph& graph, const compiler::IrNode& node, DTypeSet types) {
  auto float_tensor = [&](int v) {
    if (v < 0) return true;
    const compiler::IrValue& iv = graph.values[v];
    const bool float_type = types.contains(iv.dtype);
    const auto n = checked_numel(iv.sizes);
    return float_type && iv.sizes.size() <= kEngineMaxRank && n.has_value() && *n > 0;
  };
  for (int v : node.outputs) {
    if (v < 0 || !float_tensor(v)) return false;
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int v = node.inputs[i];
    if (v < 0) continue;
    if (node.def->input_slot(i).shape_input) {
      if (!graph.values[v].constant) return false;
      continue;
    }
    if (!float_tensor(v)) return false;
  }
  return true;
}

}  // namespace baton::cuda
