// The competing workload of baton::cuda::CompetingWorkload (include/baton/cuda/
// competing_workload.h): not part of any engine. Every thread runs dependent FP32 FMAs in rounds
// of a few tens of microseconds; between rounds thread 0 reads the stop flag (device memory, which
// the host sets with a copy on another stream) and the global timer, and the block ends when the
// flag is set or `max_ns` have passed. Thread 0 first marks the block as started (once, in mapped
// host memory), so the host can wait until every block is resident. 512 threads, at least 4 blocks
// per SM (32 registers a thread at most): 2048 threads fill an H100 or H200 SM.
#pragma once

extern "C" __global__ void __launch_bounds__(512, 4)
    baton_competing_workload(const volatile unsigned* stop, volatile unsigned* started, float* sink,
                             unsigned long long max_ns) {
  __shared__ int done;
  unsigned long long begin;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(begin));
  if (threadIdx.x == 0) {
    done = 0;
    started[blockIdx.x] = 1u;
    __threadfence_system();
  }
  __syncthreads();
  float x = (float)threadIdx.x;
  const float y = 1.0f + 1e-7f * (float)blockIdx.x;
  for (;;) {
#pragma unroll 16
    for (int i = 0; i < 8192; ++i) x = fmaf(x, 0.9999999f, y);
    if (threadIdx.x == 0) {
      unsigned long long now;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      done = (*stop != 0u || now - begin >= max_ns) ? 1 : 0;
    }
    __syncthreads();
    const int end = done;
    __syncthreads();
    if (end) break;
  }
  // Never true (x grows from >= 0 towards 1e7): keeps the compiler from dropping the FMAs.
  if (x < -1.0f) sink[blockIdx.x] = x;
}
