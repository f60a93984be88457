#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>

#include "baton/core/check.h"
#include "baton/core/log.h"
#include "baton/runtime/device_allocator.h"
#include "baton/runtime/program.h"
#include "format/size_exprs.h"
#include "ops/op_def.h"
#include "runtime/kernel.h"
#include "runtime/nvtx.h"
#include "runtime/program_impl.h"
#include "runtime/thread_pool.h"

namespace baton::runtime {
namespace {

constexpr size_t kArenaAlignment = 256;

std::string_view str(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : s->string_view();
}

template <typename T>
std::span<const T> span_of(const flatbuffers::Vector<T>* v) {
  if (v == nullptr) return {};
  return {v->data(), v->size()};
}

struct Step {
  InstructionKind kind = InstructionKind::Kernel;
  std::unique_ptr<Kernel> kernel;
  int delegate = -1;
  DelegateArgs delegate_args;
  // The values a kernel or delegate call names; its argument spans point into this, which is
  // complete before they are taken (and `steps` never grows after load).
  std::vector<Value*> args;
  Value* src = nullptr;
  Value* dst = nullptr;
  DeviceAllocator* allocator = nullptr;
  std::string description;
  std::string op, name;  // InstructionInfo's
  Device device;
  // A kernel whose output has a data-dependent size (Kernel::produced_size): the symbol that
  // size binds once the kernel has run; -1 for every other step.
  int produced_symbol = -1;
};

struct DelegateInstance {
  BackendInterface* backend = nullptr;
  DelegateHandle* handle = nullptr;
  std::string name;
  Device device;  // as the program records it
};

struct ArenaInstance {
  Device device;
  DeviceAllocator* allocator = nullptr;
  void* base = nullptr;
  uint64_t size = 0;
};

}  // namespace

struct Method::Impl {
  std::shared_ptr<const Program> program;
  const fb::Method* fm = nullptr;
  std::string name;
  // MethodOptions::device_map, checked: where each recorded device runs (placed()).
  std::vector<DeviceMapping> device_map;
  Device placed(Device recorded) const {
    for (const DeviceMapping& m : device_map) {
      if (m.from == recorded) return m.to;
    }
    return recorded;
  }
  std::vector<Value> values;
  // Planned data pointer of each value (restored by set_input after a bind).
  std::vector<void*> planned;
  // Dynamic shapes (docs/dynamic_shapes.md): the tensors with dims, each owning the sizes its
  // Value's view points at (the file's sizes, the upper bound, until a call changes them).
  struct DynamicTensor {
    int value = -1;
    std::span<const uint32_t> dims;  // indices into fm->size_exprs()
    std::span<const int64_t> max;    // the file's sizes: what memory was planned for
    std::span<int64_t> sizes;
  };
  // One entry per input with dims, and one per distinct dims of the other tensors (which share
  // it). Its spans point into resolve_block.
  std::vector<DynamicTensor> dynamic;
  std::vector<int> dynamic_of;      // per value: its entry in `dynamic`, or -1
  std::vector<int64_t> symbol_max;  // per symbol, from the file
  // The data-dependent symbols (Symbol.source >= 0: NonZero's count), which a kernel binds while
  // the call runs rather than the inputs before it; resolve() keeps their last sizes.
  std::vector<uint32_t> data_symbols;
  // With data symbols: what delegates read as the call's symbols (DelegateArgs::symbols), the
  // input symbols' values with each data symbol at its maximum. GPU engines are built with a
  // data symbol pinned there (nothing they compute depends on it), so a new count neither
  // re-patches an engine nor leaves its range.
  std::vector<int64_t> delegate_symbols;
  bool produced_dirty = false;  // bind_produced() failed part way (it is redone on the next call)
  // An input dimension that resolve() reads (filled by plan_resolve): where its size is and what
  // it must be, so that a call reads one short array rather than each input's entry, its dims and
  // their expressions in turn.
  struct InputDim {
    const int64_t* size = nullptr;  // where bind_sizes() keeps the call's size
    uint32_t expr = 0;              // the dimension's size expression
    uint32_t symbol = 0;            // input_symbols: the symbol it is
    uint32_t input = 0, axis = 0;   // for messages
  };
  // Everything resolve() reads and writes, carved out of one allocation (made in load_values) in
  // the order resolve() walks it. During a large model's call its weights evict all of this from
  // the caches and the TLB; one block of a few pages, prefetched at the end of the call
  // (prepare_next_resolve), comes back in about the time of one miss, where separate heap arrays
  // would cost one memory latency (and a page walk) each, one after the other.
  std::unique_ptr<std::byte[]> resolve_block;
  size_t resolve_block_bytes = 0;
  std::span<InputDim> input_symbols;    // input dimensions that are one symbol: they bind it
  std::span<int64_t> bound;             // per symbol: the size an input gave it, -1 before
  std::span<int32_t> bound_by;          // per symbol: its entry in input_symbols that gave it
  std::span<int64_t> expr_values;       // per size expression
  std::span<InputDim> input_relations;  // input dimensions that are an expression: checked
  // Three parallel arrays, one element per axis of every entry of `dynamic`, in entry order: the
  // axis's expression, the size its memory was planned for (the file's), and its size now. The
  // entries' spans, and through them the tensors' views, point into them.
  std::span<uint32_t> dims_storage;
  std::span<int64_t> max_storage;
  std::span<int64_t> size_storage;
  format::SizeExprList exprs;  // fm->size_exprs(), decoded at load
  // Per size expression: its value with every symbol at its minimum (Method::Dim::min).
  std::vector<int64_t> expr_at_min;
  std::vector<uint32_t> dynamic_kernels;  // kernel steps with a dynamic value
  // Those of dynamic_kernels that need resize() at every change of shape (not follows_sizes()).
  std::vector<uint32_t> resizable;
  bool shapes_dirty = false;           // an input's sizes changed since the last resolve
  Method::ResolveTimes resolve_times;  // of the last execute(), with profiling
  // With profiling, when the last resolve() had written the sizes (zero: no resolve this call).
  std::chrono::steady_clock::time_point sized_at;
  // The CPU kernels' threads (MethodOptions::threads), made with the first kernel; declared before
  // the steps, whose kernels keep a pointer to it.
  unsigned threads = 1;
  std::unique_ptr<ThreadPool> pool;
  // The CPU kernels' shared scratch (runtime/scratch.h), reserved at their create and allocated
  // once after the last; declared before the steps, whose kernels point into it.
  ScratchPlan scratch;
  std::vector<Step> steps;
  std::vector<ArenaInstance> arenas;
  std::vector<DelegateInstance> delegates;
  std::vector<int> inputs;
  std::vector<int> outputs;
  // State (Method.state, docs/state.md): values kept across calls, zeroed at load and by
  // reset_state(). `value` and `update` are one slot of an arena; `bytes` is its planned size.
  struct StateEntry {
    std::string name;
    int value = -1;
    int update = -1;
    uint64_t bytes = 0;
  };
  std::vector<StateEntry> state;
  // Inputs without planned memory must be bound before execute.
  std::vector<uint8_t> input_ready;
  // Per value: read (written) by an instruction that is not a delegate call. Only values that
  // delegates alone touch may be bound to memory on another device.
  std::vector<uint8_t> read_outside_delegates;
  std::vector<uint8_t> written_outside_delegates;
  Method::Profiling profiling;
  NvtxDomain nvtx = nullptr;
  std::vector<std::chrono::nanoseconds> times;
  std::vector<std::chrono::steady_clock::time_point> starts;
  Method::CopyCounts copies;

  ~Impl() {
    // Delegates first (they may still reference arena memory), in reverse order of creation.
    for (auto it = delegates.rbegin(); it != delegates.rend(); ++it) {
      if (it->handle != nullptr) it->backend->destroy(it->handle);
    }
    steps.clear();
    for (ArenaInstance& a : arenas) {
      if (a.base != nullptr) a.allocator->deallocate(a.device, a.base);
    }
  }

  std::string symbol_name(size_t s) const {
    return std::string(str(fm->symbols()->Get(s)->name()));
  }

  std::string expr_text(uint32_t e) const { return format::size_expr_text(*fm, e); }

  // From the decoded list, not the file's tables: resolve() asks on every change of shape.
  bool is_symbol(uint32_t e) const {
    return exprs.op(e) == static_cast<uint8_t>(fb::SizeOp::Symbol);
  }
  bool is_constant_expr(uint32_t e) const {
    return exprs.op(e) == static_cast<uint8_t>(fb::SizeOp::Const);
  }

  // Checks an input's sizes against its dims and records them. A dynamic dimension must lie in
  // its symbol's range (or, for an expression, within the planned maximum); whether the inputs
  // agree with each other is for resolve(), when all of them are bound.
  Status bind_sizes(size_t index, const TensorView& value, std::string_view input_name) {
    DynamicTensor& d = dynamic[dynamic_of[inputs[index]]];
    auto expected = [&] {
      std::string out = "[";
      for (size_t a = 0; a < d.dims.size(); ++a) {
        out += (a == 0 ? "" : ", ") +
               (is_constant_expr(d.dims[a]) ? std::to_string(d.max[a]) : expr_text(d.dims[a]));
      }
      return out + "]";
    };
    BATON_CHECK_OR_RETURN(
        value.dtype == values[inputs[index]].tensor.dtype && value.sizes.size() == d.dims.size(),
        InvalidArgument, "input {} ('{}'): expected {} {}, got {} {}", index, input_name,
        dtype_name(values[inputs[index]].tensor.dtype), expected(), dtype_name(value.dtype),
        shape_to_string(value.sizes));
    for (size_t a = 0; a < d.dims.size(); ++a) {
      const int64_t v = value.sizes[a];
      const uint32_t e = d.dims[a];
      if (is_constant_expr(e)) {
        BATON_CHECK_OR_RETURN(v == d.max[a], InvalidArgument,
                              "input {} ('{}'): axis {} has size {}, but the program fixes it at "
                              "{} (shape {})",
                              index, input_name, a, v, d.max[a], expected());
      } else if (is_symbol(e)) {
        const auto* s = fm->symbols()->Get(static_cast<uint32_t>(exprs.value(e)));
        BATON_CHECK_OR_RETURN(s->min() <= v && v <= s->max(), InvalidArgument,
                              "input {} ('{}'): axis {} ('{}') has size {}, outside the range "
                              "{}..{} the program was compiled for (shape {}); recompile with a "
                              "wider --dim {}=MIN..MAX",
                              index, input_name, a, str(s->name()), v, s->min(), s->max(),
                              expected(), str(s->name()));
      } else {
        BATON_CHECK_OR_RETURN(v >= 0 && v <= d.max[a], InvalidArgument,
                              "input {} ('{}'): axis {} ('{}') has size {}, above its largest size "
                              "{} (shape {})",
                              index, input_name, a, expr_text(e), v, d.max[a], expected());
      }
    }
    if (!std::equal(d.sizes.begin(), d.sizes.end(), value.sizes.begin(), value.sizes.end())) {
      std::copy(value.sizes.begin(), value.sizes.end(), d.sizes.begin());
      shapes_dirty = true;
    }
    return Status();
  }

