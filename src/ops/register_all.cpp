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
  register_gather(registry);
  register_scatter_nd(registry);
  register_slice(registry);
  register_split(registry);
  register_expand(registry);
  register_tile(registry);
  register_cumsum(registry);
  register_topk(registry);
  register_nonzero(registry);
  register_rnn(registry);
  register_depth_space(registry);
  register_shape_size(registry);
  register_range(registry);
  register_constant_of_shape(registry);
  register_trilu(registry);
  register_einsum(registry);
  register_where(registry);
  register_cast(registry);
  register_clip(registry);
  register_variadic(registry);
  register_bitshift(registry);
  register_layer_norm(registry);
  register_normalization(registry);
  register_pool(registry);
  register_reduce(registry);
  register_pad(registry);
  register_resize(registry);
  register_conv(registry);
  register_linear(registry);
  register_attention(registry);
}

}  // namespace baton::ops
