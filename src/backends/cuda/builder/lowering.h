// The lowering context: what one operator's lowering (builder/ops/*.cpp) sees of the partition it
// lowers and of the engine it builds. Lowerings never touch the engine file format: they name
// values (IR value ids, plus synthetic ids the context hands out), and add steps over them.
//
// Values become slots: the partition's inputs and outputs are bindings (the caller's buffers,
// in the program's dtypes), constants become weights (converted once to the dtype asked for),
// everything else is scratch planned by lifetime after all steps are known. A view makes one
// value an alias of another (no work): the same bytes reshaped (alias), or read through its own
// element strides from an element offset (view: Transpose, Split, Slice). Only lowerings that say
// they read strided views (OpLowering::strided) see the latter; the others get row-major copies.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/builder/codegen.h"
#include "backends/cuda/builder/engine_builder.h"
#include "backends/cuda/engine_format.h"
#include "compiler/backend_compiler.h"

namespace baton::cuda {

class Lowering {
 public:
  Lowering(const compiler::Graph& graph, const compiler::Partition& partition,
           const EngineTarget& target);
  // A dynamic engine's probe (builder/dynamic_shapes.h): this lowering is of `graph` with its
  // sizes at one assignment of the symbols, and `upper` lowered the same partition at the
  // maxima. Decisions that must be the same at every size read upper_sizes_of, and scratch
  // takes the upper lowering's plan, so that the two engines differ only in sizes.
  void follow(const Lowering& upper) { upper_ = &upper; }
  // Marks the lowering at a dynamic engine's maxima (the one probes follow). Without
  // `cudnn_fusions`, attention is lowered to GEMMs and a softmax kernel instead of cuDNN's fused
  // attention (lower_dynamic's second attempt, for a partition whose fused attention does not
  // follow its sizes).
  void set_dynamic(bool cudnn_fusions = true) {
    dynamic_ = true;
    cudnn_fusions_ = cudnn_fusions;
  }
  // Whether this lowers a dynamic engine (at its maxima or a probe).
  bool dynamic() const { return dynamic_ || upper_ != nullptr; }
  // Whether cuDNN's fused attention (SdpaStep) may be emitted: always in a static engine; in a
  // dynamic one unless its maxima's lowering said otherwise (the engine builds its plan per
  // shape, as for convolutions).
  bool cudnn_fusions() const { return upper_ != nullptr ? upper_->cudnn_fusions_ : cudnn_fusions_; }

  const compiler::Graph& graph() const { return g_; }
  const compiler::IrNode& node(int index) const { return g_.nodes[index]; }
  const compiler::IrValue& value(int v) const { return g_.values[v]; }
  bool is_constant(int v) const;
  const EngineTarget& target() const { return t_; }
  // What GEMM operands and weights are fed in (fp16 / bf16 engines: that type; else float32).
  DType operand_dtype() const { return operand_; }
  // What activations are stored in between steps (fp16 engines: float16; else float32).
  DType activation_dtype() const { return activation_; }

  // --- values ---------------------------------------------------------------------------------
  // The dtype and sizes a value is stored with (its slot's).
  DType dtype_of(int v) const;
  const std::vector<int64_t>& sizes_of(int v) const;
  // `v`'s sizes at the symbols' maxima (sizes_of for a static engine): what decisions that must
  // hold at every size of a dynamic engine's range read (a warp or a block per row).
  const std::vector<int64_t>& upper_sizes_of(int v) const;
  bool is_binding(int v) const;
  // A constant's data as floats (float32, float16, bfloat16 or float64 constants).
  std::vector<float> constant_floats(int v) const;
  // A constant as engine weights in `dtype`, converted once and shared by every reader.
  int weight(int v, DType dtype);
  // New weights from host values (a bias vector, a materialized C matrix).
  int add_weights(const std::vector<float>& values, DType dtype, std::vector<int64_t> sizes);
  // A fresh scratch value.
  int new_scratch(DType dtype, std::vector<int64_t> sizes);
  // Constant `v`'s bytes as they are (integer and bool constants: indices, masks), as weights.
  int raw_weight(int v);

