// Kernel scratch: working memory a CPU kernel writes and reads within one run() and keeps nothing
// of between runs (float16 inputs converted for the BLAS, im2col columns, attention scores, a
// GEMM's packing space).
//
// Kernels do not own it. At create a kernel *reserves* what it needs through its KernelCall
// (call.reserve_scratch); nothing is allocated then. Once every kernel of a method is created, the
// method allocates one scratch area, sized to the largest single kernel's reservations: a method
// runs its kernels one at a time, so they can all share it (like two arena values whose lifetimes
// do not overlap). That is one allocation at load, its size known before the first run and
// reported (Method::scratch_bytes, `baton run --json`, `baton inspect --load`), a failure an
// OutOfMemory error naming the kernel that needs the most; and the sum over kernels, which the
// kernels' own vectors used to hold, becomes the maximum.
//
// Scratch content is undefined at the start of every run: a kernel may not rely on what it or
// another kernel left there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"

namespace baton::runtime {

class ScratchPlan;

// Where one reservation lives once the plan is allocated: `slots` equal pieces of `slot_bytes`,
// one per thread of the kernel's pool when reserved per thread. Valid for the plan's lifetime;
// data() is null before the plan is allocated and for an empty reservation.
class ScratchRef {
 public:
  ScratchRef() = default;
  template <typename T>
  T* data(size_t slot = 0) const {
    std::byte* base = this->base();
    return base == nullptr || slot_bytes_ == 0
               ? nullptr
               : reinterpret_cast<T*>(base + offset_ + slot * slot_bytes_);
  }

 private:
  friend class ScratchPlan;
  std::byte* base() const;
  const ScratchPlan* plan_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t slot_bytes_ = 0;
};

class ScratchPlan {
 public:
  // Every reservation starts on this boundary (cache lines; any element type).
  static constexpr uint64_t kAlignment = 64;

  // Starts the reservations of the next kernel, named for messages ("Conv (node 'conv1')").
  void begin_kernel(std::string description);
  // Reserves `count` elements of `element_bytes`, `slots` times (1, or one per pool thread), for
  // the current kernel; `what` names the buffer in messages. Fails with OutOfMemory when the size
  // overflows 64 bits; nothing is allocated yet.
  Status reserve(ScratchRef& ref, uint64_t count, uint64_t element_bytes, uint64_t slots,
                 std::string_view what);
  // Allocates the area: the largest kernel's total. OutOfMemory, naming that kernel and the
  // bytes, when the host cannot hold it. Reservations made later are an Internal error.
  Status allocate();
  // Tests: fills the allocated area with `byte`, so that a kernel reading scratch it did not write
  // in the same run computes garbage and fails its comparison.
  void fill(std::byte byte);

  // Bytes of the area (known before allocate), and what each kernel reserved, in begin order.
  uint64_t bytes() const { return peak_; }
  struct KernelScratch {
    std::string kernel;
    uint64_t bytes = 0;
  };
  const std::vector<KernelScratch>& kernels() const { return kernels_; }

 private:
  friend class ScratchRef;
  std::vector<KernelScratch> kernels_;
  uint64_t peak_ = 0;  // the largest kernel's bytes
  std::unique_ptr<std::byte[]> storage_;
  std::byte* base_ = nullptr;
};

inline std::byte* ScratchRef::base() const { return plan_ == nullptr ? nullptr : plan_->base_; }

}  // namespace baton::runtime
