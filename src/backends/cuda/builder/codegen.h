// CUDA C++ glue for the engine's kernels. The device code itself lives in builder/device/*.cuh
// (embedded at build time); what is generated per kernel is a small `extern "C"` entry point that
// calls those templates with the kernel's sizes and strides (kernel arguments, KernelArgs) and its
// scalar constants, plus the expression bodies of fused elementwise kernels. NVRTC compiles all of
// a partition's kernels into one cubin for the target architecture.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/engine_format.h"
#include "baton/core/dtype.h"

namespace baton::cuda {

// One elementwise operation inside a fused kernel: a device expression (from the elementwise
// table, src/ops/elementwise.h) of `{x}` (unary) or `{a}` and `{b}` (binary). Operand indices
// refer to `inputs` (>= 0) or to earlier results (-1 - k for op k).
struct FusedOp {
  std::string expression;
  int a = 0;
  int b = 0;
};

// The identity, for kernels that only convert (casts) or copy.
inline constexpr std::string_view kCopyExpression = "{x}";

// One input of a Concat that a fused kernel reads in place (FusedInput::pieces).
struct FusedPiece {
  DType dtype = DType::Float32;
  std::vector<int64_t> strides;  // along the output's dimensions, in the kernel's order
  int64_t size = 0;              // its extent along the Concat's axis
};

struct FusedInput {
  DType dtype = DType::Float32;
  // Element strides along the output's dimensions (0 where the input is broadcast). Empty for a
  // scalar literal.
  std::vector<int64_t> strides;
  bool literal = false;
  float value = 0.0f;  // literal scalar constants are baked into the code
  // A Concat read where its inputs are (lower_fused_group): the input is `pieces` joined along
  // dimension `axis` of the kernel's dimension order, each piece a pointer of its own; `dtype`
  // and `strides` are unused. The Concat then costs no kernel and no copy.
  std::vector<FusedPiece> pieces{};
  int axis = -1;
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
  // A dynamic engine's kernel, whose sizes differ from call to call (the launch: generate_fused).
  bool sizes_vary = false;
};

// The scalar arguments of one generated kernel: the sizes, strides and offsets its source would
// otherwise hold as constants. Passed as arguments (one `BatonArgs<N> a` after the pointers,
// KernelStep::num_args), they make an op's kernel the same source at every shape, so a model
// compiles each op variant once and a dynamic program can run it at any size; with
// BuildOptions::kernel_sizes = code they are written into the source as constants instead.
class KernelArgs {
 public:
  explicit KernelArgs(bool in_code = false) : in_code_(in_code) {}
  bool in_code() const { return in_code_; }
  // How the kernel reads `v`: "a.v[3]" (an argument) or "123LL" (a constant).
  std::string value(int64_t v);
  // A local array declaration, "  const long long name[2] = {a.v[0], a.v[1]};\n" (constexpr
  // with the values in the code).
  std::string array(std::string_view name, const std::vector<int64_t>& values);
  // Whether a kernel whose indices stay below `count` divides them by its argument sizes through
  // magic numbers (division_magic, baton_div on the device): the sizes are arguments and every
  // index fits in 31 bits. Otherwise it divides (by constants, when the sizes are in the code).
  bool magic_division(int64_t count) const;
  // The quotient of the int64 index expression `x` (below `count`) by `d`: a division by a
  // constant in the code; with `d` an argument, a multiplication by its magic when
  // magic_division(count), else a 64-bit division.
  std::string quotient(std::string_view x, int64_t d, int64_t count);
  // The parameter that follows the pointers in the kernel's signature: ", const BatonArgs<N> a",
  // or nothing when the kernel has no arguments. N counts the values asked for so far, so call it
  // after the last value(), array() or quotient(), in a statement of its own or after theirs
  // (the order in which one call's arguments are evaluated is unspecified).
  std::string parameter() const;
  const std::vector<int64_t>& values() const { return values_; }