  // --- layouts --------------------------------------------------------------------------------
  // A rank-4 scratch value may be stored channels-last (NHWC): its logical dimensions stay
  // N, C, H, W, its bytes are ordered N, H, W, C. Bindings and weights are always row-major.
  // Lowerings that are not layout-aware (OpLowering::layout_aware false) never see such a value:
  // the builder hands them a row-major copy (read_row_major_inputs).
  bool channels_last(int v) const;
  // Stores scratch value `v` channels-last (before any step reads or writes it); false (and
  // nothing changes) for a binding, weights or a value not of rank 4.
  bool set_channels_last(int v);
  // Element strides of `v`'s logical dimensions as stored (row-major, channels-last, or a view's
  // own).
  std::vector<int64_t> strides_of(int v) const;
  // Whether `v` is a view that not every lowering can read as it is: its strides are not
  // row-major, or its first element is not at an engine-aligned address.
  bool strided(int v) const;
  // `v`'s first element, in elements from the start of the bytes it names (0 unless a view).
  int64_t view_offset(int v) const;
  // `v` as a row-major value at an aligned address: itself, or a copy made by a kernel (once per
  // value).
  int row_major(int v);
  // Rank-4 `v` stored channels-last in `dtype` with `channels` channels (at least its own; the
  // extra ones zero, for cuDNN's tensor-core engines): itself, a cast keeping its layout, or a copy
  // made by one kernel (once per value, dtype and channel count).
  Result<int> channels_last_copy(int v, DType dtype, int64_t channels);
  // While lowering node `index`, its inputs that the lowering cannot read as they are stored
  // (channels-last ones unless `channels_last_ok`, strided views unless `strided_ok`) read as
  // row-major copies; end_reads() ends that.
  void read_row_major_inputs(int index, bool channels_last_ok, bool strided_ok);
  void end_reads() { redirect_.clear(); }
  // `v` as `dtype`: itself, its weights, or a copy made by a cast kernel (once per value and
  // dtype); a strided view is copied row-major.
  Result<int> ensure(int v, DType dtype);
  // Makes `out` a view of `in` (same bytes, row-major; a strided `in` is copied first). When `out`
  // is a binding (the caller's buffer), a copy or cast kernel fills it instead.
  void alias(int out, int in);
  // Makes `out` a view of `in`'s bytes read with element `strides` (along `out`'s dimensions)
  // from element `offset` (counted from `in`'s first element). When `out` is a binding, a kernel
  // gathers the view into it instead.
  void view(int out, int in, std::vector<int64_t> strides, int64_t offset);

  // --- the partition's graph ------------------------------------------------------------------
  // Nodes of this partition that read `v`.
  const std::vector<int>& consumers(int v) const;
  // The one node of this partition reading `v`, when `v` has one reader and is not a partition
  // output; -1 otherwise. Attention absorbs its output's reshape this way; epilogues (bias,
  // residual, activation) are the optimizer's (compiler/passes/fuse_*.cpp), not a lowering's.
  int single_consumer(int v) const;
  bool is_partition_output(int v) const { return outputs_.count(v) > 0; }
  // Whether partition input `in` and output `out` are one buffer the method keeps as state
  // (Partition::in_place): a lowering writing `out` may then skip copying `in` into it.
  bool bound_in_place(int in, int out) const;
  // A value a lowering derived once and others may reuse (an attention mask materialized for
  // cuDNN, shared by every layer): the value remembered under `key`, or -1.
  int derived(const std::string& key) const;
  void remember(const std::string& key, int v) { derived_[key] = v; }
  // Marks a node as done by an earlier step (a fused epilogue): the builder skips it.
  void absorb(int node) { absorbed_.insert(node); }
  bool absorbed(int node) const { return absorbed_.count(node) > 0; }
  // A Concat left unlowered where it stands (concat_reads_in_place, builder/ops/registry.h):
  // the elementwise runs that read its output read its inputs where they are instead, and no
  // step writes the output. deferred_concat(v) is the Concat node writing `v` while deferred,
  // else -1; end_deferral when it is lowered after all (lower_deferred_concat).
  void defer_concat(int node) { deferred_[g_.nodes[node].outputs[0]] = node; }
  int deferred_concat(int v) const {
    const auto it = deferred_.find(v);
    return it == deferred_.end() ? -1 : it->second;
  }
  void end_deferral(int v) { deferred_.erase(v); }

  // --- steps ----------------------------------------------------------------------------------
  // "k3_softmax": a unique kernel name.
  std::string kernel_name(const char* what) const;
  // A generated kernel launched with one pointer per operand, in order, then `args` (its
  // scalar arguments, KernelArgs) when there are any.
  void add_kernel(const std::string& name, std::string code, const LaunchShape& launch,
                  std::vector<int> operands, const KernelArgs& args = KernelArgs());
  // Where a new kernel's sizes go (the build option kernel_sizes): arguments, or its code.
  KernelArgs kernel_args() const;
  // A cuBLASLt GEMM; operands {a, b, c, d, bias} in cuBLASLt's terms (-1: unused c / bias).
  void add_gemm(const GemmStep& gemm, std::array<int, 5> operands);
  // The same GEMM run by cuDNN (StepKind::Matmul: no C, alpha 1), for its erf-GELU epilogue.
  void add_matmul(const GemmStep& gemm, std::array<int, 5> operands);
  void add_copy(int src, int dst);
  // A cuDNN convolution; operands {x, w, bias, residual, y} (-1: no bias / residual).
  void add_conv(const ConvStep& conv, std::array<int, 5> operands);
  // A cuDNN attention; operands {q, k, v, o, bias} (-1: no bias), read and written through the
  // step's strides from each value's first element.
  void add_sdpa(const SdpaStep& sdpa, std::array<int, 5> operands);
  // A kernel converting `src` (contiguous) into `dst` of `dtype`.
  void add_cast(int src, int dst, DType dtype);
  // The part of a fused op's epilogue its main step could not take, as one kernel: `out` =
  // `activation`(`y` + `bias` + `residual`), `bias` (one value per channel, dimension 1) and
  // `residual` -1 for none, `activation` a device expression of {x} (kCopyExpression for none).
  // `out` is written in its own layout and dtype (a scratch `out` not yet written takes `y`'s
  // channels-last layout); the inputs are read in theirs.
  void add_epilogue(int y, int residual, const std::string& activation, int out, int bias = -1);