  // A symbol whose size a kernel computes from data while the call runs (NonZero's count).
  bool is_data_symbol(size_t s) const {
    return std::find(data_symbols.begin(), data_symbols.end(), s) != data_symbols.end();
  }

  // Method::prepare_shape: checks `sizes` against the symbols, gives every dynamic tensor the
  // sizes they make, asks each delegate to prepare for them, and puts every size back as it
  // was, so that the next call sees the inputs' own.
  Status prepare(std::span<const SymbolSize> sizes) {
    const size_t n = symbol_max.size();
    auto names = [&] {
      std::string out;
      for (size_t s = 0; s < n; ++s) {
        if (is_data_symbol(s)) continue;
        out += fmt::format("{}{}", out.empty() ? "" : ", ", symbol_name(s));
      }
      return out;
    };
    BATON_CHECK_OR_RETURN(n > 0 || sizes.empty(), InvalidArgument,
                          "method '{}' has no dynamic dimension, so a shape to prepare names no "
                          "symbol ('{}' was given): prepare its one shape with no sizes",
                          name, sizes.empty() ? "" : sizes[0].name);
    std::vector<int64_t> values(n, -1);
    for (const SymbolSize& given : sizes) {
      size_t s = 0;
      while (s < n && symbol_name(s) != given.name) ++s;
      BATON_CHECK_OR_RETURN(s < n, InvalidArgument,
                            "method '{}' has no symbol '{}' to prepare a shape for; its symbols "
                            "are {}",
                            name, given.name, names());
      BATON_CHECK_OR_RETURN(!is_data_symbol(s), InvalidArgument,
                            "method '{}': symbol '{}' is a size the model computes from data, "
                            "not one a call gives; leave it out of the shape to prepare",
                            name, given.name);
      BATON_CHECK_OR_RETURN(values[s] < 0, InvalidArgument,
                            "method '{}': the shape to prepare gives '{}' twice", name, given.name);
      const fb::Symbol* fs = fm->symbols()->Get(static_cast<uint32_t>(s));
      BATON_CHECK_OR_RETURN(fs->min() <= given.size && given.size <= fs->max(), InvalidArgument,
                            "method '{}': cannot prepare {}={}, outside the range {}..{} the "
                            "program was compiled for",
                            name, given.name, given.size, fs->min(), fs->max());
      values[s] = given.size;
    }
    for (uint32_t s : data_symbols) values[s] = symbol_max[s];
    for (size_t s = 0; s < n; ++s) {
      BATON_CHECK_OR_RETURN(values[s] >= 0, InvalidArgument,
                            "method '{}': the shape to prepare gives no size for '{}'; give one "
                            "for each of {}",
                            name, symbol_name(s), names());
    }
    // Every size resolve() or a call wrote, put back however the delegates' preparing ends
    // (also without delegates, where nothing else happens: the round trip is the same code).
    const std::vector<int64_t> saved_bound(bound.begin(), bound.end());
    const std::vector<int64_t> saved_exprs(expr_values.begin(), expr_values.end());
    const std::vector<int64_t> saved_sizes(size_storage.begin(), size_storage.end());
    const std::vector<int64_t> saved_delegate_symbols = delegate_symbols;
    Status status;
    if (n > 0) {
      std::copy(values.begin(), values.end(), bound.begin());
      if (!delegate_symbols.empty()) {
        std::copy(values.begin(), values.end(), delegate_symbols.begin());
      }
      if (Status st = exprs.evaluate(bound, expr_values); !st.ok()) {
        status = with_method_name(Error::InvalidArgument, st);
      } else {
        status = write_sizes();
      }
    }
    for (size_t i = 0; i < steps.size() && status.ok(); ++i) {
      const Step& step = steps[i];
      if (step.kind != InstructionKind::Delegate) continue;
      const DelegateInstance& d = delegates[step.delegate];
      if (Status st = d.backend->prepare(d.handle, step.delegate_args); !st.ok()) {
        status = Status(st.code(), fmt::format("method '{}' instruction {} ({}): preparing a "
                                               "shape: {}",
                                               name, i, step.description, st.message()));
      }
    }
    std::copy(saved_bound.begin(), saved_bound.end(), bound.begin());
    std::copy(saved_exprs.begin(), saved_exprs.end(), expr_values.begin());
    std::copy(saved_sizes.begin(), saved_sizes.end(), size_storage.begin());
    std::copy(saved_delegate_symbols.begin(), saved_delegate_symbols.end(),
              delegate_symbols.begin());
    return status;
  }

  // At load: the declared OPT shape (every symbol an input gives declares one), then the
  // shapes the options list, each with an info line saying what it cost.
  Status prepare_at_load(const MethodOptions& options) {
    std::vector<std::vector<SymbolSize>> shapes;
    if (!symbol_max.empty()) {
      std::vector<SymbolSize> opt;
      for (size_t s = 0; s < symbol_max.size(); ++s) {
        if (is_data_symbol(s)) continue;
        const int64_t v = fm->symbols()->Get(static_cast<uint32_t>(s))->opt();
        if (v <= 0) {
          opt.clear();
          break;
        }
        opt.push_back(SymbolSize{symbol_name(s), v});
      }
      if (!opt.empty()) shapes.push_back(std::move(opt));
    }
    shapes.insert(shapes.end(), options.prepare_shapes.begin(), options.prepare_shapes.end());
    if (delegates.empty()) {
      // Checked all the same: a typo in a shape is an error whatever runs the method.
      for (const auto& shape : shapes) BATON_TRY(prepare(shape));
      return Status();
    }
    const bool opt_first = options.prepare_shapes.size() < shapes.size();
    for (size_t k = 0; k < shapes.size(); ++k) {
      const auto start = std::chrono::steady_clock::now();
      if (Status st = prepare(shapes[k]); !st.ok()) {
        // The declared OPT shape is prepared unasked: a failure there (a capture refused, say)
        // leaves that shape to its first call, as before shapes were prepared, and is said; a
        // shape the caller listed fails the load.
        if (k > 0 || !opt_first) return st;
        log_message(LogLevel::Warn, "runtime",
                    fmt::format("method '{}': the declared OPT shape was not prepared at load "
                                "(its first call will do that work): {}",
                                name, st.message()));
        continue;
      }
      std::string text;
      for (const SymbolSize& p : shapes[k]) {
        text += fmt::format("{}{}={}", text.empty() ? "" : ", ", p.name, p.size);
      }
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      log_message(
          LogLevel::Info, "runtime",
          fmt::format(
              "method '{}': prepared {} ({}) in {:.0f} ms", name, text.empty() ? "its shape" : text,
              k == 0 && opt_first ? "the declared OPT shape" : "MethodOptions::prepare_shapes",
              ms));
    }
    return Status();
  }

  // resolve() as a plain function, whose address prepare_next_resolve() can take.
  [[gnu::noinline]] static Status resolve_method(Impl& m,
                                                 std::chrono::steady_clock::time_point entered) {
    return m.resolve(entered);
  }

  // Once per call whose input sizes changed: binds the symbols from the inputs, checks that the
  // inputs agree (two inputs giving one symbol two sizes, an input dimension the others imply),
  // computes every size expression, writes the sizes of every dynamic tensor and resizes the
  // kernels that read them. Allocates nothing but an error's message. `entered`: when execute()
  // was entered, with profiling (the start of the sizes' time, so that timing resolve() adds one
  // clock read to a call, not three).
  [[gnu::always_inline]] Status resolve(std::chrono::steady_clock::time_point entered) {
    // Its data and code were prefetched at the end of the previous call (prepare_next_resolve).
    // A data-dependent symbol keeps its last size (every tensor that depends on it is written
    // after the kernel that binds it anew has run).
    for (size_t s = 0, d = 0; s < bound.size(); ++s) {
      if (d < data_symbols.size() && data_symbols[d] == s) {
        ++d;
      } else {
        bound[s] = -1;
      }
    }
    for (size_t k = 0; k < input_symbols.size(); ++k) {
      const InputDim& d = input_symbols[k];
      const int64_t v = *d.size;
      if (bound[d.symbol] < 0) {
        bound[d.symbol] = v;
        bound_by[d.symbol] = static_cast<int>(k);
      } else if (bound[d.symbol] != v) [[unlikely]] {
        return inputs_disagree(d);
      }
    }
    if (Status st = exprs.evaluate(bound, expr_values); !st.ok()) [[unlikely]] {
      return with_method_name(Error::InvalidArgument, st);
    }
    if (!data_symbols.empty()) {
      std::copy(bound.begin(), bound.end(), delegate_symbols.begin());
      for (uint32_t s : data_symbols) delegate_symbols[s] = symbol_max[s];
    }
    // Relations between inputs: an input dimension that is an expression of symbols other inputs
    // bind must have its value.
    for (const InputDim& d : input_relations) {
      if (expr_values[d.expr] != *d.size) [[unlikely]]
        return relation_broken(d);
    }
    BATON_TRY(write_sizes());
    if (profiling.instructions) {
      // The kernels' part ends where the first instruction starts (execute() computes it).
      sized_at = std::chrono::steady_clock::now();
      resolve_times.sizes = sized_at - entered;
    }
    BATON_TRY(resize_kernels(resizable));
    shapes_dirty = false;
    return Status();
  }

