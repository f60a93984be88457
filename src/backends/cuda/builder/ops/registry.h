// The GPU lowering of each operator: one file per op or op family in this folder, listed once in
// registry.cpp. The builder asks `supports` which nodes the GPU takes (the partitioner groups
// them) and calls `lower` for each node it reaches, in execution order.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "backends/cuda/builder/lowering.h"
#include "ops/activation.h"

namespace baton::cuda {

// The float types an engine computes in: what most lowerings take.
inline constexpr DTypeSet kFloatEngineTypes{DType::Float32, DType::Float16, DType::BFloat16};
// Every dtype an engine stores (typed.cuh): the float types, int8, uint8, int16, int32, int64 and
// bool.
inline constexpr DTypeSet kEngineTypes{DType::Float32, DType::Float16, DType::BFloat16,
                                       DType::Int8,    DType::UInt8,   DType::Int16,
                                       DType::Int32,   DType::Int64,   DType::Bool};

struct OpLowering {
  std::string_view op;  // ONNX op type (domain ai.onnx)
  // Whether the GPU takes this node (dtypes, shapes, compile-time shape inputs).
  bool (*supports)(const compiler::Graph& graph, const compiler::IrNode& node) = nullptr;
  // Lowers node `index`. Null for elementwise ops, which lower_fused_group lowers in runs.
  Status (*lower)(Lowering& ctx, int index) = nullptr;
  // Bit i: input i is read as a tensor-core operand (a value read only that way is stored in the
  // engine's operand dtype, so no cast kernel runs before the GEMM).
  uint32_t operand_inputs = 0;
  std::string_view domain = "";  // "baton" for Baton's canonical ops
  // Whether `lower` reads channels-last inputs itself (Lowering::strides_of); otherwise the
  // builder hands it row-major copies of them.
  bool layout_aware = false;
  // Whether `lower` reads strided views (Lowering::strided: transposed, split or sliced values)
  // through Lowering::strides_of and view_offset; otherwise the builder hands it row-major copies.
  bool strided = false;
  // The element types of the op's data (its first input) that `supports` takes, as the operator
  // table shows them (`baton ops`, docs/operators.md). The conformance build test checks that
  // every dtype a case runs on the GPU is among them.
  DTypeSet types = kFloatEngineTypes;
};

// Every lowering, in the order of the list in registry.cpp.
std::span<const OpLowering> op_lowerings();
const OpLowering* find_lowering(std::string_view op, std::string_view domain = "");

// The lowerings, one definition each in this folder (registry.cpp lists them).
extern const OpLowering kGemmLowering;               // gemm.cpp
extern const OpLowering kMatMulLowering;             // gemm.cpp
extern const OpLowering kLinearLowering;             // gemm.cpp (baton Linear)
extern const OpLowering kSoftmaxLowering;            // softmax.cpp
extern const OpLowering kTransposeLowering;          // transpose.cpp
extern const OpLowering kConcatLowering;             // concat.cpp
extern const OpLowering kIdentityLowering;           // views.cpp
extern const OpLowering kReshapeLowering;            // views.cpp
extern const OpLowering kFlattenLowering;            // views.cpp
extern const OpLowering kSqueezeLowering;            // views.cpp
extern const OpLowering kUnsqueezeLowering;          // views.cpp
extern const OpLowering kConvLowering;               // conv.cpp
extern const OpLowering kFusedConvLowering;          // conv.cpp (baton FusedConv)
extern const OpLowering kMaxPoolLowering;            // pool.cpp
extern const OpLowering kAveragePoolLowering;        // pool.cpp
extern const OpLowering kReduceSumLowering;          // reduce.cpp
extern const OpLowering kReduceMeanLowering;         // reduce.cpp
extern const OpLowering kReduceMaxLowering;          // reduce.cpp
extern const OpLowering kReduceMinLowering;          // reduce.cpp
extern const OpLowering kGlobalAveragePoolLowering;  // reduce.cpp
extern const OpLowering kGlobalMaxPoolLowering;      // reduce.cpp
extern const OpLowering kGatherLowering;             // gather.cpp
extern const OpLowering kGatherNDLowering;           // gather.cpp
extern const OpLowering kGatherElementsLowering;     // gather.cpp
extern const OpLowering kShapeLowering;              // sizes.cpp
extern const OpLowering kRangeLowering;              // sizes.cpp
extern const OpLowering kWhereLowering;              // where.cpp
extern const OpLowering kCastLowering;               // cast.cpp
extern const OpLowering kExpandLowering;             // slice.cpp
extern const OpLowering kSliceLowering;              // slice.cpp
extern const OpLowering kSplitLowering;              // slice.cpp
extern const OpLowering kBatchNormLowering;          // normalization.cpp
extern const OpLowering kInstanceNormLowering;       // normalization.cpp
extern const OpLowering kGroupNormLowering;          // normalization.cpp
extern const OpLowering kDepthToSpaceLowering;       // depth_space.cpp
extern const OpLowering kSpaceToDepthLowering;       // depth_space.cpp
extern const OpLowering kPadLowering;                // pad.cpp
extern const OpLowering kArgMaxLowering;             // along_axis.cpp
extern const OpLowering kArgMinLowering;             // along_axis.cpp
extern const OpLowering kCumSumLowering;             // along_axis.cpp
extern const OpLowering kConvTransposeLowering;      // conv_transpose.cpp
extern const OpLowering kResizeLowering;             // resize.cpp
extern const OpLowering kUpsampleLowering;           // resize.cpp
extern const OpLowering kTopKLowering;               // topk.cpp
extern const OpLowering kScatterNDLowering;          // scatter.cpp
extern const OpLowering kScatterElementsLowering;    // scatter.cpp

// Transformer ops.
extern const OpLowering kLayerNormLowering;     // layer_norm.cpp
extern const OpLowering kAddLayerNormLowering;  // layer_norm.cpp (baton AddLayerNorm)
extern const OpLowering kAttentionLowering;     // attention.cpp (baton Attention)
// Each row of the elementwise table (float rows fuse into generated kernels; rows that read or
// write bool get a typed kernel each) and Gelu (elementwise.cpp).
std::vector<OpLowering> elementwise_lowerings();

// Elementwise ops (ops/elementwise.cpp): whether a node joins fused kernels, and the lowering of
// one run of them as a single generated kernel.
bool is_fusible(const compiler::Graph& graph, const compiler::IrNode& node);
// The device expression of fusible node `n` in `{x}` (or `{a}`, `{b}`), attribute values baked
// in as literals.
std::string elementwise_expression(const compiler::IrNode& n);
// The device expression in `{x}` of a fused op's activation (ops/activation.h; none: `{x}`).
std::string activation_expression(const ops::Activation& act);
Status lower_fused_group(Lowering& ctx, const std::vector<int>& group);

// Concats read in place (concat.cpp). Whether Concat node `index` can be left to its readers
// (Lowering::defer_concat): a float Concat of activations, not a partition output, whose every
// reader is an elementwise node of the Concat's sizes reading nothing else but constants (so each
// lands in an elementwise run, and no other step can take it as an epilogue). DenseNet's dense
// layers are such: Concat, then the normalization's Mul and Add and a ReLU.
bool concat_reads_in_place(const Lowering& ctx, int index);
// Lowers deferred Concat `v` after all, at this point of the step order (a reader that cannot
// read it in place: a run with too many pointers for one kernel).
Status lower_deferred_concat(Lowering& ctx, int v);

// The shared support rule: every data input and output a float tensor (float32, float16 or
// bfloat16) of rank <= kEngineMaxRank with at least one element; inputs the definition marks as
// shape inputs must be compile-time constants.
bool float_tensors_only(const compiler::Graph& graph, const compiler::IrNode& node);

// float_tensors_only's rule with any dtype of `types` in place of the float types.
bool tensors_of(const compiler::Graph& graph, const compiler::IrNode& node, DTypeSet types);
// The same with kEngineTypes.
bool engine_tensors(const compiler::Graph& graph, const compiler::IrNode& node);

// The elements of integer constant `v` (a shape input: Slice's starts, Pad's pads, CumSum's axis,
// Resize's sizes) as int64.
std::vector<int64_t> constant_ints(const compiler::Graph& g, int v);

// What a kernel reads for input value `v`: `v` itself, or a constant's weights (float constants
// in the engine's activation dtype, integer and bool ones as they are).
int operand_of(Lowering& ctx, int v);

// Row-major and batched (contiguous batches): D[b] (m x n) = alpha * X[b] (m x k) W[b] (k x n),
// W stored n x k when `w_transposed`. In cuBLASLt's column-major terms that is D^T = W^T X^T: its A
// is W, its B is X, its m and n are our n and m (as in gemm.cpp). Operands in the engine's
// operand dtype, D in `d_dtype`: attention's two GEMMs, a patch convolution's GEMM.
GemmStep batched_gemm(const Lowering& ctx, DType d_dtype, int64_t batches, int64_t m, int64_t n,
                      int64_t k, bool w_transposed, float alpha);

// Input `v` of a typed kernel (codegen.h) whose output has `sizes`: its operand (operand_of) and
// its stored strides broadcast to `sizes` (0 along broadcast dimensions).
struct TypedOperand {
  int operand = -1;
  TypedInput input;
};
TypedOperand typed_operand(Lowering& ctx, int v, const std::vector<int64_t>& sizes);
// Adds the typed kernel `k` (named `what`) over `operands` (the inputs' operands, then the
// output).
void add_typed_kernel(Lowering& ctx, const char* what, TypedKernel k, std::vector<int> operands);
// Lowers node `index` as one typed kernel computing `expression` (`{i}`: input i) over its first
// `inputs` inputs, each broadcast to the output's shape.
Status lower_broadcast(Lowering& ctx, int index, const char* what, std::string expression,
                       size_t inputs = SIZE_MAX);
// Element strides (`strides`) of a value of shape `sizes`, broadcast to `rank` dimensions (aligned
// on the right, 0 along dimensions of size 1 and the missing leading ones).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& sizes,
                                       const std::vector<int64_t>& strides, size_t rank);

}  // namespace baton::cuda
