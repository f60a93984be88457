// The "cuda" backend: runtime::BackendInterface over engines. docs/device-contract.md is the
// contract this file implements.
//
// init: loads (or shares) the engine of the blob on its GPU, checks the partition's label against
// it, and allocates everything execute needs: an execution context (scratch, cuBLASLt workspace),
// one staging buffer per binding (unless staging is strict), and the events.
// execute: classifies each bound pointer (device memory on the engine's GPU and managed memory are
// bound directly; host memory is staged; another GPU's memory is refused), enqueues everything on
// the caller's stream (StreamGuard) or cudaStreamPerThread, records a completion event, and
// synchronizes only when the contract says so.
// destroy: waits for the completion event, then frees.
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/engine.h"
#include "backends/cuda/engine_describe.h"
#include "backends/cuda/handles.h"
#include "baton/core/log.h"
#include "baton/core/text.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/options.h"
#include "baton/runtime/backend.h"

namespace baton::cuda {
namespace {

// Handles of one program on one GPU share the engine (weights, module, GEMM plans): the engine is
// keyed by its blob's bytes, which live in the loaded program, by the GPU it runs on (a device map
// can place one blob on several) and by how many candidates its choices made at load were timed
// among (a load option).
class EngineCache {
 public:
  Result<std::shared_ptr<Engine>> get(std::span<const uint8_t> blob, const std::string& partition,
                                      int tune_candidates, int device,
                                      std::shared_ptr<const Engine> weights_from = nullptr,
                                      std::span<const uint8_t> shared_weights = {}) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(engines_, [](const auto& entry) { return entry.second.expired(); });
    const auto key = std::make_tuple(blob.data(), blob.size(), tune_candidates, device);
    if (auto it = engines_.find(key); it != engines_.end()) {
      if (auto engine = it->second.lock()) return engine;
    }
    BATON_ASSIGN_OR_RETURN(std::shared_ptr<Engine> engine,
                           Engine::load(blob, partition, tune_candidates, false,
                                        std::move(weights_from), shared_weights, device));
    engines_[key] = engine;
    return engine;
  }

  EngineStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    EngineStats s;
    for (const auto& [key, weak] : engines_) {
      if (auto engine = weak.lock()) {
        ++s.engines;
        if (engine->owns_weights()) s.weight_bytes += engine->blob().weights().size();
      }
    }
    return s;
  }

 private:
  std::mutex mutex_;
  std::map<std::tuple<const uint8_t*, size_t, int, int>, std::weak_ptr<Engine>> engines_;
};

EngineCache& engine_cache() {
  static EngineCache cache;
  return cache;
}

enum class Binding : uint8_t { Unknown, Direct, Staged };

struct BindingState {
  uint64_t bytes = 0;
  bool is_output = false;
  DeviceBuffer staging;  // for host memory (none when staging is strict or the GPU is integrated)
  const void* last_pointer = nullptr;
  Binding last = Binding::Unknown;
};

// Members are destroyed bottom-up: the events, then the staging buffers, then the execution
// context (scratch, workspace, graph) and with it, when no other handle shares it, the engine.
struct CudaHandle : runtime::DelegateHandle {
  // One execution context per engine: one, or one per bucket of a bucketed dynamic engine (the
  // widest last). `context` is the one the current call runs on.
  std::vector<std::unique_ptr<ExecutionContext>> contexts;
  ExecutionContext* context = nullptr;
  std::vector<void*> pointers;
  std::vector<BindingState> bindings;
  // The "in_place" compile spec (compiler/state.h): (input binding, output binding) pairs the
  // method binds to one buffer, because the engine writes the output without copying the input
  // into it (a state's scatter). Checked at every call.
  std::vector<std::pair<size_t, size_t>> in_place;
  bool use_graph = true;
  bool strict = false;
  bool integrated = false;
  Event start;
  Event stop;
  Event done;            // completion event of the last call
  bool pending = false;  // `done` recorded and not yet waited for on the host
  // A profile of the steps (DelegateArgs::profile_steps): an event before each step and one after
  // the last, made at init. `steps_timed`: the last call recorded them.
  std::vector<Event> step_marks;
  std::vector<cudaEvent_t> step_mark_handles;  // their handles, as enqueue takes them
  bool steps_timed = false;
  bool timed_async = false;  // the last profiled call returned early: measure once it is done
  // Caller streams by their process-unique id (cudaStreamGetId: a destroyed stream's handle may
  // come back for another stream, its id never does). `checked_stream`: the last caller stream
  // whose device was verified; `done_stream`: the stream `done` was recorded on, which needs no
  // wait for it (none when unknown).
  std::optional<unsigned long long> checked_stream;
  std::optional<unsigned long long> done_stream;
  bool logged_staging = false;
  std::mutex mutex;  // calls on one handle are serialized
  uint64_t zero_copy_calls = 0, staged_calls = 0, staged_bytes = 0, async_returns = 0;
  std::optional<double> last_ms;

