// Device helpers every kernel of a Baton engine includes. Compiled by NVRTC at build time, which
// has no toolkit headers: float16 and bfloat16 values are 16-bit structs converted with PTX cvt
// instructions, and arithmetic is done in float.
#pragma once

struct __align__(2) half_t {
  unsigned short x;
};
struct __align__(2) bf16_t {
  unsigned short x;
};

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(half_t v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x));
  return f;
}
__device__ __forceinline__ float to_f(bf16_t v) { return __uint_as_float(((unsigned)v.x) << 16); }

__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(half_t* p, float v) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  p->x = h;
}
__device__ __forceinline__ void st(bf16_t* p, float v) {
#if __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  p->x = h;
#else
  unsigned u = __float_as_uint(v);
  p->x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

// The first statement of every engine kernel built for sm_90 or newer (KernelStep::flags): waits
// until the grid before it in the stream has completed and its memory writes are visible. A
// no-op when the kernel was launched without programmatic stream serialization.
__device__ __forceinline__ void baton_wait_for_predecessor() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kVec elements of T read or written with one access (T's size times kVec bytes, aligned so).
template <int kVec, typename T>
struct alignas(sizeof(T) * kVec) baton_vec {
  T v[kVec];
};

template <int kVec, typename T>
__device__ __forceinline__ bool baton_vec_aligned(const T* p) {
  return ((unsigned long long)p % (sizeof(T) * kVec)) == 0;  // null is aligned
}

template <int kVec, typename T>
__device__ __forceinline__ void baton_vec_load(const T* p, float (&out)[kVec]) {
  if (kVec == 1) {
    out[0] = to_f(p[0]);
    return;
  }
  const baton_vec<kVec, T> w = *reinterpret_cast<const baton_vec<kVec, T>*>(p);
#pragma unroll
  for (int e = 0; e < kVec; ++e) out[e] = to_f(w.v[e]);
}

template <int kVec, typename T>
__device__ __forceinline__ void baton_vec_store(T* p, const float (&in)[kVec]) {
  if (kVec == 1) {
    st(p, in[0]);
    return;
  }
  baton_vec<kVec, T> w;
#pragma unroll
  for (int e = 0; e < kVec; ++e) st(&w.v[e], in[e]);
  *reinterpret_cast<baton_vec<kVec, T>*>(p) = w;
}

// The functions the elementwise table's device expressions call (src/ops/elementwise.h).
__device__ __forceinline__ float baton_relu(float x) { return x < 0.0f ? 0.0f : x; }  // NaN stays
__device__ __forceinline__ float baton_sign(float x) {
  return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
}
__device__ __forceinline__ float baton_sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}
// x clamped to [0, 1]; NaN stays NaN (fminf / fmaxf would drop it).
__device__ __forceinline__ float baton_clamp01(float x) {
  return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
}
__device__ __forceinline__ float baton_hard_swish(float x) {
  return x * baton_clamp01(x / 6.0f + 0.5f);
}
__device__ __forceinline__ float baton_prelu(float x, float slope) {
  return x < 0.0f ? slope * x : x;
}
__device__ __forceinline__ float baton_elu(float x, float alpha) {
  return x < 0.0f ? alpha * expm1f(x) : x;
}
__device__ __forceinline__ float baton_selu(float x, float alpha, float gamma) {
  return x > 0.0f ? gamma * x : gamma * (alpha * expm1f(x));
}
__device__ __forceinline__ float baton_celu(float x, float alpha) {
  return x > 0.0f ? x : alpha * expm1f(x / alpha);
}
__device__ __forceinline__ float baton_shrink(float x, float bias, float lambd) {
  return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0f);
}
// log(1 + exp(x)) without overflow for large x.
__device__ __forceinline__ float baton_softplus(float x) {
  return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
// 0.5 x (1 + erf(x / sqrt 2)) written with erfc so negative x keep their precision.
__device__ __forceinline__ float baton_gelu(float x) {
  return 0.5f * x * erfcf(-x * 0.70710678118654752f);
}
__device__ __forceinline__ float baton_gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// f(i) for every element index i in [0, n), grid-striding.
template <typename F>
__device__ __forceinline__ void baton_for_each(long long n, F f) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    f(i);
  }
}

// A kernel's scalar arguments (sizes, strides, offsets: KernelStep::num_args), passed by value
// after its pointers.
template <int N>
struct BatonArgs {
  long long v[N];
};

// x / d for x below 2^31, with `magic` the host's division_magic(d) (codegen.h): the multiplier in
// the low 32 bits, the shift above them, 0 when d is 1.
__device__ __forceinline__ unsigned baton_div(unsigned x, long long magic) {
  return magic == 0 ? x : __umulhi(x, (unsigned)magic) >> (unsigned)(magic >> 32);
}

// baton_offset for sizes that are kernel arguments and an index below 2^31: each division is a
// multiplication by the dimension's magic. The outermost dimension needs none (i is in range).
template <int R>
__device__ __forceinline__ long long baton_offset_fast(long long i, const long long (&sizes)[R],
                                                       const long long (&magic)[R],
                                                       const long long (&strides)[R]) {
  unsigned x = (unsigned)i;
  long long offset = 0;
#pragma unroll
  for (int d = R - 1; d > 0; --d) {
    const unsigned q = baton_div(x, magic[d]);
    offset += (long long)(x - q * (unsigned)sizes[d]) * strides[d];
    x = q;
  }
  return offset + (long long)x * strides[0];
}

// The offset of output element i in a tensor read with element `strides` along the output's
// `sizes` (0 along broadcast dimensions). When the arrays are compile-time constants (the build
// option kernel_sizes=code), the unrolled divisions become multiplications.
template <int R>
__device__ __forceinline__ long long baton_offset(long long i, const long long (&sizes)[R],
                                                  const long long (&strides)[R]) {
  long long offset = 0;
#pragma unroll
  for (int d = R - 1; d >= 0; --d) {
    offset += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return offset;
}
