// The "cuda" backend: runtime::BackendInterface over engines.
//
// init loads (or reuses) the engine for the blob on its GPU and creates an execution context;
// execute binds the delegate's tensors and enqueues the engine on the current stream; destroy
// frees the context (the engine goes when its last context does).
#include <map>
#include <mutex>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/engine.h"
#include "baton/cuda/backend.h"
#include "baton/runtime/backend.h"

namespace baton::cuda {
namespace {

// Handles of one program on one GPU share the engine (weights, module, GEMM plans): the engine is
// keyed by its blob's bytes, which live in the loaded program.
class EngineCache {
 public:
  Result<std::shared_ptr<Engine>> get(std::span<const uint8_t> blob, const std::string& partition) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_pair(blob.data(), blob.size());
    if (auto it = engines_.find(key); it != engines_.end()) {
      if (auto engine = it->second.lock()) return engine;
    }
    BATON_ASSIGN_OR_RETURN(std::shared_ptr<Engine> engine, Engine::load(blob, partition));
    engines_[key] = engine;
    return engine;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<const uint8_t*, size_t>, std::weak_ptr<Engine>> engines_;
};

struct CudaHandle : runtime::DelegateHandle {
  std::unique_ptr<ExecutionContext> context;
  std::vector<void*> pointers;
  bool use_graph = true;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  std::optional<double> last_ms;

  ~CudaHandle() override {
    if (!context) return;
    DeviceGuard guard(context->engine().device());
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    context.reset();
  }
};

bool graphs_enabled(const runtime::BackendInitContext& ctx) {
  for (const auto& o : ctx.options) {
    if (o.key == "cuda_graphs") return o.value != "0";
  }
  const char* env = std::getenv("BATON_CUDA_GRAPHS");
  return env == nullptr || std::string_view(env) != "0";
}

class CudaBackend final : public runtime::BackendInterface {
 public:
  std::string_view id() const override { return "cuda"; }
  bool is_available() const override { return device_count() > 0; }

  Result<runtime::DelegateHandle*> init(const runtime::BackendInitContext& ctx,
                                        std::span<const uint8_t> blob,
                                        std::span<const runtime::CompileSpec> specs) override {
    const std::string partition(ctx.delegate_name);
    BATON_ASSIGN_OR_RETURN(std::shared_ptr<Engine> engine, cache_.get(blob, partition));
    // The label device-aware planning used for this partition's tensors must be the GPU its
    // engine runs on, or every tensor at its boundary would be on the wrong GPU.
    for (const runtime::CompileSpec& spec : specs) {
      if (spec.key != "target_device") continue;
      const std::optional<Device> label = Device::parse(spec.value_string());
      const Device built_for = Device::cuda(static_cast<int16_t>(engine->device()));
      BATON_CHECK_OR_RETURN(label == built_for, InvalidProgram,
                            "partition '{}' is labelled target_device={} but its engine was built "
                            "for {}: the program's tensors for it are planned on {}. Recompile "
                            "without --target-device, or with --device {}",
                            partition, spec.value_string(), built_for.to_string(),
                            spec.value_string(), spec.value_string());
    }
    auto handle = std::make_unique<CudaHandle>();
    BATON_ASSIGN_OR_RETURN(handle->context, ExecutionContext::create(engine));
    handle->pointers.assign(engine->blob().bindings().size(), nullptr);
    handle->use_graph = graphs_enabled(ctx);
    DeviceGuard guard(engine->device());
    BATON_CUDA_CHECK_ON(engine->device(), cudaEventCreate(&handle->start));
    BATON_CUDA_CHECK_ON(engine->device(), cudaEventCreate(&handle->stop));
    return static_cast<runtime::DelegateHandle*>(handle.release());
  }

  Status execute(runtime::DelegateHandle* h, const runtime::DelegateArgs& args) override {
    auto* handle = static_cast<CudaHandle*>(h);
    Engine& engine = handle->context->engine();
    const EngineBlob& blob = engine.blob();
    const size_t inputs = blob.num_inputs();
    BATON_CHECK_OR_RETURN(args.inputs.size() == inputs &&
                              args.inputs.size() + args.outputs.size() == blob.bindings().size(),
                          InvalidArgument,
                          "partition '{}' takes {} inputs and {} outputs, the call has {} and {}",
                          engine.partition(), inputs, blob.bindings().size() - inputs,
                          args.inputs.size(), args.outputs.size());
    const Device device = Device::cuda(static_cast<int16_t>(engine.device()));
    for (size_t i = 0; i < blob.bindings().size(); ++i) {
      const runtime::Value* v = i < inputs ? args.inputs[i] : args.outputs[i - inputs];
      const BindingRecord& b = blob.bindings()[i];
      const TensorView& t = v->tensor;
      const bool fits = t.dtype == static_cast<DType>(b.dtype) &&
                        std::equal(t.sizes.begin(), t.sizes.end(), b.sizes, b.sizes + b.rank);
      BATON_CHECK_OR_RETURN(
          fits, InvalidArgument,
          "partition '{}' binding '{}' is {} {} but the tensor passed is {} {}", engine.partition(),
          blob.binding_name(i), dtype_name(static_cast<DType>(b.dtype)),
          shape_to_string({b.sizes, b.rank}), dtype_name(t.dtype), shape_to_string(t.sizes));
      BATON_CHECK_OR_RETURN(t.device == device, InvalidArgument,
                            "partition '{}' runs on {} but binding '{}' is memory on {}",
                            engine.partition(), device.to_string(), blob.binding_name(i),
                            t.device.to_string());
      handle->pointers[i] = t.data;
    }
    DeviceGuard guard(engine.device());
    BATON_TRY(guard.status());
    cudaStream_t stream = current_stream();
    if (args.profile) BATON_CUDA_CHECK_ON(engine.device(), cudaEventRecord(handle->start, stream));
    BATON_TRY(handle->context->enqueue(handle->pointers, stream, handle->use_graph));
    if (args.profile) BATON_CUDA_CHECK_ON(engine.device(), cudaEventRecord(handle->stop, stream));
    BATON_CUDA_CHECK_ON(engine.device(), cudaStreamSynchronize(stream));
    if (args.profile) {
      float ms = 0.0f;
      BATON_CUDA_CHECK_ON(engine.device(), cudaEventElapsedTime(&ms, handle->start, handle->stop));
      handle->last_ms = ms;
    }
    return Status();
  }

  void destroy(runtime::DelegateHandle* h) override { delete static_cast<CudaHandle*>(h); }

  std::optional<double> last_device_time_ms(runtime::DelegateHandle* h) const override {
    return static_cast<CudaHandle*>(h)->last_ms;
  }

 private:
  EngineCache cache_;
};

}  // namespace

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CudaBackend backend;
    runtime::register_backend(&backend);
    runtime::register_device_allocator(&cuda_allocator());
  });
}

}  // namespace baton::cuda