  ~CudaHandle() override {
    // Work may still be in flight on the caller's stream: it uses this handle's buffers, which the
    // members' owners free next.
    if (pending && done) {
      DeviceGuard guard(done.device());
      cudaEventSynchronize(done.get());
    }
  }
};

// The load options of one delegate: the program's compile specs that are load options
// (strict_staging, from compile --strict-staging), then the method's options over them.
Result<LoadOptions> load_options(const runtime::BackendInitContext& ctx,
                                 std::span<const runtime::CompileSpec> specs) {
  std::vector<runtime::BackendOption> all;
  const std::vector<std::string_view> keys = LoadOptions::keys();
  for (const auto& s : specs) {
    if (std::find(keys.begin(), keys.end(), s.key) != keys.end()) {
      all.push_back({std::string(s.key), std::string(s.value_string())});
    }
  }
  all.insert(all.end(), ctx.options.begin(), ctx.options.end());
  return LoadOptions::parse(all);
}

class CudaBackend final : public runtime::BackendInterface {
 public:
  std::string_view id() const override { return "cuda"; }
  bool is_available() const override { return device_count() > 0; }
  std::vector<std::string_view> option_keys() const override { return LoadOptions::keys(); }
  Status check_option(const runtime::BackendOption& option) const override {
    LoadOptions unused;
    return unused.set(option.key, option.value);
  }

