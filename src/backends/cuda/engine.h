// A loaded CUDA engine and its execution contexts.
//
// Engine: what is immutable and shared by every handle of one blob on one GPU — the weights
// (uploaded once), the module with the engine's kernels, the cuBLASLt descriptors and the
// algorithms chosen for this GPU at load.
//
// ExecutionContext: what one delegate handle owns — scratch memory for activations, the cuBLASLt
// workspace and handle, the launch arguments, and a CUDA graph of the whole engine that is replayed
// while the bound addresses stay the same and captured again when they change.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExtMem.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cudnn_graph.h"
#include "backends/cuda/engine_format.h"
#include "backends/cuda/handles.h"
#include "backends/cuda/tuning.h"
#include "baton/core/error.h"
#include "baton/cuda/options.h"

namespace baton::cuda {

struct GemmPlan {
  MatmulDesc desc;
  MatrixLayout a, b, c, d;
  cublasLtMatmulAlgo_t algo{};            // for 256-byte aligned operands
  cublasLtMatmulAlgo_t unaligned_algo{};  // when a bound pointer is less aligned
  bool binds_caller_memory = false;       // reads or writes a binding
};

// How each GEMM and cuDNN step's algorithm was chosen when the engine was loaded.
struct ChoiceStats {
  uint32_t recorded = 0;  // taken from the blob
  uint32_t timed = 0;     // timed now (steps of the same shape share one timing)
  uint32_t untimed = 0;   // the heuristics' first choice (tune_candidates=1)
  uint32_t rechosen = 0;  // recorded, but no longer applicable here: chosen again
  double ms = 0;          // spent choosing
};

class Engine {
 public:
  // Validates the device (exists, architecture) against the blob, uploads weights, loads the
  // kernels, plans every GEMM and chooses every GEMM's algorithm and every cuDNN step's
  // (convolution, attention) engine: the blob's recorded choices where they still apply, else timed
  // now (tuning.h). `partition` names the delegate in messages. `quiet` leaves the info line about
  // timing out (the builder times an engine to record its choices and says so itself).
  // `tune_candidates`: how many candidates are timed per step chosen here (1: none timed, the
  // heuristics' first choice).
  // `weights_from`: an engine of the same partition (another bucket of a bucketed engine) whose
  // weights, when byte for byte this blob's, are shared instead of uploaded again.
  // `shared_weights`: the bucketed engine's shared weights (shared_bucket_weights), for a bucket
  // stored without its own.
  // `device`: the GPU to run on, where a device map moved the engine (runtime::MethodOptions::
  // device_map); -1 runs it where it was built for (the header's device).
  static Result<std::shared_ptr<Engine>> load(std::span<const uint8_t> blob,
                                              const std::string& partition, int tune_candidates,
                                              bool quiet = false,
                                              std::shared_ptr<const Engine> weights_from = nullptr,
                                              std::span<const uint8_t> shared_weights = {},
                                              int device = -1);
  // Frees the GEMM descriptors, the kernels' library and the weights (each on its GPU).
  ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineBlob& blob() const { return blob_; }
  // The GPU the engine runs on (its weights, kernels and plans live there).
  int device() const { return device_; }
  const std::string& partition() const { return partition_; }
  void* weights() const { return weights_from_ ? weights_from_->weights() : weights_.get(); }
  bool owns_weights() const { return weights_from_ == nullptr; }
  cudaKernel_t kernel(uint32_t i) const { return kernels_[i]; }
  const GemmPlan& gemm(size_t step) const { return gemms_[step]; }
  // The cuDNN plan chosen for cuDNN step `step` (Conv or Sdpa).
  const CudnnChoice& cudnn_choice(size_t step) const { return cudnn_choices_[step]; }
  const ChoiceStats& choice_stats() const { return stats_; }
  // The choices as the blob records them (record_choices), for an engine built on its GPU.
  EngineChoices choices() const;

 private:
  Engine() = default;
  Status init(std::span<const uint8_t> blob, const std::string& partition, bool quiet,
              std::span<const uint8_t> shared_weights);
  // Choosing (tuning.cpp): plans and chooses every GEMM's algorithm and cuDNN step's plan.
  Status choose_algorithms(const std::string& gpu, bool quiet);
  Status plan_gemm(cublasLtHandle_t handle, size_t step);
  Status apply_recorded_gemm(cublasLtHandle_t handle, size_t step, const StepChoice& recorded);
  Status choose_gemm(cublasLtHandle_t handle, size_t step, Stopwatch* stopwatch);
  Status choose_cudnn_plans(Stopwatch* stopwatch, bool use_recorded, std::string* rechosen);