  // After step `i`, a kernel with a data-dependent output size: binds its symbol to the size the
  // kernel produced and, when that changed, computes every size expression again, writes the
  // dynamic tensors' sizes and resizes the kernels that need it, as resolve() does for a change
  // of input shape (so the instructions after it see their sizes). Allocates nothing.
  Status bind_produced(size_t i) {
    const Step& step = steps[i];
    const auto s = static_cast<size_t>(step.produced_symbol);
    const int64_t n = step.kernel->produced_size();
    if (n < 0 || n > symbol_max[s]) [[unlikely]] {
      return BATON_ERROR(Internal,
                         "method '{}' instruction {} ({}): produced size {} for '{}' lies outside "
                         "0..{}",
                         name, i, step.description, n, symbol_name(s), symbol_max[s]);
    }
    if (bound[s] == n && !produced_dirty) return Status();
    bound[s] = n;
    // Until this has finished, the sizes may be half written: the next call redoes it whatever
    // the count.
    produced_dirty = true;
    if (Status st = exprs.evaluate(bound, expr_values); !st.ok()) [[unlikely]] {
      return with_method_name(Error::InvalidArgument, st);
    }
    BATON_TRY(write_sizes());
    BATON_TRY(resize_kernels(resizable));
    produced_dirty = false;
    return Status();
  }

  // resolve()'s errors, out of line: between two calls of a large model resolve()'s own code is
  // evicted too, and every cache line of it that a call runs through is a miss; building the
  // messages in place made it several times longer than the work it does.
  [[gnu::cold, gnu::noinline]] Status inputs_disagree(const InputDim& d) const {
    const InputDim& first = input_symbols[bound_by[d.symbol]];
    return BATON_ERROR(InvalidArgument,
                       "method '{}': input {} ({}) axis {} gives '{}' the size {}, but input {} "
                       "({}) axis {} gives it {}; inputs that share a dimension name must agree",
                       name, first.input, value_name(inputs[first.input]), first.axis,
                       symbol_name(d.symbol), bound[d.symbol], d.input, value_name(inputs[d.input]),
                       d.axis, *d.size);
  }
  [[gnu::cold, gnu::noinline]] Status relation_broken(const InputDim& d) const {
    return BATON_ERROR(InvalidArgument,
                       "method '{}': input {} ({}) axis {} has size {}, but the other inputs' "
                       "sizes make it {} = {}",
                       name, d.input, value_name(inputs[d.input]), d.axis, *d.size,
                       expr_text(d.expr), expr_values[d.expr]);
  }
  [[gnu::cold, gnu::noinline]] Status with_method_name(Error code, const Status& st) const {
    return Status(code, fmt::format("method '{}': {}", name, st.message()));
  }

  // At the end of every call of a dynamic method: asks for what the next call's resolve() reads,
  // its data and its code (into the data caches, from which the instruction fetch then takes it).
  // During a large model's call its weights evict all of it, and resolve() would otherwise take
  // each of its cache lines as a miss, one after the other, before the first instruction can run;
  // here the misses overlap and cost the caller nothing, between calls. At most a few hundred
  // prefetch instructions (kPrefetchCap), issued whether or not the next call changes shape.
  void prepare_next_resolve() const {
    prefetch(resolve_block.get(), resolve_block_bytes);
    prefetch(exprs.code().data(), exprs.code().size_bytes());
    // Function addresses as data addresses: conditionally supported by the standard, done by GCC
    // and Clang on every target Baton builds for; a prefetch never faults.
    prefetch(reinterpret_cast<const void*>(&Impl::resolve_method), kResolveCodeBytes);
    prefetch(format::SizeExprList::evaluate_code(), kResolveCodeBytes);
  }
  // About resolve_method's and evaluate_list's machine code (under 1 KB each in the x86-64
  // release build); prefetching past the end of one only fetches some of the next function.
  static constexpr size_t kResolveCodeBytes = 1024;
  // Beyond this a method's resolve state would not stay in the caches anyway (a hand-made program
  // may hold a million expressions), and prefetching it would only evict the caller's data.
  static constexpr size_t kPrefetchCap = 16 * 1024;

  static void prefetch(const void* data, size_t bytes) {
    const auto* p = static_cast<const std::byte*>(data);
    for (size_t at = 0; at < std::min(bytes, kPrefetchCap); at += 64) __builtin_prefetch(p + at);
  }

  // Writes every dynamic tensor's sizes from expr_values and resizes every kernel that reads them
  // (at load: follows_sizes() kernels too, whose resize() says whether they take these sizes).
  Status apply_sizes() {
    BATON_TRY(write_sizes());
    return resize_kernels(dynamic_kernels);
  }

  // One flat pass over the three parallel arrays every entry's spans point into (in entry order,
  // without holes), rather than entry by entry: they are read front to back, which the hardware
  // prefetches, where the entries' spans were a chain of loads that each missed the cache after a
  // large model's call.
  Status write_sizes() {
    const size_t n = size_storage.size();
    const uint32_t* dims = dims_storage.data();
    const int64_t* max = max_storage.data();
    int64_t* sizes = size_storage.data();
    for (size_t j = 0; j < n; ++j) {
      const int64_t v = expr_values[dims[j]];
      // The verifier checked each expression at the symbols' maxima; a hand-made expression
      // need not be monotone, so every size is checked against the planned memory.
      if (v < 0 || v > max[j]) [[unlikely]] {
        return size_outside_plan(j, v);
      }
      sizes[j] = v;
    }
    return Status();
  }

  // write_sizes()'s error, for dims_storage[j]: finds the tensor whose entry holds it.
  [[gnu::cold, gnu::noinline]] Status size_outside_plan(size_t j, int64_t v) const {
    for (const DynamicTensor& d : dynamic) {
      const size_t first = static_cast<size_t>(d.dims.data() - dims_storage.data());
      if (j < first || j >= first + d.dims.size()) continue;
      return BATON_ERROR(InvalidProgram,
                         "method '{}': tensor {} axis {} would have size {} ({}), outside the "
                         "0..{} its memory was planned for; the program is inconsistent",
                         name, value_name(d.value), j - first, v, expr_text(dims_storage[j]),
                         max_storage[j]);
    }
    return BATON_ERROR(InvalidProgram, "method '{}': size {} lies in no tensor", name, j);
  }

  Status resize_kernels(const std::vector<uint32_t>& which) {
    for (uint32_t i : which) {
      if (Status st = steps[i].kernel->resize(); !st.ok()) [[unlikely]] {
        return resize_failed(i, st);
      }
    }
    return Status();
  }
  [[gnu::cold, gnu::noinline]] Status resize_failed(uint32_t i, const Status& st) const {
    return Status(st.code(), fmt::format("method '{}' instruction {} ({}): {}", name, i,
                                         steps[i].description, st.message()));
  }

  // At load: the tables resolve() walks (input_symbols, input_relations). A symbol that no input
  // dimension is could never be given a size, so such a program is refused here (the compiler
  // never writes one).
  Status plan_resolve() {
    size_t symbols_filled = 0, relations_filled = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int di = dynamic_of[inputs[i]];
      if (di < 0) continue;
      const DynamicTensor& d = dynamic[di];
      for (size_t a = 0; a < d.dims.size(); ++a) {
        const uint32_t e = d.dims[a];
        if (is_constant_expr(e)) continue;  // bind_sizes() checks those
        InputDim dim{&d.sizes[a], e, 0, static_cast<uint32_t>(i), static_cast<uint32_t>(a)};
        // load_values sized both arrays from the same inputs (the verifier refuses an input
        // listed twice); checked anyway, since a miscount would write past the block.
        std::span<InputDim>& list = is_symbol(e) ? input_symbols : input_relations;
        size_t& filled = is_symbol(e) ? symbols_filled : relations_filled;
        BATON_CHECK_OR_RETURN(filled < list.size(), Internal,
                              "method '{}': input {} has more dynamic dimensions than were counted",
                              name, i);
        if (is_symbol(e)) dim.symbol = static_cast<uint32_t>(exprs.value(e));
        list[filled++] = dim;
      }
    }
    BATON_CHECK_OR_RETURN(
        symbols_filled == input_symbols.size() && relations_filled == input_relations.size(),
        Internal, "method '{}': the inputs have fewer dynamic dimensions than were counted", name);
    for (uint32_t s = 0; s < bound.size(); ++s) {
      const int source = fm->symbols()->Get(s)->source();
      if (source >= 0) {
        // The verifier checked that one kernel instruction writes the source.
        data_symbols.push_back(s);
        for (uint32_t i = 0; i < steps.size(); ++i) {
          const auto* k = fm->instructions()->Get(i)->instruction_as_KernelCall();
          if (k == nullptr) continue;
          const std::span<const int32_t> outs = span_of(k->outputs());
          if (std::find(outs.begin(), outs.end(), source) == outs.end()) continue;
          // Asked now (a kernel that produces a count reports one from its creation on), so a
          // hand-made program whose source kernel gives none is refused at load, not mid-call.
          BATON_CHECK_OR_RETURN(steps[i].kernel->produced_size() >= 0, InvalidProgram,
                                "method '{}': symbol '{}' is the data-dependent size of {}, but "
                                "instruction {} ({}) that writes it produces no size",
                                name, symbol_name(s), value_name(source), i, steps[i].description);
          steps[i].produced_symbol = static_cast<int>(s);
        }
        continue;
      }
      const bool given = std::any_of(input_symbols.begin(), input_symbols.end(),
                                     [&](const InputDim& d) { return d.symbol == s; });
      BATON_CHECK_OR_RETURN(given, InvalidProgram,
                            "method '{}': no input dimension is the symbol '{}', so no call can "
                            "give it a size; recompile the model",
                            name, symbol_name(s));
    }
    if (!data_symbols.empty()) {
      delegate_symbols.assign(bound.begin(), bound.end());  // the maxima, as `bound` at load
      for (Step& step : steps) {
        if (step.kind == InstructionKind::Delegate) step.delegate_args.symbols = delegate_symbols;
      }
    }
    return Status();
  }

