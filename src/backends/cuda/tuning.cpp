#include "backends/cuda/tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/engine.h"
#include "baton/core/log.h"

namespace baton::cuda {

namespace {

// Element `i` of `data` (of `dtype`: float32, float16 or bfloat16) as a float.
float element(const void* data, uint64_t i, DType dtype) {
  switch (dtype) {
    case DType::Float16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(data) + 2 * i, 2);
      return half_to_float(h);
    }
    case DType::BFloat16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const uint8_t*>(data) + 2 * i, 2);
      return bfloat16_to_float(b);
    }
    default: {
      float f;
      std::memcpy(&f, static_cast<const uint8_t*>(data) + 4 * i, 4);
      return f;
    }
  }
}

// The unit roundoff of `dtype`'s significand.
float unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return std::ldexp(1.0f, -11);
    case DType::BFloat16:
      return std::ldexp(1.0f, -8);
    default:
      return std::ldexp(1.0f, -24);
  }
}

}  // namespace

float output_deviation(const void* candidate, const void* reference, uint64_t count, DType dtype) {
  float largest_difference = 0, largest_reference = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const float c = element(candidate, i, dtype), r = element(reference, i, dtype);
    if (!std::isfinite(c) || !std::isfinite(r)) return std::numeric_limits<float>::infinity();
    largest_difference = std::max(largest_difference, std::fabs(c - r));
    largest_reference = std::max(largest_reference, std::fabs(r));
  }
  if (largest_difference == 0) return 0;
  if (largest_reference == 0) return std::numeric_limits<float>::infinity();
  return largest_difference / largest_reference;
}

float agreement_tolerance(DType inputs, DType output, bool tf32) {
  const float u =
      std::max({unit_roundoff(inputs), unit_roundoff(output), tf32 ? std::ldexp(1.0f, -11) : 0.0f});
  return std::max(8 * u, std::ldexp(1.0f, -12));
}

