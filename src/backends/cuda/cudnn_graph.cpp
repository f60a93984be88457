#include "backends/cuda/cudnn_graph.h"

#include <cudnn_frontend.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cuda/device.h"
#include "baton/core/check.h"
#include "baton/core/log.h"

// cudnn-frontend's dynamic loading resolves every cuDNN call in this library handle, which its
// user opens (load_cudnn below).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace baton::cuda {
namespace fe = cudnn_frontend;

namespace {

std::atomic<uint32_t> g_loaded_version{0};

// cudnn-frontend reports a missing libcudnn (or a symbol it lacks) by throwing.
constexpr const char* kHowToGetCudnn =
    "Baton loads cuDNN 9 (libcudnn.so.9) at run time for convolutions, attention and GEMMs with "
    "an erf-GELU (fp16 and bf16; BATON_GEMM_GELU=kernel when compiling keeps those on cuBLASLt): "
    "install it "
    "(e.g. the nvidia-cudnn-cu13 wheel or the cudnn9-cuda-13 package) and put its lib folder on "
    "LD_LIBRARY_PATH";

Result<fe::DataType_t> data_type(uint8_t dtype, const std::string& what) {
  switch (static_cast<DType>(dtype)) {
    case DType::Float32:
      return fe::DataType_t::FLOAT;
    case DType::Float16:
      return fe::DataType_t::HALF;
    case DType::BFloat16:
      return fe::DataType_t::BFLOAT16;
    default:
      return BATON_ERROR(NotSupported,
                         "{}: cuDNN convolutions take float32, float16 or bfloat16, "
                         "not dtype {}",
                         what, dtype);
  }
}

// N, C, H, W dimensions with channels-last strides.
std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) {
  return {h * w * c, 1, w * c, c};
}

}  // namespace

// Opens libcudnn once per process; the dlerror text of a failure is kept for every later caller.
namespace {
Status load_cudnn() {
  static const std::string error = [] {
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      if (void* h = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) {
        fe::cudnn_dlhandle = h;
        return std::string();
      }
    }
    const char* e = dlerror();
    return std::string(e ? e : "dlopen failed");
  }();
  if (error.empty()) return Status();
  return BATON_ERROR(NotSupported, "cannot load cuDNN: {}. {}", error, kHowToGetCudnn);
}
}  // namespace

// --- handle ------------------------------------------------------------------------------------

Result<CudnnHandle> CudnnHandle::create(int device) {
  BATON_TRY(load_cudnn());
  DeviceGuard guard(device);
  BATON_TRY(guard.status());
  CudnnHandle h;
  try {
    const cudnnStatus_t st = fe::detail::create_handle(&h.handle_);
    BATON_CHECK_OR_RETURN(st == CUDNN_STATUS_SUCCESS, Internal, "cudnnCreate on cuda:{} failed: {}",
                          device, fe::detail::get_error_string(st));
    g_loaded_version.store(static_cast<uint32_t>(fe::detail::get_backend_version()));
  } catch (const std::exception& e) {
    return BATON_ERROR(NotSupported, "cannot load cuDNN: {}. {}", e.what(), kHowToGetCudnn);
  }
  h.device_ = device;
  return h;
}

CudnnHandle::~CudnnHandle() {
  if (handle_ == nullptr) return;
  DeviceGuard guard(device_);
  fe::detail::destroy_handle(handle_);
}

CudnnHandle::CudnnHandle(CudnnHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}

CudnnHandle& CudnnHandle::operator=(CudnnHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) {
      DeviceGuard guard(device_);
      fe::detail::destroy_handle(handle_);
    }
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

uint32_t loaded_cudnn_version() { return g_loaded_version.load(); }

// --- convolution plans -------------------------------------------------------------------------

namespace {

// A graph whose plans' numerical notes can be read: cudnn-frontend queries them with the
// heuristics but keeps them in a protected member, public only to filters.
class NotedGraph : public fe::graph::Graph {
 public:
  std::vector<fe::NumericalNote_t> notes_at(int64_t index) const {
    std::vector<fe::NumericalNote_t> out;
    if (index < 0 || index >= static_cast<int64_t>(plans.numeric_notes.size())) return out;
    for (const fe::NumericalNote_t note : plans.numeric_notes[index]) {
      if (note != fe::NumericalNote_t::NOT_SET) out.push_back(note);
    }
    return out;
  }
};

}  // namespace

struct CudnnPlan::Impl {
  NotedGraph graph;
  int64_t workspace = 0;
  std::string engine;
  CudnnChoice choice;

  // Once the plan to execute is built: its workspace size and its name.
  Status finish(const std::string& what) {
    BATON_CHECK_OR_RETURN(graph.get_workspace_size(workspace).is_good(), Internal,
                          "{}: cuDNN did not report the plan's workspace size", what);
    std::string name;
    if (graph.get_plan_name(name).is_good()) engine = name;
    return Status();
  }
};

