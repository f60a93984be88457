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

// A dynamic engine's row kernel that decides when it runs: a warp per row where the call has at
// least kWarpRowsMin rows, a block per row below (the kernel compares its row count, an
// argument, with kWarpRowsMin; both paths are compiled in). One launch rule for both: blocks of
// 128 threads (four rows a block, or one row a block, a thread per group of the row's elements),
// the grid the row count or a quarter of it (LaunchShape::warp_rows_from). A choice fixed at
// the largest sizes, as row_launch makes it, gave BERT-base's 24 LayerNorms a warp per row at
// 8 x 16 (128 rows): 5.6 µs each against 4.5 for the static engine's block per row (H200,
// Nsight Compute). Rows of up to kWarpRowLimit elements only.
inline RowLaunch switching_row_launch(int64_t rows) {
  constexpr int64_t kRowsPerBlock = 4;
  RowLaunch r;
  r.warp = rows >= kWarpRowsMin;
  r.launch.block = 32 * kRowsPerBlock;
  r.launch.grid = static_cast<uint32_t>(r.warp ? (rows + kRowsPerBlock - 1) / kRowsPerBlock : rows);
  r.launch.count = rows;
  r.launch.per_block = kRowsPerBlock;
  r.launch.cap = INT32_MAX;
  r.launch.warp_rows_from = kWarpRowsMin;
  return r;
}

}  // namespace baton::cuda
