// Operators: the schema and kernel of each op the runtime can run on the CPU.
//
// An op is registered once (register_builtins() does it for Baton's CPU kernels) with a schema
// that the compiler and the runtime share:
//  - `infer` computes output dtypes and sizes from the inputs and attributes. The compiler uses it
//    for shape inference; the loader uses it to check that a program's declared output shapes are
//    what the op produces, so a corrupt program cannot make a kernel write out of bounds.
//  - `create` binds a kernel to one call's values at load time (parse attributes, precompute
//    strides). Kernel::run then executes without allocating.
// Values passed to `infer` may be tensors with data == nullptr (shape-only, at compile time);
// `infer` must only read data of inputs it needs as constants (and say so when they are absent).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"
#include "baton/runtime/value.h"

namespace baton::runtime {

// Bound arguments of one kernel call. All pointers stay valid for the kernel's lifetime.
struct OpCall {
  std::span<Value* const> inputs;   // tensor values; None for an absent optional input
  std::span<Value* const> attrs;    // in the schema's attribute order
  std::span<Value* const> outputs;  // tensor values
  std::string_view node_name;       // the ONNX node, for messages
};

struct TensorMeta {
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Must not allocate. Reads data pointers from the bound values on every call (callers may
  // rebind inputs between calls).
  virtual Status run() = 0;
};

using InferFn = Status (*)(const OpCall& call, std::span<TensorMeta> outputs);
using CreateFn = Result<std::unique_ptr<Kernel>> (*)(const OpCall& call);

struct AttrSpec {
  std::string_view name;
  ValueKind kind;
  bool required = false;
  // Used when the attribute is absent and not required. Lists default to empty; a None default
  // (default_none) means "absent" is meaningful to the op (e.g. Transpose's perm).
  int64_t default_int = 0;
  double default_float = 0.0;
  std::string_view default_string;
  bool default_none = false;
};

struct OpSchema {
  std::string_view name;  // ONNX op type (domain ai.onnx)
  int min_opset = 13;     // first opset whose semantics this kernel implements
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  int num_outputs = 1;
  std::vector<AttrSpec> attrs;
  // Element types the kernel accepts for its (first) input; empty means any.
  std::vector<DType> dtypes;
  InferFn infer = nullptr;
  CreateFn create = nullptr;
};

// Checks that `call` matches `schema` (arity, attribute kinds) and runs its infer.
Status infer_op(const OpSchema& schema, const OpCall& call, std::span<TensorMeta> outputs);
// "Gemm (node 'fc1')".
std::string describe_call(const OpSchema& schema, const OpCall& call);

class OpRegistry {
 public:
  // The registry the loader and the compiler use unless told otherwise.
  static OpRegistry& global();

  // Replaces an earlier registration of the same name.
  void add(OpSchema schema);
  const OpSchema* find(std::string_view name) const;
  std::vector<std::string_view> names() const;

 private:
  std::vector<std::unique_ptr<OpSchema>> schemas_;
};

}  // namespace baton::runtime