namespace {

// Tensor uids: the order execute() takes its pointers in (cudnn_operands').
enum Uid : int64_t { kX = 1, kW = 2, kBias = 3, kResidual = 4, kY = 5 };
enum SdpaUid : int64_t { kQ = 1, kK = 2, kV = 3, kAttnBias = 4, kO = 5 };

// Candidates needing more workspace than this are not timed.
constexpr int64_t kMaxTimedWorkspace = int64_t{256} << 20;

// What a step is, for errors: "this convolution (1x56x56x64 NHWC -> K=64, ...)".
std::string step_text(const StepRecord& r) {
  if (r.kind == static_cast<uint32_t>(StepKind::Sdpa)) {
    const SdpaStep& a = r.sdpa;
    return fmt::format("this attention (B={} H={} Sq={} Sk={} D={} Dv={} {}, mask {})", a.b, a.h,
                       a.sq, a.sk, a.d, a.dv, dtype_name(static_cast<DType>(a.dtype)),
                       sdpa_mask_name(static_cast<SdpaMask>(a.mask)));
  }
  if (r.kind == static_cast<uint32_t>(StepKind::Matmul)) {
    const GemmStep& g = r.gemm;
    return fmt::format("this matmul ([{}, {}] x [{}, {}] {}, epilogue {})", g.n, g.k, g.k, g.m,
                       dtype_name(static_cast<DType>(g.a_dtype)),
                       epilogue_name(static_cast<GemmEpilogue>(g.epilogue)));
  }
  const ConvStep& c = r.conv;
  return fmt::format(
      "this convolution ({}x{}x{}x{} NHWC -> K={}, {}x{} stride {}x{} groups {}, {})", c.n, c.in_h,
      c.in_w, c.c, c.k, c.kernel_h, c.kernel_w, c.stride_h, c.stride_w, c.groups,
      precision_name(static_cast<Precision>(c.compute)));
}

// For a matmul, how to do without it.
std::string fallback_hint(const StepRecord& r) {
  return r.kind == static_cast<uint32_t>(StepKind::Matmul)
             ? " (compile with BATON_GEMM_GELU=kernel in the environment to run it on cuBLASLt "
               "and a GELU kernel instead)"
             : "";
}

Status check(fe::error_t e, const char* stage, const StepRecord& r, const std::string& what) {
  if (e.is_good()) return Status();
  return BATON_ERROR(NotSupported, "{}: cuDNN cannot run {}: {} failed: {}{}", what, step_text(r),
                     stage, e.get_message(), fallback_hint(r));
}

// Strict fp32: no TF32 tensor cores (inputs rounded to 10 bits), for chosen and replayed plans.
void restrict_numerics(fe::graph::Graph& g, const StepRecord& r) {
  if (r.kind == static_cast<uint32_t>(StepKind::Conv) &&
      static_cast<Precision>(r.conv.compute) == Precision::FP32 &&
      static_cast<DType>(r.conv.x_dtype) == DType::Float32) {
    g.deselect_numeric_notes(
        {fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
  }
}

std::shared_ptr<fe::graph::Tensor_attributes> add_tensor(fe::graph::Graph& g, const char* name,
                                                         int64_t uid, fe::DataType_t type,
                                                         std::vector<int64_t> dims,
                                                         std::vector<int64_t> strides) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_data_type(type)
                      .set_dim(std::move(dims))
                      .set_stride(std::move(strides)));
}

Status conv_graph(fe::graph::Graph& g, const ConvStep& c, const std::string& what);

// Matmul: the GemmStep's column-major D[m, n] = op(A)[m, k] op(B)[k, n] is row-major
// D[n, m] = op(B)^T[n, k] op(A)^T[k, m], which cuDNN's matmul takes as it is (strides for each
// transpose), then the bias along m and the erf-GELU as pointwise operations.
Status matmul_graph(fe::graph::Graph& g, const GemmStep& s, const std::string& what) {
  BATON_ASSIGN_OR_RETURN(const fe::DataType_t type, data_type(s.a_dtype, what));
  g.set_io_data_type(type)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // One batch (the engine format checks it): the leading dimension of size 1 gets any stride.
  const int64_t m = s.m, n = s.n, k = s.k;
  // op(B)^T [n, k]: B is [k, n] (or [n, k] transposed) column-major with leading dimension ldb.
  // Uids in cudnn_operands' order: the step's A (cuDNN's right operand), B (its left), bias, D.
  auto left = add_tensor(
      g, "b", kW, type, {1, n, k},
      s.trans_b ? std::vector<int64_t>{n * k, 1, s.ldb} : std::vector<int64_t>{n * k, s.ldb, 1});
  auto right = add_tensor(
      g, "a", kX, type, {1, k, m},
      s.trans_a ? std::vector<int64_t>{k * m, 1, s.lda} : std::vector<int64_t>{k * m, s.lda, 1});
  auto y = g.matmul(left, right, fe::graph::Matmul_attributes().set_name("matmul"));
  y->set_data_type(fe::DataType_t::FLOAT);
  const auto epilogue = static_cast<GemmEpilogue>(s.epilogue);
  if (epilogue_has_bias(epilogue)) {
    BATON_ASSIGN_OR_RETURN(const fe::DataType_t b_type, data_type(s.bias_dtype, what));
    y = g.pointwise(
        y, add_tensor(g, "bias", kBias, b_type, {1, 1, m}, {m, m, 1}),
        fe::graph::Pointwise_attributes().set_name("bias").set_mode(fe::PointwiseMode_t::ADD));
    y->set_data_type(fe::DataType_t::FLOAT);
  }
  if (epilogue == GemmEpilogue::BiasGeluErf) {
    y = g.pointwise(y, fe::graph::Pointwise_attributes().set_name("gelu").set_mode(
                           fe::PointwiseMode_t::GELU_FWD));
  }
  BATON_ASSIGN_OR_RETURN(const fe::DataType_t d_type, data_type(s.d_dtype, what));
  y->set_output(true).set_uid(kY).set_data_type(d_type).set_dim({1, n, m}).set_stride(
      {n * m, s.ldd, 1});
  return Status();
}

// Attention: cuDNN's SDPA node over [B, H, S, D] tensors with the step's strides.
Status sdpa_graph(fe::graph::Graph& g, const SdpaStep& a, const std::string& what) {
  BATON_ASSIGN_OR_RETURN(const fe::DataType_t type, data_type(a.dtype, what));
  g.set_io_data_type(type)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = a.b, h = a.h, sq = a.sq, sk = a.sk;
  auto strided = [](const int64_t(&st)[3]) { return std::vector<int64_t>{st[0], st[1], st[2], 1}; };
  auto q = add_tensor(g, "q", kQ, type, {b, h, sq, a.d}, strided(a.q_strides));
  auto k = add_tensor(g, "k", kK, type, {b, h, sk, a.d}, strided(a.k_strides));
  auto v = add_tensor(g, "v", kV, type, {b, h, sk, a.dv}, strided(a.v_strides));
  auto options =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(
          a.scale);
  switch (static_cast<SdpaMask>(a.mask)) {
    case SdpaMask::None:
      break;
    case SdpaMask::Causal:
      options.set_causal_mask(true);
      break;
    case SdpaMask::Bias: {
      const int64_t bb = a.bias_batch ? b : 1, bh = a.bias_heads ? h : 1;
      options.set_bias(
          add_tensor(g, "bias", kAttnBias, type, {bb, bh, sq, sk}, {bh * sq * sk, sq * sk, sk, 1}));
      break;
    }
  }
  auto outputs = g.sdpa(q, k, v, options);
  outputs[0]
      ->set_output(true)
      .set_uid(kO)
      .set_data_type(type)
      .set_dim({b, h, sq, a.dv})
      .set_stride(strided(a.o_strides));
  return Status();
}

// The operation graph of step `r` and the plans cuDNN's heuristics (mode A, then FALLBACK) offer
// for it, strict fp32's filter applied; none built yet.
Status offer_plans(fe::graph::Graph& g, cudnnHandle_t handle, const StepRecord& r,
                   const std::string& what) {
  if (r.kind == static_cast<uint32_t>(StepKind::Sdpa)) {
    BATON_TRY(sdpa_graph(g, r.sdpa, what));
  } else if (r.kind == static_cast<uint32_t>(StepKind::Matmul)) {
    BATON_TRY(matmul_graph(g, r.gemm, what));
  } else {
    BATON_TRY(conv_graph(g, r.conv, what));
  }
  BATON_TRY(check(g.validate(), "validate", r, what));
  BATON_TRY(check(g.build_operation_graph(handle), "build_operation_graph", r, what));
  BATON_TRY(check(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
                  "create_execution_plans", r, what));
  restrict_numerics(g, r);
  BATON_TRY(check(g.check_support(handle), "check_support", r, what));
  return Status();
}

// Convolution: conv_fprop, then the bias, residual and activation as pointwise operations.
Status conv_graph(fe::graph::Graph& g, const ConvStep& c, const std::string& what) {
  BATON_ASSIGN_OR_RETURN(const fe::DataType_t x_type, data_type(c.x_dtype, what));
  BATON_ASSIGN_OR_RETURN(const fe::DataType_t w_type, data_type(c.w_dtype, what));
  BATON_ASSIGN_OR_RETURN(const fe::DataType_t y_type, data_type(c.y_dtype, what));
  g.set_io_data_type(x_type)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, Uid uid, fe::DataType_t type, std::vector<int64_t> dims,
                    std::vector<int64_t> strides) {
    return add_tensor(g, name, uid, type, std::move(dims), std::move(strides));
  };
  // `mode` of a and b as an fp32 intermediate.
  auto binary = [&](std::shared_ptr<fe::graph::Tensor_attributes> a,
                    std::shared_ptr<fe::graph::Tensor_attributes> b, fe::PointwiseMode_t mode,
                    const char* name) {
    auto out = g.pointwise(a, b, fe::graph::Pointwise_attributes().set_name(name).set_mode(mode));
    out->set_data_type(fe::DataType_t::FLOAT);
    return out;
  };
  const int64_t cg = c.c / c.groups;
  auto x = tensor("x", kX, x_type, {c.n, c.c, c.in_h, c.in_w}, nhwc_strides(c.c, c.in_h, c.in_w));
  auto w = tensor("w", kW, w_type, {c.k, cg, c.kernel_h, c.kernel_w},
                  nhwc_strides(cg, c.kernel_h, c.kernel_w));
  auto options = fe::graph::Conv_fprop_attributes()
                     .set_name("conv")
                     .set_pre_padding({c.pad_top, c.pad_left})
                     .set_post_padding({c.pad_bottom, c.pad_right})
                     .set_stride({c.stride_h, c.stride_w})
                     .set_dilation({c.dilation_h, c.dilation_w});
  auto y = g.conv_fprop(x, w, options);
  y->set_data_type(fe::DataType_t::FLOAT);
  if (c.has_bias) {
    BATON_ASSIGN_OR_RETURN(const fe::DataType_t b_type, data_type(c.bias_dtype, what));
    y = binary(y, tensor("bias", kBias, b_type, {1, c.k, 1, 1}, {c.k, 1, c.k, c.k}),
               fe::PointwiseMode_t::ADD, "bias");
  }
  if (c.has_residual) {
    y = binary(y,
               tensor("residual", kResidual, y_type, {c.n, c.k, c.out_h, c.out_w},
                      nhwc_strides(c.k, c.out_h, c.out_w)),
               fe::PointwiseMode_t::ADD, "residual");
  }
  switch (static_cast<ConvActivation>(c.activation)) {
    case ConvActivation::None:
      break;
    case ConvActivation::Relu:
      y = g.pointwise(y, fe::graph::Pointwise_attributes().set_name("relu").set_mode(
                             fe::PointwiseMode_t::RELU_FWD));
      break;
    case ConvActivation::HardSwish:
    case ConvActivation::HardSigmoid: {
      // cuDNN has no hard activations: alpha t + beta, clipped to [0, 1] by a ReLU with an upper
      // clip, times t for HardSwish; alpha and beta are scalars passed by value.
      auto scalar = [&](float v) { return g.tensor(v, fe::graph::ScalarType::RUNTIME_PARAM); };
      auto t = binary(y, scalar(c.act_alpha), fe::PointwiseMode_t::MUL, "alpha");
      t = binary(t, scalar(c.act_beta), fe::PointwiseMode_t::ADD, "beta");
      t = g.pointwise(t, fe::graph::Pointwise_attributes()
                             .set_name("clip")
                             .set_mode(fe::PointwiseMode_t::RELU_FWD)
                             .set_relu_lower_clip(0.0f)
                             .set_relu_upper_clip(1.0f));
      if (static_cast<ConvActivation>(c.activation) == ConvActivation::HardSwish) {
        t->set_data_type(fe::DataType_t::FLOAT);
        t = binary(y, t, fe::PointwiseMode_t::MUL, "hardswish");
      }
      y = t;
      break;
    }
  }
  y->set_output(true)
      .set_uid(kY)
      .set_data_type(y_type)
      .set_dim({c.n, c.k, c.out_h, c.out_w})
      .set_stride(nhwc_strides(conv_y_pitch(c), c.out_h, c.out_w));
  return Status();
}