  // At load: every kernel of a dynamic call is resized to the sizes with every symbol at its
  // minimum and then back to the maximum, so that a kernel that cannot follow some dimension (a
  // convolution's spatial size) is refused at load rather than at the first call that varies it.
  Status check_dynamic_kernels() {
    if (symbol_max.empty()) return Status();
    std::vector<int64_t> min;
    for (uint32_t s = 0; s < symbol_max.size(); ++s) min.push_back(fm->symbols()->Get(s)->min());
    for (const std::vector<int64_t>* at : {&min, &symbol_max}) {
      if (Status st = exprs.evaluate(*at, expr_values); !st.ok()) {
        return Status(Error::InvalidProgram, fmt::format("method '{}': {}", name, st.message()));
      }
      if (at == &min) expr_at_min.assign(expr_values.begin(), expr_values.end());
      if (Status st = apply_sizes(); !st.ok()) {
        return st.code() == Error::NotSupported
                   ? Status(Error::NotSupported,
                            fmt::format("{} (at the smallest sizes of its dynamic dimensions); "
                                        "compile the model with those dimensions fixed (--shape)",
                                        st.message()))
                   : st;
      }
    }
    return Status();
  }

  std::string value_name(int index) const {
    const Value& v = values[index];
    if (v.is_tensor()) {
      const auto* t = fm->values()->Get(index)->value_as_Tensor();
      return fmt::format("'{}'", str(t->name()));
    }
    return fmt::format("value {}", index);
  }

  // Zeroes state `index`'s bytes (on a device, by a copy from zeroed host memory: this runs at
  // load and on reset, never in execute()).
  Status zero_state(size_t index) {
    const StateEntry& e = state[index];
    const TensorView& t = values[e.value].tensor;
    if (e.bytes == 0) return Status();
    if (t.device.is_cpu()) {
      std::memset(t.data, 0, e.bytes);
      return Status();
    }
    DeviceAllocator* allocator = copy_allocator(t.device, Device::cpu());
    BATON_CHECK_OR_RETURN(allocator != nullptr, NotSupported,
                          "method '{}' state '{}' is on {}, and no allocator for it is registered",
                          name, e.name, t.device.to_string());
    const std::vector<uint8_t> zeros(e.bytes, 0);
    return allocator->copy(t.data, t.device, zeros.data(), Device::cpu(), e.bytes);
  }

  Status load_state() {
    for (uint32_t i = 0; fm->state() != nullptr && i < fm->state()->size(); ++i) {
      const fb::State* st = fm->state()->Get(i);
      StateEntry e;
      e.name = std::string(str(st->name()));
      e.value = st->value();
      e.update = st->update();
      e.bytes = values[e.value].tensor.nbytes();
      state.push_back(std::move(e));
      BATON_TRY(zero_state(state.size() - 1));
    }
    return Status();
  }

  Status load_arenas() {
    const auto* list = fm->arenas();
    for (uint32_t i = 0; list != nullptr && i < list->size(); ++i) {
      const fb::Arena* fa = list->Get(i);
      ArenaInstance a;
      a.device = placed(format::device_of(*fa));
      a.size = fa->size();
      a.allocator = find_device_allocator(a.device.type);
      BATON_CHECK_OR_RETURN(
          a.allocator != nullptr, NotSupported,
          "method '{}': arena {} is on {} but no allocator for {} is registered in "
          "this runtime (call baton::register_builtins(); for GPUs link baton_cuda "
          "and call baton::cuda::register_backend())",
          name, i, a.device.to_string(), device_type_name(a.device.type));
      auto mem = a.allocator->allocate(a.device, a.size, kArenaAlignment);
      if (!mem.ok()) {
        return Status(mem.code(),
                      fmt::format("method '{}': allocating arena {} ({} bytes on {}): {}", name, i,
                                  a.size, a.device.to_string(), mem.status().message()));
      }
      a.base = *mem;
      arenas.push_back(a);
    }
    return Status();
  }

