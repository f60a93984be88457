// Registration functions of the definition files, all called from register_all_ops
// (register_all.cpp): one per file, explicit (no static initializers).
#pragma once

#include "ops/op_def.h"

namespace baton::ops {

void register_elementwise(OpRegistry& registry);  // elementwise.cpp: every row of the table
void register_gelu(OpRegistry& registry);
void register_softmax(OpRegistry& registry);
void register_gemm(OpRegistry& registry);
void register_matmul(OpRegistry& registry);
void register_constant(OpRegistry& registry);
void register_identity(OpRegistry& registry);
void register_reshape(OpRegistry& registry);
void register_flatten(OpRegistry& registry);
void register_transpose(OpRegistry& registry);
void register_squeeze(OpRegistry& registry);  // Squeeze and Unsqueeze
void register_concat(OpRegistry& registry);
void register_layer_norm(OpRegistry& registry);  // LayerNormalization and baton AddLayerNorm
// Baton's canonical ops (domain "baton"), written by the optimizer (compiler/passes/).
void register_linear(OpRegistry& registry);
void register_attention(OpRegistry& registry);

}  // namespace baton::ops