// The name and engine of plan `index` of `g`.
Result<CudnnChoice> choice_at(const fe::graph::Graph& g, int64_t index, const std::string& what) {
  CudnnChoice choice;
  std::unordered_map<fe::KnobType_t, int64_t> knobs;
  fe::error_t e = g.get_engine_and_knobs_at_index(index, choice.engine, knobs);
  if (e.is_good()) e = g.get_plan_name_at_index(index, choice.plan);
  BATON_CHECK_OR_RETURN(e.is_good(), Internal, "{}: cuDNN did not name plan {}: {}", what, index,
                        e.get_message());
  BATON_CHECK_OR_RETURN(choice.plan.size() < sizeof(StepChoice::cudnn_plan), NotSupported,
                        "{}: cuDNN's name for plan {} is {} bytes; Baton records at most {}", what,
                        index, choice.plan.size(), sizeof(StepChoice::cudnn_plan) - 1);
  return choice;
}

// The step's operand pointers in uid order inside `base` (each range 256-byte aligned); the bytes
// needed.
uint64_t operand_layout(const StepRecord& r, uint8_t* base, void** pointers, int* n) {
  BufferRef refs[5];
  *n = cudnn_operands(r, refs);
  uint64_t offset = 0;
  for (int i = 0; i < *n; ++i) {
    pointers[i] = base + offset;
    offset += (refs[i].bytes + 255) / 256 * 256;
  }
  return offset;
}

