// The ahead-of-time compiler: ONNX model -> Baton program.
//
//   baton::register_builtins();
//   baton::compiler::CompileOptions options;
//   auto program = baton::compiler::compile_file("model.onnx", options);
//   if (program.ok()) program->write("model.baton");
//
// Pipeline (each phase is reported through `progress`): import (ONNX protobuf -> IR), infer
// (Baton's static shape inference and constant folding), partition (backends claim nodes),
// lower (each partition is given its target device and becomes a backend blob for it), place
// (device propagation and transfers), plan (lifetime-based offsets, one arena per device), emit
// (the program file). Errors name the model, the node, its op, domain and opset.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"

namespace baton::compiler {

// The compiler's IR and a backend's partitions and blobs (src/compiler/ir.h,
// src/compiler/backend_compiler.h): only backends see inside them.
struct Graph;
struct IrNode;
struct Partition;
struct LoweredPartition;

// The compile-time side of a backend: which nodes it can take, and how a partition of them
// becomes the blob its runtime side (runtime::BackendInterface with the same id) executes.
// Callers hold one from make_backend_compiler() and pass it in CompileOptions::backends.
class BackendCompiler {
 public:
  virtual ~BackendCompiler() = default;
  // The runtime backend id the blob is for ("cuda").
  virtual std::string_view id() const = 0;
  // The device this compiler builds blobs for (one compiler per target device).
  virtual Device device() const = 0;
  virtual bool supports(const Graph& graph, const IrNode& node) const = 0;
  // Whether the backend lowers op `op` of `domain` at all. The optimizer does not rewrite
  // patterns into a canonical op (Baton's Attention, AddLayerNorm) that a target backend has no
  // lowering for, so a model the backend ran whole before keeps running whole.
  virtual bool lowers(std::string_view op, std::string_view domain) const {
    (void)op;
    (void)domain;
    return true;
  }
  // Whether lower() takes partitions with dynamic dimensions (docs/dynamic_shapes.md) and builds
  // blobs that run at every size in their ranges, at the symbols DelegateArgs::symbols gives.
  // A dynamic model is refused for a backend that does not, rather than built for one size.
  virtual bool supports_dynamic_shapes() const { return false; }
  // Constants the partition reads are embedded in the blob (they are not partition inputs).
  virtual Result<LoweredPartition> lower(const Graph& graph, const Partition& partition) = 0;
  // The device a blob was built for, read back from the blob itself (the CUDA engine's header
  // device id). The compiler asserts it is device(), so label and blob cannot drift; an
  // unreadable blob is a compile-time error.
  virtual Result<Device> blob_device(std::span<const uint8_t> blob) const = 0;
  // Why supports() refused `node`, in words a user acts on ("no CUDA lowering for LSTM"): what a
  // compile lists for each node left on the CPU (CompileSummary::fallbacks).
  virtual std::string unsupported_reason(const Graph& graph, const IrNode& node) const;
};

// Fixes the sizes of a graph input whose ONNX shape has symbolic dimensions.
struct InputShape {
  std::string name;
  std::vector<int64_t> sizes;
};

// Declares a symbolic dimension (an ONNX dim_param, e.g. "batch") dynamic over MIN..MAX: the
// program then runs at every size in that range (docs/dynamic_shapes.md). `opt` is the size to
// tune for (0: MAX). With `same_as` set, the dimension is instead the one that names (which has
// its own range): torch.export names each input's batch separately ("s33", "s6"), and a model
// that needs them equal says so with --dim s6=s33; calls must then give both one size.
struct DimRange {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  int64_t opt = 0;
  std::string same_as;
};

// "batch=1..32", "batch=1..32@8" or "s6=s33" (the --dim flag's text). InvalidArgument saying what
// is wrong.
Result<DimRange> parse_dim_range(std::string_view text);

// A graph input of an ONNX model as the file declares it, before any compile option applies:
// per dimension its dim_param ("batch"), or "" where the model fixes the size (or leaves the
// dimension unnamed). Initializers the file also lists as inputs are left out.
struct ModelInput {
  std::string name;
  std::vector<std::string> dim_params;
};
Result<std::vector<ModelInput>> read_model_inputs(const std::string& onnx_path);

struct Progress {
  std::string_view phase;  // "import", "infer", "partition", "lower", "place", "plan"
  std::string detail;      // "12 nodes, opset 17", ...
  std::chrono::duration<double, std::milli> elapsed;  // this phase
};

// A graph input and a graph output that are one tensor kept across calls (docs/state.md): the
// output is the input with new entries scattered in (`present = ScatterND(past, ...)`), so the
// program keeps one buffer, updated in place, and the caller passes and receives neither.
struct StatePair {
  std::string input;
  std::string output;
};

enum class MethodIo {
  Host,    // method inputs and outputs live on the host; copies move them to and from devices
  Device,  // each input lives on the device of the partition that first reads it, each output on
           // the device that produces it (callers pass and get device memory)
};

// Which device each partition is built for (the placement pass applies it). At most one of the
// two forms is set; with neither, a partition goes to the device of the backend that claimed it.
struct TargetDevices {
  // Partition i goes to round_robin[i % size], in partition order; repeats are allowed
  // ({cuda:0, cuda:0, cuda:1} puts two of every three partitions on GPU 0).
  std::vector<Device> round_robin;
  // Partition index -> device; every partition must be named.
  std::map<int, Device> by_partition;
};

// The text form of a device list, as `baton compile --device` and the Python package take it:
// "cpu" (no targets), "cuda:N", "cuda:0,cuda:1" (round robin over partitions, repeats kept) or
// "0=cuda:1,1=cuda:0" (partition index -> device). InvalidArgument saying what is wrong.
Result<TargetDevices> parse_target_devices(std::string_view text);
// The distinct devices of `targets`, in the order first named.
std::vector<Device> distinct_devices(const TargetDevices& targets);

// What a compile for a GPU does with nodes no GPU backend takes, which then run on Baton's CPU
// kernels: allow them (listed in the summary and the program), warn (also a warning naming each,
// grouped by reason), or refuse the model (an error naming each).
enum class FallbackPolicy { Allow, Warn, Error };

struct CompileOptions {
  std::vector<InputShape> input_shapes;
  // Ranges of the symbolic dimensions left dynamic (input_shapes fixes an input completely).
  std::vector<DimRange> dims;
  // Backend compilers, one per target device (BackendCompiler::device()), not owned. They claim
  // nodes in this order of priority; each partition is then lowered by the compiler of its own
  // backend that builds for the device `targets` gives it. Empty: every node runs on Baton's CPU
  // kernels.
  std::vector<BackendCompiler*> backends;
  // Every device named here needs a compiler in `backends` that builds for it.
  TargetDevices targets;
  // When set, every partition's target_device label is this text, verbatim, and its tensors are
  // placed on the device it names. Otherwise each label is the device its own blob was built for.
  std::optional<std::string> target_device;
  MethodIo io = MethodIo::Host;
  // At most this many nodes per partition (0: no limit), e.g. to spread a model over GPUs.
  size_t max_partition_nodes = 0;
  // Compile specs added to every delegate (e.g. {"strict_staging", "1"}).
  std::vector<std::pair<std::string, std::string>> delegate_specs;
  // Constant folding materializes a node's outputs at compile time and stores them in the
  // program. A node whose outputs would take more than max_fold_bytes (or would bring all folded
  // outputs past max_total_fold_bytes) is not folded: it stays a node and computes its outputs at
  // run time (a few bytes of model can ask for terabytes: a broadcast of two constant vectors).
  uint64_t max_fold_bytes = uint64_t{256} << 20;
  uint64_t max_total_fold_bytes = uint64_t{4} << 30;
  // Nor is a node whose computation would take more than this many operations (multiply-adds
  // or elements touched, estimated from the shapes): it runs at run time instead.
  double max_fold_work = 1e10;
  // The largest memory arena (per device: the tensors a method computes, with lifetimes sharing
  // bytes) the program may ask its runtime to allocate; a larger one is a compile error naming
  // the largest tensors. At most 2^50 (the program format's limit).
  uint64_t max_arena_bytes = uint64_t{256} << 30;
  std::function<void(const Progress&)> progress;
  // The graph optimizer (docs/optimizer.md): false skips every pass (`--no-optimize`);
  // `disabled_passes` names passes to skip (`--disable-pass NAME`; an unknown name is an error).
  bool optimize = true;
  std::vector<std::string> disabled_passes;
  // Every tensor a node still computes after optimization (not a constant, not already an
  // output) becomes a method output too, after the model's own, in the order the nodes run
  // (`baton compare --per-node` compares them with a reference). The optimizer runs first, so a
  // value a fused pattern absorbed is not among them; an exposed value may keep a backend from a
  // fusion that needs it to stay internal.
  bool expose_intermediates = false;
  FallbackPolicy fallback = FallbackPolicy::Warn;
  // State (`--state INPUT=OUTPUT`): these pairs become the method's state; with state_auto
  // (`--state auto`), so does every output that is a ScatterND or ScatterElements of an input
  // into a tensor of its shape. A pair that cannot be updated in place is an error naming it.
  std::vector<StatePair> state;
  bool state_auto = false;
  // Sampling inside the program (`--sample greedy`, docs/generate.md): the logits output
  // [batch, new_tokens, vocab] is replaced by `next_tokens` [batch, new_tokens] int64, the most
  // likely token after each position (ArgMax, on the logits' device), so that a generation loop
  // reads 8 bytes per token instead of the vocabulary's logits. "top-k=K": drawn from the K most
  // likely instead, with the temperature, top-p and a uniform number per position as new inputs
  // (sample_temperature [1], sample_top_p [1], sample_uniform [batch, new_tokens]; compiler/
  // sampling.h). Empty: no sampling.
  std::string sample;
};

// A node a compile for a GPU left on the CPU, and why (BackendCompiler::unsupported_reason).
struct CpuFallback {
  std::string node;  // the ONNX node's name (or "#index" when it has none)
  std::string op;    // "LSTM", or "com.microsoft.Gelu"
  std::string reason;
};

struct CompileSummary {
  int opset = 0;
  size_t onnx_nodes = 0;
  size_t folded_nodes = 0;
  // Per optimizer pass, in order: its name and how many matches it rewrote (-1: disabled).
  std::vector<std::pair<std::string, int64_t>> passes;
  // Nodes left to run time because folding them would have passed max_fold_bytes or
  // max_total_fold_bytes: "Add node 'outer' (4398046511104 bytes)".
  std::vector<std::string> unfolded_nodes;
  size_t kernel_calls = 0;
  size_t delegate_calls = 0;
  size_t copies = 0;
  // Per partition: its name and target_device label.
  std::vector<std::pair<std::string, std::string>> partitions;
  uint64_t constant_bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> arenas;  // device, bytes
  // CompileOptions::expose_intermediates: the values added as outputs, in order.
  std::vector<std::string> exposed_values;
  // A compile with backends: every node left on Baton's CPU kernels, in execution order.
  std::vector<CpuFallback> fallbacks;
  // The method's state (CompileOptions::state): each pair's input and output names.
  std::vector<StatePair> state;
};

class CompiledProgram {
 public:
  CompiledProgram(CompiledProgram&&) noexcept;
  CompiledProgram& operator=(CompiledProgram&&) noexcept;
  ~CompiledProgram();

