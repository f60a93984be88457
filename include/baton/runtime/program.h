// Program: a verified, loaded program file. Method: one runnable instance of one of its methods.
//
// Program::load_file maps the file read-only and verifies it completely before returning (see
// docs/format.md); constants are used in place, never copied. A Program is immutable and may be
// shared by any number of Methods on any threads.
//
// load_method allocates everything a method needs (one arena per device, staging, kernel state,
// delegate handles) and checks every instruction against the registered kernels and backends.
// After that, Method::execute allocates nothing.
//
// Threads: one Method must be used by one thread at a time. Several Methods loaded from one
// Program may execute concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/tensor.h"
#include "baton/runtime/backend.h"

namespace baton::runtime {

class Method;
struct ProgramFactory;

struct TensorInfo {
  std::string_view name;
  DType dtype = DType::Float32;
  std::span<const int64_t> sizes;
  Device device;
  // False when the program planned no memory for it: the caller must bind it.
  bool has_storage = true;
};

// How Program::load_file / load_bytes verify a file.
struct LoadOptions {
  // Compare the XXH3-64 checksums of the header and table and of every data segment (constants,
  // backend blobs) with those recorded in the file: a damaged byte anywhere is an InvalidProgram
  // error naming the segment and its byte range. This reads every byte of the file once at load
  // (docs/format.md gives the measured cost). Off: the segments are not read at load (a mapped
  // file is not touched until its data is used) and a damaged weight goes unnoticed; every other
  // check (bounds, indices, kinds, overlaps) still runs. Off is for fuzzing and for files that
  // were checked already (e.g. by a download's own digest).
  bool verify_checksums = true;
  // Threads that hash the segments, the calling thread included; they have ended when the load
  // returns. 0: one per CPU, at most 8, and only the calling thread for files under 16 MiB.
  unsigned checksum_threads = 0;
};

// A dynamic method's symbol and a size for it: one part of a shape given by its symbols
// (MethodOptions::prepare_shapes, Method::prepare_shape).
struct SymbolSize {
  std::string name;
  int64_t size = 0;
};
// Parses "batch=1,sequence=16" (the CLI's --prepare-shape; "" is no sizes, a static method's one
// shape): InvalidArgument naming the part that is not NAME=SIZE. Checked against a method only by
// prepare_shape.
Result<std::vector<SymbolSize>> parse_symbol_sizes(std::string_view text);

// One entry of a device map (MethodOptions::device_map): what the program records as `from`
// runs on `to` instead.
struct DeviceMapping {
  Device from;
  Device to;
};
// Parses "cuda:0=cuda:1[,cuda:1=cuda:0...]" (the CLI's --device-map; "" is no map):
// InvalidArgument naming the part that is not DEVICE=DEVICE. The map's own rules are checked by
// load_method.
Result<std::vector<DeviceMapping>> parse_device_map(std::string_view text);

struct MethodOptions {
  // Load options, KEY=VALUE, passed to every backend's init (e.g. {"cuda_graphs", "0"}; for the
  // CUDA backend, baton::cuda::LoadOptions::to_backend_options() in include/baton/cuda/options.h).
  // load_method refuses a key no registered backend takes, and a value its backend refuses.
  std::vector<BackendOption> backend_options;
  // Threads the CPU kernels split GEMMs, convolutions and attention over, the executing thread
  // included (the others are made at load, and wait between executes without using the CPU after
  // a 200 us spin). 0: one per CPU the process may run on (its affinity mask). 1: everything runs
  // on the thread that calls execute(). Results may differ in the last bits between thread counts
  // (OpenBLAS blocks a split GEMM differently), never between runs with the same count.
  unsigned threads = 0;
  // Shapes prepared at load (Method::prepare_shape, in this order, after the declared OPT
  // shape), so that their first calls are as fast as later ones. A listed shape that
  // prepare_shape refuses fails the load with its error (the OPT shape's failure is a warning:
  // its first call then does the work). Each costs load time (full-size BERT-base fp16 on an
  // H200: 0.34-0.47 s, mostly timing its GEMMs and cuDNN plans) and a CUDA graph's memory.
  std::vector<std::vector<SymbolSize>> prepare_shapes;
  // Relocates the program (docs/serving.md, "One program, every GPU"): every arena, tensor and
  // delegate the program records on `from` is placed on `to`, so one file built for cuda:0 serves
  // an instance on each GPU. Only GPUs map, to GPUs of the same type; a device is mapped at most
  // once and no two onto one; devices not named stay where the program put them. A GPU engine
  // still checks at load that its target has the SM architecture it was built for (the usual
  // error, naming the mapping). load_method refuses a map that breaks these rules by name.
  std::vector<DeviceMapping> device_map;
};

class Program : public std::enable_shared_from_this<Program> {
 public:
  // Maps PATH read-only. PATH must be a regular file (a directory, device or FIFO is refused by
  // name). Errors: IoError (cannot open/map, not a regular file), InvalidProgram / NotSupported
  // (bad file), each naming the file; OutOfMemory when the host cannot hold what loading needs
  // (the load functions and load_method never throw).
  static Result<std::shared_ptr<const Program>> load_file(const std::string& path,
                                                          const LoadOptions& options = {});
  // Copies `bytes` into aligned storage owned by the Program.
  static Result<std::shared_ptr<const Program>> load_bytes(std::span<const uint8_t> bytes,
                                                           const LoadOptions& options = {});

  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  size_t num_methods() const;
  std::string_view method_name(size_t index) const;
  // The file's producer string ("baton 0.1.0 from mlp.onnx").
  std::string_view producer() const;
  size_t file_size() const;
  // The path the program was loaded from, or "<memory>".
  std::string_view origin() const;
  // The whole verified file (mapped, or the copy load_bytes made), valid while the Program lives:
  // for tools that describe the file (include/baton/extension/inspect.h). docs/format.md is its
  // layout.
  std::span<const uint8_t> bytes() const;