// The operands of the step being chosen: `pointers` into `base` (`bytes` in all), where plans are
// timed on Stopwatch::kTimingByte in every byte, as they always were; `check`, laid out the same,
// holds random inputs and a fixed pattern in the output, copied over `base` for each plan's checked
// run.
struct StepOperands {
  void* pointers[5];
  int n = 0;
  void* base = nullptr;
  const void* check = nullptr;
  uint64_t bytes = 0;
  uint64_t out_bytes = 0;
};

// Plan `index` (built) of `g`: timed, then run once more as a step of an engine runs, for its
// output (`out`): on the checked operands (the output overwritten with a fixed pattern, so an
// element the plan does not write shows), captured in a CUDA graph after a node that overwrites
// the workspace with non-zero bytes (the engine's steps share one workspace, and its graph replays
// what was captured). An error when the plan cannot run here or cannot be captured.
Result<float> try_plan(fe::graph::Graph& g, cudnnHandle_t handle, int64_t index, StepOperands& ops,
                       Stopwatch& stopwatch, std::vector<uint8_t>* out) {
  int64_t workspace_size = 0;
  if (g.get_workspace_size_plan_at_index(index, workspace_size).is_bad() ||
      workspace_size > kMaxTimedWorkspace) {
    return BATON_ERROR(NotSupported, "workspace of {} bytes", workspace_size);
  }
  const uint64_t workspace_bytes = static_cast<uint64_t>(std::max<int64_t>(workspace_size, 1));
  BATON_ASSIGN_OR_RETURN(void* workspace, stopwatch.workspace(workspace_bytes));
  auto run = [&](cudaStream_t stream) -> Status {
    BATON_CHECK_OR_RETURN(fe::detail::set_stream(handle, stream) == CUDNN_STATUS_SUCCESS, Internal,
                          "cudnnSetStream failed");
    fe::error_t e = g.execute_plan_at_index(handle, ops.pointers, ops.n, workspace, index);
    BATON_CHECK_OR_RETURN(e.is_good(), NotSupported, "{}", e.get_message());
    return Status();
  };
  BATON_TRY(stopwatch.set_bytes(ops.base, ops.bytes, Stopwatch::kTimingByte));
  BATON_ASSIGN_OR_RETURN(const float us, stopwatch.time(run));
  BATON_TRY(stopwatch.copy(ops.base, ops.check, ops.bytes));
  BATON_TRY(stopwatch.replay_captured([&](cudaStream_t stream) -> Status {
    BATON_TRY(stopwatch.set_bytes(workspace, workspace_bytes, Stopwatch::kScribbleByte));
    return run(stream);
  }));
  BATON_TRY(stopwatch.download(ops.pointers[ops.n - 1], ops.out_bytes, out));
  return us;
}