Result<Stopwatch> Stopwatch::create(int device) {
  Stopwatch w;
  w.device_ = device;
  cudaStream_t stream = nullptr;
  BATON_CUDA_CHECK_ON(device, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  w.stream_ = OwnedStream(stream, device);
  BATON_ASSIGN_OR_RETURN(w.start_, create_event(device));
  BATON_ASSIGN_OR_RETURN(w.stop_, create_event(device));
  return w;
}

Result<float> Stopwatch::time(const std::function<Status(cudaStream_t)>& run) {
  constexpr int kWarmup = 2;
  constexpr int kRuns = 8;
  cudaStream_t s = stream_.get();
  for (int i = 0; i < kWarmup; ++i) BATON_TRY(run(s));
  // The kRuns runs are captured in one CUDA graph and timed as one launch, as the engine replays
  // its steps. Enqueued one by one, the events also measured the host's time to enqueue each run
  // (cuDNN's execute takes several microseconds of host time, more than a small convolution's
  // GPU time): the timings of small steps were then the host's, and which candidate won was
  // chance (ResNet-50 at batch 1 ran 1.27x slower with 32 candidates timed than with 4). Work
  // that cannot be captured (the warm-up runs have shown it runs) is timed enqueued one by one,
  // as before.
  Result<GraphExec> graph = capture([&](cudaStream_t stream) -> Status {
    for (int i = 0; i < kRuns; ++i) BATON_TRY(run(stream));
    return Status();
  });
  if (!graph.ok()) cudaGetLastError();
  auto enqueue = [&]() -> Status {
    if (graph.ok()) {
      BATON_CUDA_CHECK_ON(device_, cudaGraphLaunch(graph->get(), s));
      return Status();
    }
    for (int i = 0; i < kRuns; ++i) BATON_TRY(run(s));
    return Status();
  };
  if (graph.ok()) BATON_TRY(enqueue());  // the graph's own first launch uploads it
  float best = 0;
  for (int round = 0; round < 2; ++round) {
    BATON_CUDA_CHECK_ON(device_, cudaEventRecord(start_.get(), s));
    BATON_TRY(enqueue());
    BATON_CUDA_CHECK_ON(device_, cudaEventRecord(stop_.get(), s));
    BATON_CUDA_CHECK_ON(device_, cudaEventSynchronize(stop_.get()));
    float ms = 0;
    BATON_CUDA_CHECK_ON(device_, cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    const float us = ms * 1000.0f / kRuns;
    best = round == 0 ? us : std::min(best, us);
  }
  return best;
}

Result<bool> Stopwatch::grow(DeviceBuffer* buffer, uint64_t* size, uint64_t bytes,
                             const char* what) {
  if (bytes <= *size) return false;
  buffer->reset();
  BATON_ASSIGN_OR_RETURN(*buffer, allocate_device_buffer(device_, bytes, what));
  *size = bytes;
  return true;
}

Result<void*> Stopwatch::operands(uint64_t bytes) {
  BATON_ASSIGN_OR_RETURN(const bool grown,
                         grow(&operands_, &operand_bytes_, bytes, "operands for timing choices"));
  if (grown) BATON_TRY(set_bytes(operands_.get(), bytes, kTimingByte));
  return operands_.get();
}

Status Stopwatch::set_bytes(void* p, uint64_t bytes, uint8_t value) {
  BATON_CUDA_CHECK_ON(device_, cudaMemsetAsync(p, value, bytes, stream_.get()));
  return Status();
}

Result<void*> Stopwatch::check_operands(uint64_t bytes) {
  BATON_TRY(grow(&check_operands_, &check_operand_bytes_, bytes, "operands for checking choices")
                .status());
  return check_operands_.get();
}

Status Stopwatch::copy(void* dst, const void* src, uint64_t bytes) {
  BATON_CUDA_CHECK_ON(device_,
                      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.get()));
  return Status();
}

Result<void*> Stopwatch::workspace(uint64_t bytes) {
  BATON_TRY(grow(&workspace_, &workspace_bytes_, bytes, "workspace for timing choices").status());
  return workspace_.get();
}

Status Stopwatch::fill_uniform(void* p, uint64_t bytes, DType dtype, uint32_t seed) {
  staging_.resize(bytes);
  const uint64_t size = dtype == DType::Float32 ? 4 : 2;
  uint64_t state = 0x9e3779b97f4a7c15ull ^ seed;
  for (uint64_t i = 0; i + size <= bytes; i += size) {
    // xorshift64*: the top 24 bits as a fraction in [0, 1).
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const float v = static_cast<float>((state * 0x2545f4914f6cdd1dull) >> 40) * 0x1p-24f;
    if (dtype == DType::Float32) {
      std::memcpy(&staging_[i], &v, 4);
    } else {
      const uint16_t h = dtype == DType::Float16 ? float_to_half(v) : float_to_bfloat16(v);
      std::memcpy(&staging_[i], &h, 2);
    }
  }
  BATON_CUDA_CHECK_ON(
      device_, cudaMemcpyAsync(p, staging_.data(), bytes, cudaMemcpyHostToDevice, stream_.get()));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(stream_.get()));
  return Status();
}

Result<GraphExec> Stopwatch::capture(const std::function<Status(cudaStream_t)>& enqueue) {
  cudaStream_t s = stream_.get();
  BATON_CUDA_CHECK_ON(device_, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status enqueued = enqueue(s);
  cudaGraph_t captured = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &captured);
  Graph graph(captured, device_);
  BATON_TRY(enqueued);
  if (ended != cudaSuccess) {
    cudaGetLastError();
    return BATON_ERROR(NotSupported, "cannot be captured in a CUDA graph: {}",
                       cudaGetErrorString(ended));
  }
  cudaGraphExec_t instantiated = nullptr;
  BATON_CUDA_CHECK_ON(device_, cudaGraphInstantiate(&instantiated, graph.get(), 0));
  return GraphExec(instantiated, device_);
}

Status Stopwatch::replay_captured(const std::function<Status(cudaStream_t)>& enqueue) {
  BATON_ASSIGN_OR_RETURN(GraphExec exec, capture(enqueue));
  BATON_CUDA_CHECK_ON(device_, cudaGraphLaunch(exec.get(), stream_.get()));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(stream_.get()));
  return Status();
}