  Result<std::unique_ptr<Method>> load_method(std::string_view name = "forward",
                                              const MethodOptions& options = {}) const;

  // The loaded file and its mapping (src/runtime/program_impl.h); opaque outside the runtime.
  struct Impl;

 private:
  // The loads themselves; the public functions turn an allocation failure inside them into
  // Error::OutOfMemory (out_of_memory_as_error).
  static Result<std::shared_ptr<const Program>> load_file_impl(const std::string& path,
                                                               const LoadOptions& options);
  static Result<std::shared_ptr<const Program>> load_bytes_impl(std::span<const uint8_t> bytes,
                                                                const LoadOptions& options);
  Result<std::unique_ptr<Method>> load_method_impl(std::string_view name,
                                                   const MethodOptions& options) const;
  friend struct ProgramFactory;
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

enum class InstructionKind : uint8_t { Kernel, Delegate, Copy };

struct InstructionInfo {
  InstructionKind kind;
  // "Gemm (node 'fc1')", "delegate 0 'cuda_0' (backend cuda)", "copy 'x' cpu -> cuda:0".
  std::string description;
  // Where the work runs.
  Device device;
  // The kernel's op ("Gemm"; "delegate", "copy") and what it runs: its ONNX node, the
  // delegate's partition, the copied tensor.
  std::string op;
  std::string name;
};

class Method {
 public:
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  std::string_view name() const;
  // The threads its CPU kernels use (MethodOptions::threads, 0 resolved to the CPU count).
  unsigned cpu_threads() const;
  // The CPU kernels' scratch: one area allocated at load, shared by every kernel (they run one at
  // a time), as large as the largest kernel's need; and what each kernel reserved (its
  // description, "method 'forward' instruction 3 (Conv node 'conv1')", and bytes), in program
  // order. The sizes depend on the shapes and on cpu_threads().
  uint64_t scratch_bytes() const;
  struct KernelScratch {
    std::string kernel;
    uint64_t bytes = 0;
  };
  std::vector<KernelScratch> kernel_scratch() const;
  // What the CPU kernels made at load for themselves besides that scratch: packed copies of
  // constant float32 weights (a Linear's, a MatMul's constant B, a convolution's W, for Baton's
  // own GEMM kernels on a CPU with AVX2 or AVX-512), each as large as the weight it copies. The
  // total, and each kernel that holds any (description and bytes), in program order.
  uint64_t held_bytes() const;
  std::vector<KernelScratch> kernel_held() const;
  size_t num_inputs() const;
  size_t num_outputs() const;

