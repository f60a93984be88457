// The CUDA engine blob: what the engine builder writes for one GPU partition and the CUDA
// delegate loads. Plain C++ (no CUDA headers), so the format is written and checked without a
// GPU. docs/engine-format.md describes it byte by byte.
//
// Layout (little-endian; every section 64-byte aligned, inside the blob):
//   EngineHeader (256 bytes)
//   bindings  BindingRecord[num_bindings], in delegate-argument order (inputs, then outputs)
//   steps     StepRecord[num_steps], executed in order
//   strings   binding and kernel names (not NUL-terminated; records hold offset + length)
//   options   the build options the engine was built with: "KEY=VALUE" lines, printable ASCII
//   args      int64 values the kernel steps pass their kernels by value (sizes, strides, offsets)
//   kernels   KernelRecord[num_kernels]: the entry points in the cubin
//   weights   constant tensors in the engine's precision, uploaded once at load
//   cubin     the NVRTC-compiled module for `sm_arch`
//   choices   StepChoice[]: the cuBLASLt algorithm or cuDNN engine timed fastest for each GEMM
//             and convolution step on a GPU (optional: empty when the engine was built without
//             its GPU; the loader then chooses and times at load)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/core/dtype.h"
#include "baton/core/error.h"

namespace baton::cuda {

inline constexpr char kEngineMagic[8] = {'B', 'T', 'N', 'E', 'N', 'G', 'I', 'N'};
// 2: the options section (version 1 engines recorded no options). 3: kernel arguments (the args
// section, KernelStep::first_arg and num_args) and a 320-byte header. 4: dynamic engines (the
// symbols, exprs and patches sections). A blob without dynamic sizes is written as version 3, so
// static engines stay what they were; readers take both.
inline constexpr uint32_t kEngineVersion = 4;
inline constexpr uint32_t kStaticEngineVersion = 3;
inline constexpr uint64_t kMaxEngineOptionsBytes = 4096;
inline constexpr uint32_t kEngineMaxRank = 8;
inline constexpr uint64_t kEngineAlignment = 256;  // scratch and weights offsets

enum class Precision : uint32_t { FP32 = 0, TF32 = 1, FP16 = 2, BF16 = 3 };
std::string_view precision_name(Precision p);
bool parse_precision(std::string_view text, Precision* out);

struct Section {
  uint64_t offset;
  uint64_t size;
};

struct EngineHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  int32_t device_id;          // the GPU the engine was built for ("cuda:N")
  uint32_t sm_arch;           // major * 10 + minor, e.g. 90
  uint32_t cuda_version;      // CUDART_VERSION at build, e.g. 13000
  uint32_t cublaslt_version;  // CUBLAS_VERSION at build
  uint32_t cudnn_version;     // CUDNN_VERSION at build
  uint32_t nvrtc_version;     // major * 1000 + minor * 10
  uint32_t precision;         // Precision
  uint32_t num_bindings;
  uint32_t num_steps;
  uint32_t num_kernels;
  uint64_t scratch_bytes;    // activations planned by the builder
  uint64_t workspace_bytes;  // cuBLASLt workspace
  Section bindings;
  Section steps;
  Section strings;
  Section kernels;
  Section weights;
  Section cubin;
  uint64_t blob_size;  // the whole blob; a reader rejects truncated or padded blobs
  // Timed choices (size 0 when none were recorded) and what they were timed with: a loader with
  // another cuBLASLt or cuDNN version chooses again.
  Section choices;
  uint32_t choices_cublaslt_version;  // cublasLtGetVersion() when timed
  uint32_t choices_cudnn_version;     // cudnnGetVersion() when timed (0: no cuDNN step)
  char choices_gpu[40];               // the GPU's name, NUL-padded, for inspection
  Section options;                    // build options, "KEY=VALUE\n" lines
  Section args;                       // int64[]: the kernel steps' arguments
  // A dynamic engine (version 4; all three empty in a static one): the partition's symbols, the
  // size expressions over them, and the patches that write each expression's value into the
  // bindings, steps and arguments for a call's sizes. Every other section holds the engine at
  // the symbols' maxima.
  Section symbols;  // SymbolRecord[]
  Section exprs;    // ExprRecord[], operands before the expressions that read them
  Section patches;  // PatchRecord[]
};
static_assert(sizeof(EngineHeader) == 320);