  // Plans scratch, compiles the kernels with NVRTC and writes the engine blob.
  Result<compiler::LoweredPartition> finish();
  // The two halves of finish: the engine without its cubin (scratch planned, every step's
  // buffers placed; called once: it hands over the weights), then the cubin compiled into it
  // and the blob written. A dynamic engine adds its symbols, expressions and patches in between.
  Result<EngineDescription> describe();
  Result<compiler::LoweredPartition> compile(EngineDescription e) const;
  // After describe(): each kernel's source, and each step's launch rule (LaunchShape; kernel
  // steps only), for comparing and fitting the probes of a dynamic engine.
  const std::vector<std::string>& kernel_sources() const { return kernel_sources_; }
  const LaunchShape& step_launch(size_t step) const { return steps_[step].launch; }

 private:
  struct Slot {
    enum class Kind { Binding, Scratch, Weights, Alias };
    Kind kind = Kind::Scratch;
    int binding = -1;
    int root = -1;
    uint64_t offset = 0;  // weights or (after planning) scratch
    DType dtype = DType::Float32;
    std::vector<int64_t> sizes;
    bool channels_last = false;  // rank-4 scratch stored N, H, W, C
    // An alias read through its own strides (empty: the root's layout) from an element offset
    // (from the root's first element).
    std::vector<int64_t> view_strides;
    int64_t view_offset = 0;
    int first = INT_MAX;
    int last = -1;
    uint64_t bytes() const;
  };
  struct Planned {
    StepRecord record{};
    std::vector<int> operands;  // value ids; -1 = unused (GEMM c / bias)
    // Per operand: whether the step writes it (a kernel's pointer parameters not declared
    // const; a library step's output), for find_size_only_steps.
    std::vector<bool> writes;
    std::vector<int64_t> args;  // a kernel's scalar arguments
    LaunchShape launch;         // a kernel's launch (its grid rule)
  };

  // A GEMM, convolution or attention step over up to five operands (-1: unused).
  void add_library_step(const StepRecord& record, std::array<int, 5> operands);
  // describe(): the kernel steps of a dynamic engine whose results depend on sizes alone
  // (kKernelSizeOnly), and the scratch values they write.
  std::set<size_t> find_size_only_steps(std::set<int>* roots) const;
  void assign_slots();
  bool feeds_only_gemms(int v) const;
  std::set<int> squared_values() const;
  // `v`, or the row-major copy read in its place while a node that is not layout-aware lowers.
  int read(int v) const;
  int root(int v) const;
  int row_major_copy(int v);  // cached
  // A kernel reading `src` through its strides into `dst` (row-major, its own dtype).
  void gather_into(int src, int dst);
  const Slot& slot(int v) const { return slots_.at(root(v)); }
  BufferRef ref_of(int v) const;

  const compiler::Graph& g_;
  const compiler::Partition& p_;
  const EngineTarget& t_;
  const DType operand_;
  const DType activation_;
  int next_synthetic_;
  std::map<int, Slot> slots_;
  std::map<int, std::vector<int>> consumers_;
  std::set<int> outputs_;
  std::set<int> absorbed_;
  std::map<int, int> deferred_;  // a deferred Concat's output -> its node
  std::map<std::pair<int, int>, int> weight_cache_;
  std::map<std::pair<int, int>, int> cast_cache_;
  // (value, dtype or -1 for a row-major copy, channels) -> the copy
  std::map<std::tuple<int, int, int64_t>, int> layout_cache_;
  std::map<int, int> redirect_;
  std::map<std::string, int> derived_;
  std::vector<Planned> steps_;
  std::vector<std::string> kernel_names_;
  std::vector<std::string> kernel_sources_;  // the source of each kernel, by kernel index
  // Each kernel's pointer parameters and argument count (what its source declares).
  std::vector<std::pair<uint32_t, uint32_t>> kernel_params_;
  // A kernel's source with its name blanked -> its index: identical kernels are compiled once.
  std::map<std::string, uint32_t> kernel_by_body_;
  std::vector<uint8_t> weights_;
  const Lowering* upper_ = nullptr;   // follow()
  bool dynamic_ = false;              // set_dynamic()
  bool cudnn_fusions_ = true;         // set_dynamic()
  uint64_t scratch_bytes_ = 0;        // after describe()
  std::set<size_t> size_only_steps_;  // after describe(): the steps flagged kKernelSizeOnly
};

}  // namespace baton::cuda
