// The launch of a row-wise kernel (device/rows.cuh): a warp per row for rows of up to
// kWarpRowLimit elements (four rows per block), else a block per row sized to the row.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cuda/builder/codegen.h"

namespace baton::cuda {

inline constexpr int64_t kWarpRowLimit = 1024;

struct RowLaunch {
  LaunchShape launch;
  bool warp = false;  // the kWarp template argument
};

inline RowLaunch row_launch(int64_t rows, int64_t len) {
  RowLaunch r;
  if (len <= kWarpRowLimit) {
    constexpr int64_t kRowsPerBlock = 4;
    r.warp = true;
    r.launch.block = 32 * kRowsPerBlock;
    r.launch.grid = static_cast<uint32_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    return r;
  }
  // About eight elements per thread, 128 to 1024 threads.
  uint32_t block = 128;
  while (block < 1024 && int64_t{block} * 8 < len) block *= 2;
  r.launch.block = block;
  r.launch.grid = static_cast<uint32_t>(std::max<int64_t>(rows, 1));
  return r;
}

}  // namespace baton::cuda