struct BindingRecord {
  uint32_t name_offset;  // into strings
  uint32_t name_size;
  uint8_t dtype;  // baton::DType (ONNX code)
  uint8_t is_output;
  uint8_t rank;
  uint8_t reserved[5];
  int64_t sizes[kEngineMaxRank];
};
static_assert(sizeof(BindingRecord) == 80);

enum class Space : uint32_t { Binding = 0, Scratch = 1, Weights = 2 };

// A byte range an operation reads or writes: inside binding `index`, or at `offset` in the
// engine's scratch or weights buffer. `bytes` is the extent accessed, checked at load.
struct BufferRef {
  uint32_t space;  // Space
  uint32_t index;  // binding index (Space::Binding)
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(BufferRef) == 24);

// Matmul: a GEMM described by a GemmStep (the same column-major terms) that cuDNN runs as one
// operation graph, for epilogues cuBLASLt lacks (the erf-GELU: BiasGeluErf).
enum class StepKind : uint32_t { Gemm = 1, Kernel = 2, Copy = 3, Conv = 4, Sdpa = 5, Matmul = 6 };
// Steps cuDNN runs (an operation graph and a plan chosen for it): Conv, Sdpa and Matmul.
bool is_cudnn_step(uint32_t kind);
// "gemm", "kernel", "copy", "conv", "sdpa", "matmul" (as `baton inspect` and profiles name them).
std::string_view step_kind_name(StepKind kind);

inline constexpr uint32_t kMaxKernelOperands = 16;
// A kernel's scalar arguments travel in its parameter block with its pointers (4 KB at most).
inline constexpr uint32_t kMaxKernelArgs = 256;

// cuBLASLt matmul in column-major terms: D[m, n] = alpha * op(A)[m, k] * op(B)[k, n]
// (+ beta * C) (+ bias[m]) then the epilogue, batched with strides (0 broadcasts).
struct GemmStep {
  uint8_t a_dtype, b_dtype, c_dtype, d_dtype;  // DType of each operand
  uint8_t trans_a, trans_b;
  uint8_t epilogue;  // GemmEpilogue
  uint8_t has_c;
  uint8_t compute;     // Precision: FP32 -> 32F, TF32 -> 32F_FAST_TF32, FP16/BF16 -> 32F
  uint8_t bias_dtype;  // DType of the bias vector (epilogues with a bias)
  uint8_t reserved[2];
  uint32_t batch;
  int64_t m, n, k;
  int64_t lda, ldb, ldc, ldd;
  int64_t stride_a, stride_b, stride_c, stride_d;
  float alpha, beta;
  BufferRef a, b, c, d, bias;
};

// BiasGeluErf (the exact, erf-based GELU after the bias) only in Matmul steps: cuBLASLt's GELU
// epilogue is the tanh form.
enum class GemmEpilogue : uint8_t {
  None = 0,
  Bias = 1,
  BiasRelu = 2,
  BiasGeluTanh = 3,
  Relu = 4,
  BiasGeluErf = 5
};
inline constexpr uint8_t kMaxGemmEpilogue = 5;
// Whether the epilogue adds a bias vector; its name ("bias+relu") for inspection.
bool epilogue_has_bias(GemmEpilogue e);
std::string_view epilogue_name(GemmEpilogue e);

// Launch of kernel `kernel` with one pointer argument per operand, in order, then (when num_args
// is not 0) the values args[first_arg, first_arg + num_args) as one by-value argument (the
// kernel's `BatonArgs<num_args>`): the sizes, strides and offsets the kernel works with, so that
// one kernel serves every shape of its op (docs/gpu_dynamic_shapes.md).
struct KernelStep {
  uint32_t kernel;
  uint32_t num_operands;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t flags;  // KernelFlags
  uint32_t first_arg;
  uint32_t num_args;
  BufferRef operands[kMaxKernelOperands];
};