  // Destroyed bottom-up: the plans and kernels before the library, the library before the weights.
  EngineBlob blob_;
  std::string partition_;
  int device_ = 0;                              // see device()
  std::shared_ptr<const Engine> weights_from_;  // whose weights these are, when shared
  DeviceBuffer weights_;
  Library library_;
  std::vector<cudaKernel_t> kernels_;       // owned by library_
  std::vector<GemmPlan> gemms_;             // indexed by step (empty plans for other steps)
  std::vector<CudnnChoice> cudnn_choices_;  // indexed by step (engine -1 for other steps)
  // Per GEMM step: the aligned algorithm's time and how many candidates were timed.
  std::vector<std::pair<float, uint32_t>> gemm_times_;
  ChoiceStats stats_;
  int tune_candidates_ = 4;
};

class ExecutionContext {
 public:
  // A context's scratch and workspace (device memory). The buckets of one dynamic engine share
  // one pair, sized for the largest bucket: calls on one delegate handle run one after another
  // on the device, so no two buckets use it at once.
  struct Memory {
    DeviceBuffer scratch;
    DeviceBuffer workspace;  // cuBLASLt's and cuDNN's (steps run one after another)
    uint64_t scratch_bytes = 0, workspace_bytes = 0;
  };
  // Allocates `bytes` of scratch and of workspace on `device` (none when 0).
  static Result<std::shared_ptr<Memory>> allocate_memory(int device, uint64_t scratch_bytes,
                                                         uint64_t workspace_bytes,
                                                         std::string_view partition);

  // `options`: graph_edges and cuda_pdl are read here (the others are the delegate's). With
  // `allocate` the context allocates its own scratch and workspace; without, it is given memory
  // shared with other contexts by share_memory (before any call), once the caller knows every
  // context's needs (scratch_needed, workspace_needed).
  static Result<std::unique_ptr<ExecutionContext>> create(std::shared_ptr<Engine> engine,
                                                          const LoadOptions& options,
                                                          bool allocate = true);
  // What this context needs of a shared Memory: the engine's scratch, and the larger of its
  // cuBLASLt workspace and its cuDNN plans' workspace (known once the plans are made, at create).
  uint64_t scratch_needed() const { return engine_->blob().header().scratch_bytes; }
  uint64_t workspace_needed() const { return workspace_bytes_; }
  // Takes `memory` (at least scratch_needed and workspace_needed) as this context's.
  Status share_memory(std::shared_ptr<Memory> memory);
  // Frees the graph, the workspace, the scratch and the cuBLASLt handle (on the engine's GPU), then
  // lets go of the engine. Work still in flight must have been waited for.
  ~ExecutionContext() = default;

  // Binds `pointers` (one per binding, in order) and enqueues the engine on `stream`. With
  // `use_graph`, replays the captured graph (a dynamic engine's: the current shape's) when the
  // pointers (and the stream's context) are the ones it was captured with; otherwise captures the
  // engine again and updates the graph (or, for a shape not seen yet, keeps a new one). With
  // `step_marks` (one event per step and one more), launches the steps one by one, recording
  // mark s before step s and the last mark after the last step: a profile of the steps.
  // `stream_id` (cudaStreamGetId), when known, lets the stream's context be asked once per stream.
  Status enqueue(std::span<void* const> pointers, cudaStream_t stream,
                 std::optional<unsigned long long> stream_id, bool use_graph,
                 std::span<const cudaEvent_t> step_marks = {});
  // Makes calls at `symbols` ready before the first of them (Method::prepare_shape): a dynamic
  // engine's GEMM algorithms and cuDNN plans for these sizes are timed (tune_candidates) and
  // kept for good, and its steps patched for them (the binding sizes are theirs after it). An
  // earlier call's work that uses this context must be done. Nothing for a static engine.
  Status prepare(std::span<const int64_t> symbols);
  // Then, with graphs: captures the current shape's graph with `pointers` on `stream` and
  // instantiates it, without launching it (a graph already held for the shape was destroyed by
  // prepare, whose timed choices may free the kernels it held, and is captured anew in its slot).
  // The size-only kernels run on `stream` into the graph's copy of their block, reading only
  // weights; nothing else runs. The caller waits for `stream`. A later call at these sizes, with
  // these pointers, in the stream's context (the primary context's streams share it; a green
  // context's does not) replays the graph without host work; with other pointers it captures again,
  // taking the timed choices.
  Status capture_prepared(std::span<void* const> pointers, cudaStream_t stream);