// The DType of each of the step's operands, in cudnn_operands' order (the output last).
int operand_dtypes(const StepRecord& r, DType (&out)[5]) {
  int n = 0;
  auto add = [&](uint8_t dtype) { out[n++] = static_cast<DType>(dtype); };
  if (r.kind == static_cast<uint32_t>(StepKind::Conv)) {
    const ConvStep& c = r.conv;
    add(c.x_dtype);
    add(c.w_dtype);
    if (c.has_bias) add(c.bias_dtype);
    if (c.has_residual) add(c.y_dtype);
    add(c.y_dtype);
  } else if (r.kind == static_cast<uint32_t>(StepKind::Sdpa)) {
    const SdpaStep& a = r.sdpa;
    for (int i = 0; i < 3 + (static_cast<SdpaMask>(a.mask) == SdpaMask::Bias); ++i) add(a.dtype);
    add(a.dtype);
  } else {
    const GemmStep& g = r.gemm;
    add(g.a_dtype);
    add(g.b_dtype);
    if (epilogue_has_bias(static_cast<GemmEpilogue>(g.epilogue))) add(g.bias_dtype);
    add(g.d_dtype);
  }
  return n;
}

// How far two correct plans of step `r` may disagree (agreement_tolerance for its types).
float step_tolerance(const StepRecord& r) {
  if (r.kind == static_cast<uint32_t>(StepKind::Conv)) {
    return agreement_tolerance(static_cast<DType>(r.conv.x_dtype),
                               static_cast<DType>(r.conv.y_dtype),
                               static_cast<Precision>(r.conv.compute) == Precision::TF32);
  }
  if (r.kind == static_cast<uint32_t>(StepKind::Sdpa)) {
    return agreement_tolerance(static_cast<DType>(r.sdpa.dtype), static_cast<DType>(r.sdpa.dtype),
                               false);
  }
  return agreement_tolerance(static_cast<DType>(r.gemm.a_dtype), static_cast<DType>(r.gemm.d_dtype),
                             static_cast<Precision>(r.gemm.compute) == Precision::TF32);
}