  // Dynamic shapes (docs/dynamic_shapes.md). A dynamic method has symbols, each a dimension name
  // with the sizes a call may give it; its inputs' sizes bind them, every other size follows.
  // input_info / output_info then report the sizes of the last call (before the first, every
  // symbol's maximum), and output(i) the shape execute() produced.
  struct Symbol {
    std::string_view name;
    int64_t min = 0;
    int64_t max = 0;
    int64_t opt = 0;  // the size it was tuned for (0: max)
  };
  size_t num_symbols() const;
  Symbol symbol(size_t index) const;
  // One entry per dimension of input (output) `index`: the expression over the symbols ("batch",
  // "(seq + 1)"), empty for a static dimension, and its sizes with every symbol at its minimum and
  // at its maximum.
  struct Dim {
    std::string expr;
    int64_t min = 0;
    int64_t max = 0;
  };
  std::vector<Dim> input_dims(size_t index) const;
  std::vector<Dim> output_dims(size_t index) const;
  // Accessors taking an index: past the matching count they return an empty result (an
  // unnamed, storage-less TensorInfo; a null TensorView; no counters), never throw.
  TensorInfo input_info(size_t index) const;
  TensorInfo output_info(size_t index) const;

  // Copies `value` into the input's planned memory (through the device allocator when the input
  // lives on a device). dtype and sizes must match exactly; a dynamic dimension's size must lie in
  // its range (the next execute() checks that the inputs agree with each other).
  Status set_input(size_t index, const TensorView& value);
  // Zero-copy: later executions read the input from the caller's memory, which must stay valid
  // and unchanged until they finish. The view's device must be the input's device, unless only
  // delegates read the input: then memory on another device is handed to them as is, and the
  // backend binds it directly, stages it, or refuses it (the CUDA contract: device memory on the
  // engine's GPU and managed memory directly, host memory staged, another GPU's memory refused).
  Status bind_input(size_t index, const TensorView& value);
  // Later executions write the output into the caller's memory (same rules as bind_input, with
  // "written only by a delegate" for the other-device case). A dynamic output takes memory of
  // its dtype that holds it at its largest sizes (output_dims' maxima; the view's own sizes only
  // count its bytes): each call writes it there at the call's sizes, which output(index) reports.
  Status bind_output(size_t index, const TensorView& value);
  // Later executions write the output into its planned memory again (undoes bind_output; does
  // nothing for an output that was never redirected).
  void unbind_output(size_t index);

  // Runs every instruction in order. Allocates nothing. Errors name the failing instruction.
  Status execute();

  // Makes calls at one shape as fast from the first as later ones: each delegate does now what
  // its first call at these sizes would do besides running. The CUDA backend times its GEMM
  // algorithms and cuDNN plans for these sizes (keeping them for good) and captures the
  // shape's CUDA graph with the memory the inputs and outputs are in now, launching nothing; a
  // call at this shape with that memory, on a stream of the GPU's primary context, then
  // replays the graph without any host work (another stream context, or other memory, captures
  // again, with the timed choices). So bind the memory the calls will use first (binding
  // memory of the largest sizes, shaped by the view given, lets one buffer serve every shape).
  // `sizes` names every symbol the inputs give a size (not the data-dependent ones); a static
  // method takes none (its one shape's graph is captured). Reads and writes no tensor data and
  // changes nothing a call sees (the inputs' sizes stay those last set). Blocks until its device
  // work is done; allocates. Methods loaded with a declared OPT shape (compile --dim
  // NAME=MIN..MAX@OPT on every symbol) prepare it at load; MethodOptions::prepare_shapes lists
  // more. Errors: InvalidArgument naming an unknown, repeated or missing symbol, or a size
  // outside its range; a delegate's error naming its instruction.
  Status prepare_shape(std::span<const SymbolSize> sizes);

