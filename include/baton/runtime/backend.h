// Backends: how a program's delegated partitions run.
//
// A backend is registered once under its id ("cuda", ...). For every delegate of a method the
// loader calls `init` with the delegate's blob and compile specs and keeps the returned handle;
// `execute` runs the partition on the call's tensor values; `destroy` frees the handle.
//
// Contract for implementers:
//  - `init` may allocate and may block; it validates the blob completely (a corrupt blob is
//    Error::InvalidProgram, never a crash) and sizes everything `execute` will need.
//  - `execute` must not allocate host or device memory. Output tensors are planned by the
//    runtime; the backend writes into them.
//  - `prepare` (optional) readies a handle for one shape ahead of its first call.
//  - `destroy` must release everything, also when `init` of a later delegate failed.
//  - None of them throw.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"
#include "baton/runtime/value.h"

namespace baton::runtime {

struct CompileSpec {
  std::string_view key;
  std::span<const uint8_t> value;

  std::string_view value_string() const {
    return {reinterpret_cast<const char*>(value.data()), value.size()};
  }
};

// Key/value options given at load time (e.g. {"strict_staging", "1"}). Method loading refuses a
// key that no registered backend takes (BackendInterface::option_keys) and a value its backend
// refuses (check_option), before any delegate is initialized: a typo is an error, not a default.
struct BackendOption {
  std::string key;
  std::string value;
};

struct BackendInitContext {
  std::string_view method_name;
  std::string_view delegate_name;  // the partition, for messages
  int delegate_index = 0;
  // The device the delegate runs on: the one the program records for it (its blob was built for
  // it), or where MethodOptions::device_map moves that.
  Device device;
  // The device the program records for this delegate (equal to `device` without a device map):
  // what a backend checks its blob against.
  Device recorded_device;
  std::span<const BackendOption> options;
};

struct DelegateArgs {
  std::span<Value* const> inputs;
  std::span<Value* const> outputs;
  // Set while the method profiles: the backend may measure its device time (see
  // last_device_time_ms); it must not change results or synchronization.
  bool profile = false;
  // Set while the method profiles steps: the backend may run its steps one by one (no graph
  // replay) and time each (see step_times); same results and synchronization.
  bool profile_steps = false;
  // A dynamic method's symbol values for this call (its symbols in the program's order; empty
  // for a static method): a backend built for a range of sizes runs at these. Valid during the
  // call.
  std::span<const int64_t> symbols;
};

// One step of a backend's partition, as timed by a call with DelegateArgs::profile_steps.
struct StepTime {
  std::string kind;     // the backend's step kind: "gemm", "conv", "kernel", "sdpa", "copy"
  std::string name;     // what runs it: a kernel's name, "cublasLtMatmul", a cuDNN engine
  std::string what;     // the step's description (as the backend describes its blob)
  double start_ms = 0;  // from the start of the call's first step
  double ms = 0;        // device time
};

class DelegateHandle {
 public:
  virtual ~DelegateHandle() = default;
};

class BackendInterface {
 public:
  virtual ~BackendInterface() = default;
  virtual std::string_view id() const = 0;
  // False when the backend cannot run here at all (e.g. no GPU); loading then fails with a
  // message naming the backend.
  virtual bool is_available() const = 0;
  // The load option keys this backend takes, and a check of one of its options' values: an
  // InvalidArgument naming the option and listing the valid values. Neither needs the device.
  virtual std::vector<std::string_view> option_keys() const { return {}; }
  virtual Status check_option(const BackendOption& option) const { return Status(); }
  virtual Result<DelegateHandle*> init(const BackendInitContext& context,
                                       std::span<const uint8_t> blob,
                                       std::span<const CompileSpec> compile_specs) = 0;
  virtual Status execute(DelegateHandle* handle, const DelegateArgs& args) = 0;
  // Makes the handle ready for calls at the sizes and memory `args` carries (Method::
  // prepare_shape): what its first call there would do besides running, done now (the CUDA
  // backend times its GEMM algorithms and cuDNN plans for these sizes and captures their CUDA
  // graph). Must not read or write the tensors' data; may allocate, block and take long. The
  // default does nothing.
  virtual Status prepare(DelegateHandle* handle, const DelegateArgs& args) { return Status(); }
  virtual void destroy(DelegateHandle* handle) = 0;
  // Device time of the handle's last profiled execute, when the backend measures one (and the
  // work is done: an execute that returned early is measured once the caller has waited for it).
  virtual std::optional<double> last_device_time_ms(DelegateHandle* handle) const {
    return std::nullopt;
  }
  // Per-step device times of the handle's last execute with profile_steps, in step order; empty
  // when the backend does not time steps (or that execute failed). May block until that call's
  // work is done (and calls on the handle wait meanwhile), and allocate.
  virtual std::vector<StepTime> step_times(DelegateHandle* handle) const { return {}; }
  // Monitoring counters of a handle ("zero_copy_calls", "staged_bytes", ...). May allocate.
  virtual std::vector<std::pair<std::string, uint64_t>> counters(DelegateHandle* handle) const {
    return {};
  }
  // What this backend knows about one of its blobs, for `baton inspect` and the Python binding
  // (include/baton/extension/inspect.h): one JSON object as text, e.g. the device and
  // architecture it was built for, its bindings and steps. An empty string (the default) means
  // the backend does not describe its blobs. Works without the device (programs are inspected on
  // machines without one) and on any bytes: a blob that does not validate is an error (typically
  // InvalidProgram, as `init` would return), which the description shows. May allocate; must be
  // callable concurrently with everything else.
  virtual Result<std::string> describe_blob(std::span<const uint8_t> blob) const {
    return std::string();
  }
};

// The registry keeps the pointer; the backend must outlive every Method that uses it (static
// storage is the usual choice). Registering an id twice replaces the earlier backend.
void register_backend(BackendInterface* backend);
BackendInterface* find_backend(std::string_view id);
std::vector<std::string_view> registered_backends();

}  // namespace baton::runtime