Status Stopwatch::download(const void* p, uint64_t bytes, std::vector<uint8_t>* out) {
  out->resize(bytes);
  BATON_CUDA_CHECK_ON(
      device_, cudaMemcpyAsync(out->data(), p, bytes, cudaMemcpyDeviceToHost, stream_.get()));
  BATON_CUDA_CHECK_ON(device_, cudaStreamSynchronize(stream_.get()));
  return Status();
}

// --- an engine's choices (Engine's members that choose; the rest of Engine is engine.cpp) ----

namespace {

static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(StepChoice::cublaslt_algo));

// Operand pointers for timing a GEMM: each of A, B, C, D its own 256-byte aligned range of
// `base`; returns the bytes needed.
uint64_t gemm_operands(const GemmStep& g, uint8_t* base, void* pointers[4]) {
  uint64_t offset = 0;
  const BufferRef* refs[4] = {&g.a, &g.b, &g.c, &g.d};
  for (int i = 0; i < 4; ++i) {
    pointers[i] = base + offset;
    offset += (refs[i]->bytes + 255) / 256 * 256;
  }
  return offset;
}

}  // namespace

// Plans every GEMM and chooses every GEMM's algorithm and every cuDNN step's plan: the blob's
// recorded choices where they still apply (the same GPU model and library versions), else timed
// now among tune_candidates_ (or the heuristics' first, with one candidate). `gpu`: the engine's
// GPU's name, compared with the one the choices were timed on.
Status Engine::choose_algorithms(const std::string& gpu, bool quiet) {
  const EngineHeader& h = blob_.header();
  const std::string& partition = partition_;
  const size_t n = blob_.steps().size();
  gemms_.resize(n);
  gemm_times_.assign(n, {0.0f, 0u});
  cudnn_choices_.resize(n);
  // Planning needs a handle for the heuristics and the timing only; each execution context has
  // its own.
  const auto started = std::chrono::steady_clock::now();
  BATON_ASSIGN_OR_RETURN(const CublasLtHandle handle, create_cublaslt(device_));
  std::optional<Stopwatch> stopwatch;
  if (blob_.num_choice_steps() > 0 && tune_candidates_ > 1) {
    BATON_ASSIGN_OR_RETURN(Stopwatch w, Stopwatch::create(device_));
    stopwatch.emplace(std::move(w));
  }
  // Recorded choices apply on the GPU model they were timed on, with the libraries they were
  // timed with; otherwise every one is chosen again.
  std::string rechosen;
  if (!blob_.choices().empty()) {
    if (blob_.choices_gpu() != gpu) {
      rechosen = fmt::format("they were timed on {}, this is {}", blob_.choices_gpu(), gpu);
    } else if (h.choices_cublaslt_version != cublasLtGetVersion()) {
      rechosen = fmt::format("they were timed with cuBLASLt {}, this is {}",
                             h.choices_cublaslt_version, cublasLtGetVersion());
    }
  }
  const bool use_recorded = rechosen.empty();
  std::map<std::string, size_t> first_of_shape;
  for (size_t s = 0; s < n; ++s) {
    if (blob_.steps()[s].kind != static_cast<uint32_t>(StepKind::Gemm)) continue;
    BATON_TRY(plan_gemm(handle.get(), s));
    const StepChoice* recorded = blob_.choice(s);
    if (recorded != nullptr && use_recorded) {
      Status applied = apply_recorded_gemm(handle.get(), s, *recorded);
      if (applied.ok()) continue;
      rechosen += fmt::format("{}step {}: {}", rechosen.empty() ? "" : "; ", s, applied.message());
    }
    if (recorded != nullptr) ++stats_.rechosen;
    const std::string shape = step_signature(blob_.steps()[s].gemm, offsetof(GemmStep, a));
    if (auto it = first_of_shape.find(shape); it != first_of_shape.end()) {
      gemms_[s].algo = gemms_[it->second].algo;
      gemm_times_[s] = gemm_times_[it->second];
      ++(gemm_times_[s].second > 0 ? stats_.timed : stats_.untimed);
      continue;
    }
    BATON_TRY(choose_gemm(handle.get(), s, stopwatch ? &*stopwatch : nullptr));
    first_of_shape[shape] = s;
  }
  BATON_TRY(choose_cudnn_plans(stopwatch ? &*stopwatch : nullptr, use_recorded, &rechosen));
  stats_.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!rechosen.empty()) {
    // An info line, not a warning: the program still runs at full speed with the choices made
    // here; only the load takes longer (docs/engine-format.md).
    log_message(LogLevel::Info, "cuda",
                fmt::format("partition '{}': the program's recorded algorithm choices do not all "
                            "apply here ({}): {} chosen again. Compile the model on this machine "
                            "to record choices for it",
                            partition, rechosen, stats_.rechosen));
  }
  if (!quiet && stats_.timed > 0) {
    log_message(LogLevel::Info, "cuda",
                fmt::format("partition '{}' on cuda:{}: timed the algorithms of {} GEMM and "
                            "cuDNN steps ({} candidates each) in {:.0f} ms at load; compile "
                            "with this GPU present to record them in the program",
                            partition, device_, stats_.timed, tune_candidates_, stats_.ms));
  }
  return Status();
}

