#include "backends/cuda/engine.h"

#include <nvtx3/nvToolsExtMemCudaRt.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string_view>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/driver.h"
#include "baton/core/log.h"
#include "baton/core/tensor.h"
#include "baton/core/text.h"
#include "runtime/nvtx.h"

namespace baton::cuda {
namespace {

cudaDataType_t data_type(uint8_t dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

cublasLtEpilogue_t epilogue_of(uint8_t e) {
  switch (static_cast<GemmEpilogue>(e)) {
    case GemmEpilogue::Bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::BiasRelu:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::BiasGeluTanh:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::Relu:
      return CUBLASLT_EPILOGUE_RELU;
    default:
      return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

Result<MatrixLayout> make_layout(uint8_t dtype, int64_t rows, int64_t cols, int64_t ld,
                                 uint32_t batch, int64_t stride) {
  BATON_ASSIGN_OR_RETURN(MatrixLayout layout,
                         create_matrix_layout(data_type(dtype), static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    BATON_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    BATON_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return layout;
}

// A GEMM's A, B, C and D as cuBLASLt lays them out (column-major rows x cols, leading dimension,
// batch stride): what plan_gemm creates layouts of and a dynamic engine resets them to.
struct MatrixShape {
  uint8_t dtype;
  int64_t rows, cols, ld, stride;
};
std::array<MatrixShape, 4> matrices_of(const GemmStep& g) {
  return {{{g.a_dtype, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a},
           {g.b_dtype, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b},
           {g.c_dtype, g.m, g.n, g.ldc, g.stride_c},
           {g.d_dtype, g.m, g.n, g.ldd, g.stride_d}}};
}

// The four layouts of `g`, into a, b, c, d.
Status make_layouts(const GemmStep& g, std::array<MatrixLayout*, 4> out) {
  const std::array<MatrixShape, 4> m = matrices_of(g);
  for (size_t i = 0; i < 4; ++i) {
    BATON_ASSIGN_OR_RETURN(
        *out[i], make_layout(m[i].dtype, m[i].rows, m[i].cols, m[i].ld, g.batch, m[i].stride));
  }
  return Status();
}

bool is_binding(const BufferRef& r) { return r.space == static_cast<uint32_t>(Space::Binding); }

// Counts `graph`'s nodes and its kernel nodes, child graphs' included (what one replay runs:
// reported by the delegate's counters).
Status count_graph_nodes(cudaGraph_t graph, int device, uint32_t& nodes, uint32_t& kernels) {
  nodes = 0;
  kernels = 0;
  std::vector<cudaGraph_t> pending{graph};
  std::vector<cudaGraphNode_t> list;
  while (!pending.empty()) {
    cudaGraph_t g = pending.back();
    pending.pop_back();
    size_t n = 0;
    BATON_CUDA_CHECK_ON(device, cudaGraphGetNodes(g, nullptr, &n));
    list.resize(n);
    if (n) BATON_CUDA_CHECK_ON(device, cudaGraphGetNodes(g, list.data(), &n));
    for (size_t i = 0; i < n; ++i) {
      cudaGraphNodeType type{};
      BATON_CUDA_CHECK_ON(device, cudaGraphNodeGetType(list[i], &type));
      if (type == cudaGraphNodeTypeGraph) {
        cudaGraph_t child = nullptr;
        BATON_CUDA_CHECK_ON(device, cudaGraphChildGraphNodeGetGraph(list[i], &child));
        pending.push_back(child);
        continue;
      }
      ++nodes;
      if (type == cudaGraphNodeTypeKernel) ++kernels;
    }
  }
  return Status();
}

// The edges of `graph` (top level) that let a node start before the one it depends on has
// finished (programmatic dependent launch). Each is replaced by a full dependency, except, with
// `keep_own`, those into one of `own` (the engine's generated kernels, which wait for their
// predecessor before touching memory). cuDNN's and cuBLASLt's are never kept: with them,
// ResNet-50 fp16 ran wrong on an H200 (docs/device-contract.md).
Result<uint32_t> programmatic_edges(cudaGraph_t graph, int device, bool keep_own,
                                    const std::vector<cudaGraphNode_t>& own) {
  size_t n = 0;
  BATON_CUDA_CHECK_ON(device, cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (n) {
    BATON_CUDA_CHECK_ON(device, cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n));
  }
  uint32_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (data[i].type == cudaGraphDependencyTypeDefault && data[i].from_port == 0) continue;
    ++count;
    if (keep_own && std::find(own.begin(), own.end(), to[i]) != own.end()) continue;
    BATON_CUDA_CHECK_ON(device, cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1));
    cudaGraphEdgeData full{};
    BATON_CUDA_CHECK_ON(device, cudaGraphAddDependencies(graph, &from[i], &to[i], &full, 1));
  }
  return count;
}

// cuBLASLt's first heuristic choice for a GEMM's layouts with operands aligned to `align` bytes
// and at most `workspace` bytes of workspace: a cuBLASLt status other than success, or no
// algorithm found, is returned as the status.
cublasStatus_t first_heuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                               cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                               cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                               uint64_t workspace, uint32_t align, cublasLtMatmulAlgo_t* out) {
  Result<MatmulPreference> pref = create_matmul_preference();
  if (!pref.ok()) return CUBLAS_STATUS_ALLOC_FAILED;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref->get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(pref->get(), attr, &align, sizeof align);
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, d, pref->get(), 1, &result, &found);
  }
  if (st == CUBLAS_STATUS_SUCCESS && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (st == CUBLAS_STATUS_SUCCESS) *out = result.algo;
  return st;
}

}  // namespace

Result<std::shared_ptr<Engine>> Engine::load(std::span<const uint8_t> blob,
                                             const std::string& partition, int tune_candidates,
                                             bool quiet, std::shared_ptr<const Engine> weights_from,
                                             std::span<const uint8_t> shared_weights, int device) {
  std::shared_ptr<Engine> engine(new Engine());
  engine->device_ = device;
  engine->tune_candidates_ = std::clamp(tune_candidates, 1, kMaxTuneCandidates);
  engine->weights_from_ = std::move(weights_from);
  BATON_TRY(engine->init(blob, partition, quiet, shared_weights));
  return engine;
}

Status Engine::init(std::span<const uint8_t> bytes, const std::string& partition, bool quiet,
                    std::span<const uint8_t> shared_weights) {
  partition_ = partition;
  BATON_ASSIGN_OR_RETURN(blob_, EngineBlob::parse(bytes, shared_weights));
  const EngineHeader& h = blob_.header();
  // Where it runs: where it was built for, or where a device map moved it (then messages name
  // both).
  if (device_ < 0) device_ = h.device_id;
  const std::string mapped =
      device_ == h.device_id
          ? std::string()
          : fmt::format(" (mapped there from cuda:{} by the device map)", h.device_id);
  const std::vector<DeviceInfo> found = visible_devices();
  const int count = static_cast<int>(found.size());
  if (device_ >= count) {
    std::string list;
    for (const DeviceInfo& d : found) {
      list += fmt::format("{}cuda:{} (sm_{})", list.empty() ? "" : ", ", d.index, d.sm_arch);
    }
    if (device_ == h.device_id) {
      return BATON_ERROR(NotSupported,
                         "partition '{}' was built for cuda:{} ({}), but this machine has {} CUDA "
                         "device(s){}{}. Rebuild it for a GPU that exists: baton compile "
                         "MODEL.onnx --device cuda:N; or run it on one with --device-map "
                         "cuda:{}=cuda:N",
                         partition, h.device_id, sm_arch_name(h.sm_arch), count, count ? ": " : "",
                         list, h.device_id);
    }
    return BATON_ERROR(NotSupported,
                       "partition '{}' (built for cuda:{}, {}) is mapped to cuda:{} by the device "
                       "map, but this machine has {} CUDA device(s){}{}. Map it to a GPU that "
                       "exists: --device-map cuda:{}=cuda:N",
                       partition, h.device_id, sm_arch_name(h.sm_arch), device_, count,
                       count ? ": " : "", list, h.device_id);
  }
  const auto found_arch = static_cast<uint32_t>(found[device_].sm_arch);
  BATON_CHECK_OR_RETURN(cubin_runs_on(h.sm_arch, found_arch), NotSupported,
                        "partition '{}' was built for {} but cuda:{}{} is {}: its kernels cannot "
                        "run there. Rebuild it on this machine (baton compile MODEL.onnx --device "
                        "cuda:{}) or for this architecture (--arch {})",
                        partition, sm_arch_name(h.sm_arch), device_, mapped,
                        sm_arch_name(found_arch), device_, sm_arch_name(found_arch));

  DeviceGuard guard(device_);
  BATON_TRY(guard.status());
  if (weights_from_ != nullptr && !(weights_from_->device() == device_ &&
                                    std::equal(blob_.weights().begin(), blob_.weights().end(),
                                               weights_from_->blob().weights().begin(),
                                               weights_from_->blob().weights().end()))) {
    weights_from_.reset();  // not the same weights: this engine uploads its own
  }
  if (!blob_.weights().empty() && weights_from_ == nullptr) {
    BATON_ASSIGN_OR_RETURN(
        weights_, allocate_device_buffer(device_, blob_.weights().size(),
                                         fmt::format("weights for partition '{}'", partition)));
    BATON_CUDA_CHECK_ON(device_, cudaMemcpy(weights_.get(), blob_.weights().data(),
                                            blob_.weights().size(), cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy may return with the last DMA still in flight on the legacy
    // stream, which orders only blocking streams: a caller's non-blocking stream (StreamGuard,
    // a green context's) could run the first execute() before the weights land. Load time only.
    BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(cudaStreamLegacy));
  }
  if (!blob_.cubin().empty()) {
    BATON_ASSIGN_OR_RETURN(library_, load_library(device_, blob_.cubin().data()));
    for (size_t i = 0; i < blob_.kernels().size(); ++i) {
      const std::string name(blob_.kernel_name(i));
      cudaKernel_t k = nullptr;
      const cudaError_t e = cudaLibraryGetKernel(&k, library_.get(), name.c_str());
      BATON_CHECK_OR_RETURN(e == cudaSuccess, InvalidProgram,
                            "partition '{}': kernel '{}' is not in the engine's cubin: {}. The "
                            "program is damaged: compile the model again",
                            partition, name, status_string(e));
      kernels_.push_back(k);
    }
  }
  return choose_algorithms(found[device_].name, quiet);
}

Status Engine::plan_gemm(cublasLtHandle_t handle, size_t step) {
  const GemmStep& g = blob_.steps()[step].gemm;
  GemmPlan& p = gemms_[step];
  const cublasComputeType_t compute = static_cast<Precision>(g.compute) == Precision::TF32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  BATON_ASSIGN_OR_RETURN(p.desc, create_matmul_desc(compute, CUDA_R_32F));
  const int32_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  BATON_CUDA_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  BATON_CUDA_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const cublasLtEpilogue_t epilogue = epilogue_of(g.epilogue);
  BATON_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                  &epilogue, sizeof epilogue));
  if (epilogue_has_bias(static_cast<GemmEpilogue>(g.epilogue))) {
    const void* bias = static_cast<const uint8_t*>(weights()) + g.bias.offset;
    const cudaDataType_t bias_type = data_type(g.bias_dtype);
    BATON_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof bias));
    BATON_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  }
  BATON_TRY(make_layouts(g, {&p.a, &p.b, &p.c, &p.d}));
  p.binds_caller_memory =
      is_binding(g.a) || is_binding(g.b) || is_binding(g.d) || (g.has_c && is_binding(g.c));

  // The algorithm for 256-byte aligned pointers (the ones the runtime plans) is chosen by
  // choose_gemm or taken from the blob; this one tolerates any element-aligned caller pointer.
  const cublasStatus_t st =
      first_heuristic(handle, p.desc.get(), p.a.get(), p.b.get(), g.has_c ? p.c.get() : p.d.get(),
                      p.d.get(), blob_.header().workspace_bytes, 4, &p.unaligned_algo);
  BATON_CHECK_OR_RETURN(st == CUBLAS_STATUS_SUCCESS, NotSupported,
                        "partition '{}' step {}: cuBLASLt has no algorithm on cuda:{} for m={} "
                        "n={} k={} batch={} (unaligned pointers): {}. Compile with another "
                        "--precision, or report the shape",
                        partition_, step, device(), g.m, g.n, g.k, g.batch, status_string(st));
  return Status();
}

