// Windowed pooling (MaxPool, AveragePool) over R spatial dimensions, one thread per output
// element. The input is read through element strides per logical dimension (N, C, D1, ...), so a
// channels-last input is read in place; the output is written in memory order, which the caller
// describes as the output's sizes in memory order (`sizes`) and which logical dimension each
// position is (`dims`). Per window, only the taps inside the input are visited (as in the CPU
// kernel, src/kernels/cpu/op_pool.cpp): MaxPool takes the largest (a NaN wins), AveragePool
// divides a float sum by the taps inside the input, or with count_include_pad by the taps inside
// the padded extent [-head, in + tail).
#pragma once

#include "baton/common.cuh"

__device__ __forceinline__ long long baton_floor_div(long long a, long long b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
__device__ __forceinline__ long long baton_min_ll(long long a, long long b) {
  return a < b ? a : b;
}

// MODE: 0 max, 1 average over the taps inside the input, 2 average with count_include_pad.
// kFast: the output's sizes are kernel arguments and every index is below 2^31, so the index is
// split through the sizes' magics (baton_div); otherwise by dividing (by constants, when the
// sizes are in the code).
// V > 1: each thread takes V consecutive elements of the output's innermost memory dimension (the
// channels of a channels-last pool, whose input has them consecutive too), read and written with
// one 16-byte access where both pointers are aligned for it: `n` counts those groups, and the
// innermost of `sizes` is the channels divided by V (the builder passes V > 1 only when the
// channels, and every input stride but theirs, are multiples of V). A 2x2 MaxPool of a UNet's
// 256x256x64 fp16 map moved one 2-byte element per thread and tap, at a sixth of the H200's
// bandwidth.
template <int R, int MODE, bool kFast, int V, typename TIn, typename TOut>
__device__ __forceinline__ void baton_pool(
    const TIn* __restrict__ x, TOut* __restrict__ y, long long n, const long long (&sizes)[R + 2],
    const long long (&magic)[R + 2], const int (&dims)[R + 2], const long long (&xstrides)[R + 2],
    const long long (&in)[R], const long long (&k)[R], const long long (&s)[R],
    const long long (&d)[R], const long long (&head)[R], const long long (&tail)[R]) {
  const bool vec = V > 1 && baton_vec_aligned<V>(x) && baton_vec_aligned<V>(y);
  baton_for_each(n, [&](long long i) {
    long long c[R + 2];
    long long rest = i;
#pragma unroll
    for (int p = R + 1; p >= 0; --p) {
      const long long q = kFast ? (long long)baton_div((unsigned)rest, magic[p]) : rest / sizes[p];
      c[dims[p]] = rest - q * sizes[p];
      rest = q;
    }
    if (V > 1) c[dims[R + 1]] *= V;
    const long long base = c[0] * xstrides[0] + c[1] * xstrides[1];
    long long first[R], taps[R];
    float count = 1.0f;
#pragma unroll
    for (int a = 0; a < R; ++a) {
      const long long start = c[2 + a] * s[a] - head[a];
      const long long j0 = start < 0 ? (-start + d[a] - 1) / d[a] : 0;
      const long long j1 = baton_min_ll(k[a] - 1, baton_floor_div(in[a] - 1 - start, d[a]));
      first[a] = start + j0 * d[a];
      taps[a] = j1 >= j0 ? j1 - j0 + 1 : 0;
      if (MODE == 2) {
        const long long jp =
            baton_min_ll(k[a] - 1, baton_floor_div(in[a] + tail[a] - 1 - start, d[a]));
        count *= (float)(jp >= 0 ? jp + 1 : 0);
      } else {
        count *= (float)taps[a];
      }
    }
    long long total = 1;
#pragma unroll
    for (int a = 0; a < R; ++a) total *= taps[a];
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = MODE == 0 ? __int_as_float(0xff800000) : 0.0f;
    // The taps in row-major order, their coordinates counted like an odometer (the last one
    // fastest), and the offset moved by each dimension's step: no division per tap. (Splitting a
    // flat tap index into coordinates cost two 64-bit divisions per tap and dimension, which made
    // a 2x2 MaxPool a fifth of memory speed on an H200.)
    long long j[R], step[R], offset = base;
#pragma unroll
    for (int a = 0; a < R; ++a) {
      j[a] = 0;
      step[a] = d[a] * xstrides[2 + a];
      offset += first[a] * xstrides[2 + a];
    }
    for (long long t = 0; t < total; ++t) {
      float v[V];
      if (vec) {
        baton_vec_load<V>(x + offset, v);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) v[e] = to_f(x[offset + e]);
      }
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if (MODE == 0) {
          acc[e] = (v[e] > acc[e] || v[e] != v[e]) ? v[e] : acc[e];
        } else {
          acc[e] += v[e];
        }
      }
#pragma unroll
      for (int a = R - 1; a >= 0; --a) {
        if (++j[a] < taps[a]) {
          offset += step[a];
          break;
        }
        offset -= (taps[a] - 1) * step[a];
        j[a] = 0;
      }
    }
    if (MODE != 0) {
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] /= count;
    }
    if (vec) {
      baton_vec_store<V>(y + i * V, acc);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) st(&y[i * V + e], acc[e]);
    }
  });
}
