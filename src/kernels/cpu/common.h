// Helpers shared by the CPU kernels: the contiguous-copy kernel of the data-movement ops and the
// kernel-creation shorthands. Everything here runs at create time except ContiguousCopyKernel::run,
// which allocates nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"
#include "runtime/kernel.h"

namespace baton::kernels::cpu {

using ops::product;

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
    const runtime::KernelCall& call) {
  const runtime::Value* in = call.inputs[0];
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<ContiguousCopyKernel>(in, call.outputs[0], in->tensor.nbytes()));
}

// A kernel that `dispatch` did not make: the dtype is outside what the kernel was registered
// for, which the loader checked, so this is a bug.
inline Status no_kernel_for(const runtime::KernelCall& call, DType dtype) {
  return BATON_ERROR(Internal, "{}: no kernel instance for {}", call.describe(), dtype_name(dtype));
}

}  // namespace baton::kernels::cpu
