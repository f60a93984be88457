#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_all(runtime::KernelRegistry& registry) {
  register_gemm(registry);
  register_matmul(registry);
  register_elementwise(registry);
  register_gelu(registry);
  register_softmax(registry);
  register_layer_norm(registry);
  register_linear(registry);
  register_attention(registry);
  register_identity(registry);
  register_reshape(registry);
  register_flatten(registry);
  register_transpose(registry);
  register_squeeze(registry);
  register_unsqueeze(registry);
  register_concat(registry);
}

}  // namespace baton::kernels::cpu
