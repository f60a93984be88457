// MatMul's operand shapes, shared by the definition and the kernels that lower it.
#pragma once

#include <cstdint>
#include <span>

namespace baton::ops {

// A as [batch..., M, K] and B as [batch..., K, N], after promoting 1-D operands.
struct MatMulShape {
  std::span<const int64_t> a_batch, b_batch;
  int64_t m = 1, k = 1, kb = 1, n = 1;
};

MatMulShape matmul_shape(std::span<const int64_t> a, std::span<const int64_t> b);

}  // namespace baton::ops
