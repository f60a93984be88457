// The CUDA backend's options, typed. docs/options.md lists every key, its values and its default.
//
// Build options say how the engine builder lowers a GPU partition; the builder records them in
// each engine's header, and `baton inspect` shows them (`--json`: an "options" object per engine),
// so a program always says how it was built. Load options say how a loaded engine runs.
//
// Both are parsed once from KEY=VALUE text (the CLI's `--cuda-option` / `--load-option`, the
// Python package's `cuda_options=` / `load_options=` dictionaries); an unknown key or value is an
// InvalidArgument that lists the valid ones. C++ callers may fill the structs directly:
//
//   baton::cuda::BuildOptions build;
//   build.conv_rows = baton::cuda::ConvRows::Cudnn;
//   target_spec.options = build.to_strings();          // compiler::TargetSpec
//
//   baton::cuda::LoadOptions load;
//   load.cuda_graphs = false;
//   method_options.backend_options = load.to_backend_options();   // runtime::MethodOptions
//
// Plain C++: usable (and checked) in builds without the CUDA toolkit.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"
#include "baton/runtime/backend.h"

namespace baton::cuda {

// A 1x1 convolution of a 1x1 input over a few images (a classifier head): a generated row kernel
// with its epilogue fused, or cuDNN.
enum class ConvRows { Kernel, Cudnn };
// A convolution whose windows tile its input (a ViT patch embedding): one GEMM over the patches,
// or cuDNN.
enum class ConvPatches { Gemm, Cudnn };
// HardSwish / HardSigmoid after a cuDNN convolution: fused into it as a pointwise chain (cuDNN's
// runtime-compiled engines), or left to the generated elementwise kernels.
enum class ConvHardActivations { Fused, Unfused };
// MatMul + bias + exact (erf) GELU in fp16 / bf16: one cuDNN matmul, or cuBLASLt with a bias
// epilogue and a GELU kernel after it.
enum class GemmGelu { Cudnn, Kernel };
// A Concat read only by elementwise kernels (DenseNet's dense layers: Concat, then a
// normalization and a ReLU): those kernels read its inputs where they are, and the Concat costs
// no kernel and no copy; or the Concat's own kernel writes it first.
enum class ConcatReads { InPlace, Kernel };
// A channels-last pool or reduction with few blocks of columns over many positions
// (squeeze-excite's pools at batch 1): its positions split over more blocks and a second kernel
// combining their partial results, or the columns' blocks alone (one kernel).
enum class ReduceColumns { Split, Whole };
// The sizes, strides and offsets of the generated kernels: kernel arguments (one kernel serves
// every shape of an op, so a model compiles each op's kernel once) or constants written into
// each kernel's source (one kernel per shape; kept to measure the two against each other).
enum class KernelSizes { Arguments, Code };

// The most candidates timed per GEMM or cuDNN step.
inline constexpr int kMaxTuneCandidates = 32;
// The most CUDA graphs a dynamic engine keeps (the load option cuda_graph_shapes).
inline constexpr int kMaxGraphShapes = 4096;

struct BuildOptions {
  ConvRows conv_rows = ConvRows::Kernel;
  ConvPatches conv_patches = ConvPatches::Gemm;
  ConvHardActivations conv_hard_activations = ConvHardActivations::Fused;
  GemmGelu gemm_gelu = GemmGelu::Cudnn;
  ConcatReads concat = ConcatReads::InPlace;
  ReduceColumns reduce_columns = ReduceColumns::Split;
  KernelSizes kernel_sizes = KernelSizes::Arguments;
  // Candidates timed per GEMM / cuDNN step when the target GPU is present at build (1..32; 1
  // times nothing and records the heuristics' first choices, which makes builds reproducible).
  int tune_candidates = 4;
  // A diagnostic, not recorded: a folder that receives each partition's generated kernel source.
  std::string dump_kernel_source;

  // Applies "KEY=VALUE" entries over the defaults, in order (a later entry wins).
  static Result<BuildOptions> parse(std::span<const std::string> key_values);
  Status set(std::string_view key, std::string_view value);
  // Every option that changes what is built, as KEY=VALUE in a fixed order, defaults included:
  // what the engine header records. `to_strings` adds the diagnostics that are set.
  std::vector<std::string> recorded() const;
  std::vector<std::string> to_strings() const;
};

enum class GraphEdges { Own, Full };

struct LoadOptions {
  // Replay each engine's steps as one CUDA graph (captured at the first execute per binding set).
  bool cuda_graphs = true;
  // A dynamic engine's graphs: one per shape (its symbols' values), captured at the first call at
  // that shape; past this many per engine the least recently used one is replaced.
  int cuda_graph_shapes = 32;
  // Let each generated kernel start while its predecessor finishes (programmatic dependent launch).
  bool cuda_pdl = true;
  // Refuse host memory at execute instead of staging it; also set by the program when it was
  // compiled with --strict-staging.
  bool strict_staging = false;
  // What becomes of the programmatic edges cuDNN's and cuBLASLt's kernels leave in a captured
  // graph: own (serialize theirs, keep Baton's) or full (serialize every one).
  GraphEdges graph_edges = GraphEdges::Own;
  // Candidates timed per GEMM / cuDNN step when the program's recorded choices do not apply here
  // and are chosen at load (1..32; 1 times nothing).
  int tune_candidates = 4;

  // Applies the options over the defaults, in order; keys of other backends are refused too (a
  // typo must not pass silently).
  static Result<LoadOptions> parse(std::span<const runtime::BackendOption> options);
  Status set(std::string_view key, std::string_view value);
  std::vector<runtime::BackendOption> to_backend_options() const;
  // The keys load options take.
  static std::vector<std::string_view> keys();
};

// "conv_rows: kernel (default) | cudnn" lines for every build option and every load option, for
// help texts.
std::string build_options_help();
std::string load_options_help();

}  // namespace baton::cuda