std::string_view note_name(fe::NumericalNote_t note) {
  switch (note) {
    case fe::NumericalNote_t::TENSOR_CORE:
      return "tensor-core";
    case fe::NumericalNote_t::DOWN_CONVERT_INPUTS:
      return "down-convert-inputs";
    case fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION:
      return "reduced-precision-reduction";
    case fe::NumericalNote_t::FFT:
      return "fft";
    case fe::NumericalNote_t::NONDETERMINISTIC:
      return "nondeterministic";
    case fe::NumericalNote_t::WINOGRAD:
      return "winograd";
    case fe::NumericalNote_t::WINOGRAD_TILE_4x4:
      return "winograd-4x4";
    case fe::NumericalNote_t::WINOGRAD_TILE_6x6:
      return "winograd-6x6";
    case fe::NumericalNote_t::WINOGRAD_TILE_13x13:
      return "winograd-13x13";
    case fe::NumericalNote_t::STRICT_NAN_PROP:
      return "strict-nan-prop";
    default:
      return "?";
  }
}

bool has_note(const std::vector<fe::NumericalNote_t>& notes, fe::NumericalNote_t note) {
  return std::find(notes.begin(), notes.end(), note) != notes.end();
}

// Plans computing by a transform (FFT, Winograd) round differently from a direct product: they
// are checked against one that does not, never the reference themselves.
bool transforms(const std::vector<fe::NumericalNote_t>& notes) {
  for (const fe::NumericalNote_t note : notes) {
    switch (note) {
      case fe::NumericalNote_t::FFT:
      case fe::NumericalNote_t::WINOGRAD:
      case fe::NumericalNote_t::WINOGRAD_TILE_4x4:
      case fe::NumericalNote_t::WINOGRAD_TILE_6x6:
      case fe::NumericalNote_t::WINOGRAD_TILE_13x13:
        return true;
      default:
        break;
    }
  }
  return false;
}

std::string notes_text(const std::vector<fe::NumericalNote_t>& notes) {
  std::string out;
  for (const fe::NumericalNote_t note : notes) {
    out += fmt::format("{}{}", out.empty() ? "" : ",", note_name(note));
  }
  return out.empty() ? "no notes" : out;
}

// A candidate plan that ran: its index, time and output on the step's random operands.
struct Trial {
  int64_t index = -1;
  float us = 0;
  bool transform = false;
  std::string name, notes;
  std::vector<uint8_t> output;
};

}  // namespace

Result<CudnnPlan> CudnnPlan::make(const std::string& what,
                                  const std::function<Status(Impl&)>& build) {
  CudnnPlan plan;
  plan.impl_ = std::make_unique<Impl>();
  try {
    BATON_TRY(build(*plan.impl_));
  } catch (const std::exception& e) {
    return BATON_ERROR(NotSupported, "{}: cuDNN: {}. {}", what, e.what(), kHowToGetCudnn);
  }
  return plan;
}