  // A dynamic engine (EngineBlob::dynamic): sets the sizes of the next calls from the method's
  // symbol values. When they differ from the last call's, evaluates the engine's size
  // expressions, writes them into this context's copy of the steps, arguments and binding sizes,
  // checks the patched steps as the loader checks a blob, and fits the GEMMs' cuBLASLt layouts
  // and algorithms to the new sizes (host work only; the first call at new sizes pays it).
  // Calls that keep their sizes return at once; a change to sizes whose graph is cached takes
  // that graph's binding sizes and patches nothing (until something runs the steps without the
  // graph). A static engine ignores it.
  Status resize(std::span<const int64_t> symbols);
  // A dynamic engine whose every symbol has a declared OPT value in its range (`--dim
  // batch=1..64@8`): resizes to that shape at load, so its first call there patches nothing and
  // builds no GEMM heuristic or cuDNN plan. Its GEMM algorithms and cuDNN plans are timed there
  // as the largest sizes' are at load (the load option tune_candidates), where shapes neither
  // declared nor prepared take the heuristics' first choices. (The method then prepares the OPT
  // shape, which captures its graph: Method::prepare_shape.) Needs the memory (create with
  // `allocate`, or share_memory). Nothing for other engines.
  Status prepare_declared_shape();
  // The sizes of binding `i` for the current call (the blob's for a static engine) and its bytes.
  std::span<const int64_t> binding_sizes(size_t i) const;
  uint64_t binding_bytes(size_t i) const { return binding_bytes_[i]; }
  // The device memory this context allocated at create: scratch and workspace.
  // Shared with other contexts when create was given `memory` (memory() tells which).
  uint64_t device_bytes() const { return memory_->scratch_bytes + memory_->workspace_bytes; }
  const Memory* memory() const { return memory_.get(); }
  // How many calls changed a dynamic engine's sizes (patched its steps).
  uint64_t resizes() const { return resizes_; }

  // The last captured graph's nodes, and how many of them are kernels (cuDNN's and cuBLASLt's
  // included); 0 before a graph was captured.
  uint32_t graph_nodes() const { return graph_nodes_; }
  uint32_t graph_kernels() const { return graph_kernels_; }
  // The graphs held (a dynamic engine's: one per shape called, up to cuda_graph_shapes), how many
  // times a graph was captured, and how many of those replaced another shape's graph.
  size_t graphs() const { return graphs_.size(); }
  uint64_t graph_captures() const { return graph_captures_; }
  uint64_t graph_replacements() const { return graph_replacements_; }
  // A dynamic engine's size-only kernels (kKernelSizeOnly), which a captured graph leaves out
  // (they run once, when it is captured), and the device bytes their graphs' copies of the
  // size-only block hold (allocated as each graph is first captured).
  size_t size_only_steps() const { return size_only_steps_; }
  uint64_t size_value_bytes() const { return size_value_bytes_; }
  // A dynamic engine with cuDNN steps: how many shapes' sets of cuDNN plans were built.
  uint64_t plan_sets_built() const { return plan_sets_built_; }
  // How many cuDNN plans this context built (at create and per shape; steps of one operation
  // graph share one).
  uint64_t cudnn_plans_built() const { return cudnn_plans_built_; }
  // How many GEMM algorithms and cuDNN plans were timed for the declared OPT shape and the
  // prepared shapes (prepare); shapes prepared by `prepare`.
  uint64_t prepared_choices_timed() const { return prepared_choices_timed_; }
  size_t prepared_shapes() const { return prepared_.size(); }

  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  // What runs step `s`: its kernel's name, "cublasLtMatmul", or the cuDNN engine (for profiles).
  std::string step_runner(size_t s) const;

