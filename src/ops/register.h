// Registration functions of the definition files, all called from register_all_ops
// (register_all.cpp): one per file, explicit (no static initializers).
#pragma once

#include "ops/op_def.h"

namespace baton::ops {

void register_elementwise(OpRegistry& registry);  // elementwise.cpp: every row of the table
void register_gelu(OpRegistry& registry);
void register_softmax(OpRegistry& registry);  // Softmax, LogSoftmax and Hardmax
void register_gemm(OpRegistry& registry);
void register_matmul(OpRegistry& registry);
void register_constant(OpRegistry& registry);
void register_identity(OpRegistry& registry);
void register_reshape(OpRegistry& registry);
void register_flatten(OpRegistry& registry);
void register_transpose(OpRegistry& registry);
void register_squeeze(OpRegistry& registry);  // Squeeze and Unsqueeze
void register_concat(OpRegistry& registry);
void register_gather(OpRegistry& registry);  // Gather, GatherElements and GatherND
void register_scatter_nd(OpRegistry& registry);
void register_slice(OpRegistry& registry);
void register_split(OpRegistry& registry);
void register_expand(OpRegistry& registry);
void register_tile(OpRegistry& registry);
void register_cumsum(OpRegistry& registry);
void register_topk(OpRegistry& registry);
void register_nonzero(OpRegistry& registry);
void register_rnn(OpRegistry& registry);
void register_depth_space(OpRegistry& registry);
void register_shape_size(OpRegistry& registry);  // Shape and Size
void register_range(OpRegistry& registry);
void register_constant_of_shape(OpRegistry& registry);
void register_trilu(OpRegistry& registry);
void register_einsum(OpRegistry& registry);
void register_where(OpRegistry& registry);
void register_cast(OpRegistry& registry);  // Cast and CastLike
void register_clip(OpRegistry& registry);
void register_variadic(OpRegistry& registry);  // Max, Min, Mean and Sum
void register_bitshift(OpRegistry& registry);
void register_layer_norm(OpRegistry& registry);  // LayerNormalization and baton AddLayerNorm
// BatchNormalization, InstanceNormalization and GroupNormalization
void register_normalization(OpRegistry& registry);
// MaxPool, AveragePool, LpPool and their Global forms
void register_pool(OpRegistry& registry);
void register_reduce(OpRegistry& registry);  // the ten Reduce* ops, ArgMax and ArgMin
void register_pad(OpRegistry& registry);
void register_resize(OpRegistry& registry);  // Resize and Upsample
void register_conv(OpRegistry& registry);    // Conv and ConvTranspose
// Baton's canonical ops (domain "baton"), written by the optimizer (compiler/passes/).
void register_linear(OpRegistry& registry);
void register_attention(OpRegistry& registry);

}  // namespace baton::ops
