// CUDA C++ source generation for the engine's kernels. Shapes are static, so every size, stride
// and scalar constant is baked into the source; NVRTC then compiles all of a partition's kernels
// into one cubin for the target architecture.
//
// The generated code needs no headers: half and bfloat16 values are stored as 16-bit structs and
// converted with PTX cvt instructions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/core/dtype.h"

namespace baton::cuda {

// One elementwise operation inside a fused kernel. Operand indices refer to `inputs` (>= 0) or to
// earlier results (-1 - k for op k).
struct FusedOp {
  enum class Kind { Add, Sub, Mul, Div, Pow, Sqrt, Erf, Relu, Tanh, Sigmoid, Gelu, GeluTanh, Copy };
  Kind kind;
  int a = 0;
  int b = 0;
};

struct FusedInput {
  DType dtype = DType::Float32;
  // Element strides along the output's dimensions (0 where the input is broadcast). Empty for a
  // scalar literal.
  std::vector<int64_t> strides;
  bool literal = false;
  float value = 0.0f;  // literal scalar constants are baked into the code
};

struct FusedOutput {
  DType dtype = DType::Float32;
  int op = 0;  // which op's result is stored
};

struct FusedKernel {
  std::string name;
  std::vector<int64_t> sizes;  // output shape (all outputs have it)
  std::vector<FusedInput> inputs;
  std::vector<FusedOp> ops;
  std::vector<FusedOutput> outputs;
};

// Launch configuration of a generated kernel.
struct LaunchShape {
  uint32_t grid = 1;
  uint32_t block = 256;
};

// Pointer arguments: non-literal inputs in order, then outputs.
std::string generate_fused(const FusedKernel& k, LaunchShape* launch);

// Softmax over `axis_size` elements spaced `inner` apart, for outer * inner rows.
std::string generate_softmax(const std::string& name, DType in, DType out, int64_t outer,
                             int64_t axis_size, int64_t inner, LaunchShape* launch);

// y = transpose(x, perm) for x of shape `in_sizes`.
std::string generate_transpose(const std::string& name, DType in, DType out,
                               const std::vector<int64_t>& in_sizes,
                               const std::vector<int64_t>& perm, LaunchShape* launch);

// Concatenation along one axis: the output is [outer, sum(axis_sizes), inner].
std::string generate_concat(const std::string& name, const std::vector<DType>& in, DType out,
                            int64_t outer, const std::vector<int64_t>& axis_sizes, int64_t inner,
                            LaunchShape* launch);

// Definitions every generated kernel relies on; emitted once per module.
std::string kernel_prelude();

// "float", "half_t", "bf16_t".
std::string_view device_type_name(DType dtype);

}  // namespace baton::cuda