 private:
  explicit ExecutionContext(std::shared_ptr<Engine> engine) : engine_(std::move(engine)) {}
  // Which steps enqueue_steps launches: all of them, only the size-only kernels
  // (kKernelSizeOnly: filling a graph's copy of the size-only block), or all others.
  enum class StepSet { All, SizeOnly, Rest };
  // With `own_nodes` (while the stream is captured), each generated kernel's graph node is added
  // to it.
  Status enqueue_steps(std::span<void* const> pointers, cudaStream_t stream,
                       std::span<const cudaEvent_t> step_marks = {},
                       std::vector<cudaGraphNode_t>* own_nodes = nullptr,
                       StepSet which = StepSet::All);
  void* resolve(const BufferRef& ref, std::span<void* const> pointers) const;
  // At create: the size-only block (size_lo_, size_hi_) of a dynamic engine's steps
  // (engine_format.h's size_only_block), when the blob lays it out as the builder does.
  void find_size_only_block();
  // The steps as this call runs them: the blob's, or a dynamic engine's patched copy.
  std::span<const StepRecord> steps() const;
  // The GEMM of `step` at the patched sizes (its layouts, and its algorithm: timed for these
  // GEMM sizes when a prepared shape had them, else the heuristics').
  Status fit_gemm(size_t step);
  // Patches for `symbols` with the choices timed (tune_candidates) and kept as a prepared
  // shape's: prepare_declared_shape's and prepare's common part.
  Status tune_shape(std::span<const int64_t> symbols);
  // Patches the steps, arguments, binding sizes and GEMMs for `symbols` (resize's host work).
  Status patch(std::span<const int64_t> symbols);
  // Captures the steps as a graph and stores it in the current shape's entry, a new entry, or the
  // least recently used one, then launches it.
  // Without `launch` the graph is captured and instantiated (and uploaded) only: prepare.
  Status capture_and_launch(std::span<void* const> pointers, cudaStream_t stream, void* context,
                            int found, bool launch = true);
  void declare_library_writes(std::span<void* const> pointers);