Result<std::shared_ptr<ExecutionContext::Memory>> ExecutionContext::allocate_memory(
    int device, uint64_t scratch_bytes, uint64_t workspace_bytes, std::string_view partition) {
  DeviceGuard guard(device);
  BATON_TRY(guard.status());
  auto memory = std::make_shared<Memory>();
  if (scratch_bytes > 0) {
    BATON_ASSIGN_OR_RETURN(
        memory->scratch,
        allocate_device_buffer(device, scratch_bytes,
                               fmt::format("scratch for partition '{}'", partition)));
  }
  if (workspace_bytes > 0) {
    BATON_ASSIGN_OR_RETURN(
        memory->workspace,
        allocate_device_buffer(
            device, workspace_bytes,
            fmt::format("cuBLASLt and cuDNN workspace for partition '{}'", partition)));
  }
  memory->scratch_bytes = scratch_bytes;
  memory->workspace_bytes = workspace_bytes;
  return memory;
}

Status ExecutionContext::share_memory(std::shared_ptr<Memory> memory) {
  const uint64_t scratch = engine_->blob().header().scratch_bytes;
  BATON_CHECK_OR_RETURN(
      memory->scratch_bytes >= scratch && memory->workspace_bytes >= workspace_bytes_, Internal,
      "partition '{}': the shared scratch ({} bytes) or workspace ({} bytes) "
      "is smaller than the engine's ({} and {} bytes)",
      engine_->partition(), memory->scratch_bytes, memory->workspace_bytes, scratch,
      workspace_bytes_);
  memory_ = std::move(memory);
  return Status();
}