// KernelStep::flags. kWaitsForPredecessor: the kernel's first statement waits for the grid before
// it (griddepcontrol.wait, sm_90 and newer), so it may be launched with programmatic stream
// serialization (CUDA's programmatic dependent launch): its blocks start while the step before it
// finishes, and read nothing until that step's writes are complete and visible.
inline constexpr uint32_t kKernelWaitsForPredecessor = 1;
// kKernelSizeOnly (dynamic engines): the kernel reads only weights and what earlier such kernels
// wrote, and writes only into the size-only block, a range of scratch no other step writes. Its
// results depend on the call's sizes alone, so the runtime runs it once per shape, when that
// shape's CUDA graph is captured, into a copy of the block the graph keeps; without a graph it
// runs at every call. A reader that ignores the flag runs it at every call, which is correct.
inline constexpr uint32_t kKernelSizeOnly = 2;
// The most bytes of size-only values a dynamic engine keeps (at its largest sizes): each CUDA
// graph a context keeps holds its own copy (at most 32 MiB for the default 32 graphs). Steps past
// it run at every call. 1 MiB holds GPT-2's causal mask comparisons over 512 positions (two
// [512, 512] booleans), which at 256 KiB ran at every call, two kernels the static engine folds.
inline constexpr uint64_t kMaxSizeOnlyBytes = 1024 * 1024;

// HardSigmoid(t) = max(0, min(1, alpha t + beta)); HardSwish(t) = t HardSigmoid(t) (ONNX's
// HardSwish: alpha 1/6, beta 1/2). Both read ConvStep's act_alpha and act_beta.
enum class ConvActivation : uint8_t { None = 0, Relu = 1, HardSwish = 2, HardSigmoid = 3 };
inline constexpr uint8_t kMaxConvActivation = 3;
std::string_view conv_activation_name(ConvActivation a);

// A 2-D convolution through cuDNN's graph API, its epilogue fused:
//   y = act(conv(x, w) + bias + residual)
// x, residual and y are channels-last (N, H, W, C); w is K, R, S, C/groups (channels-last
// filters); bias has K elements. y's pixels are y_channel_stride elements apart (0: K, packed),
// so a convolution can write its K channels into a slice of a wider channels-last tensor (a
// Concat on channels, written in place). The cuDNN plan is chosen when the engine is loaded.
struct ConvStep {
  uint8_t x_dtype, w_dtype, y_dtype, bias_dtype;  // DType; the residual has y's dtype
  uint8_t has_bias, has_residual;
  uint8_t activation;  // ConvActivation
  uint8_t compute;     // Precision: FP32 forbids TF32 tensor cores, TF32 allows them
  int64_t n, c, k, groups;
  int64_t in_h, in_w, out_h, out_w, kernel_h, kernel_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t stride_h, stride_w, dilation_h, dilation_w;
  BufferRef x, w, bias, residual, y;
  float act_alpha, act_beta;  // HardSwish and HardSigmoid (finite); 0 for the others
  int64_t y_channel_stride;   // 0 (packed: K) or at least K
};
// y's pixel pitch in elements.
inline int64_t conv_y_pitch(const ConvStep& c) {
  return c.y_channel_stride == 0 ? c.k : c.y_channel_stride;
}

enum class SdpaMask : uint8_t { None = 0, Causal = 1, Bias = 2 };
inline constexpr uint8_t kMaxSdpaMask = 2;
std::string_view sdpa_mask_name(SdpaMask m);

// Scaled dot-product attention through cuDNN's fused SDPA (graph API, flash attention):
//   O = softmax(scale * Q K^T [+ bias | causal mask]) V
// Q [B, H, Sq, D], K [B, H, Sk, D], V [B, H, Sk, Dv] and O [B, H, Sq, Dv], each read or written
// through its own batch, head and sequence strides (elements; the last dimension is contiguous),
// so Q, K and V can be views of one projection's output and O a view of a transposed buffer.
// The causal mask keeps key j for query i when j <= i. The bias is contiguous
// [B or 1, H or 1, Sq, Sk] (bias_batch / bias_heads say which). All tensors have `dtype`.
struct SdpaStep {
  uint8_t dtype;  // DType: Float16 or BFloat16
  uint8_t mask;   // SdpaMask
  uint8_t bias_batch, bias_heads;
  float scale;
  uint32_t b, h, sq, sk, d, dv;
  int64_t q_strides[3], k_strides[3], v_strides[3], o_strides[3];  // batch, head, sequence
  BufferRef q, k, v, o, bias;
};