  void load_values(const Program::Impl& p) {
    const auto* list = fm->values();
    const uint32_t n = list == nullptr ? 0 : list->size();
    values.resize(n);
    planned.assign(n, nullptr);
    dynamic_of.assign(n, -1);
    const std::span<const int32_t> inputs_of_file = span_of(fm->inputs());
    auto is_input = [&](uint32_t i) {
      return std::find(inputs_of_file.begin(), inputs_of_file.end(), static_cast<int32_t>(i)) !=
             inputs_of_file.end();
    };
    exprs = format::SizeExprList(*fm);
    // First the sizes of resolve()'s arrays: the entries (inputs' own, the others' distinct
    // dims), their axes, and the input axes that bind a symbol or are checked.
    std::map<std::vector<uint32_t>, int> shape_index;  // non-input shapes, by their expressions
    size_t dynamic_count = 0, dims_count = 0, symbol_dims = 0, relation_dims = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Tensor* t = list->Get(i)->value_as_Tensor();
      if (t == nullptr || t->dims() == nullptr || t->dims()->size() == 0) continue;
      const std::span<const uint32_t> dims(t->dims()->data(), t->dims()->size());
      if (is_input(i)) {
        for (uint32_t e : dims) {
          if (is_symbol(e))
            ++symbol_dims;
          else if (!is_constant_expr(e))
            ++relation_dims;
        }
      } else if (!shape_index.emplace(std::vector<uint32_t>(dims.begin(), dims.end()), 0).second) {
        continue;  // shares an entry
      }
      ++dynamic_count;
      dims_count += dims.size();
    }
    shape_index.clear();
    dynamic.reserve(dynamic_count);
    const uint32_t nsym = fm->symbols() == nullptr ? 0 : fm->symbols()->size();
    for (uint32_t s = 0; s < nsym; ++s) symbol_max.push_back(fm->symbols()->Get(s)->max());
    // Then the block, carved in the order resolve() reads it (twice: once to size it). Each array
    // is value-initialized in place, which begins its elements' lifetimes.
    static_assert(alignof(InputDim) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__ &&
                  alignof(int64_t) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    for (int pass = 0; pass < 2; ++pass) {
      size_t offset = 0;
      auto carve = [&]<typename T>(std::span<T>& out, size_t count) {
        offset = (offset + alignof(T) - 1) / alignof(T) * alignof(T);
        if (pass == 1) {
          T* first = reinterpret_cast<T*>(resolve_block.get() + offset);
          std::uninitialized_value_construct_n(first, count);
          out = {first, count};
        }
        offset += count * sizeof(T);
      };
      carve(input_symbols, symbol_dims);
      carve(bound, nsym);
      carve(bound_by, nsym);
      carve(expr_values, exprs.size());
      carve(input_relations, relation_dims);
      carve(dims_storage, dims_count);
      carve(max_storage, dims_count);
      carve(size_storage, dims_count);
      if (pass == 0) {
        resolve_block_bytes = offset;
        resolve_block = std::make_unique_for_overwrite<std::byte[]>(std::max<size_t>(offset, 1));
      }
    }
    // Until a call resolves other sizes, every tensor is at its planned maximum: so are the
    // symbols (a delegate's first call at the maxima reads them, DelegateArgs::symbols).
    std::copy(symbol_max.begin(), symbol_max.end(), bound.begin());
    size_t used_dims = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Value* fv = list->Get(i);
      Value& v = values[i];
      switch (fv->value_type()) {
        case fb::ValueKind::Int:
          v = Value::from_int(fv->value_as_Int()->value());
          break;
        case fb::ValueKind::Float:
          v = Value::from_float(fv->value_as_Float()->value());
          break;
        case fb::ValueKind::String:
          v = Value::from_string(str(fv->value_as_String()->value()));
          break;
        case fb::ValueKind::IntList:
          v = Value::from_ints(span_of(fv->value_as_IntList()->items()));
          break;
        case fb::ValueKind::FloatList:
          v = Value::from_floats(span_of(fv->value_as_FloatList()->items()));
          break;
        case fb::ValueKind::Tensor: {
          const fb::Tensor* t = fv->value_as_Tensor();
          TensorView view;
          view.dtype = static_cast<DType>(t->dtype());
          view.sizes = span_of(t->sizes());
          if (t->dims() != nullptr && t->dims()->size() > 0) {
            const std::span<const uint32_t> dims(t->dims()->data(), t->dims()->size());
            // Tensors with the same expressions share one sizes array, so that a call writes
            // each distinct shape once (BERT's hundreds of [batch, sequence, 768] tensors are a
            // handful of shapes). Inputs keep their own: each holds what its caller bound until
            // resolve() has checked that they agree.
            const bool input = is_input(i);
            const std::vector<uint32_t> key(dims.begin(), dims.end());
            auto shared = input ? shape_index.end() : shape_index.find(key);
            if (shared == shape_index.end()) {
              DynamicTensor& d = dynamic.emplace_back();
              d.value = static_cast<int>(i);
              const size_t rank = dims.size();
              std::copy(dims.begin(), dims.end(), dims_storage.begin() + used_dims);
              std::copy(view.sizes.begin(), view.sizes.end(), max_storage.begin() + used_dims);
              std::copy(view.sizes.begin(), view.sizes.end(), size_storage.begin() + used_dims);
              d.dims = std::span<const uint32_t>(dims_storage.data() + used_dims, rank);
              d.max = std::span<const int64_t>(max_storage.data() + used_dims, rank);
              d.sizes = std::span<int64_t>(size_storage.data() + used_dims, rank);
              used_dims += rank;
              const int index = static_cast<int>(dynamic.size()) - 1;
              if (!input) shared = shape_index.emplace(key, index).first;
              dynamic_of[i] = index;
            } else {
              dynamic_of[i] = shared->second;
            }
            view.sizes = dynamic[dynamic_of[i]].sizes;
          }
          view.device = placed(format::device_of(*t));
          if (t->allocation() == fb::AllocationKind::Constant) {
            view.data =
                const_cast<uint8_t*>(p.file.segment(t->constant_segment()).data()) + t->offset();
          } else if (t->allocation() == fb::AllocationKind::Arena) {
            view.data = static_cast<uint8_t*>(arenas[t->arena()].base) + t->offset();
          }
          v = Value::from_tensor(view);
          planned[i] = view.data;
          break;
        }
        default:
          v = Value::none();
          break;
      }
    }
    // The first pass counted what this one fills; the same tests decide both.
    assert(used_dims == dims_storage.size());
  }

  // Fills `step.args` with the values each list names, then returns one span per list.
  template <size_t N>
  std::array<std::span<Value* const>, N> take_args(
      Step& step, std::array<const flatbuffers::Vector<int32_t>*, N> lists) {
    step.args.clear();
    for (const auto* list : lists) {
      for (int32_t index : span_of(list)) step.args.push_back(&values[index]);
    }
    std::array<std::span<Value* const>, N> spans;
    size_t at = 0;
    for (size_t j = 0; j < N; ++j) {
      spans[j] = {step.args.data() + at, span_of(lists[j]).size()};
      at += spans[j].size();
    }
    return spans;
  }

  Status load_delegates(const Program::Impl& p, const MethodOptions& options) {
    const auto* list = fm->delegates();
    for (uint32_t i = 0; list != nullptr && i < list->size(); ++i) {
      const fb::Delegate* fd = list->Get(i);
      const std::string_view backend_id = str(fd->backend());
      DelegateInstance d;
      d.name = std::string(str(fd->name()));
      d.device = placed(format::device_of(*fd));
      d.backend = find_backend(backend_id);
      if (d.backend == nullptr) {
        std::string known;
        for (std::string_view id : registered_backends()) known += fmt::format(" '{}'", id);
        return BATON_ERROR(NotSupported,
                           "method '{}': delegate {} ('{}') needs backend '{}', which is not "
                           "registered in this runtime (registered:{}). Link the backend's library "
                           "and register it (for 'cuda': baton::cuda::register_backend())",
                           name, i, d.name, backend_id, known.empty() ? " none" : known);
      }
      BATON_CHECK_OR_RETURN(d.backend->is_available(), NotSupported,
                            "method '{}': delegate {} ('{}') needs backend '{}', which is not "
                            "available on this machine (for 'cuda': no CUDA device is visible; "
                            "check the driver and CUDA_VISIBLE_DEVICES). To run without it, "
                            "compile the model again with --device cpu",
                            name, i, d.name, backend_id);
      std::vector<CompileSpec> specs;
      for (uint32_t k = 0; fd->compile_specs() != nullptr && k < fd->compile_specs()->size(); ++k) {
        const fb::CompileSpec* cs = fd->compile_specs()->Get(k);
        specs.push_back(CompileSpec{str(cs->key()), span_of(cs->value())});
      }
      BackendInitContext ctx;
      ctx.method_name = name;
      ctx.delegate_name = d.name;
      ctx.delegate_index = static_cast<int>(i);
      ctx.recorded_device = format::device_of(*fd);
      ctx.device = placed(ctx.recorded_device);
      ctx.options = options.backend_options;
      auto handle = d.backend->init(ctx, p.file.segment(fd->blob_segment()), specs);
      if (!handle.ok()) {
        return Status(handle.code(),
                      fmt::format("method '{}': initializing delegate {} ('{}', backend '{}'): {}",
                                  name, i, d.name, backend_id, handle.status().message()));
      }
      d.handle = *handle;
      delegates.push_back(std::move(d));
    }
    return Status();
  }

  Status load_kernel(uint32_t index, const fb::KernelCall& k, Step& step) {
    const fb::Operator* op = fm->operators()->Get(k.operator_());
    const std::string_view op_name = str(op->name());
    const std::string_view domain = str(op->domain()) == "ai.onnx" ? "" : str(op->domain());
    const std::string where = fmt::format("method '{}' instruction {} ({} node '{}')", name, index,
                                          op_name, str(k.name()));
    const ops::OpDef* def = ops::op_registry().find(op_name, domain, op->opset());
    if (def == nullptr) {
      const ops::OpDef* earliest = ops::op_registry().earliest(op_name, domain);
      return earliest == nullptr
                 ? BATON_ERROR(NotSupported,
                               "{}: operator '{}' (domain '{}') is not known to this runtime (use "
                               "the Baton version that compiled the program)",
                               where, op_name, domain.empty() ? "ai.onnx" : domain)
                 : BATON_ERROR(NotSupported,
                               "{}: the program uses '{}' at opset {}, but this runtime knows it "
                               "from opset {}",
                               where, op_name, op->opset(), earliest->since_version);
    }
    const KernelDef* kernel = kernel_registry().find(op_name, domain);
    BATON_CHECK_OR_RETURN(kernel != nullptr, NotSupported,
                          "{}: operator '{}' has no CPU kernel in this runtime (call "
                          "baton::register_builtins() before loading)",
                          where, op_name);
    KernelCall call;
    call.def = def;
    const auto args = take_args<3>(step, {k.inputs(), k.attributes(), k.outputs()});
    call.inputs = args[0];
    call.attrs = args[1];
    call.outputs = args[2];
    call.node_name = str(k.name());
    if (!pool) pool = std::make_unique<ThreadPool>(threads);
    call.pool = pool.get();
    call.scratch = &scratch;
    // A call with a dynamic value is created at the largest sizes and resized before every call
    // at others (Kernel::resize); its kernel reserves scratch for every size up to the largest.
    const bool dynamic_call = std::any_of(step.args.begin(), step.args.end(), [&](Value* v) {
      return dynamic_of[static_cast<size_t>(v - values.data())] >= 0;
    });
    call.dynamic = dynamic_call;

    // The definition's inference on what the program declares: the declared outputs must be what
    // the op produces from these inputs, and the attributes must be in the canonical form the
    // compiler writes (kernels rely on it: normalized axes, filled-in permutations).
    std::vector<ops::InputInfo> inputs;
    std::vector<DType> in_types, out_types;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const Value* v = call.inputs[i];
      BATON_CHECK_OR_RETURN(v->is_none() || v->is_tensor(), InvalidProgram,
                            "{}: input {} is a {}, not a tensor", where, i,
                            value_kind_name(v->kind));
      ops::InputInfo info;
      info.present = v->is_tensor();
      if (info.present) {
        BATON_CHECK_OR_RETURN(v->tensor.device.is_cpu(), InvalidProgram,
                              "{}: input {} is on {}, but CPU kernels read host memory", where, i,
                              v->tensor.device.to_string());
        info.dtype = v->tensor.dtype;
        info.sizes = v->tensor.sizes;
        const int vi = span_of(k.inputs())[i];
        if (fm->values()->Get(vi)->value_as_Tensor()->allocation() ==
            fb::AllocationKind::Constant) {
          info.data = v->tensor.data;
          if (i < 64) call.constant_inputs |= uint64_t{1} << i;
        }
        in_types.push_back(info.dtype);
      }
      inputs.push_back(info);
    }
    // A canonical op (domain "baton") may gain attributes between Baton versions (Linear's
    // activation): a program written before binds fewer than this runtime's definition.
    BATON_CHECK_OR_RETURN(call.attrs.size() == def->attrs.size(), InvalidProgram,
                          "{}: {} has {} attributes in this Baton, the program binds {}: it was "
                          "compiled by another Baton version; compile the model again with this "
                          "one (baton compile MODEL.onnx -o PROGRAM.baton)",
                          where, def->versioned_name(), def->attrs.size(), call.attrs.size());
    std::vector<ops::AttrValue> attrs;
    for (size_t a = 0; a < call.attrs.size(); ++a) {
      const ops::AttrKind kind = a < def->attrs.size() ? def->attrs[a].kind : ops::AttrKind::Int;
      attrs.push_back(value_as_attr(*call.attrs[a], kind));
    }
    const std::vector<ops::AttrValue> declared = attrs;
    std::vector<ops::OutputInfo> metas(call.outputs.size());
    Status st = ops::infer(*def, call.node_name, inputs, attrs, metas);
    if (!st.ok()) {
      const Error code =
          st.code() == Error::NotSupported ? Error::NotSupported : Error::InvalidProgram;
      return Status(code, fmt::format("{}: {}", where, st.message()));
    }
    for (size_t a = 0; a < attrs.size(); ++a) {
      BATON_CHECK_OR_RETURN(attrs[a] == declared[a], InvalidProgram,
                            "{}: attribute '{}' is {} in the program, but its canonical form is "
                            "{}: the program was not written by this compiler; recompile it",
                            where, def->attrs[a].name, declared[a].to_string(),
                            attrs[a].to_string());
    }
    for (size_t o = 0; o < metas.size(); ++o) {
      const Value* out = call.outputs[o];
      BATON_CHECK_OR_RETURN(out->is_tensor(), InvalidProgram, "{}: output {} is a {}, not a tensor",
                            where, o, value_kind_name(out->kind));
      const TensorView& t = out->tensor;
      const bool same =
          metas[o].dtype == t.dtype &&
          std::equal(metas[o].sizes.begin(), metas[o].sizes.end(), t.sizes.begin(), t.sizes.end());
      BATON_CHECK_OR_RETURN(same, InvalidProgram,
                            "{}: the op produces {} {} for output {} but the program declares {} "
                            "{}: the program is inconsistent; recompile it",
                            where, dtype_name(metas[o].dtype), shape_to_string(metas[o].sizes), o,
                            dtype_name(t.dtype), shape_to_string(t.sizes));
      BATON_CHECK_OR_RETURN(t.device.is_cpu(), InvalidProgram,
                            "{}: output {} is on {}, but CPU kernels write host memory", where, o,
                            t.device.to_string());
      out_types.push_back(t.dtype);
    }
    std::string why;
    BATON_CHECK_OR_RETURN(kernel_takes(*kernel, *def, in_types, out_types, &why), NotSupported,
                          "{}: {}", where, why);
    // Kernels size their buffers from the model's shapes at create and report what they cannot
    // allocate (kernels/cpu/common.h: size_buffer). This is the net under any that still sizes a
    // std::vector directly: the load fails with OutOfMemory naming the node, never an exception
    // out of the library.
    Result<std::unique_ptr<Kernel>> created = Status(Error::Internal, "not created");
    scratch.begin_kernel(where);
    try {
      created = kernel->create(call);
    } catch (const std::bad_alloc&) {
      return BATON_ERROR(OutOfMemory,
                         "{}: the host is out of memory for the buffers its kernel sizes at load "
                         "from this model's shapes",
                         where);
    } catch (const std::length_error&) {
      return BATON_ERROR(OutOfMemory,
                         "{}: its kernel's buffers for this model's shapes exceed what one "
                         "allocation can hold",
                         where);
    }
    if (!created.ok()) {
      return Status(created.code(), fmt::format("{}: {}", where, created.status().message()));
    }
    step.kind = InstructionKind::Kernel;
    step.kernel = std::move(created).value();
    // A call with a dynamic value is resized before every call at new sizes; ask now (at the
    // largest sizes, which it was created at) whether its kernel can, so that a program the
    // runtime cannot run at every size is refused at load, not at the first small batch.
    if (dynamic_call) {
      if (Status resized = step.kernel->resize(); !resized.ok()) {
        return resized.code() == Error::NotSupported
                   ? BATON_ERROR(NotSupported,
                                 "{}: Baton's CPU kernel for {} does not run at dynamic sizes yet; "
                                 "compile the model with the shapes fixed (--shape)",
                                 where, def->versioned_name())
                   : Status(resized.code(), fmt::format("{}: {}", where, resized.message()));
      }
      dynamic_kernels.push_back(index);
      if (!step.kernel->follows_sizes()) resizable.push_back(index);
    }
    step.description = call.describe();
    step.op = std::string(def->name);
    step.name = std::string(call.node_name);
    step.device = Device::cpu();
    return Status();
  }

  Status load_steps() {
    const auto* list = fm->instructions();
    const uint32_t n = list == nullptr ? 0 : list->size();
    steps.resize(n);
    read_outside_delegates.assign(values.size(), 0);
    written_outside_delegates.assign(values.size(), 0);
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Instruction* ins = list->Get(i);
      Step& step = steps[i];
      if (const auto* k = ins->instruction_as_KernelCall()) {
        for (int32_t v : span_of(k->inputs())) read_outside_delegates[v] = 1;
        for (int32_t v : span_of(k->outputs())) written_outside_delegates[v] = 1;
        BATON_TRY(load_kernel(i, *k, step));
      } else if (const auto* d = ins->instruction_as_DelegateCall()) {
        step.kind = InstructionKind::Delegate;
        step.delegate = d->delegate();
        const auto args = take_args<2>(step, {d->inputs(), d->outputs()});
        // A delegate with dynamic tensors runs at the symbols resolve() bound for the call
        // (a backend that cannot refuses at its own load: the CUDA engine checks its blob's
        // symbols against the call's).
        step.delegate_args.symbols = bound;
        step.delegate_args.inputs = args[0];
        step.delegate_args.outputs = args[1];
        const DelegateInstance& inst = delegates[step.delegate];
        step.device = inst.device;
        step.description = fmt::format("delegate {} '{}' (backend {})", step.delegate, inst.name,
                                       inst.backend->id());
        step.op = "delegate";
        step.name = inst.name;
      } else if (const auto* c = ins->instruction_as_DeviceCopy()) {
        read_outside_delegates[c->src()] = 1;
        written_outside_delegates[c->dst()] = 1;
        step.kind = InstructionKind::Copy;
        step.src = &values[c->src()];
        step.dst = &values[c->dst()];
        const Device from = step.src->tensor.device;
        const Device to = step.dst->tensor.device;
        BATON_CHECK_OR_RETURN(from.is_cpu() || to.is_cpu() || from.type == to.type, NotSupported,
                              "method '{}' instruction {}: copies between {} and {} are not "
                              "supported",
                              name, i, from.to_string(), to.to_string());
        step.allocator = copy_allocator(to, from);
        BATON_CHECK_OR_RETURN(step.allocator != nullptr, NotSupported,
                              "method '{}' instruction {}: copy {} -> {} needs an allocator for "
                              "{}, which is not registered",
                              name, i, from.to_string(), to.to_string(),
                              device_type_name(from.is_cpu() ? to.type : from.type));
        step.device = from.is_cpu() ? to : from;
        step.description =
            fmt::format("copy {} {} -> {}", value_name(c->dst()), from.to_string(), to.to_string());
        step.op = "copy";
        step.name = std::string(str(fm->values()->Get(c->dst())->value_as_Tensor()->name()));
      }
    }
    return Status();
  }
};