Result<std::unique_ptr<ExecutionContext>> ExecutionContext::create(std::shared_ptr<Engine> engine,
                                                                   const LoadOptions& options,
                                                                   bool allocate) {
  std::unique_ptr<ExecutionContext> ctx(new ExecutionContext(std::move(engine)));
  ctx->graph_edges_ = options.graph_edges;
  ctx->tune_candidates_ = std::clamp(options.tune_candidates, 1, kMaxTuneCandidates);
  if (ctx->engine_->blob().dynamic()) {
    ctx->graph_shapes_ = static_cast<size_t>(std::max(1, options.cuda_graph_shapes));
  }
  // Reserved now so that keeping a new shape's graph moves no other entry.
  ctx->graphs_.reserve(ctx->graph_shapes_);
  ctx->dependent_launch_ = options.cuda_pdl;
  const EngineBlob& blob = ctx->engine_->blob();
  const int device = ctx->engine_->device();
  DeviceGuard guard(device);
  BATON_TRY(guard.status());
  BATON_ASSIGN_OR_RETURN(ctx->handle_, create_cublaslt(device));
  ctx->workspace_bytes_ = blob.header().workspace_bytes;
  ctx->cudnn_plans_.of_step.assign(blob.steps().size(), -1);
  for (size_t s = 0; s < blob.steps().size(); ++s) {
    const StepRecord& r = blob.steps()[s];
    if (!is_cudnn_step(r.kind)) continue;
    if (!ctx->cudnn_) {
      BATON_ASSIGN_OR_RETURN(ctx->cudnn_, CudnnHandle::create(device));
    }
    const Engine& engine = *ctx->engine_;
    BATON_TRY(ctx->cudnn_plans_.add(
        blob.steps(), s,
        [&](size_t t) { return engine.cudnn_choice(t).plan == engine.cudnn_choice(s).plan; },
        [&]() -> Result<CudnnPlan> {
          ++ctx->cudnn_plans_built_;
          return CudnnPlan::create(ctx->cudnn_.get(), r, engine.cudnn_choice(s),
                                   fmt::format("partition '{}' step {}", engine.partition(), s));
        }));
    ctx->workspace_bytes_ =
        std::max(ctx->workspace_bytes_, ctx->cudnn_plans_.at(s).workspace_bytes());
  }
  // Without `allocate`, the caller shares memory sized for every context (share_memory).
  if (allocate) {
    BATON_ASSIGN_OR_RETURN(
        ctx->memory_, allocate_memory(device, blob.header().scratch_bytes, ctx->workspace_bytes_,
                                      ctx->engine_->partition()));
  }
  const size_t nb = blob.bindings().size();
  ctx->binding_sizes_.assign(nb * kEngineMaxRank, 0);
  ctx->binding_bytes_.assign(nb, 0);
  for (size_t i = 0; i < nb; ++i) {
    const BindingRecord& b = blob.bindings()[i];
    std::copy(b.sizes, b.sizes + b.rank, ctx->binding_sizes_.begin() + i * kEngineMaxRank);
    ctx->binding_bytes_[i] = *checked_nbytes(static_cast<DType>(b.dtype), {b.sizes, b.rank});
  }
  if (blob.dynamic()) {
    // cuDNN's steps get a plan per shape (fit_cudnn).
    ctx->shape_plans_.reserve(ctx->graph_shapes_ + 2);
    ctx->dynamic_ = true;
    ctx->steps_.assign(blob.steps().begin(), blob.steps().end());
    ctx->args_.assign(blob.args().begin(), blob.args().end());
    ctx->expr_values_.assign(blob.exprs().size(), 0);
    for (const SymbolRecord& sym : blob.symbols()) ctx->symbols_.push_back(sym.max);
    ctx->patched_ = ctx->symbols_;
    ctx->gemms_.resize(blob.steps().size());
    for (size_t s = 0; s < blob.steps().size(); ++s) {
      if (blob.steps()[s].kind != static_cast<uint32_t>(StepKind::Gemm)) continue;
      const GemmStep& g = blob.steps()[s].gemm;
      DynamicGemm& d = ctx->gemms_[s];
      BATON_TRY(make_layouts(g, {&d.a, &d.b, &d.c, &d.d}));
      d.algo = ctx->engine_->gemm(s).algo;
      d.unaligned_algo = ctx->engine_->gemm(s).unaligned_algo;
    }
  }
  ctx->kernel_args_.resize(blob.steps().size());
  ctx->kernel_arg_ptrs_.resize(blob.steps().size());
  for (size_t s = 0; s < blob.steps().size(); ++s) {
    const StepRecord& r = blob.steps()[s];
    if (r.kind != static_cast<uint32_t>(StepKind::Kernel)) continue;
    ctx->kernel_args_[s].resize(r.kernel.num_operands);
    for (auto& arg : ctx->kernel_args_[s]) ctx->kernel_arg_ptrs_[s].push_back(&arg);
    // The kernel's scalar arguments, one by-value struct read straight from the blob (which the
    // engine keeps for its lifetime; the launch copies the bytes).
    if (r.kernel.num_args > 0) {
      // A dynamic engine's come from this context's patched copy.
      ctx->kernel_arg_ptrs_[s].push_back(
          ctx->dynamic_ ? ctx->args_.data() + r.kernel.first_arg
                        : const_cast<int64_t*>(blob.kernel_args(r.kernel).data()));  // NOLINT
    }
  }
  if (ctx->dynamic_) ctx->find_size_only_block();
  size_t declared = 0;
  for (const StepRecord& r : blob.steps()) {
    declared += r.kind == static_cast<uint32_t>(StepKind::Gemm) || is_cudnn_step(r.kind) ||
                (r.kind == static_cast<uint32_t>(StepKind::Copy) &&
                 r.copy.src.space == static_cast<uint32_t>(Space::Scratch));
  }
  ctx->library_writes_.resize(declared);
  for (size_t s = 0; s < blob.steps().size(); ++s) {
    ctx->step_labels_.push_back(
        fmt::format("{} {}", step_kind_name(static_cast<StepKind>(blob.steps()[s].kind)), s));
  }
  runtime::nvtx_domain();  // NVTX initializes on its first call: here, not in a warm execute
  return ctx;
}

void ExecutionContext::find_size_only_block() {
  const SizeOnlyBlock block = size_only_block(engine_->blob().steps());
  if (!block.refused.empty()) {
    log_message(LogLevel::Debug, "cuda",
                fmt::format("partition '{}': {}; every step runs at every call",
                            engine_->partition(), block.refused));
  }
  if (block.empty()) return;
  size_lo_ = block.begin;
  size_hi_ = block.end;
  size_only_steps_ = block.steps;
}

std::span<const StepRecord> ExecutionContext::steps() const {
  if (dynamic_) return steps_;
  return engine_->blob().steps();
}

std::span<const int64_t> ExecutionContext::binding_sizes(size_t i) const {
  return {binding_sizes_.data() + i * kEngineMaxRank, engine_->blob().bindings()[i].rank};
}

Status ExecutionContext::resize(std::span<const int64_t> symbols) {
  if (!dynamic_) return Status();
  const EngineBlob& blob = engine_->blob();
  if (std::equal(symbols.begin(), symbols.end(), symbols_.begin(), symbols_.end())) {
    return Status();
  }
  BATON_CHECK_OR_RETURN(symbols.size() == blob.symbols().size(), InvalidArgument,
                        "partition '{}' is a dynamic engine over {} symbols but the call gives {} "
                        "symbol values",
                        engine_->partition(), blob.symbols().size(), symbols.size());
  for (size_t i = 0; i < symbols.size(); ++i) {
    const SymbolRecord& r = blob.symbols()[i];
    BATON_CHECK_OR_RETURN(symbols[i] >= r.min && symbols[i] <= r.max, InvalidArgument,
                          "partition '{}': symbol '{}' is {}, outside the engine's range {}..{}",
                          engine_->partition(), blob.symbol_name(i), symbols[i], r.min, r.max);
  }
  // A shape whose graph is kept needs only its binding sizes: the graph holds the patched steps.
  for (size_t g = 0; g < graphs_.size(); ++g) {
    const ShapeGraph& entry = graphs_[g];
    if (!std::equal(symbols.begin(), symbols.end(), entry.symbols.begin(), entry.symbols.end())) {
      continue;
    }
    std::copy(entry.binding_sizes.begin(), entry.binding_sizes.end(), binding_sizes_.begin());
    std::copy(entry.binding_bytes.begin(), entry.binding_bytes.end(), binding_bytes_.begin());
    std::copy(symbols.begin(), symbols.end(), symbols_.begin());
    current_graph_ = static_cast<int>(g);
    ++resizes_;
    return Status();
  }
  current_graph_ = -1;
  // Whatever fails below leaves the call's sizes unknown: the next call patches again.
  symbols_.assign(symbols_.size(), -1);
  BATON_TRY(patch(symbols));
  std::copy(symbols.begin(), symbols.end(), symbols_.begin());
  ++resizes_;
  return Status();
}

