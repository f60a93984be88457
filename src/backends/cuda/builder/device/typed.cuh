// Typed loads and stores for kernels that move, select, compare or convert values of any dtype an
// engine stores (float32, float16, bfloat16, int8, uint8, int16, int32, int64, bool): `ld` gives
// a float for the float types and the value itself for integers and bool; `sto` stores a value
// into any of them. Data movement between two float types rounds once (st's cvt.rn); between
// equal integer types it is exact.
#pragma once

#include "baton/common.cuh"

// ONNX bool: one byte, 0 or 1.
struct __align__(1) bool_t {
  unsigned char x;
};

__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld(half_t v) { return to_f(v); }
__device__ __forceinline__ float ld(bf16_t v) { return to_f(v); }
__device__ __forceinline__ bool ld(bool_t v) { return v.x != 0; }
__device__ __forceinline__ int ld(signed char v) { return v; }
__device__ __forceinline__ int ld(unsigned char v) { return v; }
__device__ __forceinline__ int ld(short v) { return v; }
__device__ __forceinline__ int ld(int v) { return v; }
__device__ __forceinline__ long long ld(long long v) { return v; }

template <typename V>
__device__ __forceinline__ void sto(float* p, V v) {
  *p = (float)v;
}
template <typename V>
__device__ __forceinline__ void sto(half_t* p, V v) {
  st(p, (float)v);
}
template <typename V>
__device__ __forceinline__ void sto(bf16_t* p, V v) {
  st(p, (float)v);
}
// Any non-zero value (NaN included) is true.
template <typename V>
__device__ __forceinline__ void sto(bool_t* p, V v) {
  p->x = v ? 1 : 0;
}
// Integer to integer wraps (two's complement), as the CPU kernels do.
template <typename V>
__device__ __forceinline__ void sto(signed char* p, V v) {
  *p = (signed char)v;
}
template <typename V>
__device__ __forceinline__ void sto(unsigned char* p, V v) {
  *p = (unsigned char)v;
}
template <typename V>
__device__ __forceinline__ void sto(short* p, V v) {
  *p = (short)v;
}
template <typename V>
__device__ __forceinline__ void sto(int* p, V v) {
  *p = (int)v;
}
template <typename V>
__device__ __forceinline__ void sto(long long* p, V v) {
  *p = (long long)v;
}

// Float to integer as Cast does it on the CPU: truncation toward zero, saturated to [lo, hi],
// NaN to 0 (a plain C++ conversion would be undefined out of range).
__device__ __forceinline__ long long baton_f2i(float f, long long lo, long long hi) {
  if (f != f) return 0;
  if (f <= (float)lo) return lo;
  if (f >= (float)hi) return hi;
  return (long long)f;
}

// f rounded to float16 / bfloat16 and back: a Cast to those types whose result the engine keeps
// in float32 still rounds.
__device__ __forceinline__ float baton_round_f16(float f) {
  half_t h;
  st(&h, f);
  return to_f(h);
}
__device__ __forceinline__ float baton_round_bf16(float f) {
  bf16_t h;
  st(&h, f);
  return to_f(h);
}

// Gathers: an index into a dimension of `n` elements, negative ones counting from the end; -1
// when it is outside [-n, n) (the CPU kernels report an error; a kernel cannot, and writes 0).
__device__ __forceinline__ long long baton_wrap_index(long long k, long long n) {
  if (k < 0) k += n;
  return (k < 0 || k >= n) ? -1 : k;
}

// Gather along one axis: data viewed as [outer, n, inner], indices flattened to `count`. kFast:
// the sizes are kernel arguments and every index is below 2^31, so quotients come from the
// magics (baton_div); otherwise from dividing (by constants when the sizes are in the code).
template <bool kFast, typename TD, typename TI, typename TO>
__device__ __forceinline__ void baton_gather(const TD* __restrict__ x, const TI* __restrict__ idx,
                                             TO* __restrict__ y, long long total, long long count,
                                             long long n, long long inner, long long count_magic,
                                             long long inner_magic) {
  baton_for_each(total, [&](long long i) {
    const long long t = kFast ? (long long)baton_div((unsigned)i, inner_magic) : i / inner;
    const long long r = i - t * inner;
    const long long b = kFast ? (long long)baton_div((unsigned)t, count_magic) : t / count;
    const long long k = baton_wrap_index((long long)idx[t - b * count], n);
    if (k < 0) {
      sto(&y[i], 0);
    } else {
      sto(&y[i], ld(x[(b * n + k) * inner + r]));
    }
  });
}

// GatherND: for each of `tuples` index tuples of K entries (per batch of `batch_elems` data
// elements), the slice of `inner` elements the tuple names; dims / strides are the K indexed
// dimensions of data.
template <int K, bool kFast, typename TD, typename TI, typename TO>
__device__ __forceinline__ void baton_gather_nd(
    const TD* __restrict__ x, const TI* __restrict__ idx, TO* __restrict__ y, long long total,
    long long tuples, long long batch_elems, long long inner, const long long (&dims)[K],
    const long long (&strides)[K], long long tuples_magic, long long inner_magic) {
  baton_for_each(total, [&](long long i) {
    const long long t = kFast ? (long long)baton_div((unsigned)i, inner_magic) : i / inner;
    const long long b = kFast ? (long long)baton_div((unsigned)t, tuples_magic) : t / tuples;
    long long offset = b * batch_elems + (i - t * inner);
    bool valid = true;
#pragma unroll
    for (int a = 0; a < K; ++a) {
      const long long k = baton_wrap_index((long long)idx[t * K + a], dims[a]);
      valid = valid && k >= 0;
      offset += k * strides[a];
    }
    if (valid) {
      sto(&y[i], ld(x[offset]));
    } else {
      sto(&y[i], 0);
    }
  });
}
