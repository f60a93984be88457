// Registration entry points of Baton's CPU kernels: one function per op file
// (src/kernels/cpu/op_<name>.cpp), all called from register_builtins().
#pragma once

#include "baton/runtime/operator.h"

namespace baton::kernels::cpu {

void register_gemm(runtime::OpRegistry& registry);
void register_matmul(runtime::OpRegistry& registry);
// Add, Sub, Mul, Div, Pow: one broadcasting implementation.
void register_binary_ops(runtime::OpRegistry& registry);
// Sqrt, Erf, Relu, Tanh, Sigmoid.
void register_unary_ops(runtime::OpRegistry& registry);
void register_gelu(runtime::OpRegistry& registry);
void register_softmax(runtime::OpRegistry& registry);
void register_identity(runtime::OpRegistry& registry);
void register_reshape(runtime::OpRegistry& registry);
void register_flatten(runtime::OpRegistry& registry);
void register_transpose(runtime::OpRegistry& registry);
void register_squeeze(runtime::OpRegistry& registry);
void register_unsqueeze(runtime::OpRegistry& registry);
void register_concat(runtime::OpRegistry& registry);

// All of the above.
void register_all(runtime::OpRegistry& registry);

}  // namespace baton::kernels::cpu