Status ExecutionContext::prepare_declared_shape() {
  if (!dynamic_) return Status();
  std::vector<int64_t> opt;
  for (const SymbolRecord& r : engine_->blob().symbols()) {
    // 0: no OPT declared, or one outside this bucket's range (lower_dynamic records it so).
    if (r.opt <= 0) return Status();
    opt.push_back(r.opt);
  }
  return prepare(opt);
}

bool ExecutionContext::is_prepared(std::span<const int64_t> symbols) const {
  return std::any_of(prepared_.begin(), prepared_.end(), [&](const std::vector<int64_t>& p) {
    return std::equal(p.begin(), p.end(), symbols.begin(), symbols.end());
  });
}

Status ExecutionContext::tune_shape(std::span<const int64_t> symbols) {
  std::optional<ShapeTuning> tuning;
  if (tune_candidates_ > 1) {
    Result<Stopwatch> w = Stopwatch::create(engine_->device());
    if (w.ok()) {
      tuning.emplace(ShapeTuning{std::move(*w)});
      tuning_ = &*tuning;
    } else {
      log_message(LogLevel::Info, "cuda",
                  fmt::format("partition '{}': a prepared shape's choices are not timed ({}); "
                              "the heuristics' first choices are taken",
                              engine_->partition(), w.status().message()));
    }
  }
  struct EndTuning {
    ShapeTuning** tuning;
    ~EndTuning() { *tuning = nullptr; }
  } end_tuning{&tuning_};
  // resize checks the sizes against the engine's range, and patches (timed) unless the sizes
  // are the current call's or a graph is held for them; then they are patched here, since an
  // earlier call may have patched them with untimed choices.
  const uint64_t patches = patches_;
  BATON_TRY(resize(symbols));
  if (patches_ == patches) BATON_TRY(patch(symbols));
  // Counted (and its cuDNN plans kept for good) once its choices are made.
  if (!is_prepared(symbols)) prepared_.emplace_back(symbols.begin(), symbols.end());
  return Status();
}

Status ExecutionContext::prepare(std::span<const int64_t> symbols) {
  if (!dynamic_) return Status();
  // The engine's GPU is current for all of it: the plans, the heuristics and the stopwatch's
  // memory belong there (the loader may run with another GPU current).
  DeviceGuard guard(engine_->device());
  BATON_TRY(guard.status());
  // A graph held for these sizes holds the kernels of the cuDNN plans it was captured with, and
  // preparing builds those plans again (timed), which unloads the old ones' kernels: the graph
  // goes first (its slot and its copy of the size-only block are kept for the capture that
  // follows). Updating it in place after its plans were freed gave wrong results on an H200.
  prepared_slot_ = -1;
  for (size_t g = 0; g < graphs_.size(); ++g) {
    ShapeGraph& entry = graphs_[g];
    if (!std::equal(symbols.begin(), symbols.end(), entry.symbols.begin(), entry.symbols.end())) {
      continue;
    }
    entry.exec.reset();
    entry.symbols.clear();
    entry.pointers.clear();
    if (current_graph_ == static_cast<int>(g)) current_graph_ = -1;
    prepared_slot_ = static_cast<int>(g);
  }
  const uint64_t calls = resizes_;
  const Status tuned = tune_shape(symbols);
  resizes_ = calls;  // preparing is not a call
  return tuned;
}

Status ExecutionContext::capture_prepared(std::span<void* const> pointers, cudaStream_t stream) {
  if (engine_->blob().steps().empty()) return Status();
  DeviceGuard guard(engine_->device());
  BATON_TRY(guard.status());
  declare_library_writes(pointers);
  const int device = engine_->device();
  BATON_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
  CUcontext context = nullptr;
  BATON_CUDA_CHECK_ON(device, api->cuStreamGetCtx(reinterpret_cast<CUstream>(stream), &context));
  std::optional<ContextGuard> cudnn_context;
  if (cudnn_) {
    cudnn_context.emplace(*api, context);
    BATON_TRY(cudnn_context->status());
  }
  // The slot of the graph prepare() let go for these sizes, else a new or the least recently used
  // one (a static engine: its one graph).
  const int found = dynamic_ ? prepared_slot_ : (graphs_.empty() ? -1 : 0);
  prepared_slot_ = -1;
  if (found < 0 && graphs_.size() >= graph_shapes_) {
    log_message(LogLevel::Info, "cuda",
                fmt::format("partition '{}': preparing more shapes than the {} graphs it keeps "
                            "(the load option cuda_graph_shapes): the least recently used "
                            "shape's graph is replaced, and that shape captures again at its "
                            "next call",
                            engine_->partition(), graph_shapes_));
  }
  return capture_and_launch(pointers, stream, context, found, /*launch=*/false);
}

Status ExecutionContext::patch(std::span<const int64_t> symbols) {
  const EngineBlob& blob = engine_->blob();
  // Whatever fails below leaves the copies half patched: the next call patches them again.
  patched_.assign(patched_.size(), -1);
  ++patches_;
  BATON_TRY(evaluate_exprs(blob.exprs(), symbols, expr_values_));
  if (Status st = apply_patches(blob, expr_values_, steps_, args_, binding_sizes_); !st.ok()) {
    return Status(st.code(), fmt::format("partition '{}': {}", engine_->partition(), st.message()));
  }
  for (size_t i = 0; i < binding_bytes_.size(); ++i) {
    const std::optional<uint64_t> bytes =
        checked_nbytes(static_cast<DType>(blob.bindings()[i].dtype), binding_sizes(i));
    BATON_CHECK_OR_RETURN(bytes.has_value(), InvalidArgument,
                          "partition '{}': binding {} overflows", engine_->partition(), i);
    binding_bytes_[i] = *bytes;
  }
  // The expressions are trusted no more than the blob: the steps they give are checked as the
  // loader checks the blob's own, so no size can send a step outside its buffers.
  BATON_TRY(blob.check_steps(steps_, args_, binding_bytes_));
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (steps_[s].kind == static_cast<uint32_t>(StepKind::Gemm)) BATON_TRY(fit_gemm(s));
  }
  BATON_TRY(fit_cudnn(symbols));
  std::copy(symbols.begin(), symbols.end(), patched_.begin());
  return Status();
}

const CudnnPlan& ExecutionContext::CudnnPlans::at(size_t s) const {
  static const CudnnPlan kNone;
  const int i = s < of_step.size() ? of_step[s] : -1;
  return i >= 0 ? plans[static_cast<size_t>(i)] : kNone;
}

Status ExecutionContext::CudnnPlans::add(std::span<const StepRecord> steps, size_t s,
                                         const std::function<bool(size_t earlier)>& same,
                                         const std::function<Result<CudnnPlan>()>& make) {
  for (size_t t = 0; t < s; ++t) {
    if (of_step[t] >= 0 && same_cudnn_graph(steps[t], steps[s]) && same(t)) {
      of_step[s] = of_step[t];
      return Status();
    }
  }
  BATON_ASSIGN_OR_RETURN(CudnnPlan plan, make());
  plans.push_back(std::move(plan));
  of_step[s] = static_cast<int>(plans.size() - 1);
  return Status();
}

