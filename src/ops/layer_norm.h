// What LayerNormalization and Baton's AddLayerNorm share with the kernels and passes that read
// them (ops/layer_norm.cpp has the definitions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace baton::ops {

// Whether AddLayerNorm's R of sizes `r` fits X of sizes `x` normalized from `axis`: X's shape, or
// X's trailing dimensions, at least the normalized ones, after leading 1s. Row i of X (its
// leading dimensions flattened) then adds row i % (numel(R) / row length) of R.
bool add_layer_norm_residual_fits(std::span<const int64_t> x, std::span<const int64_t> r,
                                  size_t axis);

}  // namespace baton::ops