// Device-to-device copy of src.bytes (== dst.bytes).
struct CopyStep {
  BufferRef src;
  BufferRef dst;
};

struct StepRecord {
  uint32_t kind;  // StepKind
  uint32_t reserved;
  union {
    GemmStep gemm;
    KernelStep kernel;
    CopyStep copy;
    ConvStep conv;
    SdpaStep sdpa;
  };
};
static_assert(sizeof(StepRecord) == 440, "the step record's size is part of the format");

// The tensors of a cuDNN step (is_cudnn_step) in the order its plan takes their pointers: a
// convolution's x, w, [bias], [residual], y; an attention's q, k, v, [bias], o; a matmul's a, b,
// [bias], d. Returns how many.
int cudnn_operands(const StepRecord& r, BufferRef (&out)[5]);
// Every buffer step `r` names, in `out` (kMaxKernelOperands at most): a GEMM's A, B, D, [C],
// [bias]; a kernel's operands; a copy's source and destination; a cuDNN step's as
// cudnn_operands. Returns how many.
int step_buffers(const StepRecord& r, BufferRef (&out)[kMaxKernelOperands]);

// Whether `r` is a kernel flagged kKernelSizeOnly.
inline bool is_size_only_kernel(const StepRecord& r) {
  return r.kind == static_cast<uint32_t>(StepKind::Kernel) &&
         (r.kernel.flags & kKernelSizeOnly) != 0;
}

// The size-only block of a dynamic engine's `steps` (kKernelSizeOnly): the scratch range
// [begin, end) its flagged kernels touch, and how many there are. Empty, with `refused` saying
// why, when the steps do not lay it out as the builder does: a flagged kernel reading a binding
// (it would keep one call's input for every later call), a block over kMaxSizeOnlyBytes, or a
// buffer of another step straddling its edge. The runtime then runs every step at every call,
// as a reader unaware of the flag would. Empty without a reason when nothing is flagged.
struct SizeOnlyBlock {
  uint64_t begin = 0, end = 0;
  size_t steps = 0;
  std::string refused;
  bool empty() const { return end <= begin; }
};
SizeOnlyBlock size_only_block(std::span<const StepRecord> steps);

// Whether cuDNN steps `a` and `b` have the same operation graph (kind, sizes, strides, dtypes,
// fused operations), differing at most in the buffers they read and write: one plan then serves
// both, since cuDNN takes the pointers only when the plan runs.
bool same_cudnn_graph(const StepRecord& a, const StepRecord& b);

// The choice timed for one GEMM or cuDNN step. A GEMM's is cuBLASLt's opaque algorithm
// (cublasLtMatmulAlgo_t); a convolution's or an attention's is one of the plans cuDNN's
// heuristics offer for its operation graph, named as cuDNN names it (engine and knob values:
// "eng0_k2=3_k3=0...").
struct StepChoice {
  uint32_t step;        // index of a Gemm, Conv or Sdpa step
  uint32_t kind;        // that step's StepKind, repeated as a check
  float time_us;        // the chosen candidate's time when it was chosen
  uint32_t candidates;  // how many candidates were timed
  uint64_t cublaslt_algo[8];
  int64_t cudnn_engine;  // the plan's engine (global index), for inspection
  char cudnn_plan[264];  // the plan's name, NUL-padded
};
static_assert(sizeof(StepChoice) == 352);

// What write_engine_blob / record_choices store in the choices section.
struct EngineChoices {
  uint32_t cublaslt_version = 0;
  uint32_t cudnn_version = 0;
  std::string gpu;
  std::vector<StepChoice> steps;
};

// An entry point of the cubin and its parameters as its source declares them: `num_pointers`
// pointers, then a BatonArgs<num_args> when num_args is not 0. Every step that launches it must
// pass exactly these (checked at load), so that a step record cannot make the launch read more
// parameter bytes than the blob holds.
struct KernelRecord {
  uint32_t name_offset;
  uint32_t name_size;
  uint32_t num_pointers;
  uint32_t num_args;
};
static_assert(sizeof(KernelRecord) == 16);

