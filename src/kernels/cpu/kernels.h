// Registration entry points of Baton's CPU kernels: one function per op file
// (src/kernels/cpu/op_<name>.cpp), all called from register_all() (register_all.cpp), which
// register_builtins() calls. Each adds the kernel (op, the dtypes it takes, create) to the
// registry; the op's semantics are its definition in src/ops.
#pragma once

#include "runtime/kernel.h"

namespace baton::kernels::cpu {

// Linear algebra (OpenBLAS).
void register_gemm(runtime::KernelRegistry& registry);
void register_matmul(runtime::KernelRegistry& registry);
// Every row of the elementwise table (ops/elementwise.h): unary and broadcasting binary ops.
void register_elementwise(runtime::KernelRegistry& registry);
// Elementwise ops of their own shape: Where (three inputs), Clip (optional bounds), Max, Min,
// Mean and Sum (any number of inputs), Cast and CastLike (two dtypes), BitShift (a string
// attribute).
void register_where(runtime::KernelRegistry& registry);
void register_clip(runtime::KernelRegistry& registry);
void register_variadic(runtime::KernelRegistry& registry);
void register_cast(runtime::KernelRegistry& registry);
void register_bitshift(runtime::KernelRegistry& registry);
void register_gelu(runtime::KernelRegistry& registry);
void register_softmax(runtime::KernelRegistry& registry);     // and LogSoftmax, Hardmax
void register_layer_norm(runtime::KernelRegistry& registry);  // and baton AddLayerNorm
void register_batch_norm(runtime::KernelRegistry& registry);
void register_group_norm(runtime::KernelRegistry& registry);  // and InstanceNormalization
// MaxPool, AveragePool, LpPool and their Global forms.
void register_pool(runtime::KernelRegistry& registry);
// Convolution (im2col + OpenBLAS GEMM; depthwise as a direct loop).
void register_conv(runtime::KernelRegistry& registry);
void register_conv_transpose(runtime::KernelRegistry& registry);
// Baton's canonical ops (domain "baton"), written by the optimizer.
void register_linear(runtime::KernelRegistry& registry);
void register_attention(runtime::KernelRegistry& registry);
// Data movement (any dtype).
void register_identity(runtime::KernelRegistry& registry);
void register_reshape(runtime::KernelRegistry& registry);
void register_flatten(runtime::KernelRegistry& registry);
void register_transpose(runtime::KernelRegistry& registry);
void register_squeeze(runtime::KernelRegistry& registry);
void register_unsqueeze(runtime::KernelRegistry& registry);
void register_concat(runtime::KernelRegistry& registry);
void register_split(runtime::KernelRegistry& registry);
void register_slice(runtime::KernelRegistry& registry);
void register_expand(runtime::KernelRegistry& registry);
void register_tile(runtime::KernelRegistry& registry);
void register_cumsum(runtime::KernelRegistry& registry);
void register_topk(runtime::KernelRegistry& registry);
void register_nonzero(runtime::KernelRegistry& registry);
void register_rnn(runtime::KernelRegistry& registry);
void register_depth_space(runtime::KernelRegistry& registry);
void register_trilu(runtime::KernelRegistry& registry);
// Indexing (any dtype; indices checked at run time).
void register_gather(runtime::KernelRegistry& registry);
void register_gather_elements(runtime::KernelRegistry& registry);
void register_gather_nd(runtime::KernelRegistry& registry);
void register_scatter_nd(runtime::KernelRegistry& registry);
// Shapes and generated tensors (folded by the compiler where their inputs are known).
void register_shape(runtime::KernelRegistry& registry);
void register_size(runtime::KernelRegistry& registry);
void register_range(runtime::KernelRegistry& registry);
void register_constant_of_shape(runtime::KernelRegistry& registry);
// Einstein summation (a loop nest; numeric types).
void register_einsum(runtime::KernelRegistry& registry);
// Reductions: the ten Reduce* ops (one table, ops/reduce.h), ArgMax and ArgMin.
void register_reduce(runtime::KernelRegistry& registry);
void register_argmax(runtime::KernelRegistry& registry);  // and ArgMin
// Padding and resampling (Pad: any dtype; Resize and Upsample: nearest any dtype, linear and
// cubic float types).
void register_pad(runtime::KernelRegistry& registry);
void register_resize(runtime::KernelRegistry& registry);  // and Upsample

// All of the above.
void register_all(runtime::KernelRegistry& registry);

}  // namespace baton::kernels::cpu
