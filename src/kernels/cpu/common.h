// Helpers shared by the CPU kernels: message prefixes, axis normalization, constant-input reads,
// attribute access and the contiguous-copy kernel used by the data-movement ops.
//
// Everything here runs at infer or create time except ContiguousCopyKernel::run, which allocates
// nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "baton/runtime/operator.h"

namespace baton::kernels::cpu {

// "Add (node 'add_3')", the same text as runtime::describe_call (infer functions do not get the
// schema, only the call).
inline std::string describe(std::string_view op, const runtime::OpCall& call) {
  if (call.node_name.empty()) return std::string(op);
  return fmt::format("{} (node '{}')", op, call.node_name);
}

// Attribute specs for the schemas (OpSchema::attrs, in the order infer and create index them).
inline runtime::AttrSpec int_attr(std::string_view name, int64_t default_value) {
  runtime::AttrSpec spec;
  spec.name = name;
  spec.kind = runtime::ValueKind::Int;
  spec.default_int = default_value;
  return spec;
}
inline runtime::AttrSpec required_int_attr(std::string_view name) {
  runtime::AttrSpec spec;
  spec.name = name;
  spec.kind = runtime::ValueKind::Int;
  spec.required = true;
  return spec;
}
inline runtime::AttrSpec float_attr(std::string_view name, double default_value) {
  runtime::AttrSpec spec;
  spec.name = name;
  spec.kind = runtime::ValueKind::Float;
  spec.default_float = default_value;
  return spec;
}
inline runtime::AttrSpec string_attr(std::string_view name, std::string_view default_value) {
  runtime::AttrSpec spec;
  spec.name = name;
  spec.kind = runtime::ValueKind::String;
  spec.default_string = default_value;
  return spec;
}
// An int list whose absence (a None value) means something to the op.
inline runtime::AttrSpec optional_ints_attr(std::string_view name) {
  runtime::AttrSpec spec;
  spec.name = name;
  spec.kind = runtime::ValueKind::IntList;
  spec.default_none = true;
  return spec;
}

// One output with the dtype and shape of input 0 (unary ops, Identity, Softmax).
inline Status infer_same_as_input(const runtime::OpCall& call,
                                  std::span<runtime::TensorMeta> outputs) {
  const TensorView& x = call.inputs[0]->tensor;
  outputs[0].dtype = x.dtype;
  outputs[0].sizes.assign(x.sizes.begin(), x.sizes.end());
  return Status::ok_status();
}

// Maps an ONNX axis in [-rank, rank - 1] to [0, rank - 1].
inline Result<int> normalize_axis(int64_t axis, int rank, std::string_view what,
                                  std::string_view label = "axis") {
  BATON_CHECK_OR_RETURN(axis >= -rank && axis < rank, InvalidArgument,
                        "{}: {} {} is out of range [{}, {}] for a rank-{} input", what, label, axis,
                        -rank, rank - 1, rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Input `index` must be a tensor (variadic and optional inputs may be None after infer_op).
inline Status check_tensor_input(const runtime::OpCall& call, size_t index, std::string_view what) {
  const runtime::Value* v = call.inputs[index];
  BATON_CHECK_OR_RETURN(
      v != nullptr && v->is_tensor(), InvalidArgument, "{}: input {} must be a tensor, got {}",
      what, index, v == nullptr ? std::string_view("nothing") : runtime::value_kind_name(v->kind));
  return Status::ok_status();
}

// Every listed input must have the dtype of input 0 (ONNX's type constraint T).
inline Status check_same_dtype(const runtime::OpCall& call, std::span<const size_t> indices,
                               std::string_view what) {
  const DType dt = call.inputs[0]->tensor.dtype;
  for (size_t i : indices) {
    const DType other = call.inputs[i]->tensor.dtype;
    BATON_CHECK_OR_RETURN(other == dt, InvalidArgument,
                          "{}: input {} is {} but input 0 is {}; both must have the same dtype",
                          what, i, dtype_name(other), dtype_name(dt));
  }
  return Status::ok_status();
}

// Ops that index with fixed-size arrays of kMaxRank.
inline Status check_rank(std::span<const int64_t> sizes, std::string_view what,
                         std::string_view which = "input") {
  BATON_CHECK_OR_RETURN(static_cast<int>(sizes.size()) <= kMaxRank, NotSupported,
                        "{}: {} has rank {} ({}); the CPU kernels support rank <= {}", what, which,
                        sizes.size(), shape_to_string(sizes), kMaxRank);
  return Status::ok_status();
}

// Reads an int64 tensor input that the op needs as a constant (Reshape's shape, Squeeze's and
// Unsqueeze's axes). Baton compiles static shapes, so a computed input is NotSupported.
inline Result<std::vector<int64_t>> read_int64_constant(const runtime::OpCall& call, size_t index,
                                                        std::string_view input_name,
                                                        std::string_view what) {
  const TensorView& t = call.inputs[index]->tensor;
  BATON_CHECK_OR_RETURN(t.dtype == DType::Int64, InvalidArgument,
                        "{}: the {} input must be int64, got {}", what, input_name,
                        dtype_name(t.dtype));
  BATON_CHECK_OR_RETURN(t.rank() <= 1, InvalidArgument,
                        "{}: the {} input must be 1-D, got shape {}", what, input_name,
                        shape_to_string(t.sizes));
  BATON_CHECK_OR_RETURN(t.data != nullptr, NotSupported,
                        "{}: the {} input must be a constant; Baton compiles static shapes", what,
                        input_name);
  const int64_t n = t.numel();
  const int64_t* p = t.data_as<const int64_t>();
  return std::vector<int64_t>(p, p + n);
}

// Product of sizes[begin, end).
inline int64_t product(std::span<const int64_t> sizes, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= sizes[i];
  return n;
}

inline Result<int64_t> checked_product(std::span<const int64_t> sizes, std::string_view what) {
  auto n = checked_numel(sizes);
  BATON_CHECK_OR_RETURN(n.has_value(), InvalidArgument,
                        "{}: shape {} has a negative size or more than 2^63 elements", what,
                        shape_to_string(sizes));
  return *n;
}

// Copies input 0's bytes to output 0: Identity, Reshape, Flatten, Squeeze and Unsqueeze only
// change the shape, and Baton's kernels are out-variant (outputs never alias inputs).
class ContiguousCopyKernel final : public runtime::Kernel {
 public:
  ContiguousCopyKernel(const runtime::Value* in, runtime::Value* out, size_t nbytes)
      : in_(in), out_(out), nbytes_(nbytes) {}

  Status run() override {
    if (nbytes_ != 0) std::memcpy(out_->tensor.data, in_->tensor.data, nbytes_);
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  size_t nbytes_;
};

inline Result<std::unique_ptr<runtime::Kernel>> create_contiguous_copy(
    const runtime::OpCall& call) {
  const runtime::Value* in = call.inputs[0];
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<ContiguousCopyKernel>(in, call.outputs[0], in->tensor.nbytes()));
}

}  // namespace baton::kernels::cpu