// --- dynamic engines (docs/gpu_dynamic_shapes.md) -----------------------------------------------
// A symbol of the program's method, in the method's order (a call's symbol values are indexed the
// same way): its name (in strings) and range.
struct SymbolRecord {
  uint32_t name_offset;
  uint32_t name_size;
  int64_t min, max, opt;
};
static_assert(sizeof(SymbolRecord) == 32);

// A size expression in flat form: a constant, a symbol, or an operation on two earlier records.
enum class ExprOp : uint32_t {
  Const = 0,
  Symbol = 1,
  Add = 2,
  Mul = 3,
  FloorDiv = 4,
  CeilDiv = 5,
  Min = 6,
  Max = 7
};
inline constexpr uint32_t kMaxExprOp = 7;
struct ExprRecord {
  uint32_t op;    // ExprOp
  uint32_t a, b;  // operands (earlier records) of the binary operations
  uint32_t reserved;
  int64_t value;  // Const: the value; Symbol: the symbol's index
};
static_assert(sizeof(ExprRecord) == 24);

// Where a patch writes: a field of a step record (at a byte offset inside it), a kernel argument,
// or a dimension of a binding's sizes.
enum class PatchTarget : uint8_t { StepField = 0, Arg = 1, BindingSize = 2 };
// What it writes: the expression's value, or (kernel arguments only) the division magic of that
// value (division_magic in builder/codegen.h), which a kernel multiplies by instead of dividing.
enum class PatchKind : uint8_t { Value = 0, DivisionMagic = 1 };
struct PatchRecord {
  uint8_t target;  // PatchTarget
  uint8_t kind;    // PatchKind
  uint8_t width;   // bytes written: 4 (uint32 fields) or 8
  uint8_t reserved;
  uint32_t index;   // the step, the argument, or the binding
  uint32_t offset;  // StepField: byte offset in the StepRecord; BindingSize: the dimension
  uint32_t expr;    // the ExprRecord whose value is written
};
static_assert(sizeof(PatchRecord) == 16);

// Whether a step of `kind` may have the `width` bytes at `offset` patched: its sizes, strides,
// grid and the offsets and extents of its buffer ranges, never what selects code, a buffer or a
// kernel (the kind, flags, dtypes, a range's space and index, a kernel's index and counts).
bool patchable_step_field(uint32_t kind, uint32_t offset, uint32_t width);
// Every patchable field of a step of `kind`: {byte offset, width}.
std::vector<std::pair<uint32_t, uint32_t>> patchable_step_fields(uint32_t kind);
// A readable name of a patchable field ("gemm.n", "kernel.operands[2].bytes"), for inspect.
std::string step_field_name(uint32_t kind, uint32_t offset);

// The values of `exprs` (each checked: no overflow, no division by zero) with the symbols at
// `symbols`, into `out` (one per record). Allocates nothing.
Status evaluate_exprs(std::span<const ExprRecord> exprs, std::span<const int64_t> symbols,
                      std::span<int64_t> out);
class EngineBlob;
// Writes every patch of dynamic engine `blob`, with its expressions' `values` (evaluate_exprs),
// into copies of its steps, kernel arguments and binding sizes (kEngineMaxRank per binding):
// what a call at new sizes runs (ExecutionContext::resize). InvalidArgument when a value does not
// fit its 4-byte field. Allocates nothing; the copies are checked by EngineBlob::check_steps.
Status apply_patches(const EngineBlob& blob, std::span<const int64_t> values,
                     std::span<StepRecord> steps, std::span<int64_t> args,
                     std::span<int64_t> binding_sizes);
// The division magic of `divisor` (also builder/codegen.h's division_magic): multiplier | shift
// << 32, 0 for a divisor of 1.
int64_t division_magic(int64_t divisor);