  // Valid after execute until the next execute (or until the bound memory goes away).
  TensorView output(size_t index) const;

  // State (docs/state.md): tensors the method keeps across calls in its own memory, such as a
  // decoder's key/value cache (compiled with --state). Each is zero after load and after
  // reset_state(); every execute() reads it and leaves its update there for the next call.
  // state_info's name is the model input the state replaces, state_update_name the output that
  // updates it; state(index) views its bytes (sizes of the last call; valid while the method
  // lives). set_state copies into it (dtype and sizes as state_info gives them). Indices past
  // num_states() give empty results (set_state: InvalidArgument).
  size_t num_states() const;
  TensorInfo state_info(size_t index) const;
  std::string_view state_update_name(size_t index) const;
  TensorView state(size_t index) const;
  Status set_state(size_t index, const TensorView& value);
  Status reset_state();

  // Instruction list, for reports ("where each part ran").
  size_t num_instructions() const;
  InstructionInfo instruction_info(size_t index) const;
  // What execute measures. Nothing by default: timing loops run that way. Measuring adds a
  // clock read per instruction, two device events per delegate call, and (steps) runs each GPU
  // partition's steps one by one with an event between them instead of replaying its graph.
  struct Profiling {
    bool instructions = false;  // each instruction's host start and wall time
    bool device_time = false;   // each delegate call's device time (instruction_device_time_ms)
    bool steps = false;         // each delegate's per-step device times (instruction_step_times)
  };
  void set_profiling(const Profiling& profiling);
  // set_profiling({enabled, enabled, false}).
  void set_profiling(bool enabled);
  // With Profiling::instructions: each instruction's wall time (host clock, after the
  // instruction returned; asynchronous device work is attributed to whoever waits for it) and
  // when it started, for the last execute.
  std::span<const std::chrono::nanoseconds> instruction_times() const;
  std::span<const std::chrono::steady_clock::time_point> instruction_start_times() const;
  // With Profiling::instructions, for a dynamic method: what the last execute() spent resolving
  // sizes because its input shapes changed (both zero when they did not): `sizes`, from entering
  // execute() to having bound the symbols, evaluated the size expressions and written every
  // dynamic tensor's sizes; and `kernels`, from there to the first instruction's start, resizing
  // the kernels that need it (Kernel::resize). Kernels that follow their sizes (follows_sizes())
  // replan inside their own instruction, so that work is in instruction_times(), not here.
  struct ResolveTimes {
    std::chrono::nanoseconds sizes{0};
    std::chrono::nanoseconds kernels{0};
  };
  ResolveTimes last_resolve_times() const;
  // With Profiling::device_time, for a delegate instruction: the device time its backend measured
  // in the last execute.
  std::optional<double> instruction_device_time_ms(size_t index) const;
  // With Profiling::steps, for a delegate instruction: its backend's per-step device times in the
  // last execute (empty when the backend does not time steps). May block until that execute's
  // device work is done; allocates.
  std::vector<StepTime> instruction_step_times(size_t index) const;

  // Copy instructions executed since load, by direction (the runtime counts; tests and monitoring
  // read them, e.g. to prove two GPU partitions hand a tensor over without visiting the host).
  struct CopyCounts {
    uint64_t host_to_device = 0;
    uint64_t device_to_host = 0;
    uint64_t device_to_device = 0;
    uint64_t bytes = 0;
  };
  CopyCounts copy_counts() const;

  size_t num_delegates() const;
  // The backend's monitoring counters for delegate `index` (e.g. zero-copy and staged calls).
  std::vector<std::pair<std::string, uint64_t>> delegate_counters(size_t index) const;

  // Bytes of planned memory per arena device.
  struct ArenaInfo {
    Device device;
    uint64_t size;
  };
  std::vector<ArenaInfo> arenas() const;

  struct Impl;

 private:
  friend class Program;
  explicit Method(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::runtime