Result<std::unique_ptr<Method>> Program::load_method(std::string_view name,
                                                     const MethodOptions& options) const {
  return out_of_memory_as_error("loading method", name,
                                [&] { return load_method_impl(name, options); });
}

namespace {

// Every load option must be one a registered backend takes, with a value it takes, whether or not
// this program has a partition of that backend: one serving configuration is given to many
// programs, and a misspelt key must not quietly leave the default in place.
Status check_backend_options(std::span<const BackendOption> options) {
  for (const BackendOption& o : options) {
    BackendInterface* owner = nullptr;
    std::string known;
    for (std::string_view id : registered_backends()) {
      BackendInterface* b = find_backend(id);
      for (std::string_view key : b->option_keys()) {
        known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", key, id);
        if (key == o.key && owner == nullptr) owner = b;
      }
    }
    if (owner == nullptr) {
      return BATON_ERROR(
          InvalidArgument, "unknown load option '{}': {}", o.key,
          known.empty() ? "the backends registered here take none" : "the options are " + known);
    }
    BATON_TRY(owner->check_option(o));
  }
  return Status();
}

// A device map moves whole GPUs, one to one: a CPU cannot be mapped (its kernels read host
// memory), a device of one type cannot become another's, and two of the program's GPUs must not
// land on one (their arenas and engines were planned apart; a copy between them would become a copy
// within one GPU that no instruction expects). Each `from` must be a GPU the method uses, so a map
// meant for another program is not silently ignored.
Status check_device_map(std::span<const DeviceMapping> map, const fb::Method& fm,
                        std::string_view method) {
  if (map.empty()) return Status();
  std::vector<Device> used;
  const auto use = [&](Device d) {
    if (std::find(used.begin(), used.end(), d) == used.end()) used.push_back(d);
  };
  for (uint32_t i = 0; fm.arenas() != nullptr && i < fm.arenas()->size(); ++i) {
    use(format::device_of(*fm.arenas()->Get(i)));
  }
  for (uint32_t i = 0; fm.delegates() != nullptr && i < fm.delegates()->size(); ++i) {
    use(format::device_of(*fm.delegates()->Get(i)));
  }
  std::string used_text;
  for (const Device& d : used) {
    if (!d.is_cpu()) used_text += fmt::format("{}{}", used_text.empty() ? "" : ", ", d.to_string());
  }
  for (size_t i = 0; i < map.size(); ++i) {
    const DeviceMapping& m = map[i];
    BATON_CHECK_OR_RETURN(!m.from.is_cpu() && !m.to.is_cpu(), InvalidArgument,
                          "device map {}={}: only GPUs are mapped (the CPU stays the CPU)",
                          m.from.to_string(), m.to.to_string());
    BATON_CHECK_OR_RETURN(m.from.type == m.to.type, InvalidArgument,
                          "device map {}={}: a device maps to one of its own type",
                          m.from.to_string(), m.to.to_string());
    BATON_CHECK_OR_RETURN(
        std::find(used.begin(), used.end(), m.from) != used.end(), InvalidArgument,
        "device map {}={}: method '{}' has nothing on {} ({}); map the devices it uses",
        m.from.to_string(), m.to.to_string(), method, m.from.to_string(),
        used_text.empty() ? "it runs on the CPU alone" : "it uses " + used_text);
    for (size_t j = 0; j < i; ++j) {
      BATON_CHECK_OR_RETURN(map[j].from != m.from, InvalidArgument,
                            "device map: {} is mapped twice (to {} and to {})", m.from.to_string(),
                            map[j].to.to_string(), m.to.to_string());
      BATON_CHECK_OR_RETURN(map[j].to != m.to, InvalidArgument,
                            "device map: {} and {} are both mapped to {}; a map moves each GPU "
                            "to a GPU of its own",
                            map[j].from.to_string(), m.from.to_string(), m.to.to_string());
    }
  }
  // A device the map leaves in place must not receive another: cuda:0=cuda:1 for a program
  // that also uses cuda:1 needs cuda:1 mapped too (cuda:1=cuda:0 swaps them).
  for (const Device& d : used) {
    bool mapped = false;
    for (const DeviceMapping& m : map) mapped = mapped || m.from == d;
    if (mapped) continue;
    for (const DeviceMapping& m : map) {
      BATON_CHECK_OR_RETURN(m.to != d, InvalidArgument,
                            "device map {}={}: method '{}' also uses {}, which the map leaves in "
                            "place; map {} as well (e.g. {}={} swaps the two)",
                            m.from.to_string(), m.to.to_string(), method, d.to_string(),
                            d.to_string(), d.to_string(), m.from.to_string());
    }
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<Method>> Program::load_method_impl(std::string_view name,
                                                          const MethodOptions& options) const {
  const fb::Program& fp = impl_->file.program();
  const fb::Method* found = nullptr;
  for (const fb::Method* m : *fp.methods()) {
    if (str(m->name()) == name) found = m;
  }
  if (found == nullptr) {
    // The first few names: a program may have any number of methods.
    constexpr uint32_t kNamesShown = 8;
    const uint32_t count = fp.methods()->size();
    std::string names;
    for (uint32_t i = 0; i < std::min(count, kNamesShown); ++i) {
      names += fmt::format("{}'{}'", i == 0 ? "" : ", ", str(fp.methods()->Get(i)->name()));
    }
    if (count > kNamesShown) names += fmt::format(" and {} more", count - kNamesShown);
    return BATON_ERROR(NotFound, "{}: the program has no method '{}' (it has {})", impl_->origin,
                       name, names);
  }
  BATON_TRY(check_backend_options(options.backend_options));
  BATON_TRY(check_device_map(options.device_map, *found, name));
  auto impl = std::make_unique<Method::Impl>();
  impl->program = shared_from_this();
  impl->fm = found;
  impl->name = std::string(name);
  impl->device_map = options.device_map;
  impl->nvtx = nvtx_domain();
  BATON_TRY(impl->load_arenas());
  impl->load_values(*impl_);
  for (int32_t i : span_of(found->inputs())) impl->inputs.push_back(i);
  for (int32_t i : span_of(found->outputs())) impl->outputs.push_back(i);
  BATON_TRY(impl->load_state());
  impl->input_ready.resize(impl->inputs.size());
  for (size_t i = 0; i < impl->inputs.size(); ++i) {
    impl->input_ready[i] = impl->values[impl->inputs[i]].tensor.data != nullptr;
  }
  BATON_TRY(impl->load_delegates(*impl_, options));
  impl->threads = options.threads > 0 ? options.threads : ThreadPool::available_cpus();
  BATON_TRY(impl->load_steps());
  BATON_TRY(impl->plan_resolve());
  BATON_TRY(impl->check_dynamic_kernels());
  if (Status st = impl->scratch.allocate(); !st.ok()) {
    return Status(st.code(), fmt::format("method '{}': {}", name, st.message()));
  }
  BATON_TRY(impl->prepare_at_load(options));
  return std::unique_ptr<Method>(new Method(std::move(impl)));
}

Method::Method(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Method::~Method() = default;

std::string_view Method::name() const { return impl_->name; }
unsigned Method::cpu_threads() const { return impl_->threads; }
uint64_t Method::scratch_bytes() const { return impl_->scratch.bytes(); }
std::vector<Method::KernelScratch> Method::kernel_scratch() const {
  std::vector<KernelScratch> out;
  for (const ScratchPlan::KernelScratch& k : impl_->scratch.kernels()) {
    out.push_back(KernelScratch{k.kernel, k.bytes});
  }
  return out;
}
uint64_t Method::held_bytes() const {
  uint64_t total = 0;
  for (const KernelScratch& k : kernel_held()) total += k.bytes;
  return total;
}
std::vector<Method::KernelScratch> Method::kernel_held() const {
  std::vector<KernelScratch> out;
  for (size_t i = 0; i < impl_->steps.size(); ++i) {
    const Step& step = impl_->steps[i];
    if (step.kernel == nullptr) continue;
    if (const uint64_t bytes = step.kernel->held_bytes(); bytes > 0) {
      // Named as kernel_scratch() names its kernels.
      out.push_back(KernelScratch{fmt::format("method '{}' instruction {} ({} node '{}')",
                                              impl_->name, i, step.op, step.name),
                                  bytes});
    }
  }
  return out;
}
size_t Method::num_inputs() const { return impl_->inputs.size(); }

size_t Method::num_symbols() const { return impl_->symbol_max.size(); }

Method::Symbol Method::symbol(size_t index) const {
  if (index >= impl_->symbol_max.size()) return Symbol{};
  const fb::Symbol* s = impl_->fm->symbols()->Get(static_cast<uint32_t>(index));
  return Symbol{str(s->name()), s->min(), s->max(), s->opt()};
}

namespace {

std::vector<Method::Dim> dims_of(const Method::Impl& m, int vi) {
  std::vector<Method::Dim> out;
  const fb::Tensor* t = m.fm->values()->Get(vi)->value_as_Tensor();
  const int di = m.dynamic_of[vi];
  for (size_t a = 0; a < span_of(t->sizes()).size(); ++a) {
    const int64_t max = t->sizes()->Get(static_cast<uint32_t>(a));
    if (di < 0 || m.is_constant_expr(m.dynamic[di].dims[a])) {
      out.push_back(Method::Dim{"", max, max});
      continue;
    }
    const uint32_t e = m.dynamic[di].dims[a];
    out.push_back(Method::Dim{m.expr_text(e), m.expr_at_min[e], max});
  }
  return out;
}

}  // namespace

std::vector<Method::Dim> Method::input_dims(size_t index) const {
  return index < impl_->inputs.size() ? dims_of(*impl_, impl_->inputs[index]) : std::vector<Dim>{};
}

std::vector<Method::Dim> Method::output_dims(size_t index) const {
  return index < impl_->outputs.size() ? dims_of(*impl_, impl_->outputs[index])
                                       : std::vector<Dim>{};
}
size_t Method::num_outputs() const { return impl_->outputs.size(); }

namespace {

TensorInfo info_of(const Method::Impl& m, int index) {
  const fb::Tensor* t = m.fm->values()->Get(index)->value_as_Tensor();
  const TensorView& v = m.values[index].tensor;
  const Device planned = m.placed(format::device_of(*t));
  return TensorInfo{str(t->name()), v.dtype, v.sizes, planned, m.planned[index] != nullptr};
}

Status check_matches(const TensorInfo& info, const TensorView& value, std::string_view what,
                     size_t index) {
  const bool same_sizes =
      std::equal(info.sizes.begin(), info.sizes.end(), value.sizes.begin(), value.sizes.end());
  BATON_CHECK_OR_RETURN(value.dtype == info.dtype && same_sizes, InvalidArgument,
                        "{} {} ('{}'): expected {} {}, got {} {}", what, index, info.name,
                        dtype_name(info.dtype), shape_to_string(info.sizes),
                        dtype_name(value.dtype), shape_to_string(value.sizes));
  BATON_CHECK_OR_RETURN(value.data != nullptr || value.nbytes() == 0, InvalidArgument,
                        "{} {} ('{}'): the data pointer is null", what, index, info.name);
  return Status();
}

// An output the method computes into an arena (and so one the caller may redirect).
bool computed_output(const Method::Impl& m, int vi) {
  return m.fm->values()->Get(vi)->value_as_Tensor()->allocation() == fb::AllocationKind::Arena &&
         std::find(m.inputs.begin(), m.inputs.end(), vi) == m.inputs.end();
}

}  // namespace

// The accessors below take an index below the matching count; past it they return an empty
// description instead of throwing (the runtime throws nothing).
TensorInfo Method::input_info(size_t index) const {
  return index < impl_->inputs.size() ? info_of(*impl_, impl_->inputs[index])
                                      : TensorInfo{{}, DType::Float32, {}, Device::cpu(), false};
}

TensorInfo Method::output_info(size_t index) const {
  return index < impl_->outputs.size() ? info_of(*impl_, impl_->outputs[index])
                                       : TensorInfo{{}, DType::Float32, {}, Device::cpu(), false};
}

Status Method::set_input(size_t index, const TensorView& value) {
  BATON_CHECK_OR_RETURN(index < impl_->inputs.size(), InvalidArgument,
                        "input index {} is out of range: method '{}' has {} inputs", index,
                        impl_->name, impl_->inputs.size());
  const int vi = impl_->inputs[index];
  const TensorInfo info = input_info(index);
  if (impl_->dynamic_of[vi] >= 0) {
    BATON_CHECK_OR_RETURN(value.data != nullptr || value.nbytes() == 0, InvalidArgument,
                          "input {} ('{}'): the data pointer is null", index, info.name);
    BATON_TRY(impl_->bind_sizes(index, value, info.name));
  } else {
    BATON_TRY(check_matches(info, value, "input", index));
  }
  void* planned = impl_->planned[vi];
  BATON_CHECK_OR_RETURN(planned != nullptr, InvalidArgument,
                        "input {} ('{}') has no planned memory in this program; pass it with "
                        "bind_input",
                        index, info.name);
  Value& v = impl_->values[vi];
  v.tensor.data = planned;
  v.tensor.device = info.device;
  DeviceAllocator* allocator = copy_allocator(info.device, value.device);
  BATON_CHECK_OR_RETURN(allocator != nullptr, NotSupported,
                        "method '{}' input {} ('{}'): no allocator can copy from {} to {} (for "
                        "GPUs call baton::cuda::register_backend())",
                        impl_->name, index, info.name, value.device.to_string(),
                        info.device.to_string());
  BATON_TRY(allocator->copy(planned, info.device, value.data, value.device, value.nbytes()));
  impl_->input_ready[index] = 1;
  return Status();
}

Status Method::bind_input(size_t index, const TensorView& value) {
  BATON_CHECK_OR_RETURN(index < impl_->inputs.size(), InvalidArgument,
                        "input index {} is out of range: method '{}' has {} inputs", index,
                        impl_->name, impl_->inputs.size());
  const TensorInfo info = input_info(index);
  const int vi = impl_->inputs[index];
  if (impl_->dynamic_of[vi] >= 0) {
    BATON_CHECK_OR_RETURN(value.data != nullptr || value.nbytes() == 0, InvalidArgument,
                          "input {} ('{}'): the data pointer is null", index, info.name);
    BATON_CHECK_OR_RETURN(value.device == info.device, InvalidArgument,
                          "input {} ('{}') lives on {} in this program but the bound memory is on "
                          "{}; use set_input to copy it",
                          index, info.name, info.device.to_string(), value.device.to_string());
    BATON_TRY(impl_->bind_sizes(index, value, info.name));
  } else {
    BATON_TRY(check_matches(info, value, "input", index));
  }
  BATON_CHECK_OR_RETURN(value.device == info.device || !impl_->read_outside_delegates[vi],
                        InvalidArgument,
                        "input {} ('{}') lives on {} in this program but the bound memory is on "
                        "{}; use set_input to copy it, or compile with the matching --io option",
                        index, info.name, info.device.to_string(), value.device.to_string());
  impl_->values[vi].tensor.data = value.data;
  impl_->values[vi].tensor.device = value.device;
  impl_->input_ready[index] = 1;
  return Status();
}

Status Method::bind_output(size_t index, const TensorView& value) {
  BATON_CHECK_OR_RETURN(index < impl_->outputs.size(), InvalidArgument,
                        "output index {} is out of range: method '{}' has {} outputs", index,
                        impl_->name, impl_->outputs.size());
  const int vi = impl_->outputs[index];
  const TensorInfo info = output_info(index);
  if (const int di = impl_->dynamic_of[vi]; di >= 0) {
    // A dynamic output's sizes are known only once a call has its inputs: bound memory must hold
    // it at its largest (the sizes the program planned its own memory for, whatever this call's
    // are). Each call writes its result there at the call's sizes, which output(index) reports.
    const std::span<const int64_t> max = impl_->dynamic[static_cast<size_t>(di)].max;
    const TensorView largest{nullptr, info.dtype, max, info.device};
    BATON_CHECK_OR_RETURN(value.dtype == info.dtype, InvalidArgument,
                          "output {} ('{}'): expected {}, got {}", index, info.name,
                          dtype_name(info.dtype), dtype_name(value.dtype));
    BATON_CHECK_OR_RETURN(value.nbytes() >= largest.nbytes(), InvalidArgument,
                          "output {} ('{}') has dynamic sizes, at most {} ({} bytes); the bound "
                          "memory ({} {}) holds {} bytes: bind memory for its largest sizes",
                          index, info.name, shape_to_string(max), largest.nbytes(),
                          dtype_name(value.dtype), shape_to_string(value.sizes), value.nbytes());
    BATON_CHECK_OR_RETURN(value.data != nullptr || largest.nbytes() == 0, InvalidArgument,
                          "output {} ('{}'): the data pointer is null", index, info.name);
  } else {
    BATON_TRY(check_matches(info, value, "output", index));
  }
  BATON_CHECK_OR_RETURN(value.device == info.device || (!impl_->read_outside_delegates[vi] &&
                                                        !impl_->written_outside_delegates[vi]),
                        InvalidArgument,
                        "output {} ('{}') lives on {} in this program but the bound memory is on "
                        "{}; compile with the matching --io option",
                        index, info.name, info.device.to_string(), value.device.to_string());
  BATON_CHECK_OR_RETURN(computed_output(*impl_, vi), InvalidArgument,
                        "output {} ('{}') is a constant or a method input, not computed by the "
                        "method; it cannot be redirected (read it with output({}) instead)",
                        index, info.name, index);
  impl_->values[vi].tensor.data = value.data;
  impl_->values[vi].tensor.device = value.device;
  return Status();
}

void Method::unbind_output(size_t index) {
  if (index >= impl_->outputs.size()) return;
  const int vi = impl_->outputs[index];
  if (!computed_output(*impl_, vi)) return;  // never redirected
  impl_->values[vi].tensor.data = impl_->planned[vi];
  impl_->values[vi].tensor.device = output_info(index).device;
}

Status Method::execute() {
  Impl& m = *impl_;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    if (!m.input_ready[i]) {
      return BATON_ERROR(InvalidArgument,
                         "method '{}': input {} ('{}') has no memory; bind it with bind_input "
                         "before execute",
                         m.name, i, input_info(i).name);
    }
  }
  // The method's range covers resolving too, which is part of the call (and keeps the range's
  // push out of the kernels' share of the resolve time below).
  const NvtxRange method_range(m.nvtx, m.name);
  m.resolve_times = Method::ResolveTimes{};
  m.sized_at = {};
  // Read whether or not this call resolves, so that a call that does reads the clock once more
  // than one that does not (sized_at), and resolve's cost measured as their difference (bench/
  // resolve_bench.cpp) carries one clock read, not three.
  const auto entered = m.profiling.instructions ? std::chrono::steady_clock::now()
                                                : std::chrono::steady_clock::time_point();
  if (m.shapes_dirty) BATON_TRY(Impl::resolve_method(m, entered));
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Step& s = m.steps[i];
    const auto start = m.profiling.instructions ? std::chrono::steady_clock::now()
                                                : std::chrono::steady_clock::time_point();
    const NvtxRange range(m.nvtx, s.description);
    Status st;
    switch (s.kind) {
      case InstructionKind::Kernel:
        st = s.kernel->run();
        break;
      case InstructionKind::Delegate: {
        const DelegateInstance& d = m.delegates[s.delegate];
        st = d.backend->execute(d.handle, s.delegate_args);
        break;
      }
      case InstructionKind::Copy: {
        const Device from = s.src->tensor.device;
        const Device to = s.dst->tensor.device;
        st = s.allocator->copy(s.dst->tensor.data, to, s.src->tensor.data, from,
                               s.src->tensor.nbytes());
        ++(from.is_cpu() ? m.copies.host_to_device
           : to.is_cpu() ? m.copies.device_to_host
                         : m.copies.device_to_device);
        m.copies.bytes += s.src->tensor.nbytes();
        break;
      }
    }
    if (!st.ok()) {
      return Status(st.code(), fmt::format("method '{}' instruction {} ({}): {}", m.name, i,
                                           s.description, st.message()));
    }
    if (s.produced_symbol >= 0) BATON_TRY(m.bind_produced(i));
    if (m.profiling.instructions) {
      m.starts[i] = start;
      m.times[i] = std::chrono::steady_clock::now() - start;
      if (i == 0 && m.sized_at != std::chrono::steady_clock::time_point()) {
        m.resolve_times.kernels = start - m.sized_at;
      }
    }
  }
  if (!m.symbol_max.empty()) m.prepare_next_resolve();
  return Status();
}

Status Method::prepare_shape(std::span<const SymbolSize> sizes) { return impl_->prepare(sizes); }

Result<std::vector<DeviceMapping>> parse_device_map(std::string_view text) {
  std::vector<DeviceMapping> out;
  if (text.empty()) return out;  // no map: every device where the program put it
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view part = text.substr(at, comma - at);
    const size_t eq = part.find('=');
    std::optional<Device> from, to;
    if (eq != std::string_view::npos) {
      from = Device::parse(part.substr(0, eq));
      to = Device::parse(part.substr(eq + 1));
    }
    BATON_CHECK_OR_RETURN(from && to, InvalidArgument,
                          "'{}' in the device map '{}' is not FROM=TO with two devices (e.g. "
                          "cuda:0=cuda:1: what the program built for cuda:0 runs on cuda:1)",
                          part, text);
    out.push_back({*from, *to});
    at = comma + 1;
  }
  return out;
}

Result<std::vector<SymbolSize>> parse_symbol_sizes(std::string_view text) {
  std::vector<SymbolSize> out;
  if (text.empty()) return out;  // no symbol: a static method's one shape
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view part = text.substr(at, comma - at);
    const size_t eq = part.find('=');
    int64_t size = -1;
    const bool named = eq != std::string_view::npos && eq > 0;
    if (named) {
      const std::string_view digits = part.substr(eq + 1);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
      if (ec != std::errc() || end != digits.data() + digits.size()) size = -1;
    }
    BATON_CHECK_OR_RETURN(named && size >= 0, InvalidArgument,
                          "'{}' in the shape '{}' is not NAME=SIZE (e.g. batch=1,sequence=16)",
                          part, text);
    out.push_back(SymbolSize{std::string(part.substr(0, eq)), size});
    at = comma + 1;
  }
  return out;
}