// --- bucketed engines ------------------------------------------------------------------------
// A dynamic partition whose lowering changes with its sizes (a dimension of 1 makes a transpose a
// view, a broadcast, a dropped axis) is several dynamic engines, each for a part of the symbols'
// ranges (each engine's symbol records hold its part). The delegate runs a call on the first
// engine whose ranges hold the call's symbols. Layout: BucketsHeader, BucketRecord[count], then
// each engine blob at a 64-byte aligned offset.
inline constexpr char kBucketsMagic[8] = {'B', 'T', 'N', 'B', 'U', 'C', 'K', 'S'};
inline constexpr uint32_t kMaxBuckets = 16;
struct BucketsHeader {
  char magic[8];
  uint32_t version;  // 1
  uint32_t count;
  uint64_t blob_size;
  // The weights every bucket whose own weights section is empty reads: the first bucket's
  // weights, inside it ({0, 0}: none shared). Buckets lower the same constants the same way, so
  // the file holds them once, as the GPU does.
  Section weights;
  uint8_t reserved[24];
};
static_assert(sizeof(BucketsHeader) == 64);
struct BucketRecord {
  uint64_t offset;
  uint64_t size;
};
// The engine blobs in `bytes`: the buckets of a bucketed engine, or `bytes` itself. Checks the
// container (each engine is checked by EngineBlob::parse).
Result<std::vector<std::span<const uint8_t>>> engine_buckets(std::span<const uint8_t> bytes);
// The weights the buckets of `bytes` share (empty for a plain engine or when none are shared), to
// pass to EngineBlob::parse with each bucket. Checked by engine_buckets.
std::span<const uint8_t> shared_bucket_weights(std::span<const uint8_t> bytes);
// With `share_first_weights`, buckets after the first were written without weights (an empty
// weights section) and read the first's.
std::vector<uint8_t> write_buckets(const std::vector<std::vector<uint8_t>>& blobs,
                                   bool share_first_weights = false);
// Whether `symbols` lie inside the ranges of dynamic engine `blob`.
bool holds_symbols(const class EngineBlob& blob, std::span<const int64_t> symbols);

// A copy of a blob at a 64-byte aligned address (EngineBlob::parse needs one), for blobs held in
// a plain std::vector. The copy's bytes live as long as this object.
class AlignedBlobCopy {
 public:
  explicit AlignedBlobCopy(std::span<const uint8_t> bytes);
  std::span<const uint8_t> span() const { return {data_, size_}; }

 private:
  std::vector<uint64_t> storage_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A parsed, fully validated engine blob. Views into the blob's bytes, which must outlive it.
class EngineBlob {
 public:
  // Errors are Error::InvalidProgram naming the field and value ("engine blob: steps[3] operand 1
  // bytes [0, 4096) lie outside the 2048-byte scratch buffer").
  // `shared_weights`: a bucket's weights kept once in its bucketed engine
  // (shared_bucket_weights), used when the blob's own weights section is empty.
  static Result<EngineBlob> parse(std::span<const uint8_t> bytes,
                                  std::span<const uint8_t> shared_weights = {});

  const EngineHeader& header() const { return header_; }
  Precision precision() const { return static_cast<Precision>(header_.precision); }
  std::span<const BindingRecord> bindings() const { return bindings_; }
  std::span<const StepRecord> steps() const { return steps_; }
  std::span<const KernelRecord> kernels() const { return kernels_; }
  std::string_view string(uint32_t offset, uint32_t size) const;
  std::string_view binding_name(size_t i) const;
  std::string_view kernel_name(size_t i) const;
  std::span<const uint8_t> weights() const { return weights_; }
  std::span<const uint8_t> cubin() const { return cubin_; }
  // The kernel steps' arguments, and those of one kernel step.
  std::span<const int64_t> args() const { return args_; }
  std::span<const int64_t> kernel_args(const KernelStep& k) const {
    return args_.subspan(k.first_arg, k.num_args);
  }
  size_t num_inputs() const;
  // How many steps are GEMMs or cuDNN steps: the steps that have algorithm choices.
  size_t num_choice_steps() const;
  // The recorded choices; choice(step) is the one for `step`, or null.
  std::span<const StepChoice> choices() const { return choices_; }
  const StepChoice* choice(size_t step) const;
  std::string_view choices_gpu() const;
  // The build options recorded, one "KEY=VALUE" per line, and as (key, value) pairs in order.
  std::string_view options() const { return options_; }
  // A dynamic engine's symbols, size expressions and patches (all empty for a static engine).
  bool dynamic() const { return !symbols_.empty(); }
  std::span<const SymbolRecord> symbols() const { return symbols_; }
  std::string_view symbol_name(size_t i) const {
    return string(symbols_[i].name_offset, symbols_[i].name_size);
  }
  std::span<const ExprRecord> exprs() const { return exprs_; }
  std::span<const PatchRecord> patches() const { return patches_; }
  // Checks `steps` (this engine's steps with patches applied for a call's sizes) as parse checks
  // the blob's own, against bindings of `binding_bytes` bytes: every range inside its buffer,
  // every GEMM's and cuDNN step's extents inside its ranges. Formats only on failure.
  Status check_steps(std::span<const StepRecord> steps, std::span<const int64_t> args,
                     std::span<const uint64_t> binding_bytes) const;
  std::span<const std::pair<std::string_view, std::string_view>> option_pairs() const {
    return option_pairs_;
  }

