// Walking numpy-style (multidirectional) broadcasts, shared by the binary elementwise kernels,
// Gemm's C and MatMul's batch dimensions (ops/shape.h computes the shapes).
//
// create: make_broadcast_plan() turns the shapes into per-input element strides (0 along broadcast
// dimensions), drops size-1 dimensions and merges dimensions that stay contiguous, so most calls
// end up as one or two flat loops. run: for_each_broadcast_row() walks the plan with fixed-size
// counters and allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "kernels/cpu/common.h"

namespace baton::kernels::cpu {

// N inputs read along one output shape of at most R dimensions (Tile walks its output as 2 x rank
// dimensions). Strides are in elements.
template <int N, size_t R = kMaxRank>
struct BroadcastPlan {
  int rank = 1;
  int64_t numel = 0;
  std::array<int64_t, R> sizes{};
  std::array<std::array<int64_t, R>, N> strides{};
};

// The plan for walking `out` in order when input k steps `full[k][d]` elements along output
// dimension d: dimensions of size 1 dropped, and a dimension merged into the previous kept one
// when every input steps through both as through one. Written into `plan` in place and only up to
// its rank (entries past it are never read): resize() runs this on every change of shape, where
// filling and copying arrays of kMaxRank (or Tile's 2 x kMaxRank) entries was most of its cost.
template <int N, size_t R = kMaxRank>
void compress_plan_into(BroadcastPlan<N, R>& plan, std::span<const int64_t> out,
                        const std::array<std::array<int64_t, R>, N>& full) {
  plan.numel = product(out, 0, out.size());
  const int out_rank = static_cast<int>(out.size());
  int rank = 0;
  for (int d = 0; d < out_rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = rank > 0;
    for (int k = 0; k < N && merge; ++k) {
      // Strides of an empty tensor's view may be past int64's range (common.h element_strides).
      int64_t spanned = 0;
      merge = !__builtin_mul_overflow(full[k][d], out[d], &spanned) &&
              plan.strides[k][rank - 1] == spanned;
    }
    if (merge) {
      plan.sizes[rank - 1] *= out[d];
      for (int k = 0; k < N; ++k) plan.strides[k][rank - 1] = full[k][d];
    } else {
      plan.sizes[rank] = out[d];
      for (int k = 0; k < N; ++k) plan.strides[k][rank] = full[k][d];
      ++rank;
    }
  }
  if (rank == 0) {  // a scalar, or all sizes 1
    plan.sizes[0] = 1;
    for (int k = 0; k < N; ++k) plan.strides[k][0] = 0;
    rank = 1;
  }
  plan.rank = rank;
}

template <int N, size_t R = kMaxRank>
BroadcastPlan<N, R> compress_plan(std::span<const int64_t> out,
                                  const std::array<std::array<int64_t, R>, N>& full) {
  BroadcastPlan<N, R> plan;
  compress_plan_into<N, R>(plan, out, full);
  return plan;
}

// `out` and every input have rank <= kMaxRank and each input broadcasts to `out` (infer checked).
// In place, like compress_plan_into.
template <int N>
void make_broadcast_plan_into(BroadcastPlan<N>& plan, std::span<const int64_t> out,
                              const std::array<std::span<const int64_t>, N>& inputs) {
  const int out_rank = static_cast<int>(out.size());

  // Element strides of each input, expressed along the output's dimensions (only the first
  // out_rank entries are written and read).
  std::array<std::array<int64_t, kMaxRank>, N> full;
  for (int k = 0; k < N; ++k) {
    const std::span<const int64_t> in = inputs[k];
    const int lead = out_rank - static_cast<int>(in.size());
    int64_t stride = 1;
    for (int d = out_rank - 1; d >= 0; --d) {
      const int j = d - lead;
      if (j < 0 || in[j] == 1) {
        full[k][d] = 0;
      } else {
        full[k][d] = stride;
        stride *= in[j];
      }
    }
  }
  compress_plan_into<N>(plan, out, full);
}

template <int N>
BroadcastPlan<N> make_broadcast_plan(std::span<const int64_t> out,
                                     const std::array<std::span<const int64_t>, N>& inputs) {
  BroadcastPlan<N> plan;
  make_broadcast_plan_into<N>(plan, out, inputs);
  return plan;
}

// Steps a row walk of `plan` to its next row: `index` along the outer dimensions (an odometer
// over all but the last), and each input's element offset with it.
template <int N, size_t R>
inline void next_broadcast_row(const BroadcastPlan<N, R>& plan, std::array<int64_t, R>& index,
                               std::type_identity_t<std::array<int64_t, N>>& offsets) {
  for (int d = plan.rank - 2; d >= 0; --d) {
    if (++index[d] < plan.sizes[d]) {
      for (int k = 0; k < N; ++k) offsets[k] += plan.strides[k][d];
      return;
    }
    index[d] = 0;
    for (int k = 0; k < N; ++k) offsets[k] -= plan.strides[k][d] * (plan.sizes[d] - 1);
  }
}

// Calls body(out_offset, in_offsets, count) for each run of `count` elements along the innermost
// dimension; element e of the run is out[out_offset + e] and input k's
// [in_offsets[k] + e * plan.strides[k][plan.rank - 1]].
template <int N, size_t R = kMaxRank, typename Body>
inline void for_each_broadcast_row(const BroadcastPlan<N, R>& plan, Body&& body) {
  if (plan.numel == 0) return;
  const int last = plan.rank - 1;
  const int64_t n = plan.sizes[last];
  const int64_t rows = plan.numel / n;
  std::array<int64_t, R> index{};
  std::array<int64_t, N> offsets{};
  for (int64_t r = 0; r < rows; ++r) {
    body(r * n, offsets, n);
    next_broadcast_row(plan, index, offsets);
  }
}

// for_each_broadcast_row over output elements [start, start + count) only: the runs of that range
// (a first and a last row may be partial), each with its element offsets as
// for_each_broadcast_row gives them. Splits an elementwise op over a pool's tasks.
template <int N, size_t R = kMaxRank, typename Body>
inline void for_each_broadcast_range(const BroadcastPlan<N, R>& plan, int64_t start, int64_t count,
                                     Body&& body) {
  if (plan.numel == 0 || count <= 0) return;
  const int last = plan.rank - 1;
  const int64_t n = plan.sizes[last];
  int64_t row = start / n, col = start - (start / n) * n;
  // The row's index along the outer dimensions, and each input's offset there.
  std::array<int64_t, R> index{};
  std::array<int64_t, N> offsets{};
  for (int64_t r = row, d = last - 1; d >= 0; --d) {
    index[d] = r % plan.sizes[d];
    r /= plan.sizes[d];
    for (int k = 0; k < N; ++k) offsets[k] += index[d] * plan.strides[k][d];
  }
  for (int64_t left = count; left > 0;) {
    const int64_t len = std::min(n - col, left);
    std::array<int64_t, N> at = offsets;
    for (int k = 0; k < N; ++k) at[k] += col * plan.strides[k][last];
    body(row * n + col, at, len);
    left -= len;
    col = 0;
    ++row;
    next_broadcast_row(plan, index, offsets);
  }
}

}  // namespace baton::kernels::cpu