Result<CudnnPlan> CudnnPlan::choose(cudnnHandle_t handle, const StepRecord& step, int candidates,
                                    Stopwatch* stopwatch, const std::string& what) {
  return make(what, [&](Impl& impl) -> Status {
    NotedGraph& g = impl.graph;
    BATON_TRY(offer_plans(g, handle, step, what));
    const int64_t count = g.get_execution_plan_count();
    const bool timed = candidates > 1 && stopwatch != nullptr;
    // Timed on kTimingByte bytes; checked on a copy with random inputs in [0, 1) and a fixed
    // pattern in the output (so the gaps of a pitched output, which no plan writes, compare
    // equal).
    StepOperands ops;
    DType dtypes[5];
    BufferRef refs[5];
    const int n = cudnn_operands(step, refs);
    operand_dtypes(step, dtypes);
    const uint64_t output_bytes = refs[n - 1].bytes;
    if (timed) {
      ops.bytes = operand_layout(step, nullptr, ops.pointers, &ops.n);
      ops.out_bytes = output_bytes;
      BATON_ASSIGN_OR_RETURN(ops.base, stopwatch->operands(ops.bytes));
      BATON_ASSIGN_OR_RETURN(void* check, stopwatch->check_operands(ops.bytes));
      ops.check = check;
      void* check_pointers[5];
      operand_layout(step, static_cast<uint8_t*>(check), check_pointers, &ops.n);
      for (int i = 0; i < n; ++i) {
        // Inputs in [0, 1); the output a fixed pattern of its own.
        BATON_TRY(stopwatch->fill_uniform(check_pointers[i], refs[i].bytes, dtypes[i],
                                          i + 1 < n ? 1 + i : 0x5eed));
      }
      operand_layout(step, static_cast<uint8_t*>(ops.base), ops.pointers, &ops.n);
    }

    // Plans in the heuristics' order: up to `candidates` timed, and past them until one that does
    // not transform has run, the reference every other is checked against.
    std::vector<Trial> trials;
    int reference = -1;
    std::string failures;
    for (int64_t i = 0; i < count; ++i) {
      const bool enough = static_cast<int>(trials.size()) >= (timed ? candidates : 1);
      if (enough && (reference >= 0 || !timed)) break;
      const std::vector<fe::NumericalNote_t> notes = g.notes_at(i);
      // The graph's compute type is fp32: a plan that sums in fewer bits breaks that promise.
      if (has_note(notes, fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION)) {
        if (log_enabled(LogLevel::Debug)) {
          log_message(LogLevel::Debug, "cuda",
                      fmt::format("{}: cuDNN plan {} ({}): not timed, it reduces in reduced "
                                  "precision",
                                  what, i, notes_text(notes)));
        }
        failures +=
            fmt::format("\n  plan {}: reduces in reduced precision (Baton sums in fp32)", i);
        continue;
      }
      Trial t;
      t.index = i;
      t.transform = transforms(notes);
      if (enough && t.transform) continue;  // only a reference is wanted now
      fe::error_t built = g.build_plan_at_index(handle, i);
      if (built.is_bad()) {
        failures += fmt::format("\n  plan {}: {}", i, built.get_message());
        continue;
      }
      if (g.get_plan_name_at_index(i, t.name).is_bad()) t.name = fmt::format("plan {}", i);
      t.notes = notes_text(notes);
      if (timed) {
        Result<float> us = try_plan(g, handle, i, ops, *stopwatch, &t.output);
        if (!us.ok()) {
          failures += fmt::format("\n  plan {}: {}", i, us.status().message());
          continue;
        }
        t.us = *us;
      }
      if (reference < 0 && !t.transform) reference = static_cast<int>(trials.size());
      trials.push_back(std::move(t));
    }
    BATON_CHECK_OR_RETURN(!trials.empty(), NotSupported,
                          "{}: none of cuDNN's {} plans for {} builds or runs on this GPU{}:{}",
                          what, count, step_text(step), fallback_hint(step), failures);

    // The fastest whose output agrees with the reference's; every one when there is no reference
    // (all transform) or the reference's output is not finite.
    Fastest fastest;
    if (!timed) {
      fastest.index = trials.front().index;  // the heuristics' first plan that builds, untimed
    } else {
      const DType out_dtype = dtypes[n - 1];
      const uint64_t elements = output_bytes / dtype_size(out_dtype);
      const Trial* ref = reference >= 0 ? &trials[reference] : nullptr;
      if (ref != nullptr &&
          output_deviation(ref->output.data(), ref->output.data(), elements, out_dtype) != 0) {
        ref = nullptr;
      }
      const float tolerance = step_tolerance(step);
      for (const Trial& t : trials) {
        const float deviation =
            ref ? output_deviation(t.output.data(), ref->output.data(), elements, out_dtype) : 0;
        const bool agrees = deviation <= tolerance;
        if (log_enabled(LogLevel::Debug)) {
          log_message(
              LogLevel::Debug, "cuda",
              fmt::format(
                  "{}: cuDNN plan {} {} ({}): {:.2f} us, {}", what, t.index, t.name, t.notes, t.us,
                  ref == nullptr ? std::string("not checked (no reference)")
                  : &t == ref    ? std::string("the reference")
                                 : fmt::format("deviation {:.2e} from the reference "
                                                  "(tolerance {:.1e}){}",
                                               deviation, tolerance, agrees ? "" : ", rejected")));
        }
        if (!agrees) {
          log_message(
              LogLevel::Info, "cuda",
              fmt::format("{}: cuDNN plan {} ({}) rejected for {}: its output deviates by "
                          "{:.2e} of the largest value from plan {}'s (tolerance {:.1e})",
                          what, t.name, t.notes, step_text(step), deviation, ref->name, tolerance));
          continue;
        }
        fastest.offer(t.index, t.us);
      }
      fastest.timed = static_cast<uint32_t>(trials.size());
    }
    // Building it again makes it the plan execute() runs.
    BATON_TRY(
        check(g.build_plan_at_index(handle, fastest.index), "build_plan_at_index", step, what));
    BATON_ASSIGN_OR_RETURN(impl.choice, choice_at(g, fastest.index, what));
    impl.choice.time_us = fastest.us;
    impl.choice.candidates = fastest.timed;
    return impl.finish(what);
  });
}

