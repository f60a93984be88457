// CPU kernels: what the runtime runs for a program's kernel calls.
//
// A kernel implements one operator definition (src/ops): the runtime finds the definition by the
// call's op, domain and opset, checks the call with the definition's inference (the declared
// output shapes must be what the op produces, the attributes must be canonical), checks the
// kernel takes the call's element types, and then `create`s the kernel bound to the call's values.
// Kernel::run executes without allocating.
//
// Registration is explicit: register_builtins() adds Baton's CPU kernels (src/kernels/cpu) to
// kernel_registry().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/core/dtype.h"
#include "baton/core/error.h"
#include "baton/runtime/value.h"
#include "runtime/scratch.h"

namespace baton::ops {
struct OpDef;
struct AttrValue;
enum class AttrKind : uint8_t;
}  // namespace baton::ops

namespace baton::runtime {

class ThreadPool;

// The bound arguments of one kernel call. Every pointer stays valid for the kernel's lifetime.
struct KernelCall {
  const ops::OpDef* def = nullptr;
  std::span<Value* const> inputs;   // tensor values; None for an absent optional input
  std::span<Value* const> attrs;    // bound and canonical, in the definition's order
  std::span<Value* const> outputs;  // tensor values
  std::string_view node_name;       // the ONNX node, for messages
  // The Method's threads (runtime/thread_pool.h), or null: run on the calling thread.
  ThreadPool* pool = nullptr;
  // Where the kernel reserves its scratch (runtime/scratch.h). Whoever creates kernels provides
  // it and allocates it before the first run.
  ScratchPlan* scratch = nullptr;
  // Some value's sizes change between calls (dynamic shapes): the kernel is created at the largest
  // and resized (Kernel::resize), so its scratch must serve every smaller size too.
  bool dynamic = false;
  // Bit i set: input i is a constant of the program (a weight in the program file), whose data
  // and address stay the same for the kernel's life, so that the kernel may prepare a copy of it
  // at create (a GEMM packs its weights once). Inputs past the 64th are never marked.
  uint64_t constant_inputs = 0;

  // Attribute `name` of the definition. Asking for a name the definition lacks is a bug in the
  // kernel and gives a None value.
  const Value& attr(std::string_view name) const;
  int64_t attr_int(std::string_view name) const { return attr(name).i; }
  double attr_float(std::string_view name) const { return attr(name).f; }
  std::string_view attr_string(std::string_view name) const { return attr(name).s; }
  std::span<const int64_t> attr_ints(std::string_view name) const { return attr(name).ints; }
  std::span<const double> attr_floats(std::string_view name) const { return attr(name).floats; }
  const TensorView& input(size_t i) const { return inputs[i]->tensor; }
  const TensorView& output(size_t i) const { return outputs[i]->tensor; }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i]->is_tensor(); }
  bool input_is_constant(size_t i) const { return i < 64 && ((constant_inputs >> i) & 1) != 0; }
  // "Softmax (node 'sm')"
  std::string describe() const;
  // Reserves scratch for `count` elements of T (`slots` times: 1, or one per pool thread).
  template <typename T>
  Status reserve_scratch(ScratchRef& ref, uint64_t count, std::string_view what,
                         uint64_t slots = 1) const {
    return reserve_scratch_bytes(ref, count, sizeof(T), slots, what);
  }
  Status reserve_scratch_bytes(ScratchRef& ref, uint64_t count, uint64_t element_bytes,
                               uint64_t slots, std::string_view what) const;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Must not allocate. Scratch (runtime/scratch.h) holds garbage on entry. Reads data pointers from
  // the bound values on every call (callers may rebind inputs and outputs between calls).
  virtual Status run() = 0;
  // Dynamic shapes (docs/dynamic_shapes.md): the kernel was created at the largest sizes of its
  // values; before a call at other sizes the runtime writes them into the bound values and calls
  // resize(), which recomputes what create derived from sizes. Must not allocate, and must not
  // need more scratch than create reserved (sizes only shrink from the ones it was created at).
  // The default refuses: a kernel that has not learned dynamic sizes returns NotSupported and
  // the loader refuses the dynamic program that needs it, naming the op.
  virtual Status resize() { return Status(Error::NotSupported, "no dynamic sizes"); }
  // True for a kernel whose run() reads every size it needs from the bound values itself (a byte
  // count, a row count: a few multiplications against the work that follows), or replans when
  // they changed since its last plan (PlannedSizes, kernels/cpu/common.h). The runtime then
  // calls resize() only at load, to ask whether the kernel takes dynamic sizes at all, and not on
  // every change of shape: with hundreds of kernels in a transformer, those calls were most of
  // what a change of shape cost.
  virtual bool follows_sizes() const { return false; }
  // A kernel whose output has a data-dependent size (NonZero's count; docs/dynamic_shapes.md):
  // that size as its last run() produced it, written in its output's layout (the other axes at
  // their sizes, this one at the count). The runtime binds the output's symbol from it and
  // resolves the sizes that depend on it before the next instruction. -1: no such output.
  virtual int64_t produced_size() const { return -1; }
  // Memory the kernel made at create for itself, besides the shared scratch: packed copies of a
  // constant weight (kernels/cpu/packed_gemm.h), as large as that weight. Reported by
  // Method::held_bytes (`baton run`, `baton inspect --load`); 0 for most kernels.
  virtual uint64_t held_bytes() const { return 0; }
};

using CreateFn = Result<std::unique_ptr<Kernel>> (*)(const KernelCall& call);

struct KernelDef {
  std::string_view op;      // ONNX op type
  std::string_view domain;  // "" for ai.onnx
  // Element types the kernel takes, per type constraint of the definition ("T"); a constraint not
  // listed takes everything the definition allows.
  std::vector<std::pair<std::string_view, DTypeSet>> types;
  CreateFn create = nullptr;
};

class KernelRegistry {
 public:
  // Replaces an earlier kernel of the same op and domain.
  void add(KernelDef def);
  const KernelDef* find(std::string_view op, std::string_view domain = "") const;
  std::vector<std::string_view> names() const;

 private:
  std::vector<std::unique_ptr<KernelDef>> kernels_;
};

// The registry the loader and the compiler use.
KernelRegistry& kernel_registry();

// A bound attribute as a runtime value (a view into `attr`, which must outlive it), and back (a
// copy). A None value becomes an absent attribute of `kind`.
Value attr_as_value(const ops::AttrValue& attr);
ops::AttrValue value_as_attr(const Value& value, ops::AttrKind kind);

// Whether `kernel` takes a call of `def` with these input and output dtypes; when not, `why`
// says which constraint got which dtype and what the kernel takes.
bool kernel_takes(const KernelDef& kernel, const ops::OpDef& def, std::span<const DType> inputs,
                  std::span<const DType> outputs, std::string* why);

}  // namespace baton::runtime
