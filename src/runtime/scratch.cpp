#include "runtime/scratch.h"

#include <algorithm>
#include <new>

#include "baton/core/check.h"
#include "baton/core/text.h"

namespace baton::runtime {

void ScratchPlan::begin_kernel(std::string description) {
  kernels_.push_back(KernelScratch{std::move(description), 0});
}

Status ScratchPlan::reserve(ScratchRef& ref, uint64_t count, uint64_t element_bytes, uint64_t slots,
                            std::string_view what) {
  BATON_CHECK_OR_RETURN(!kernels_.empty() && storage_ == nullptr, Internal,
                        "scratch '{}' reserved outside a kernel's create", what);
  KernelScratch& k = kernels_.back();
  // Rounds up to the alignment; false on overflow.
  auto align_up = [](uint64_t n, uint64_t* out) {
    if (__builtin_add_overflow(n, kAlignment - 1, out)) return false;
    *out &= ~(kAlignment - 1);
    return true;
  };
  // Each slot keeps the alignment, so that every thread's piece starts on a cache line.
  uint64_t slot = 0, total = 0, start = 0, end = 0;
  const bool fits = !__builtin_mul_overflow(count, element_bytes, &slot) && align_up(slot, &slot) &&
                    !__builtin_mul_overflow(slot, slots, &total) && align_up(k.bytes, &start) &&
                    !__builtin_add_overflow(start, total, &end);
  if (!fits) {
    return BATON_ERROR(OutOfMemory,
                       "{}: its {} ({} elements of {} bytes, {} times) exceeds 2^64 bytes: this "
                       "model's shapes are too large for the host",
                       k.kernel, what, count, element_bytes, slots);
  }
  ref.plan_ = this;
  ref.offset_ = start;
  ref.slot_bytes_ = total == 0 ? 0 : slot;
  k.bytes = end;
  peak_ = std::max(peak_, end);
  return Status();
}

Status ScratchPlan::allocate() {
  if (storage_ != nullptr || peak_ == 0) return Status();
  // new[] of std::byte is aligned for max_align_t only: ask for one alignment more and start on
  // the boundary.
  const uint64_t want = peak_ + kAlignment;
  try {
    if (want > peak_ && want <= SIZE_MAX) {
      storage_.reset(new std::byte[static_cast<size_t>(want)]);
    }
  } catch (const std::bad_alloc&) {
  }
  if (storage_ == nullptr) {
    const auto largest = std::max_element(
        kernels_.begin(), kernels_.end(),
        [](const KernelScratch& a, const KernelScratch& b) { return a.bytes < b.bytes; });
    return BATON_ERROR(OutOfMemory,
                       "cannot allocate the kernels' scratch area of {} ({} bytes), sized for {}, "
                       "the kernel that needs the most: the host is out of memory for this "
                       "model's shapes",
                       size_text(peak_), peak_, largest->kernel);
  }
  const auto address = reinterpret_cast<uintptr_t>(storage_.get());
  base_ = storage_.get() + ((kAlignment - address % kAlignment) % kAlignment);
  return Status();
}

void ScratchPlan::fill(std::byte byte) {
  if (base_ != nullptr) std::fill(base_, base_ + peak_, byte);
}

}  // namespace baton::runtime
