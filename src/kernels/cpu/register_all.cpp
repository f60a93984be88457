#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {

void register_all(runtime::KernelRegistry& registry) {
  register_gemm(registry);
  register_matmul(registry);
  register_elementwise(registry);
  register_where(registry);
  register_clip(registry);
  register_variadic(registry);
  register_cast(registry);
  register_bitshift(registry);
  register_gelu(registry);
  register_softmax(registry);
  register_layer_norm(registry);
  register_batch_norm(registry);
  register_group_norm(registry);
  register_pool(registry);
  register_conv(registry);
  register_conv_transpose(registry);
  register_linear(registry);
  register_attention(registry);
  register_identity(registry);
  register_reshape(registry);
  register_flatten(registry);
  register_transpose(registry);
  register_squeeze(registry);
  register_unsqueeze(registry);
  register_concat(registry);
  register_split(registry);
  register_slice(registry);
  register_expand(registry);
  register_tile(registry);
  register_cumsum(registry);
  register_topk(registry);
  register_nonzero(registry);
  register_rnn(registry);
  register_depth_space(registry);
  register_trilu(registry);
  register_gather(registry);
  register_gather_elements(registry);
  register_gather_nd(registry);
  register_scatter_nd(registry);
  register_shape(registry);
  register_size(registry);
  register_range(registry);
  register_constant_of_shape(registry);
  register_einsum(registry);
  register_reduce(registry);
  register_argmax(registry);
  register_pad(registry);
  register_resize(registry);
}

}  // namespace baton::kernels::cpu
