// Registration entry points of Baton's CPU kernels: one function per op file
// (src/kernels/cpu/op_<name>.cpp), all called from register_all() (register_all.cpp), which
// register_builtins() calls. Each adds the op's OpSchema (ONNX name, inputs, attributes in ONNX
// spelling, dtypes, infer, create) to the registry, replacing an earlier one of the same name.
#pragma once

#include "baton/runtime/operator.h"

namespace baton::kernels::cpu {

// Linear algebra (OpenBLAS).
void register_gemm(runtime::OpRegistry& registry);
void register_matmul(runtime::OpRegistry& registry);
// Broadcasting binary ops.
void register_add(runtime::OpRegistry& registry);
void register_sub(runtime::OpRegistry& registry);
void register_mul(runtime::OpRegistry& registry);
void register_div(runtime::OpRegistry& registry);
void register_pow(runtime::OpRegistry& registry);
// Unary float32 ops.
void register_sqrt(runtime::OpRegistry& registry);
void register_erf(runtime::OpRegistry& registry);
void register_relu(runtime::OpRegistry& registry);
void register_tanh(runtime::OpRegistry& registry);
void register_sigmoid(runtime::OpRegistry& registry);
void register_gelu(runtime::OpRegistry& registry);
void register_softmax(runtime::OpRegistry& registry);
// Data movement (any dtype).
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
