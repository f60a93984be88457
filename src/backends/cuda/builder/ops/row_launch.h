// The launch of a row-wise kernel (device/rows.cuh): a warp per row when there are many rows of
// up to kWarpRowLimit elements (four rows per block), else a block per row sized to the row.
// Few rows (a transformer's 128 tokens at batch 1) get a block each: a warp per row would leave
// most SMs idle, each warp walking its row in long chains of dependent loads (a LayerNorm of
// 128 x 768 took 10 µs on an H100 that way).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cuda/builder/codegen.h"

namespace baton::cuda {

inline constexpr int64_t kWarpRowLimit = 1024;
inline constexpr int64_t kWarpRowsMin = 1024;  // at least 256 blocks of four rows

struct RowLaunch {
  LaunchShape launch;
  bool warp = false;  // the kWarp template argument
};

// `upper_rows`: the row count at the largest sizes of a dynamic engine (Lowering::upper_sizes_of),
// which decides between a warp and a block per row so that the choice is the same at every size
// (0: `rows`, a static engine).
inline RowLaunch row_launch(int64_t rows, int64_t len, int64_t upper_rows = 0) {
  RowLaunch r;
  if (len <= kWarpRowLimit && (upper_rows > 0 ? upper_rows : rows) >= kWarpRowsMin) {
    constexpr int64_t kRowsPerBlock = 4;
    r.warp = true;
    r.launch.block = 32 * kRowsPerBlock;
    r.launch.grid = static_cast<uint32_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    r.launch.count = rows;
    r.launch.per_block = kRowsPerBlock;
    r.launch.cap = INT32_MAX;
    return r;
  }
  // About four elements per thread for rows a warp could take, eight for longer ones; 128 to
  // 1024 threads.
  const int64_t per_thread = len <= kWarpRowLimit ? 4 : 8;
  uint32_t block = 128;
  while (block < 1024 && int64_t{block} * per_thread < len) block *= 2;
  r.launch.block = block;
  r.launch.grid = static_cast<uint32_t>(std::max<int64_t>(rows, 1));
  return r;
}

}  // namespace baton::cuda
