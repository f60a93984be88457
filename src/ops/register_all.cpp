#include "ops/register.h"

namespace baton::ops {

void register_all_ops(OpRegistry& registry) {
  register_elementwise(registry);
  register_gelu(registry);
  register_softmax(registry);
  register_gemm(registry);
  register_matmul(registry);
  register_constant(registry);
  register_identity(registry);
  register_reshape(registry);
  register_flatten(registry);
  register_transpose(registry);
  register_squeeze(registry);
  register_concat(registry);
  register_layer_norm(registry);
  register_linear(registry);
  register_attention(registry);
}

}  // namespace baton::ops