const CudnnPlan& ExecutionContext::plan_of(size_t s) const {
  return current_plans_ >= 0 ? shape_plans_[static_cast<size_t>(current_plans_)].plans.at(s)
                             : cudnn_plans_.at(s);
}

// A dynamic engine's cuDNN steps (convolutions, fused attention, the erf-GELU matmul) at the
// patched sizes. At the largest sizes they run the plans made at create (the choice recorded in
// the blob or timed at load); at any other shape, the plan timed for the declared OPT shape
// (timed at load), else the one chosen for the largest sizes, where cuDNN offers that plan at
// this shape and its workspace fits; else the heuristics' first plan for this shape
// (CudnnPlan::first_fitting) within the workspace sized at load. Built at the shape's first
// patch: host work of its first call (cuDNN compiles nothing for its precompiled engines).
Status ExecutionContext::fit_cudnn(std::span<const int64_t> symbols) {
  current_plans_ = -1;
  if (!cudnn_) return Status();
  const EngineBlob& blob = engine_->blob();
  bool at_largest = true;
  for (size_t i = 0; i < symbols.size(); ++i) at_largest &= symbols[i] == blob.symbols()[i].max;
  if (at_largest) return Status();
  ++plan_clock_;
  // A shape being prepared (tuning_) whose set was built untimed by an earlier call builds it
  // again, timed, in the same place (prepare waited for the calls that used it, and captures
  // the shape's graph again with the new plans).
  int rebuild = -1;
  for (size_t e = 0; e < shape_plans_.size(); ++e) {
    ShapePlans& entry = shape_plans_[e];
    if (!std::equal(symbols.begin(), symbols.end(), entry.symbols.begin(), entry.symbols.end())) {
      continue;
    }
    if (tuning_ != nullptr && !entry.timed) {
      rebuild = static_cast<int>(e);
      break;
    }
    entry.last_use = plan_clock_;
    current_plans_ = static_cast<int>(e);
    return Status();
  }
  ShapePlans made;
  made.symbols.assign(symbols.begin(), symbols.end());
  made.plans.of_step.assign(steps_.size(), -1);
  std::string sizes;  // "batch=8", for errors
  for (size_t i = 0; i < symbols.size(); ++i) {
    sizes += fmt::format("{}{}={}", i ? ", " : "", blob.symbol_name(i), symbols[i]);
  }
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (!is_cudnn_step(steps_[s].kind)) continue;
    BATON_TRY(made.plans.add(
        steps_, s, [](size_t) { return true; },
        [&]() -> Result<CudnnPlan> {
          ++cudnn_plans_built_;
          const std::string what =
              fmt::format("partition '{}' step {} at {}", engine_->partition(), s, sizes);
          if (tuning_ != nullptr) {
            // The declared OPT shape at load: the fastest of the candidates that fits the
            // workspace sized at load (a faster one that needs more is not taken).
            Result<CudnnPlan> timed = CudnnPlan::choose(cudnn_.get(), steps_[s], tune_candidates_,
                                                        &tuning_->stopwatch, what);
            if (timed.ok() && timed->workspace_bytes() <= memory_->workspace_bytes) {
              ++prepared_choices_timed_;
              return timed;
            }
          }
          // The plan timed for a prepared shape (the declared OPT shape first, then the others
          // in the order they were prepared), else for the largest sizes, where cuDNN offers it
          // at these sizes too and its workspace fits; else the heuristics' first. On an H200
          // the heuristics' first fused GELU matmul at full-size BERT-base's smaller shapes ran
          // slower than cuBLASLt and a GELU kernel; the timed plan runs faster (gemm.cpp's
          // cudnn_gelu, bench/RESULTS.md).
          std::vector<const CudnnChoice*> timed;
          for (const std::vector<int64_t>& p : prepared_) {
            for (const ShapePlans& entry : shape_plans_) {
              if (entry.symbols == p && entry.plans.at(s) &&
                  entry.plans.at(s).choice().candidates > 0) {
                timed.push_back(&entry.plans.at(s).choice());
              }
            }
          }
          if (engine_->cudnn_choice(s).candidates > 0) timed.push_back(&engine_->cudnn_choice(s));
          for (const CudnnChoice* choice : timed) {
            Result<CudnnPlan> same = CudnnPlan::create(cudnn_.get(), steps_[s], *choice, what);
            if (same.ok() && same->workspace_bytes() <= memory_->workspace_bytes) return same;
          }
          return CudnnPlan::first_fitting(cudnn_.get(), steps_[s], memory_->workspace_bytes, what);
        }));
  }
  made.last_use = plan_clock_;
  made.timed = tuning_ != nullptr;
  ++plan_sets_built_;
  if (rebuild >= 0) {
    shape_plans_[static_cast<size_t>(rebuild)] = std::move(made);
    current_plans_ = rebuild;
    return Status();
  }
  const auto kept = [&](const ShapePlans& entry) { return is_prepared(entry.symbols); };
  const size_t kept_sets =
      static_cast<size_t>(std::count_if(shape_plans_.begin(), shape_plans_.end(), kept));
  if (shape_plans_.size() < graph_shapes_ + 1 + kept_sets) {
    shape_plans_.push_back(std::move(made));
    current_plans_ = static_cast<int>(shape_plans_.size() - 1);
    return Status();
  }
  // Full: replace the least recently used set whose shape holds no graph (at most graph_shapes_
  // shapes do, so one of the graph_shapes_ + 1 sets is free). A graph keeps the kernels of the
  // plans it was captured with; those stay until that shape's graph is replaced.
  int victim = -1;
  for (size_t e = 0; e < shape_plans_.size(); ++e) {
    const ShapePlans& entry = shape_plans_[e];
    const bool held = std::any_of(graphs_.begin(), graphs_.end(),
                                  [&](const ShapeGraph& g) { return g.symbols == entry.symbols; });
    if (held || kept(entry)) continue;
    if (victim < 0 || entry.last_use < shape_plans_[static_cast<size_t>(victim)].last_use) {
      victim = static_cast<int>(e);
    }
  }
  BATON_CHECK_OR_RETURN(victim >= 0, Internal,
                        "partition '{}': every one of the {} sets of cuDNN plans belongs to "
                        "a captured graph",
                        engine_->partition(), shape_plans_.size());
  shape_plans_[static_cast<size_t>(victim)] = std::move(made);
  current_plans_ = victim;
  return Status();
}