  // Destroyed bottom-up: the graph first, the engine (weights, kernels) last.
  std::shared_ptr<Engine> engine_;
  CublasLtHandle handle_;
  // cuDNN plans by step: one per distinct operation graph, shared by the steps that have it (a
  // transformer's twelve attentions, a ResNet stage's repeated convolutions), since cuDNN takes a
  // step's pointers only when its plan runs.
  struct CudnnPlans {
    std::vector<CudnnPlan> plans;
    std::vector<int> of_step;  // per step: its plan in `plans`, or -1 (not a cuDNN step)
    const CudnnPlan& at(size_t s) const;
    // Adds step `s` of `steps`: the plan of an earlier step with the same operation graph for
    // which `same` holds, or a new one from `make`.
    Status add(std::span<const StepRecord> steps, size_t s,
               const std::function<bool(size_t earlier)>& same,
               const std::function<Result<CudnnPlan>()>& make);
  };
  // cuDNN, when the engine has cuDNN steps: the handle and the plans of the steps at the
  // engine's own sizes, made here because a plan is bound to the handle it was built with.
  CudnnHandle cudnn_;
  CudnnPlans cudnn_plans_;
  uint64_t cudnn_plans_built_ = 0;
  // While tune_shape runs (with tune_candidates_ > 1): what fit_gemm and fit_cudnn time their
  // candidates on; null otherwise.
  struct ShapeTuning {
    Stopwatch stopwatch;
  };
  ShapeTuning* tuning_ = nullptr;
  // The GEMM algorithms timed for prepared shapes (the declared OPT shape's included), by GEMM
  // sizes (step_signature): a transformer's layers repeat theirs, and any later shape whose GEMM
  // has sizes a prepared shape had takes the timed algorithm (the heuristics' first choice is
  // often slower: bench/RESULTS.md).
  std::map<std::string, cublasLtMatmulAlgo_t> timed_gemms_;
  int tune_candidates_ = 4;
  uint64_t prepared_choices_timed_ = 0;
  std::shared_ptr<Memory> memory_;
  uint64_t workspace_bytes_ = 0;  // what this engine needs of memory_'s workspace
  // What becomes of the captured graph's programmatic edges (the load option graph_edges). Own
  // (default): each is made a full dependency except those into the engine's generated kernels,
  // which wait for their predecessor before touching memory; cuDNN's and cuBLASLt's own edges are
  // not safe (docs/device-contract.md, "CUDA graphs"). Full: every one made a full dependency.
  GraphEdges graph_edges_ = GraphEdges::Own;
  // Per kernel step: operand pointers and the argument array pointing at them (sized at create).
  std::vector<std::vector<void*>> kernel_args_;
  std::vector<std::vector<void*>> kernel_arg_ptrs_;
  // A captured graph and what it was captured for. A static engine has at most one. A dynamic
  // engine has one per shape it was called at (a graph bakes every size in), up to
  // `graph_shapes_` (the load option cuda_graph_shapes; the least recently used is replaced), so
  // that calls alternating between shapes replay each shape's graph instead of capturing again.
  struct ShapeGraph {
    GraphExec exec;
    std::vector<int64_t> symbols;        // a dynamic engine's symbol values (none: static)
    std::vector<void*> pointers;         // the bindings' addresses baked in
    void* context = nullptr;             // CUcontext it was instantiated in (a green context's)
    std::vector<int64_t> binding_sizes;  // a dynamic engine's, at `symbols` (resize reads them)
    std::vector<uint64_t> binding_bytes;
    uint64_t last_use = 0;
    // This graph's copy of the size-only block (a dynamic engine with kKernelSizeOnly steps):
    // filled by those steps when the graph is captured, read by the graph's other steps.
    DeviceBuffer size_values;
  };
  std::vector<ShapeGraph> graphs_;  // capacity reserved at create
  size_t graph_shapes_ = 1;
  int current_graph_ = -1;  // a dynamic engine: the entry of the current symbols, or -1
  int prepared_slot_ = -1;  // the entry prepare() emptied for capture_prepared, or -1
  uint64_t graph_clock_ = 0, graph_captures_ = 0, graph_replacements_ = 0;
  uint32_t graph_nodes_ = 0, graph_kernels_ = 0;
  // The size-only block of scratch, [size_lo_, size_hi_) (empty: none, or a graph captures every
  // step), and where resolve() finds it while a graph's copy is filled and captured (null: in
  // scratch itself, as launches without a graph use it).
  uint64_t size_lo_ = 0, size_hi_ = 0;
  uint8_t* size_base_ = nullptr;
  uint64_t size_value_bytes_ = 0;  // held by the graphs' copies
  size_t size_only_steps_ = 0;
  // Whether kernels that wait for their predecessor (KernelStep::flags) are launched with
  // programmatic stream serialization (the load option cuda_pdl).
  bool dependent_launch_ = true;
  // The context of the last stream asked (by its id), so a call on the same stream asks nothing.
  std::optional<unsigned long long> context_stream_id_;
  void* context_of_stream_ = nullptr;
  // Per step, its NVTX range's name ("gemm 3"), made at create (execute formats nothing).
  std::vector<std::string> step_labels_;
  // Ranges declared initialized to compute-sanitizer, refilled per call (declare_library_writes).
  std::vector<nvtxMemVirtualRangeDesc_t> library_writes_;
  // A dynamic engine: the symbol values the copies below are patched for, the steps, arguments
  // and binding sizes at those values, every size expression's value, and each GEMM step's
  // layouts and algorithms at those sizes (the engine's own are for the maxima).
  // `symbols_` are the current call's values (the binding sizes are theirs); `patched_` those
  // the steps are patched for, which lag behind while calls replay cached graphs.
  bool dynamic_ = false;
  uint64_t resizes_ = 0;
  uint64_t patches_ = 0;  // patch() calls (tune_shape asks whether resize patched)
  std::vector<int64_t> symbols_;
  std::vector<int64_t> patched_;
  std::vector<StepRecord> steps_;
  std::vector<int64_t> args_;
  std::vector<int64_t> binding_sizes_;  // kEngineMaxRank per binding
  std::vector<uint64_t> binding_bytes_;
  std::vector<int64_t> expr_values_;
  struct DynamicGemm {
    MatrixLayout a, b, c, d;
    cublasLtMatmulAlgo_t algo{};
    cublasLtMatmulAlgo_t unaligned_algo{};
    bool rechosen_said = false;  // the info line of fit_gemm, once per step
  };
  std::vector<DynamicGemm> gemms_;  // indexed by step
  // The shapes prepared (prepare_declared_shape first, then prepare's, in order), whose cuDNN
  // plan sets are timed and kept for good.
  std::vector<std::vector<int64_t>> prepared_;
  bool is_prepared(std::span<const int64_t> symbols) const;
  // A dynamic engine's cuDNN plans per shape: cuDNN builds a plan for one shape, so each shape
  // other than the largest (which runs cudnn_plans_) gets a set of its own, one plan per distinct
  // operation graph, built at the shape's first patch (fit_cudnn) and kept for later patches. At
  // most graph_shapes_ + 1 sets (every shape with a graph, and the one being patched), plus the
  // prepared shapes' sets (timed, kept for good); past that, the least recently used set that no
  // graph was captured with and no prepared shape has is replaced.
  struct ShapePlans {
    std::vector<int64_t> symbols;
    CudnnPlans plans;
    uint64_t last_use = 0;
    bool timed = false;  // built while a prepared shape's choices were timed
  };
  std::vector<ShapePlans> shape_plans_;
  int current_plans_ = -1;  // the set the patched steps run, or -1: cudnn_plans_
  uint64_t plan_clock_ = 0, plan_sets_built_ = 0;
  // The plan step `s` runs at the patched sizes.
  const CudnnPlan& plan_of(size_t s) const;
  // Takes or builds the cuDNN plans for `symbols` (patch's last part).
  Status fit_cudnn(std::span<const int64_t> symbols);
};

}  // namespace baton::cuda