Status Engine::apply_recorded_gemm(cublasLtHandle_t handle, size_t step,
                                   const StepChoice& recorded) {
  const GemmStep& g = blob_.steps()[step].gemm;
  GemmPlan& p = gemms_[step];
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, recorded.cublaslt_algo, sizeof algo);
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t st =
      cublasLtMatmulAlgoCheck(handle, p.desc.get(), p.a.get(), p.b.get(),
                              g.has_c ? p.c.get() : p.d.get(), p.d.get(), &algo, &result);
  BATON_CHECK_OR_RETURN(st == CUBLAS_STATUS_SUCCESS, NotSupported,
                        "the recorded cuBLASLt algorithm fails cuBLASLt's check ({})",
                        status_string(st));
  BATON_CHECK_OR_RETURN(result.workspaceSize <= blob_.header().workspace_bytes, NotSupported,
                        "the recorded cuBLASLt algorithm needs {} bytes of workspace, the engine "
                        "has {}",
                        result.workspaceSize, blob_.header().workspace_bytes);
  p.algo = algo;
  gemm_times_[step] = {recorded.time_us, recorded.candidates};
  ++stats_.recorded;
  return Status();
}

namespace {

// cuBLASLt's top `wanted` algorithms for a GEMM (at least one, or an error naming `what`).
Result<std::vector<cublasLtMatmulHeuristicResult_t>> gemm_heuristics(cublasLtHandle_t handle,
                                                                     const GemmStep& g,
                                                                     const GemmLayouts& l,
                                                                     uint64_t workspace, int wanted,
                                                                     const std::string& what) {
  BATON_ASSIGN_OR_RETURN(const MatmulPreference pref, create_matmul_preference());
  BATON_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(std::max(wanted, 1)));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle, l.desc, l.a, l.b, l.c, l.d, pref.get(),
                                     static_cast<int>(results.size()), results.data(), &found);
  BATON_CHECK_OR_RETURN(st == CUBLAS_STATUS_SUCCESS && found > 0, NotSupported,
                        "{}: cuBLASLt has no algorithm for m={} n={} k={} batch={}: {}. Compile "
                        "with another --precision, or report the shape",
                        what, g.m, g.n, g.k, g.batch, status_string(st));
  results.resize(static_cast<size_t>(found));
  return results;
}

}  // namespace