// A dynamic engine's GEMM at the current sizes: its layouts set to them, and its algorithm: at
// the largest sizes the choice recorded (or timed at load) for them while cuBLASLt says it still
// applies; at sizes a prepared shape's GEMM had (the declared OPT shape, Method::prepare_shape)
// the algorithm timed there; else cuBLASLt's first heuristic choice for those sizes. An
// algorithm chosen for the largest sizes runs far below its speed on small ones (a tile shape
// for m = 4096 leaves most SMs idle at m = 128); the heuristic is asked once per shape, at the
// first call (later calls replay the shape's graph).
Status ExecutionContext::fit_gemm(size_t step) {
  const GemmStep& g = steps_[step].gemm;
  DynamicGemm& d = gemms_[step];
  const GemmPlan& p = engine_->gemm(step);
  const std::array<cublasLtMatrixLayout_t, 4> layouts = {d.a.get(), d.b.get(), d.c.get(),
                                                         d.d.get()};
  const std::array<MatrixShape, 4> shapes = matrices_of(g);
  const int32_t count = static_cast<int32_t>(g.batch);
  for (size_t i = 0; i < 4; ++i) {
    cublasLtMatrixLayout_t l = layouts[i];
    const uint64_t rows = static_cast<uint64_t>(shapes[i].rows);
    const uint64_t cols = static_cast<uint64_t>(shapes[i].cols);
    BATON_CUDA_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows));
    BATON_CUDA_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
    BATON_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &shapes[i].ld,
                                                      sizeof shapes[i].ld));
    BATON_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                      sizeof count));
    BATON_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(l,
                                                      CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &shapes[i].stride, sizeof shapes[i].stride));
  }
  cublasLtMatrixLayout_t c_layout = g.has_c ? d.c.get() : d.d.get();
  const uint64_t workspace = engine_->blob().header().workspace_bytes;
  auto check = [&](const cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulHeuristicResult_t result{};
    return cublasLtMatmulAlgoCheck(handle_.get(), p.desc.get(), d.a.get(), d.b.get(), c_layout,
                                   d.d.get(), &algo, &result) == CUBLAS_STATUS_SUCCESS &&
           result.workspaceSize <= workspace;
  };
  auto heuristic = [&](uint32_t align, cublasLtMatmulAlgo_t* out) -> Status {
    const cublasStatus_t st = first_heuristic(handle_.get(), p.desc.get(), d.a.get(), d.b.get(),
                                              c_layout, d.d.get(), workspace, align, out);
    BATON_CHECK_OR_RETURN(st == CUBLAS_STATUS_SUCCESS, NotSupported,
                          "partition '{}' step {}: cuBLASLt has no algorithm for m={} n={} k={} "
                          "batch={}: {}",
                          engine_->partition(), step, g.m, g.n, g.k, g.batch, status_string(st));
    return Status();
  };
  const GemmStep& largest = engine_->blob().steps()[step].gemm;
  const bool at_largest =
      g.m == largest.m && g.n == largest.n && g.k == largest.k && g.batch == largest.batch;
  if (!at_largest) {
    // A prepared shape (tuning_): timed as the largest sizes' choice is, once per GEMM sizes. A
    // failure to time leaves the heuristic. Any shape whose GEMM has sizes timed so takes that.
    const std::string shape = step_signature(g, offsetof(GemmStep, a));
    auto timed = timed_gemms_.find(shape);
    if (timed == timed_gemms_.end() && tuning_ != nullptr) {
      float us = 0;
      uint32_t candidates = 0;
      Result<cublasLtMatmulAlgo_t> algo = fastest_gemm_algo(
          handle_.get(), g, {p.desc.get(), d.a.get(), d.b.get(), c_layout, d.d.get()}, workspace,
          tune_candidates_, tuning_->stopwatch,
          fmt::format("partition '{}' step {}", engine_->partition(), step), &us, &candidates);
      if (algo.ok()) {
        timed = timed_gemms_.emplace(shape, *algo).first;
        ++prepared_choices_timed_;
      }
    }
    if (timed != timed_gemms_.end() && check(timed->second)) {
      d.algo = timed->second;
    } else {
      BATON_TRY(heuristic(256, &d.algo));
    }
    BATON_TRY(heuristic(4, &d.unaligned_algo));
    return Status();
  }
  if (check(p.algo)) {
    d.algo = p.algo;
  } else {
    BATON_TRY(heuristic(256, &d.algo));
    // The choice recorded (or timed at load) for the largest sizes does not apply to them here:
    // said once per step, not at every change of shape.
    if (!d.rechosen_said) {
      d.rechosen_said = true;
      log_message(LogLevel::Info, "cuda",
                  fmt::format("partition '{}' step {}: the GEMM algorithm chosen for the largest "
                              "sizes does not apply to them here (m={} n={} k={} batch={}); "
                              "cuBLASLt's first heuristic choice runs instead",
                              engine_->partition(), step, g.m, g.n, g.k, g.batch));
    }
  }
  if (check(p.unaligned_algo)) {
    d.unaligned_algo = p.unaligned_algo;
  } else {
    BATON_TRY(heuristic(4, &d.unaligned_algo));
  }
  return Status();
}

void* ExecutionContext::resolve(const BufferRef& ref, std::span<void* const> pointers) const {
  switch (static_cast<Space>(ref.space)) {
    case Space::Binding:
      return static_cast<uint8_t*>(pointers[ref.index]) + ref.offset;
    case Space::Scratch:
      // The size-only block of the graph being captured: that graph's own copy.
      if (size_base_ != nullptr && ref.offset >= size_lo_ && ref.offset < size_hi_) {
        return size_base_ + (ref.offset - size_lo_);
      }
      return static_cast<uint8_t*>(memory_->scratch.get()) + ref.offset;
    case Space::Weights:
      return static_cast<uint8_t*>(engine_->weights()) + ref.offset;
  }
  return nullptr;
}

Status ExecutionContext::enqueue_steps(std::span<void* const> pointers, cudaStream_t stream,
                                       std::span<const cudaEvent_t> step_marks,
                                       std::vector<cudaGraphNode_t>* own_nodes, StepSet which) {
  const EngineBlob& blob = engine_->blob();
  const int device = engine_->device();
  const std::span<const StepRecord> list = steps();
  for (size_t s = 0; s < list.size(); ++s) {
    const StepRecord& r = list[s];
    if (which != StepSet::All) {
      const bool size_only = size_hi_ > size_lo_ && is_size_only_kernel(r);
      if (size_only != (which == StepSet::SizeOnly)) continue;
    }
    const runtime::NvtxRange range(runtime::nvtx_domain(), step_labels_[s]);
    if (!step_marks.empty()) BATON_CUDA_CHECK_ON(device, cudaEventRecord(step_marks[s], stream));
    switch (static_cast<StepKind>(r.kind)) {
      case StepKind::Gemm: {
        const GemmStep& g = r.gemm;
        const GemmPlan& p = engine_->gemm(s);
        // A dynamic engine's layouts and algorithms are this context's, fitted to the sizes.
        const DynamicGemm* dg = dynamic_ ? &gemms_[s] : nullptr;
        void* a = resolve(g.a, pointers);
        void* b = resolve(g.b, pointers);
        void* d = resolve(g.d, pointers);
        void* c = g.has_c ? resolve(g.c, pointers) : d;
        bool aligned = true;
        if (p.binds_caller_memory) {
          for (const void* ptr : {a, b, c, d})
            aligned = aligned && reinterpret_cast<uintptr_t>(ptr) % 256 == 0;
        }
        cublasLtMatrixLayout_t la = dg ? dg->a.get() : p.a.get();
        cublasLtMatrixLayout_t lb = dg ? dg->b.get() : p.b.get();
        cublasLtMatrixLayout_t lc = dg ? dg->c.get() : p.c.get();
        cublasLtMatrixLayout_t ld = dg ? dg->d.get() : p.d.get();
        const cublasLtMatmulAlgo_t* algo = dg ? (aligned ? &dg->algo : &dg->unaligned_algo)
                                              : (aligned ? &p.algo : &p.unaligned_algo);
        BATON_CUDA_CHECK_ON(
            device, cublasLtMatmul(handle_.get(), p.desc.get(), &g.alpha, a, la, b, lb, &g.beta, c,
                                   g.has_c ? lc : ld, d, ld, algo, memory_->workspace.get(),
                                   blob.header().workspace_bytes, stream));
        break;
      }
      case StepKind::Conv:
      case StepKind::Sdpa:
      case StepKind::Matmul: {
        BufferRef refs[5];
        void* ptrs[5];
        const int count = cudnn_operands(r, refs);
        for (int i = 0; i < count; ++i) ptrs[i] = resolve(refs[i], pointers);
        BATON_TRY(plan_of(s).enqueue(cudnn_.get(), stream, ptrs, count, memory_->workspace.get()));
        break;
      }
      case StepKind::Kernel: {
        const KernelStep& k = r.kernel;
        for (uint32_t o = 0; o < k.num_operands; ++o)
          kernel_args_[s][o] = resolve(k.operands[o], pointers);
        const void* fn = reinterpret_cast<const void*>(engine_->kernel(k.kernel));
        const dim3 grid(k.grid[0], k.grid[1], k.grid[2]), block(k.block[0], k.block[1], k.block[2]);
        // Programmatic dependent launch (KernelStep::flags): after another step of this engine,
        // not in a profile of the steps (each step's time is its own there).
        if (dependent_launch_ && s > 0 && step_marks.empty() &&
            (k.flags & kKernelWaitsForPredecessor) != 0) {
          cudaLaunchAttribute attribute{};
          attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attribute.val.programmaticStreamSerializationAllowed = 1;
          cudaLaunchConfig_t config{};
          config.gridDim = grid;
          config.blockDim = block;
          config.dynamicSmemBytes = k.shared_bytes;
          config.stream = stream;
          config.attrs = &attribute;
          config.numAttrs = 1;
          BATON_CUDA_CHECK_ON(device, cudaLaunchKernelExC(&config, fn, kernel_arg_ptrs_[s].data()));
          break;
        }
        BATON_CUDA_CHECK_ON(device, cudaLaunchKernel(fn, grid, block, kernel_arg_ptrs_[s].data(),
                                                     k.shared_bytes, stream));
        break;
      }
      case StepKind::Copy:
        BATON_CUDA_CHECK_ON(
            device, cudaMemcpyAsync(resolve(r.copy.dst, pointers), resolve(r.copy.src, pointers),
                                    r.copy.src.bytes, cudaMemcpyDeviceToDevice, stream));
        break;
    }
    if (own_nodes != nullptr && r.kind == static_cast<uint32_t>(StepKind::Kernel)) {
      // The capture's frontier after a kernel launch is that kernel's node.
      cudaStreamCaptureStatus capturing{};
      const cudaGraphNode_t* frontier = nullptr;
      size_t n = 0;
      BATON_CUDA_CHECK_ON(device, cudaStreamGetCaptureInfo(stream, &capturing, nullptr, nullptr,
                                                           &frontier, nullptr, &n));
      if (capturing == cudaStreamCaptureStatusActive) {
        own_nodes->insert(own_nodes->end(), frontier, frontier + n);
      }
    }
  }
  if (!step_marks.empty()) {
    BATON_CUDA_CHECK_ON(device, cudaEventRecord(step_marks[list.size()], stream));
  }
  return Status();
}