 private:
  bool in_code_;
  std::vector<int64_t> values_;
};

// Division of an index below 2^31 by a divisor known only when the kernel runs (a size passed as
// an argument) without a division instruction: q = umulhi(x, multiplier) >> shift, the
// multiplier rounded up (the round-up method of Granlund and Montgomery). Encoded as one int64,
// multiplier | shift << 32; 0 for a divisor of 1 (q = x). baton_div in device/common.cuh.
// division_magic(divisor) is engine_format.h's: a dynamic engine computes the magics of a call's
// sizes when it runs.
// The magics of `divisors` when `magic` (KernelArgs::magic_division), else zeros (unused).
std::vector<int64_t> division_magics(const std::vector<int64_t>& divisors, bool magic);

// The index arithmetic of a kernel over the elements of `sizes` (row-major): the offset of an
// element in a tensor read through `strides` along those sizes. The first offset declares the
// sizes (and, when they are arguments and every index fits in 32 bits, their division magics);
// a kernel that never asks for one (every input contiguous) passes neither.
class ElementIndex {
 public:
  ElementIndex(KernelArgs& args, const std::vector<int64_t>& sizes);
  // The expression for the offset of element `i` through the strides array `strides`.
  std::string offset(std::string_view i, std::string_view strides);
  // The declarations the offsets need (none when there were none), placed at the top of the
  // kernel.
  const std::string& declarations() const { return declarations_; }

 private:
  KernelArgs& args_;
  std::vector<int64_t> sizes_;
  bool fast_ = false;
  std::string declarations_;
};

// Launch configuration of a generated kernel.
struct LaunchShape {
  uint32_t grid = 1;
  uint32_t block = 256;
  // How the grid follows the sizes, for a dynamic engine (builder/dynamic_shapes.h): with count
  // > 0 the grid is clamp(ceil(count / per_block), 1, cap) (grid_stride_launch, a warp per row),
  // and the engine recomputes it from count's size expression at each call's sizes. Otherwise
  // the grid is a size expression of its own (a block per row: the row count).
  int64_t count = 0;
  int64_t per_block = 1;
  int64_t cap = 0;
  // With warp_rows_from > 0 (a row kernel that picks a warp or a block per row when it runs,
  // row_launch.h's switching_row_launch): the grid is count (a block per row) while count <
  // warp_rows_from, else ceil(count / per_block) (per_block rows a block, a warp each).
  int64_t warp_rows_from = 0;
};

// Pointer arguments: non-literal inputs in order (a pieced input's pieces in their order), then
// outputs. One element per thread, or 16 bytes per access where every input is contiguous,
// row-contiguous or broadcast along rows, or pieced with contiguous pieces (with the one-element
// loop kept for pointers, sizes and pieces not aligned for it, checked at run time).
std::string generate_fused(const FusedKernel& k, LaunchShape* launch, KernelArgs* args);

// A kernel over values of any stored dtype (typed.cuh's ld / sto): output element i of `sizes`
// (row-major) is `expression`, where {0}, {1}, ... stand for the inputs' elements, each read as
// ld(p[offset + its strided position]) (strides 0 along broadcast dimensions). Used by the
// selection, comparison, logical, conversion and data-movement lowerings (Where, IsNaN, And,
// Cast, Expand, Slice, Split, ...), which must not round integers through float.
struct TypedInput {
  DType dtype = DType::Float32;
  std::vector<int64_t> strides;  // along the output's dimensions
  int64_t offset = 0;            // element offset of the output's first element
};
struct TypedKernel {
  std::string name;
  std::vector<int64_t> sizes;
  std::vector<TypedInput> inputs;
  std::string expression;
  DType out = DType::Float32;
};
// Pointer arguments: the inputs in order, then the output. One input read as rows of 256 or more
// contiguous elements one pitch apart (a padded GEMM result, a Slice of the last axis) gets a row
// kernel instead of the element loop (codegen.cpp, row_pitched).
std::string generate_typed(const TypedKernel& k, LaunchShape* launch, KernelArgs* args);

// A grid-stride launch over n elements (blocks of kBlock threads, the grid capped).
inline constexpr uint32_t kBlock = 256;
LaunchShape grid_stride_launch(int64_t n);
// The same over n elements taken `per_thread` at a time (a kernel's 16-byte loop): as many
// threads as n / per_thread need, the count still n (a size expression at every size).
LaunchShape vector_launch(int64_t n, int64_t per_thread);

// Whether element `strides` lay out `sizes` row-major (dimensions of size 1 may have any stride).
bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

// "{1, 2, 3}": a C++ initializer of int64 values.
std::string int_list(const std::vector<int64_t>& values);

// The #include lines every engine module starts with (the embedded device headers).
std::string kernel_prelude();

// A bit-exact float literal: "__int_as_float(0x3dcccccd)".
std::string float_literal(float v);

// The device type of a stored dtype: "float", "half_t", "bf16_t", "int", "long long", "bool_t",
// ... (typed.cuh).
std::string_view device_type_name(DType dtype);

}  // namespace baton::cuda