Result<cublasLtMatmulAlgo_t> fastest_gemm_algo(cublasLtHandle_t handle, const GemmStep& g,
                                               const GemmLayouts& layouts, uint64_t workspace,
                                               int candidates, Stopwatch& stopwatch,
                                               const std::string& what, float* us,
                                               uint32_t* timed) {
  BATON_ASSIGN_OR_RETURN(const std::vector<cublasLtMatmulHeuristicResult_t> results,
                         gemm_heuristics(handle, g, layouts, workspace, candidates, what));
  void* ptrs[4];
  BATON_ASSIGN_OR_RETURN(void* base, stopwatch.operands(gemm_operands(g, nullptr, ptrs)));
  gemm_operands(g, static_cast<uint8_t*>(base), ptrs);
  BATON_ASSIGN_OR_RETURN(void* ws, stopwatch.workspace(std::max<uint64_t>(workspace, 1)));
  Fastest fastest;
  for (size_t i = 0; i < results.size(); ++i) {
    Result<float> t = stopwatch.time([&](cudaStream_t stream) -> Status {
      BATON_CUDA_CHECK(cublasLtMatmul(handle, layouts.desc, &g.alpha, ptrs[0], layouts.a, ptrs[1],
                                      layouts.b, &g.beta, g.has_c ? ptrs[2] : ptrs[3], layouts.c,
                                      ptrs[3], layouts.d, &results[i].algo, ws, workspace, stream));
      return Status();
    });
    if (t.ok()) fastest.offer(static_cast<int64_t>(i), *t);
  }
  BATON_CHECK_OR_RETURN(fastest.index >= 0, NotSupported,
                        "{}: none of cuBLASLt's {} algorithms for m={} n={} k={} batch={} runs "
                        "here",
                        what, results.size(), g.m, g.n, g.k, g.batch);
  *us = fastest.us;
  *timed = fastest.timed;
  return results[static_cast<size_t>(fastest.index)].algo;
}

// The aligned algorithm of GEMM step `step`: the fastest of the heuristics' top candidates, timed
// on `stopwatch`, or (without one) their first.
Status Engine::choose_gemm(cublasLtHandle_t handle, size_t step, Stopwatch* stopwatch) {
  const GemmStep& g = blob_.steps()[step].gemm;
  GemmPlan& p = gemms_[step];
  const uint64_t workspace = blob_.header().workspace_bytes;
  const GemmLayouts layouts{p.desc.get(), p.a.get(), p.b.get(), g.has_c ? p.c.get() : p.d.get(),
                            p.d.get()};
  const std::string what =
      fmt::format("partition '{}' step {} on cuda:{}", partition_, step, device());
  if (stopwatch == nullptr) {
    BATON_ASSIGN_OR_RETURN(const auto results,
                           gemm_heuristics(handle, g, layouts, workspace, 1, what));
    p.algo = results[0].algo;
    ++stats_.untimed;
    return Status();
  }
  float us = 0;
  uint32_t timed = 0;
  BATON_ASSIGN_OR_RETURN(p.algo, fastest_gemm_algo(handle, g, layouts, workspace, tune_candidates_,
                                                   *stopwatch, what, &us, &timed));
  gemm_times_[step] = {us, timed};
  ++stats_.timed;
  return Status();
}

// A cuDNN matmul's plans are timed 16 at most (every plan cuDNN offered for BERT's FC1: 11). With
// the heuristics' first four, BERT ran 5% slower than with cuBLASLt and a GELU kernel, while the
// fastest of all 11 plans, timed alone, beat that pair by 1.6 us (measured on an H100).
constexpr int kMatmulCandidates = 16;