  Result<runtime::DelegateHandle*> init(const runtime::BackendInitContext& ctx,
                                        std::span<const uint8_t> blob,
                                        std::span<const runtime::CompileSpec> specs) override {
    const std::string partition(ctx.delegate_name);
    BATON_ASSIGN_OR_RETURN(const LoadOptions options, load_options(ctx, specs));
    BATON_ASSIGN_OR_RETURN(const auto buckets, engine_buckets(blob));
    std::vector<std::shared_ptr<Engine>> engines;
    for (const auto& bucket : buckets) {
      BATON_ASSIGN_OR_RETURN(
          std::shared_ptr<Engine> one,
          engine_cache().get(bucket, partition, options.tune_candidates, ctx.device.index,
                             engines.empty() ? nullptr : engines.front(),
                             shared_bucket_weights(blob)));
      BATON_CHECK_OR_RETURN(buckets.size() == 1 || one->blob().dynamic(), InvalidProgram,
                            "partition '{}': a bucketed engine of static engines", partition);
      engines.push_back(std::move(one));
    }
    const std::shared_ptr<Engine>& engine = engines.back();
    const Device built_for = Device::cuda(static_cast<int16_t>(engine->blob().header().device_id));
    // The program records where each delegate runs; a blob built for another GPU means the file
    // was assembled from parts that do not belong together. (A device map moves both together:
    // ctx.device is where the engine now runs, engine->device().)
    BATON_CHECK_OR_RETURN(ctx.recorded_device == built_for, InvalidProgram,
                          "partition '{}' is recorded to run on {}, but its engine was built for "
                          "{}: the program is inconsistent (damaged or edited). Recompile the "
                          "model",
                          partition, ctx.recorded_device.to_string(), built_for.to_string());
    // The label device-aware planning used for this partition's tensors must be the GPU its
    // engine runs on, or every tensor at its boundary would be on the wrong GPU.
    for (const runtime::CompileSpec& spec : specs) {
      if (spec.key != "target_device") continue;
      const std::optional<Device> label = Device::parse(spec.value_string());
      BATON_CHECK_OR_RETURN(label == built_for, InvalidProgram,
                            "partition '{}' is labelled target_device={} but its engine was built "
                            "for {}: the program's tensors for it are planned on {}. Recompile "
                            "without --target-device, or with --device {}",
                            partition, spec.value_string(), built_for.to_string(),
                            spec.value_string(), spec.value_string());
    }
    auto handle = std::make_unique<CudaHandle>();
    BATON_ASSIGN_OR_RETURN(handle->in_place, parse_in_place(specs, engine->blob(), partition));
    // A bucketed engine's buckets share one scratch and workspace, sized for the largest bucket's
    // needs, its cuDNN plans' workspace included (known once each context made its plans).
    for (const auto& e : engines) {
      BATON_CHECK_OR_RETURN(e->device() == engine->device() &&
                                e->blob().bindings().size() == engine->blob().bindings().size(),
                            InvalidProgram,
                            "partition '{}': the buckets of its engine disagree on the GPU or the "
                            "bindings",
                            partition);
      BATON_ASSIGN_OR_RETURN(
          std::unique_ptr<ExecutionContext> c,
          ExecutionContext::create(e, options, /*allocate=*/engines.size() == 1));
      handle->contexts.push_back(std::move(c));
    }
    if (engines.size() > 1) {
      uint64_t scratch = 0, workspace = 0;
      for (const auto& c : handle->contexts) {
        scratch = std::max(scratch, c->scratch_needed());
        workspace = std::max(workspace, c->workspace_needed());
      }
      BATON_ASSIGN_OR_RETURN(
          std::shared_ptr<ExecutionContext::Memory> shared_memory,
          ExecutionContext::allocate_memory(engine->device(), scratch, workspace, partition));
      for (const auto& c : handle->contexts) BATON_TRY(c->share_memory(shared_memory));
    }
    // The declared OPT shape's GEMM heuristics and cuDNN plans, at load instead of at its first
    // call (what building a convolution's plans costs there: 1.2 s for ResNet-50).
    for (const auto& c : handle->contexts) BATON_TRY(c->prepare_declared_shape());
    handle->context = handle->contexts.back().get();
    handle->use_graph = options.cuda_graphs;
    handle->strict = options.strict_staging;
    const int device = engine->device();
    DeviceGuard guard(device);
    BATON_TRY(guard.status());
    int integrated = 0;
    BATON_CUDA_CHECK_ON(device, cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, device));
    handle->integrated = integrated != 0;
    const EngineBlob& b = engine->blob();
    handle->pointers.assign(b.bindings().size(), nullptr);
    size_t max_steps = 0;
    for (const auto& e : engines) max_steps = std::max(max_steps, e->blob().steps().size());
    for (size_t i = 0; i < b.bindings().size(); ++i) {
      const BindingRecord& r = b.bindings()[i];
      BindingState s;
      // Staging holds the largest sizes any bucket takes.
      for (const auto& e : engines) {
        const BindingRecord& er = e->blob().bindings()[i];
        s.bytes =
            std::max(s.bytes, *checked_nbytes(static_cast<DType>(er.dtype), {er.sizes, er.rank}));
      }
      s.is_output = r.is_output != 0;
      // Staging buffers are sized and allocated here, never in execute.
      if (!handle->strict && !handle->integrated) {
        BATON_ASSIGN_OR_RETURN(
            s.staging, allocate_device_buffer(
                           device, s.bytes, fmt::format("staging for partition '{}'", partition)));
      }
      handle->bindings.push_back(std::move(s));
    }
    BATON_ASSIGN_OR_RETURN(handle->start, create_event(device));
    BATON_ASSIGN_OR_RETURN(handle->stop, create_event(device));
    BATON_ASSIGN_OR_RETURN(handle->done, create_event(device, cudaEventDisableTiming));
    for (size_t s = 0; s <= max_steps; ++s) {
      BATON_ASSIGN_OR_RETURN(Event mark, create_event(device));
      handle->step_mark_handles.push_back(mark.get());
      handle->step_marks.push_back(std::move(mark));
    }
    return static_cast<runtime::DelegateHandle*>(handle.release());
  }

  Status execute(runtime::DelegateHandle* h, const runtime::DelegateArgs& args) override {
    auto* handle = static_cast<CudaHandle*>(h);
    std::lock_guard<std::mutex> lock(handle->mutex);
    // A call that fails below measured nothing: no earlier call's times may be read as its.
    handle->steps_timed = false;
    handle->timed_async = false;
    handle->last_ms.reset();
    Engine& engine = handle->context->engine();
    const EngineBlob& blob = engine.blob();
    const int device = engine.device();
    const size_t inputs = blob.num_inputs();
    BATON_TRY(check_arity(engine, args));
    cudaStream_t stream = current_stream();
    const bool guarded = stream_selected();
    DeviceGuard guard(device);
    BATON_TRY(guard.status());
    // A caller stream's id (check_stream).
    std::optional<unsigned long long> stream_id;
    if (guarded) {
      BATON_ASSIGN_OR_RETURN(stream_id, check_stream(*handle, stream, engine));
    }

    // A dynamic engine takes the call's sizes (host work when they changed and no graph of those
    // sizes is kept, none otherwise); a bucketed one runs on the first bucket that holds them.
    BATON_TRY(choose_context(*handle, args.symbols));
    BATON_TRY(handle->context->resize(args.symbols));
    bool staged = false;
    for (size_t i = 0; i < blob.bindings().size(); ++i) {
      const runtime::Value* v = i < inputs ? args.inputs[i] : args.outputs[i - inputs];
      BATON_TRY(check_shape(*handle->context, i, v->tensor));
      BATON_TRY(classify(*handle, engine, i, v->tensor));
      staged = staged || handle->bindings[i].last == Binding::Staged;
    }
    if (staged) BATON_TRY(announce_staging(*handle, engine));
    for (const auto& [in, out] : handle->in_place) {
      // Staged copies would be two buffers, and the engine never copies the input to the output.
      BATON_CHECK_OR_RETURN(
          args.inputs[in]->tensor.data == args.outputs[out - inputs]->tensor.data &&
              handle->bindings[in].last == Binding::Direct,
          InvalidArgument,
          "partition '{}': input '{}' and output '{}' are one state tensor "
          "updated in place, so a call must pass one device buffer for both",
          engine.partition(), blob.binding_name(in), blob.binding_name(out));
    }

    // The previous call may still be running and uses the same scratch and staging buffers:
    // order this call after it on the device, without blocking the host. On the stream it was
    // enqueued on, it is ordered already; a stream is known by its id, not its handle (a
    // destroyed stream's handle may come back for another one), and cudaStreamPerThread, whose
    // handle names a different stream on each thread, always waits.
    if (handle->pending && !(stream_id && handle->done_stream == stream_id)) {
      BATON_CUDA_CHECK_ON(device, cudaStreamWaitEvent(stream, handle->done.get(), 0));
    }
    uint64_t staged_bytes = 0;
    const Status enqueued = enqueue_call(*handle, args, stream, stream_id, staged_bytes);
    // Whatever was enqueued, even before a failure, uses this handle's buffers: later calls and
    // destroy must be ordered after it.
    const cudaError_t recorded = cudaEventRecord(handle->done.get(), stream);
    // When the record failed, `done` no longer covers all the work enqueued: the next call waits
    // for it wherever it comes, never skipping the wait as if on its stream.
    handle->done_stream = recorded == cudaSuccess ? stream_id : std::nullopt;
    if (recorded == cudaSuccess) handle->pending = true;
    if (!enqueued.ok()) return enqueued;
    BATON_CUDA_CHECK_ON(device, recorded);
    // Without a caller stream the results are ready when execute returns; host memory staged in
    // or out must be safe to use on return too. Otherwise the caller owns the synchronization.
    handle->steps_timed = args.profile_steps;
    if (!guarded || staged) {
      BATON_CUDA_CHECK_ON(device, cudaStreamSynchronize(stream));
      handle->pending = false;
      if (args.profile) {
        float ms = 0.0f;
        BATON_CUDA_CHECK_ON(device,
                            cudaEventElapsedTime(&ms, handle->start.get(), handle->stop.get()));
        handle->last_ms = ms;
      }
    } else {
      ++handle->async_returns;
      handle->timed_async = args.profile;
    }
    if (staged) {
      ++handle->staged_calls;
      handle->staged_bytes += staged_bytes;
    } else {
      ++handle->zero_copy_calls;
    }
    return Status();
  }

  // A bucketed dynamic engine: the first bucket whose range holds `symbols` becomes the
  // handle's current context (one engine: it already is).
  static Status choose_context(CudaHandle& handle, std::span<const int64_t> symbols) {
    const Engine& engine = handle.context->engine();
    if (handle.contexts.size() > 1) {
      ExecutionContext* chosen = nullptr;
      for (const auto& c : handle.contexts) {
        if (holds_symbols(c->engine().blob(), symbols)) {
          chosen = c.get();
          break;
        }
      }
      if (chosen == nullptr) [[unlikely]] {
        // The method checked the symbols against its ranges, which the buckets cover: only a
        // program whose method and engine disagree gets here.
        std::string given, ranges;
        for (size_t i = 0; i < symbols.size(); ++i) {
          given += fmt::format("{}{}", i ? ", " : "", symbols[i]);
        }
        for (const auto& c : handle.contexts) {
          const EngineBlob& b = c->engine().blob();
          ranges += ranges.empty() ? "" : "; ";
          for (size_t i = 0; i < b.symbols().size(); ++i) {
            ranges += fmt::format("{}{} in {}..{}", i ? ", " : "", b.symbol_name(i),
                                  b.symbols()[i].min, b.symbols()[i].max);
          }
        }
        return BATON_ERROR(InvalidArgument,
                           "partition '{}': no engine of it takes the call's sizes ({}); its "
                           "engines take {}: the program's method and engine disagree, "
                           "recompile the model",
                           engine.partition(), given, ranges);
      }
      handle.context = chosen;
    }
    return Status();
  }

  // Method::prepare_shape: the bucket that holds the sizes times its choices for them, and
  // with graphs captures the shape's graph with the memory the call's tensors are in now (host
  // memory: the staging buffers a call would copy it through), launching nothing.
  Status prepare(runtime::DelegateHandle* h, const runtime::DelegateArgs& args) override {
    auto* handle = static_cast<CudaHandle*>(h);
    std::lock_guard<std::mutex> lock(handle->mutex);
    const size_t inputs = handle->context->engine().blob().num_inputs();
    BATON_TRY(check_arity(handle->context->engine(), args));
    const int device = handle->context->engine().device();
    DeviceGuard guard(device);
    BATON_TRY(guard.status());
    // Earlier calls may still be running with the plans and graph slot this replaces.
    if (handle->pending) {
      BATON_CUDA_CHECK_ON(device, cudaEventSynchronize(handle->done.get()));
      handle->pending = false;
    }
    BATON_TRY(choose_context(*handle, args.symbols));
    ExecutionContext& context = *handle->context;
    const Engine& engine = context.engine();
    BATON_TRY(context.prepare(args.symbols));
    if (!handle->use_graph) return Status();
    std::vector<void*> pointers(handle->bindings.size());
    for (size_t i = 0; i < handle->bindings.size(); ++i) {
      const runtime::Value* v = i < inputs ? args.inputs[i] : args.outputs[i - inputs];
      // An input the caller has yet to bind has no address to capture: the choices are made,
      // the graph is left to the first call.
      if (v->tensor.data == nullptr && v->tensor.nbytes() > 0) return Status();
      BATON_TRY(check_shape(context, i, v->tensor));
      BATON_TRY(classify(*handle, engine, i, v->tensor));
      pointers[i] = bound_pointer(handle->bindings[i], *v);
    }
    cudaStream_t raw = nullptr;
    BATON_CUDA_CHECK_ON(device, cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking));
    OwnedStream stream(raw, device);
    const Status captured = context.capture_prepared(pointers, stream.get());
    // What was enqueued (the size-only kernels, the upload) is done before the stream goes, also
    // when the capture failed part way.
    const cudaError_t synced = cudaStreamSynchronize(stream.get());
    BATON_TRY(captured);
    BATON_CUDA_CHECK_ON(device, synced);
    return Status();
  }

  void destroy(runtime::DelegateHandle* h) override { delete static_cast<CudaHandle*>(h); }

  std::optional<double> last_device_time_ms(runtime::DelegateHandle* h) const override {
    auto* handle = static_cast<CudaHandle*>(h);
    std::lock_guard<std::mutex> lock(handle->mutex);
    if (handle->timed_async) {
      // Returned early: measurable once the caller has waited for the stream (never blocks).
      float ms = 0.0f;
      DeviceGuard guard(handle->context->engine().device());
      if (guard.status().ok() &&
          cudaEventElapsedTime(&ms, handle->start.get(), handle->stop.get()) == cudaSuccess) {
        return ms;
      }
      cudaGetLastError();
      return std::nullopt;
    }
    return handle->last_ms;
  }

  std::vector<runtime::StepTime> step_times(runtime::DelegateHandle* h) const override {
    auto* handle = static_cast<CudaHandle*>(h);
    std::lock_guard<std::mutex> lock(handle->mutex);
    std::vector<runtime::StepTime> out;
    if (!handle->steps_timed) return out;
    const ExecutionContext& context = *handle->context;
    const EngineBlob& blob = handle->context->engine().blob();
    DeviceGuard guard(handle->context->engine().device());
    if (!guard.status().ok()) return out;
    const size_t n = blob.steps().size();
    if (cudaEventSynchronize(handle->step_mark_handles[n]) != cudaSuccess) {
      cudaGetLastError();
      return out;
    }
    for (size_t s = 0; s < n; ++s) {
      float start = 0.0f, ms = 0.0f;
      if (cudaEventElapsedTime(&start, handle->step_mark_handles[0],
                               handle->step_mark_handles[s]) != cudaSuccess ||
          cudaEventElapsedTime(&ms, handle->step_mark_handles[s],
                               handle->step_mark_handles[s + 1]) != cudaSuccess) {
        cudaGetLastError();
        return {};
      }
      runtime::StepTime t;
      t.kind = std::string(step_kind_name(static_cast<StepKind>(blob.steps()[s].kind)));
      t.name = context.step_runner(s);
      t.what = describe_step(blob, s);
      t.start_ms = start;
      t.ms = ms;
      out.push_back(std::move(t));
    }
    return out;
  }

  std::vector<std::pair<std::string, uint64_t>> counters(
      runtime::DelegateHandle* h) const override {
    auto* handle = static_cast<CudaHandle*>(h);
    std::lock_guard<std::mutex> lock(handle->mutex);
    const ChoiceStats& choices = handle->context->engine().choice_stats();
    // Device memory allocated at load for this handle: the weights (once, however many buckets
    // share them), the scratch and workspace (once: the buckets share them), and the staging
    // buffers (sized for the largest sizes). cuBLASLt's and cuDNN's own handles are not counted.
    uint64_t device_bytes = 0, resizes = 0, graphs = 0, captures = 0, replaced = 0, plans = 0,
             cudnn_plans = 0, timed = 0, size_only = 0, size_bytes = 0, prepared = 0;
    const ExecutionContext::Memory* counted = nullptr;  // buckets share theirs: counted once
    for (const auto& c : handle->contexts) {
      if (c->memory() != counted) device_bytes += c->device_bytes();
      counted = c->memory();
      if (c->engine().owns_weights()) device_bytes += c->engine().blob().weights().size();
      resizes += c->resizes();
      graphs += c->graphs();
      captures += c->graph_captures();
      replaced += c->graph_replacements();
      plans += c->plan_sets_built();
      cudnn_plans += c->cudnn_plans_built();
      timed += c->prepared_choices_timed();
      prepared += c->prepared_shapes();
      size_only += c->size_only_steps();
      size_bytes += c->size_value_bytes();
    }
    for (const BindingState& b : handle->bindings) device_bytes += b.staging ? b.bytes : 0;
    return {{"device_bytes_at_load", device_bytes},
            {"engines", handle->contexts.size()},
            {"shape_changes", resizes},
            {"zero_copy_calls", handle->zero_copy_calls},
            {"staged_calls", handle->staged_calls},
            {"staged_bytes", handle->staged_bytes},
            {"async_returns", handle->async_returns},
            {"choices_recorded", choices.recorded},
            {"choices_timed_at_load", choices.timed},
            {"choices_untimed", choices.untimed},
            {"choices_rechosen", choices.rechosen},
            {"graphs", graphs},
            {"graph_captures", captures},
            {"graphs_replaced", replaced},
            {"cudnn_plan_sets_built", plans},
            {"cudnn_plans_built", cudnn_plans},
            {"prepared_choices_timed", timed},
            {"prepared_shapes", prepared},
            {"graph_nodes", handle->context->graph_nodes()},
            {"graph_kernels", handle->context->graph_kernels()},
            {"size_only_steps", size_only},
            {"size_value_bytes", size_bytes}};
  }

  // The engine's header, bindings and steps, read from the blob alone (no GPU needed).
  Result<std::string> describe_blob(std::span<const uint8_t> blob) const override {
    return describe_engine_json(blob);
  }

 private:
  // The caller's stream (a StreamGuard's) must be one of the engine's GPU. Returns its id
  // (cudaStreamGetId), which identifies it for the rest of the call, or none: for
  // cudaStreamPerThread (CUDA does not say whether its id is the thread's stream's), and where
  // the id cannot be had (a stream under capture may refuse it), so that such calls always wait
  // for the previous one. A stream's device is asked once per stream id.
  static Result<std::optional<unsigned long long>> check_stream(CudaHandle& handle,
                                                                cudaStream_t stream,
                                                                const Engine& engine) {
    BATON_CHECK_OR_RETURN(stream != nullptr && stream != cudaStreamLegacy, InvalidArgument,
                          "partition '{}': the StreamGuard selects the legacy default stream; "
                          "select a stream you created (or cudaStreamPerThread)",
                          engine.partition());
    if (stream == cudaStreamPerThread) return std::optional<unsigned long long>();
    std::optional<unsigned long long> id;
    if (unsigned long long value = 0; cudaStreamGetId(stream, &value) == cudaSuccess) {
      id = value;
    } else {
      cudaGetLastError();
    }
    if (id && handle.checked_stream == id) return id;
    int stream_device = -1;
    BATON_CUDA_CHECK_ON(engine.device(), cudaStreamGetDevice(stream, &stream_device));
    BATON_CHECK_OR_RETURN(stream_device == engine.device(), InvalidArgument,
                          "partition '{}' runs on cuda:{} but the caller's stream (StreamGuard) "
                          "belongs to cuda:{}: select a stream of cuda:{}",
                          engine.partition(), engine.device(), stream_device, engine.device());
    handle.checked_stream = id;
    return id;
  }

  // Enqueues one call on `stream`: staging copies in, the engine, staging copies out (and the
  // profiling events around them).
  static Status enqueue_call(CudaHandle& handle, const runtime::DelegateArgs& args,
                             cudaStream_t stream, std::optional<unsigned long long> stream_id,
                             uint64_t& staged_bytes) {
    const int device = handle.context->engine().device();
    const size_t inputs = args.inputs.size();
    if (args.profile) BATON_CUDA_CHECK_ON(device, cudaEventRecord(handle.start.get(), stream));
    for (size_t i = 0; i < handle.bindings.size(); ++i) {
      BindingState& b = handle.bindings[i];
      const runtime::Value* v = i < inputs ? args.inputs[i] : args.outputs[i - inputs];
      handle.pointers[i] = bound_pointer(b, *v);
      if (b.last == Binding::Direct) continue;
      // Staging is sized for the largest sizes; a call copies what it has.
      const uint64_t bytes = handle.context->binding_bytes(i);
      staged_bytes += bytes;
      if (!b.is_output && bytes) {
        BATON_CUDA_CHECK_ON(device, cudaMemcpyAsync(b.staging.get(), v->tensor.data, bytes,
                                                    cudaMemcpyHostToDevice, stream));
      }
    }
    BATON_TRY(handle.context->enqueue(handle.pointers, stream, stream_id, handle.use_graph,
                                      args.profile_steps
                                          ? std::span<const cudaEvent_t>(handle.step_mark_handles)
                                          : std::span<const cudaEvent_t>()));
    for (size_t i = inputs; i < handle.bindings.size(); ++i) {
      const BindingState& b = handle.bindings[i];
      const uint64_t bytes = handle.context->binding_bytes(i);
      if (b.last != Binding::Staged || bytes == 0) continue;
      BATON_CUDA_CHECK_ON(
          device, cudaMemcpyAsync(args.outputs[i - inputs]->tensor.data, b.staging.get(), bytes,
                                  cudaMemcpyDeviceToHost, stream));
    }
    if (args.profile) BATON_CUDA_CHECK_ON(device, cudaEventRecord(handle.stop.get(), stream));
    return Status();
  }

  // The "in_place" spec ("I=O;..." over the partition's inputs and outputs) as binding indices.
  static Result<std::vector<std::pair<size_t, size_t>>> parse_in_place(
      std::span<const runtime::CompileSpec> specs, const EngineBlob& blob,
      const std::string& partition) {
    std::vector<std::pair<size_t, size_t>> out;
    for (const runtime::CompileSpec& spec : specs) {
      if (spec.key != "in_place") continue;
      const std::string text(spec.value_string());
      size_t at = 0;
      while (at < text.size()) {
        size_t end = text.find(';', at);
        if (end == std::string::npos) end = text.size();
        const std::string pair = text.substr(at, end - at);
        unsigned long long i = 0, o = 0;
        char tail = 0;
        const bool parsed = std::sscanf(pair.c_str(), "%llu=%llu%c", &i, &o, &tail) == 2;
        const size_t inputs = blob.num_inputs();
        BATON_CHECK_OR_RETURN(parsed && i < inputs && o < blob.bindings().size() - inputs,
                              InvalidProgram,
                              "partition '{}': its in_place spec '{}' does not name an input and "
                              "an output of the engine ({} and {}); the program is damaged. "
                              "Recompile the model",
                              partition, text, inputs, blob.bindings().size() - inputs);
        out.emplace_back(static_cast<size_t>(i), inputs + static_cast<size_t>(o));
        at = end + 1;
      }
    }
    return out;
  }

  // The call's tensors against the partition's bindings: as many inputs and outputs.
  static Status check_arity(const Engine& engine, const runtime::DelegateArgs& args) {
    const EngineBlob& blob = engine.blob();
    const size_t inputs = blob.num_inputs();
    BATON_CHECK_OR_RETURN(args.inputs.size() == inputs &&
                              args.inputs.size() + args.outputs.size() == blob.bindings().size(),
                          InvalidArgument,
                          "partition '{}' takes {} inputs and {} outputs, the call has {} and {}",
                          engine.partition(), inputs, blob.bindings().size() - inputs,
                          args.inputs.size(), args.outputs.size());
    return Status();
  }

  // Where the engine reads or writes a classified binding: the tensor's memory itself, or the
  // staging buffer a call copies it through.
  static void* bound_pointer(const BindingState& b, const runtime::Value& v) {
    return b.last == Binding::Direct ? v.tensor.data : b.staging.get();
  }

  // Against the binding's sizes for this call (a dynamic engine's at the call's symbols).
  static Status check_shape(const ExecutionContext& context, size_t i, const TensorView& t) {
    const Engine& engine = context.engine();
    const BindingRecord& b = engine.blob().bindings()[i];
    const std::span<const int64_t> sizes = context.binding_sizes(i);
    const bool fits = t.dtype == static_cast<DType>(b.dtype) &&
                      std::equal(t.sizes.begin(), t.sizes.end(), sizes.begin(), sizes.end());
    BATON_CHECK_OR_RETURN(fits, InvalidArgument,
                          "partition '{}' binding '{}' is {} {} but the tensor passed is {} {}",
                          engine.partition(), engine.blob().binding_name(i),
                          dtype_name(static_cast<DType>(b.dtype)), shape_to_string(sizes),
                          dtype_name(t.dtype), shape_to_string(t.sizes));
    return Status();
  }

  // Where the bound memory really is decides (the pointer is asked, not trusted): memory on the
  // engine's GPU and managed memory are bound directly; host memory is staged (or bound directly
  // on an integrated GPU); memory on another GPU is refused, naming both devices. Asked once per
  // new pointer.
  static Status classify(CudaHandle& handle, const Engine& engine, size_t i, const TensorView& t) {
    BindingState& b = handle.bindings[i];
    if (t.data == b.last_pointer && b.last != Binding::Unknown) return Status();
    const std::string_view name = engine.blob().binding_name(i);
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, t.data) != cudaSuccess) {
      cudaGetLastError();
      attr.type = cudaMemoryTypeUnregistered;
    }
    Binding kind = Binding::Staged;
    switch (attr.type) {
      case cudaMemoryTypeDevice:
        BATON_CHECK_OR_RETURN(attr.device == engine.device(), InvalidArgument,
                              "partition '{}' runs on cuda:{} but binding '{}' is memory on "
                              "cuda:{}: pass memory on cuda:{}",
                              engine.partition(), engine.device(), name, attr.device,
                              engine.device());
        kind = Binding::Direct;
        break;
      case cudaMemoryTypeManaged:
        kind = Binding::Direct;
        break;
      default:
        BATON_CHECK_OR_RETURN(!t.device.is_cuda(), InvalidArgument,
                              "partition '{}' binding '{}' is declared as memory on {} but the "
                              "pointer is host memory: pass memory allocated on {}, or declare "
                              "the TensorView's device as cpu to have it staged",
                              engine.partition(), name, t.device.to_string(), t.device.to_string());
        kind = handle.integrated ? Binding::Direct : Binding::Staged;
        break;
    }
    b.last_pointer = t.data;
    b.last = kind;
    return Status();
  }

  // Strict staging refuses host memory; otherwise the first staged call of the handle logs one
  // line. Later calls return at once (nothing is formatted, so nothing allocated).
  static Status announce_staging(CudaHandle& handle, const Engine& engine) {
    if (!handle.strict && handle.logged_staging) return Status();
    std::string list;
    for (size_t i = 0; i < handle.bindings.size(); ++i) {
      const BindingState& b = handle.bindings[i];
      if (b.last != Binding::Staged) continue;
      list += fmt::format("{}'{}' ({} {})", list.empty() ? "" : ", ", engine.blob().binding_name(i),
                          size_text(b.bytes), b.is_output ? "out" : "in");
    }
    BATON_CHECK_OR_RETURN(!handle.strict, InvalidArgument,
                          "partition '{}' was given host memory for {}; strict staging forbids "
                          "copying it: pass memory on cuda:{} (compile with --io device and bind "
                          "device buffers)",
                          engine.partition(), list, engine.device());
    handle.logged_staging = true;
    log_message(LogLevel::Info, "cuda",
                fmt::format("partition '{}' stages host memory through cuda:{} on every call: "
                            "{}. Pass memory on cuda:{} to bind it without copies",
                            engine.partition(), engine.device(), list, engine.device()));
    return Status();
  }
};

}  // namespace

EngineStats engine_stats() { return engine_cache().stats(); }

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CudaBackend backend;
    runtime::register_backend(&backend);
    runtime::register_device_allocator(&cuda_allocator());
  });
}

}  // namespace baton::cuda