std::string ExecutionContext::step_runner(size_t s) const {
  const EngineBlob& blob = engine_->blob();
  if (s >= blob.steps().size()) return std::string();
  const StepRecord& r = blob.steps()[s];
  switch (static_cast<StepKind>(r.kind)) {
    case StepKind::Gemm:
      return "cublasLtMatmul";
    case StepKind::Kernel:
      return escape_invalid_utf8(blob.kernel_name(r.kernel.kernel));
    case StepKind::Conv:
    case StepKind::Sdpa:
    case StepKind::Matmul:
      return fmt::format("cuDNN {}", plan_of(s) ? plan_of(s).engine_name() : "plan");
    case StepKind::Copy:
      return "cudaMemcpyAsync";
  }
  return std::string();
}

// Two blind spots of compute-sanitizer's initcheck (2025.3) would bury real reports under false
// ones; tests/backends/cuda/probes/tma_initcheck.cu reproduces both outside Baton:
// - it does not see stores made through the tensor memory accelerator (TMA), and cuBLASLt's
//   Hopper kernels (nvjet_sm90_*) write their output that way, so every read of a GEMM's result
//   was reported as uninitialized;
// - a memcpy node of a CUDA graph has its source checked against the state before the kernels
//   ahead of it in the same graph ran, so a copy of a kernel's output was reported too.
// So before the steps are enqueued, each GEMM's and each cuDNN step's output (cuDNN's Hopper
// engines store through TMA too) and each copy's source inside the engine's scratch are declared
// initialized through NVTX's memory API. That is true by construction: the engine builder orders
// every reader after its writer, cuBLASLt writes all of D, cuDNN all of its output, and a copy's
// scratch source is written by an earlier step. Copies from the caller's buffers are not declared:
// an uninitialized input is still reported. The declaration names the legacy default stream, not
// the caller's: initcheck crashes the process when it gets a green context's stream (the probe's
// "context markgreen"). With no tool attached the call returns at once and allocates nothing.
void ExecutionContext::declare_library_writes(std::span<void* const> pointers) {
  if (library_writes_.empty()) return;
  size_t n = 0;
  for (const StepRecord& r : steps()) {
    if (r.kind == static_cast<uint32_t>(StepKind::Gemm)) {
      library_writes_[n++] = {static_cast<size_t>(r.gemm.d.bytes), resolve(r.gemm.d, pointers)};
    } else if (is_cudnn_step(r.kind)) {
      // The output is the last of the step's tensors.
      BufferRef refs[5];
      const BufferRef& out = refs[cudnn_operands(r, refs) - 1];
      library_writes_[n++] = {static_cast<size_t>(out.bytes), resolve(out, pointers)};
    } else if (r.kind == static_cast<uint32_t>(StepKind::Copy) &&
               r.copy.src.space == static_cast<uint32_t>(Space::Scratch)) {
      library_writes_[n++] = {static_cast<size_t>(r.copy.src.bytes), resolve(r.copy.src, pointers)};
    }
  }
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = n;
  batch.regionDescElementSize = sizeof(nvtxMemVirtualRangeDesc_t);
  batch.regionDescElements = library_writes_.data();
  nvtxMemCudaMarkInitialized(runtime::nvtx_domain(), nullptr, 0, &batch);
}

Status ExecutionContext::enqueue(std::span<void* const> pointers, cudaStream_t stream,
                                 std::optional<unsigned long long> stream_id, bool use_graph,
                                 std::span<const cudaEvent_t> step_marks) {
  declare_library_writes(pointers);
  if (engine_->blob().steps().empty()) return Status();
  // A profile of the steps times each launch on its own: no graph.
  if (!step_marks.empty()) use_graph = false;
  // Steps launched here (not replayed from a graph) must be patched for the call's sizes: resize
  // skips that when the shape's graph is kept.
  auto patched = [&]() -> Status {
    if (!dynamic_ || std::equal(symbols_.begin(), symbols_.end(), patched_.begin())) {
      return Status();
    }
    return patch(symbols_);
  };
  if (!use_graph && !cudnn_) {
    BATON_TRY(patched());
    return enqueue_steps(pointers, stream, step_marks);
  }
  const int device = engine_->device();
  BATON_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
  // A graph executes in the context it was instantiated in: a green context's stream needs a
  // graph of its own, or its kernels would leave the green context's SMs.
  // A stream's context never changes: asked once per stream (by id; a handle may be reused).
  CUcontext context = nullptr;
  if (stream_id && context_stream_id_ == stream_id) {
    context = static_cast<CUcontext>(context_of_stream_);
  } else {
    BATON_CUDA_CHECK_ON(device, api->cuStreamGetCtx(reinterpret_cast<CUstream>(stream), &context));
    context_stream_id_ = stream_id;
    context_of_stream_ = context;
  }
  // cuDNN enqueues a plan in the context current on the calling thread: with a green context's
  // stream and the primary context current, cuDNN 9.19 fails ("cuCtxPushCurrent returned error
  // invalid device context", H100). So engines with cuDNN steps enqueue with the stream's
  // context current.
  std::optional<ContextGuard> cudnn_context;
  if (cudnn_) {
    cudnn_context.emplace(*api, context);
    BATON_TRY(cudnn_context->status());
  }
  if (!use_graph) {
    BATON_TRY(patched());
    return enqueue_steps(pointers, stream, step_marks);
  }
  // The graph of this call's shape: a static engine's only one, a dynamic engine's as resize
  // found it (-1: none kept for these sizes).
  const int found = dynamic_ ? current_graph_ : (graphs_.empty() ? -1 : 0);
  // Replay only what was captured with exactly these addresses: a graph bakes its pointers in.
  if (found >= 0) {
    ShapeGraph& g = graphs_[static_cast<size_t>(found)];
    if (g.context == context &&
        std::equal(pointers.begin(), pointers.end(), g.pointers.begin(), g.pointers.end())) {
      g.last_use = ++graph_clock_;
      BATON_CUDA_CHECK_ON(device, cudaGraphLaunch(g.exec.get(), stream));
      return Status();
    }
  }
  BATON_TRY(patched());
  return capture_and_launch(pointers, stream, context, found);
}