// Every cuDNN step's plan (convolutions, attention), on a handle made for choosing (each execution
// context builds the chosen plans on its own): the recorded one if this cuDNN builds it, else
// chosen now.
Status Engine::choose_cudnn_plans(Stopwatch* stopwatch, bool use_recorded, std::string* rechosen) {
  const size_t n = blob_.steps().size();
  bool any = false;
  for (const StepRecord& r : blob_.steps()) any |= is_cudnn_step(r.kind);
  if (!any) return Status();
  BATON_ASSIGN_OR_RETURN(const CudnnHandle handle, CudnnHandle::create(device()));
  if (use_recorded && !blob_.choices().empty() &&
      blob_.header().choices_cudnn_version != loaded_cudnn_version()) {
    *rechosen +=
        fmt::format("{}they were timed with cuDNN {}, this is {}", rechosen->empty() ? "" : "; ",
                    blob_.header().choices_cudnn_version, loaded_cudnn_version());
    use_recorded = false;
  }
  std::map<std::string, size_t> first_of_shape;
  for (size_t s = 0; s < n; ++s) {
    const StepRecord& r = blob_.steps()[s];
    if (!is_cudnn_step(r.kind)) continue;
    const std::string what = fmt::format("partition '{}' step {}", partition_, s);
    if (const StepChoice* c = blob_.choice(s)) {
      if (use_recorded) {
        CudnnChoice choice;
        choice.engine = c->cudnn_engine;
        choice.plan.assign(c->cudnn_plan, ::strnlen(c->cudnn_plan, sizeof c->cudnn_plan));
        choice.time_us = c->time_us;
        choice.candidates = c->candidates;
        Result<CudnnPlan> plan = CudnnPlan::create(handle.get(), r, choice, what);
        if (plan.ok()) {
          cudnn_choices_[s] = std::move(choice);
          ++stats_.recorded;
          continue;
        }
        *rechosen += fmt::format("{}step {}: the recorded cuDNN plan does not build ({})",
                                 rechosen->empty() ? "" : "; ", s, plan.status().message());
      }
      ++stats_.rechosen;
    }
    // Steps of one shape (the record up to its tensors) share one choice.
    const std::string shape =
        std::to_string(r.kind) + (r.kind == static_cast<uint32_t>(StepKind::Sdpa)
                                      ? step_signature(r.sdpa, offsetof(SdpaStep, q))
                                  : r.kind == static_cast<uint32_t>(StepKind::Matmul)
                                      ? step_signature(r.gemm, offsetof(GemmStep, a))
                                      : step_signature(r.conv, offsetof(ConvStep, x)));
    if (auto it = first_of_shape.find(shape); it != first_of_shape.end()) {
      cudnn_choices_[s] = cudnn_choices_[it->second];
    } else {
      BATON_ASSIGN_OR_RETURN(const CudnnPlan plan,
                             CudnnPlan::choose(handle.get(), r,
                                               r.kind == static_cast<uint32_t>(StepKind::Matmul)
                                                   ? std::max(tune_candidates_, kMatmulCandidates)
                                                   : tune_candidates_,
                                               stopwatch, what));
      cudnn_choices_[s] = plan.choice();
      first_of_shape[shape] = s;
    }
    ++(cudnn_choices_[s].candidates > 0 ? stats_.timed : stats_.untimed);
  }
  return Status();
}

EngineChoices Engine::choices() const {
  EngineChoices out;
  out.cublaslt_version = static_cast<uint32_t>(cublasLtGetVersion());
  for (const DeviceInfo& d : visible_devices()) {
    if (d.index == device()) out.gpu = d.name.substr(0, sizeof(EngineHeader::choices_gpu) - 1);
  }
  for (size_t s = 0; s < blob_.steps().size(); ++s) {
    const uint32_t kind = blob_.steps()[s].kind;
    StepChoice c{};
    c.step = static_cast<uint32_t>(s);
    c.kind = kind;
    if (kind == static_cast<uint32_t>(StepKind::Gemm)) {
      std::memcpy(c.cublaslt_algo, &gemms_[s].algo, sizeof c.cublaslt_algo);
      c.time_us = gemm_times_[s].first;
      c.candidates = gemm_times_[s].second;
    } else if (is_cudnn_step(kind)) {
      const CudnnChoice& chosen = cudnn_choices_[s];
      c.cudnn_engine = chosen.engine;
      std::memcpy(c.cudnn_plan, chosen.plan.data(),
                  std::min(chosen.plan.size(), sizeof c.cudnn_plan - 1));
      c.time_us = chosen.time_us;
      c.candidates = chosen.candidates;
      out.cudnn_version = loaded_cudnn_version();
    } else {
      continue;
    }
    out.steps.push_back(c);
  }
  return out;
}

}  // namespace baton::cuda