  const CompileSummary& summary() const;
  Result<std::vector<uint8_t>> serialize() const;
  // Written atomically (PATH.tmp, then renamed).
  Status write(const std::string& path) const;

  struct Impl;
  explicit CompiledProgram(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

Result<CompiledProgram> compile_file(const std::string& onnx_path, const CompileOptions& options);

// Whether CompiledProgram::write could write PATH (checked without writing anything): call it
// before compiling, so a bad output path fails at once. IoError naming what is wrong.
Status check_output_path(const std::string& path);

// What a backend compiles for: a device, and (for GPUs) an architecture and a precision.
struct TargetSpec {
  Device device;
  std::string arch;       // "sm_90"; empty: read it from the device when it exists
  std::string precision;  // "fp32", "tf32", "fp16", "bf16"; empty: the backend's default
  // The backend's build options as KEY=VALUE, parsed (and refused when unknown) by the backend:
  // for CUDA, baton::cuda::BuildOptions (include/baton/cuda/options.h, its to_strings()).
  std::vector<std::string> options = {};
};

using BackendCompilerFactory =
    std::function<Result<std::unique_ptr<BackendCompiler>>(const TargetSpec& target)>;

// Backends with a compile-time side register a factory for their device type (explicitly, e.g.
// baton::cuda::register_compiler()).
void register_backend_compiler(DeviceType type, BackendCompilerFactory factory);
// NotSupported naming the device type when no backend for it is registered in this build.
Result<std::unique_ptr<BackendCompiler>> make_backend_compiler(const TargetSpec& target);
// `base_dir` resolves external tensor data.
Result<CompiledProgram> compile_bytes(std::span<const uint8_t> onnx_bytes,
                                      const CompileOptions& options,
                                      const std::string& base_dir = ".");

}  // namespace baton::compiler