Status ExecutionContext::capture_and_launch(std::span<void* const> pointers, cudaStream_t stream,
                                            void* context, int found, bool launch) {
  const int device = engine_->device();
  BATON_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
  // Where the graph goes: the shape's own entry (its pointers or stream context changed), a new
  // entry while there is room, else the least recently used shape's entry. A new entry is added,
  // and a replacement counted, once the capture succeeded.
  size_t slot = 0;
  const bool fresh = found < 0 && graphs_.size() < graph_shapes_;
  if (found >= 0) {
    slot = static_cast<size_t>(found);
  } else if (fresh) {
    slot = graphs_.size();
  } else {
    for (size_t i = 1; i < graphs_.size(); ++i) {
      if (graphs_[i].last_use < graphs_[slot].last_use) slot = i;
    }
  }
  // A dynamic engine's size-only steps run now, outside the graph, into the entry's copy of the
  // size-only block; the graph's steps read that copy. An entry taken from another shape holds
  // nothing valid from here on until its new graph is in place.
  const bool size_block = size_hi_ > size_lo_;
  DeviceBuffer fresh_values;
  if (size_block) {
    uint8_t* base = nullptr;
    if (fresh) {
      BATON_ASSIGN_OR_RETURN(
          fresh_values,
          allocate_device_buffer(device, size_hi_ - size_lo_,
                                 fmt::format("size-only values of partition '{}' for one shape",
                                             engine_->partition())));
      base = static_cast<uint8_t*>(fresh_values.get());
    } else {
      ShapeGraph& taken = graphs_[slot];
      if (found < 0) {
        // Another shape's graph, whose size-only values are overwritten below: it can no longer
        // run, and once its symbols are cleared nothing protects the cuDNN plans it holds from
        // being freed (fit_cudnn), so it goes now rather than be updated in place later (or
        // linger, should this capture fail).
        taken.exec.reset();
        taken.symbols.clear();
        taken.pointers.clear();
      }
      base = static_cast<uint8_t*>(taken.size_values.get());
    }
    size_base_ = base;
  }
  struct ResetBase {
    uint8_t** base;
    ~ResetBase() { *base = nullptr; }
  } reset_base{&size_base_};
  if (size_block) {
    BATON_TRY(enqueue_steps(pointers, stream, {}, nullptr, StepSet::SizeOnly));
  }
  BATON_CUDA_CHECK_ON(device, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::vector<cudaGraphNode_t> own_nodes;  // recorded only for GraphEdges::Own
  const Status captured =
      enqueue_steps(pointers, stream, {}, graph_edges_ == GraphEdges::Own ? &own_nodes : nullptr,
                    size_block ? StepSet::Rest : StepSet::All);
  cudaGraph_t captured_graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &captured_graph);
  Graph graph(captured_graph, device);
  BATON_TRY(captured);
  BATON_CUDA_CHECK_ON(device, ended);
  ++graph_captures_;
  if (fresh) {
    graphs_.emplace_back();  // (capacity reserved at create: no entry moves)
    if (fresh_values) {
      size_value_bytes_ += size_hi_ - size_lo_;
      graphs_.back().size_values = std::move(fresh_values);
    }
  } else if (found < 0) {
    ++graph_replacements_;
  }
  ShapeGraph& g = graphs_[slot];
  // The libraries' programmatic edges become full dependencies (the load option graph_edges).
  BATON_ASSIGN_OR_RETURN(
      const uint32_t edges,
      programmatic_edges(graph.get(), device, graph_edges_ == GraphEdges::Own, own_nodes));
  log_message(
      LogLevel::Debug, "cuda",
      fmt::format("partition '{}': the captured graph has {} programmatic edges, all {}"
                  "made full dependencies",
                  engine_->partition(), edges,
                  graph_edges_ == GraphEdges::Own ? "but those into its generated kernels " : ""));
  // An executable graph is updated in place when it can be: the engine's graphs have the same
  // nodes at every shape (the kernels' arguments and cuBLASLt's choices may differ), and an
  // update is cheaper than instantiating again.
  if (g.exec && g.context == context) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(g.exec.get(), graph.get(), &info) != cudaSuccess) {
      cudaGetLastError();
      g.exec.reset();
    }
  } else {
    g.exec.reset();
  }
  if (!g.exec) {
    // The entry holds no graph until one is instantiated: a failure leaves it unused.
    g.symbols.clear();
    g.pointers.clear();
    cudaGraphExec_t instantiated = nullptr;
    cudaError_t e = cudaSuccess;
    {
      ContextGuard in_stream_context(*api, static_cast<CUcontext>(context));
      BATON_TRY(in_stream_context.status());
      e = cudaGraphInstantiate(&instantiated, graph.get(), 0);
    }
    if (e != cudaSuccess) {
      return BATON_ERROR(DeviceError,
                         "partition '{}': cudaGraphInstantiate failed on cuda:{}: {}. Set "
                         "BATON_CUDA_GRAPHS=0 (or the load option cuda_graphs=0) to launch its "
                         "steps without a graph",
                         engine_->partition(), device, status_string(e));
    }
    g.exec = GraphExec(instantiated, device);
  }
  g.context = context;
  g.pointers.assign(pointers.begin(), pointers.end());
  g.symbols.assign(symbols_.begin(), symbols_.end());
  g.binding_sizes.assign(binding_sizes_.begin(), binding_sizes_.end());
  g.binding_bytes.assign(binding_bytes_.begin(), binding_bytes_.end());
  g.last_use = ++graph_clock_;
  if (dynamic_) current_graph_ = static_cast<int>(slot);
  // The counters only report: a graph that cannot be counted reports 0 and still runs.
  if (!count_graph_nodes(graph.get(), device, graph_nodes_, graph_kernels_).ok()) {
    cudaGetLastError();
    graph_nodes_ = graph_kernels_ = 0;
  }
  graph.reset();  // the executable graph does not need it
  if (!launch) {
    // Prepared ahead of its calls: the graph's upload to the device is done now rather than at
    // its first launch.
    BATON_CUDA_CHECK_ON(device, cudaGraphUpload(g.exec.get(), stream));
    return Status();
  }
  BATON_CUDA_CHECK_ON(device, cudaGraphLaunch(g.exec.get(), stream));
  return Status();
}

}  // namespace baton::cuda