Result<CudnnPlan> CudnnPlan::create(cudnnHandle_t handle, const StepRecord& step,
                                    const CudnnChoice& choice, const std::string& what) {
  return make(what, [&](Impl& impl) -> Status {
    fe::graph::Graph& g = impl.graph;
    BATON_TRY(offer_plans(g, handle, step, what));
    int64_t index = -1;
    for (int64_t i = 0; i < g.get_execution_plan_count() && index < 0; ++i) {
      std::string name;
      if (g.get_plan_name_at_index(i, name).is_good() && name == choice.plan) index = i;
    }
    BATON_CHECK_OR_RETURN(index >= 0, NotSupported,
                          "{}: cuDNN's heuristics do not offer plan '{}' for {}", what, choice.plan,
                          step_text(step));
    BATON_TRY(check(g.build_plan_at_index(handle, index), "build_plan_at_index (the chosen plan)",
                    step, what));
    impl.choice = choice;
    return impl.finish(what);
  });
}

Result<CudnnPlan> CudnnPlan::first_fitting(cudnnHandle_t handle, const StepRecord& step,
                                           uint64_t max_workspace, const std::string& what) {
  return make(what, [&](Impl& impl) -> Status {
    NotedGraph& g = impl.graph;
    BATON_TRY(offer_plans(g, handle, step, what));
    // In the heuristics' order; a plan that transforms (Winograd, FFT) only when no direct one
    // builds, as choose's reference: the result should round as the largest shape's plan does.
    std::string failures;
    int64_t chosen = -1;
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
        const std::vector<fe::NumericalNote_t> notes = g.notes_at(i);
        if (has_note(notes, fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION)) continue;
        if (pass == 0 && transforms(notes)) continue;
        if (pass == 1 && !transforms(notes)) continue;
        fe::error_t built = g.build_plan_at_index(handle, i);
        if (built.is_bad()) {
          failures += fmt::format("\n  plan {}: {}", i, built.get_message());
          continue;
        }
        int64_t bytes = 0;
        if (g.get_workspace_size_plan_at_index(i, bytes).is_bad() || bytes < 0 ||
            static_cast<uint64_t>(bytes) > max_workspace) {
          failures += fmt::format("\n  plan {}: needs {} bytes of workspace, {} are there", i,
                                  bytes, max_workspace);
          continue;
        }
        chosen = i;
        break;
      }
      if (chosen >= 0) break;
    }
    BATON_CHECK_OR_RETURN(chosen >= 0, NotSupported,
                          "{}: none of cuDNN's {} plans for {} builds on this GPU within the "
                          "engine's workspace{}:{}",
                          what, g.get_execution_plan_count(), step_text(step), fallback_hint(step),
                          failures);
    // execute() runs the last plan built, which is this one (the loop stops at it; choose builds
    // its winner again because it builds others after it).
    BATON_ASSIGN_OR_RETURN(impl.choice, choice_at(g, chosen, what));
    return impl.finish(what);
  });
}

CudnnPlan::CudnnPlan() = default;
CudnnPlan::~CudnnPlan() = default;
CudnnPlan::CudnnPlan(CudnnPlan&&) noexcept = default;
CudnnPlan& CudnnPlan::operator=(CudnnPlan&&) noexcept = default;

uint64_t CudnnPlan::workspace_bytes() const {
  return impl_ ? static_cast<uint64_t>(impl_->workspace) : 0;
}

const CudnnChoice& CudnnPlan::choice() const {
  static const CudnnChoice kNone;
  return impl_ ? impl_->choice : kNone;
}

const std::string& CudnnPlan::engine_name() const {
  static const std::string kNone;
  return impl_ ? impl_->engine : kNone;
}

Status CudnnPlan::enqueue(cudnnHandle_t handle, cudaStream_t stream, void** pointers, int count,
                          void* workspace) const {
  try {
    const cudnnStatus_t st = fe::detail::set_stream(handle, stream);
    BATON_CHECK_OR_RETURN(st == CUDNN_STATUS_SUCCESS, Internal, "cudnnSetStream failed: {}",
                          fe::detail::get_error_string(st));
    fe::error_t e = impl_->graph.execute(handle, pointers, count, workspace);
    BATON_CHECK_OR_RETURN(e.is_good(), Internal, "cuDNN {} failed: {}", impl_->engine,
                          e.get_message());
  } catch (const std::exception& e) {
    return BATON_ERROR(Internal, "cuDNN {} failed: {}", impl_->engine, e.what());
  }
  return Status();
}

}  // namespace baton::cuda