TensorView Method::output(size_t index) const {
  return index < impl_->outputs.size() ? impl_->values[impl_->outputs[index]].tensor : TensorView{};
}

size_t Method::num_instructions() const { return impl_->steps.size(); }

InstructionInfo Method::instruction_info(size_t index) const {
  if (index >= impl_->steps.size()) return InstructionInfo{InstructionKind::Kernel, {}, {}, {}, {}};
  const Step& s = impl_->steps[index];
  return InstructionInfo{s.kind, s.description, s.device, s.op, s.name};
}

void Method::set_profiling(const Profiling& profiling) {
  impl_->profiling = profiling;
  impl_->times.assign(impl_->steps.size(), std::chrono::nanoseconds(0));
  impl_->starts.assign(impl_->steps.size(), std::chrono::steady_clock::time_point());
  for (Step& s : impl_->steps) {
    s.delegate_args.profile = profiling.device_time;
    s.delegate_args.profile_steps = profiling.steps;
  }
}

void Method::set_profiling(bool enabled) { set_profiling(Profiling{enabled, enabled, false}); }

std::optional<double> Method::instruction_device_time_ms(size_t index) const {
  if (index >= impl_->steps.size()) return std::nullopt;
  const Step& s = impl_->steps[index];
  if (s.kind != InstructionKind::Delegate || !impl_->profiling.device_time) return std::nullopt;
  const DelegateInstance& d = impl_->delegates[s.delegate];
  return d.backend->last_device_time_ms(d.handle);
}

