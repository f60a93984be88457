#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_all(runtime::OpRegistry& registry) {
  register_gemm(registry);
  register_matmul(registry);
  register_add(registry);
  register_sub(registry);
  register_mul(registry);
  register_div(registry);
  register_pow(registry);
  register_sqrt(registry);
  register_erf(registry);
  register_relu(registry);
  register_tanh(registry);
  register_sigmoid(registry);
  register_gelu(registry);
  register_softmax(registry);
  register_identity(registry);
  register_reshape(registry);
  register_flatten(registry);
  register_transpose(registry);
  register_squeeze(registry);
  register_unsqueeze(registry);
  register_concat(registry);
}

}  // namespace baton::kernels::cpu
