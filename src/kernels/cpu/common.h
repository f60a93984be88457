// Helpers shared by the CPU kernels: the contiguous-copy kernel of the data-movement ops and the
// kernel-creation shorthands. Everything here runs at create time except ContiguousCopyKernel::run,
// which allocates nothing.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "ops/shape.h"
#include "runtime/kernel.h"

namespace baton::kernels::cpu {

using ops::product;

// A tensor seen as [outer, n, inner] around `axis`: outer x inner lines of n elements each, one
// element of a line `inner` apart (what a kernel along one axis walks: CumSum, TopK).
struct AxisLines {
  int64_t outer = 0, n = 0, inner = 0;
};
inline AxisLines lines_along(std::span<const int64_t> sizes, size_t axis) {
  return {product(sizes, 0, axis), sizes[axis], product(sizes, axis + 1, sizes.size())};
}

// The sizes of N tensors as a kernel last planned for them. A kernel that follows_sizes() with a
// plan (a broadcast, a strided view) asks changed() at the start of run() and replans only then:
// comparing a few sizes costs nanoseconds, and the replanning happens where the kernel's state
// and values are in cache anyway, instead of in a separate pass over every kernel when a call's
// shape changes (which, with a large model's weights streaming through the caches between
// calls, missed the cache on every kernel).
template <size_t N>
class PlannedSizes {
 public:
  // True (and the sizes recorded) when any of `sizes` differs from the recorded ones.
  bool changed(const std::array<std::span<const int64_t>, N>& sizes) {
    bool same = true;
    for (size_t k = 0; k < N && same; ++k) {
      same = sizes[k].size() == rank_[k] &&
             std::equal(sizes[k].begin(), sizes[k].end(), sizes_[k].begin());
    }
    if (same) return false;
    for (size_t k = 0; k < N; ++k) {
      rank_[k] = sizes[k].size();
      std::copy(sizes[k].begin(), sizes[k].end(), sizes_[k].begin());
    }
    return true;
  }
  // After a failed replan: the next changed() is true whatever the sizes.
  void forget() { rank_.fill(kNone); }

 private:
  // No sizes recorded (a rank no tensor has): the first changed() is true even for scalars.
  static constexpr size_t kNone = SIZE_MAX;
  std::array<size_t, N> rank_ = [] {
    std::array<size_t, N> r;
    r.fill(kNone);
    return r;
  }();
  std::array<std::array<int64_t, kMaxRank>, N> sizes_{};
};

// Copies input 0's bytes to output 0: Identity, Reshape, Flatten, Squeeze and Unsqueeze only
// change the shape. Baton's kernels are out-variant (outputs never alias inputs) except these:
// the compiler may plan the output on the input's bytes (a view), and then there is nothing to do.
class ContiguousCopyKernel final : public runtime::Kernel {
 public:
  ContiguousCopyKernel(const runtime::Value* in, runtime::Value* out) : in_(in), out_(out) {}

  // Dynamic shapes: the output's sizes are the runtime's (a Reshape's shape input holds the
  // largest shape); run() takes the byte count from the input.
  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

  Status run() override {
    // Equal pointers: the compiler planned the output as a view of the input (its bytes).
    if (out_->tensor.data != in_->tensor.data) {
      const size_t nbytes = in_->tensor.nbytes();
      if (nbytes != 0) std::memcpy(out_->tensor.data, in_->tensor.data, nbytes);
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
};

inline Result<std::unique_ptr<runtime::Kernel>> create_contiguous_copy(
    const runtime::KernelCall& call) {
  const runtime::Value* in = call.inputs[0];
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<ContiguousCopyKernel>(in, call.outputs[0]));
}

// Row-major element strides of `sizes`. Past a zero dimension (a tensor with no elements) the
// true strides may exceed int64; they saturate there, and address nothing.
inline std::vector<int64_t> element_strides(std::span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    if (__builtin_mul_overflow(s, sizes[d], &s)) s = INT64_MAX;
  }
  return strides;
}

// An index into a dimension of size `n` with ONNX's negative indices (counting from the end), in
// [0, n); -1 when it is outside [-n, n - 1].
inline int64_t normalize_index(int64_t index, int64_t n) {
  if (index < 0) index += n;
  return index >= 0 && index < n ? index : -1;
}

using ops::index_out_of_range;

// A kernel that `dispatch` did not make: the dtype is outside what the kernel was registered
// for, which the loader checked, so this is a bug.
inline Status no_kernel_for(const runtime::KernelCall& call, DType dtype) {
  return BATON_ERROR(Internal, "{}: no kernel instance for {}", call.describe(), dtype_name(dtype));
}

// Sizes one of a kernel's own buffers to `n` elements at create. Such sizes come from the model's
// shapes, so they can exceed what the host has: the failure is an OutOfMemory error naming the
// node, the buffer and the bytes, never a std::bad_alloc escaping the kernel.
template <typename T>
Status size_buffer(std::vector<T>& buffer, uint64_t n, const runtime::KernelCall& call,
                   std::string_view what) {
  const uint64_t limit = std::min<uint64_t>(buffer.max_size(), UINT64_MAX / sizeof(T));
  try {
    if (n <= limit) {
      buffer.resize(static_cast<size_t>(n));
      return Status::ok_status();
    }
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return BATON_ERROR(OutOfMemory,
                     "{}: cannot allocate its {} ({} elements of {} bytes{}): the host is out of "
                     "memory for this model's shapes",
                     call.describe(), what, n, sizeof(T),
                     n <= limit ? fmt::format(", {} bytes", n * sizeof(T)) : std::string());
}

// A new kernel after it reserved its scratch (runtime/scratch.h): `kernel->reserve(call)` runs and
// its status lands in `status`.
template <typename K>
std::unique_ptr<runtime::Kernel> with_scratch(std::unique_ptr<K> kernel,
                                              const runtime::KernelCall& call, Status& status) {
  status = kernel->reserve(call);
  return kernel;
}

}  // namespace baton::kernels::cpu