std::vector<StepTime> Method::instruction_step_times(size_t index) const {
  if (index >= impl_->steps.size()) return {};
  const Step& s = impl_->steps[index];
  if (s.kind != InstructionKind::Delegate || !impl_->profiling.steps) return {};
  const DelegateInstance& d = impl_->delegates[s.delegate];
  return d.backend->step_times(d.handle);
}

std::span<const std::chrono::nanoseconds> Method::instruction_times() const { return impl_->times; }

std::span<const std::chrono::steady_clock::time_point> Method::instruction_start_times() const {
  return impl_->starts;
}

Method::CopyCounts Method::copy_counts() const { return impl_->copies; }

Method::ResolveTimes Method::last_resolve_times() const { return impl_->resolve_times; }

size_t Method::num_delegates() const { return impl_->delegates.size(); }

std::vector<std::pair<std::string, uint64_t>> Method::delegate_counters(size_t index) const {
  if (index >= impl_->delegates.size()) return {};
  const DelegateInstance& d = impl_->delegates[index];
  return d.backend->counters(d.handle);
}

size_t Method::num_states() const { return impl_->state.size(); }

TensorInfo Method::state_info(size_t index) const {
  if (index >= impl_->state.size()) return TensorInfo{{}, DType::Float32, {}, Device::cpu(), false};
  const Impl::StateEntry& e = impl_->state[index];
  TensorInfo info = info_of(*impl_, e.value);
  info.name = e.name;
  return info;
}

std::string_view Method::state_update_name(size_t index) const {
  if (index >= impl_->state.size()) return {};
  return str(impl_->fm->values()->Get(impl_->state[index].update)->value_as_Tensor()->name());
}

TensorView Method::state(size_t index) const {
  return index < impl_->state.size() ? impl_->values[impl_->state[index].value].tensor
                                     : TensorView{};
}

Status Method::set_state(size_t index, const TensorView& value) {
  BATON_CHECK_OR_RETURN(index < impl_->state.size(), InvalidArgument,
                        "state index {} is out of range: method '{}' has {} state tensors", index,
                        impl_->name, impl_->state.size());
  const TensorInfo info = state_info(index);
  BATON_TRY(check_matches(info, value, "state", index));
  DeviceAllocator* allocator = copy_allocator(info.device, value.device);
  BATON_CHECK_OR_RETURN(allocator != nullptr, NotSupported,
                        "method '{}' state {} ('{}'): no allocator can copy from {} to {}",
                        impl_->name, index, info.name, value.device.to_string(),
                        info.device.to_string());
  return allocator->copy(impl_->values[impl_->state[index].value].tensor.data, info.device,
                         value.data, value.device, value.nbytes());
}

Status Method::reset_state() {
  for (size_t i = 0; i < impl_->state.size(); ++i) BATON_TRY(impl_->zero_state(i));
  return Status();
}

std::vector<Method::ArenaInfo> Method::arenas() const {
  std::vector<ArenaInfo> out;
  for (const ArenaInstance& a : impl_->arenas) out.push_back({a.device, a.size});
  return out;
}

}  // namespace baton::runtime