 private:
  EngineHeader header_{};
  std::span<const BindingRecord> bindings_;
  std::span<const StepRecord> steps_;
  std::span<const KernelRecord> kernels_;
  std::span<const char> strings_;
  std::span<const uint8_t> weights_;
  std::span<const uint8_t> cubin_;
  std::span<const int64_t> args_;
  std::span<const SymbolRecord> symbols_;
  std::span<const ExprRecord> exprs_;
  std::span<const PatchRecord> patches_;
  std::string_view options_;
  std::vector<std::pair<std::string_view, std::string_view>> option_pairs_;
  std::span<const StepChoice> choices_;
  std::vector<int32_t> choice_of_step_;  // index into choices_, -1 when none
};

// Everything the builder decided, serialized by write_engine_blob.
struct EngineDescription {
  int32_t device_id = 0;
  uint32_t sm_arch = 0;
  uint32_t cuda_version = 0;
  uint32_t cublaslt_version = 0;
  uint32_t cudnn_version = 0;
  uint32_t nvrtc_version = 0;
  Precision precision = Precision::FP32;
  struct Binding {
    std::string name;
    DType dtype = DType::Float32;
    bool is_output = false;
    std::vector<int64_t> sizes;
  };
  std::vector<Binding> bindings;
  std::vector<StepRecord> steps;
  std::vector<std::string> kernel_names;
  // Per kernel (parallel to kernel_names): its pointer parameters and its argument count.
  std::vector<std::pair<uint32_t, uint32_t>> kernel_params;
  uint64_t scratch_bytes = 0;
  uint64_t workspace_bytes = 0;
  std::vector<uint8_t> weights;
  std::vector<uint8_t> cubin;
  std::vector<std::string> options;  // BuildOptions::recorded()
  std::vector<int64_t> args;         // KernelStep::first_arg indexes this
  // A dynamic engine's sections (empty: static, written as version 3).
  struct Symbol {
    std::string name;
    int64_t min = 0, max = 0, opt = 0;
  };
  std::vector<Symbol> symbols;
  std::vector<ExprRecord> exprs;
  std::vector<PatchRecord> patches;
};

Result<std::vector<uint8_t>> write_engine_blob(const EngineDescription& engine);

// `blob` with its choices section replaced by `choices` (which must name its GEMM and Conv
// steps; checked by parsing the result).
// `shared_weights`: a bucket's shared weights (EngineBlob::parse), for the check of the result.
Result<std::vector<uint8_t>> record_choices(std::span<const uint8_t> blob,
                                            const EngineChoices& choices,
                                            std::span<const uint8_t> shared_weights = {});

// "sm_90" -> 90; "sm_8.6"? no: only sm_XY / sm_XYZ forms.
bool parse_sm_arch(std::string_view text, uint32_t* out);
std::string sm_arch_name(uint32_t arch);
// Whether a cubin built for `built` runs on a GPU of `device`: the same major architecture, at
// the same or a newer minor revision (sm_80 runs on sm_86, not the reverse).
bool cubin_runs_on(uint32_t built, uint32_t device);

}  // namespace baton::cuda
