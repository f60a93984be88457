#include "runtime/cpu_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "baton/core/check.h"
#include "baton/core/tensor.h"

namespace baton::runtime {
namespace {

class CpuAllocator final : public DeviceAllocator {
 public:
  DeviceType type() const override { return DeviceType::CPU; }

  Result<void*> allocate(Device device, size_t bytes, size_t alignment) override {
    BATON_CHECK_OR_RETURN(device.is_cpu(), InvalidArgument,
                          "the cpu allocator cannot allocate on {}", device.to_string());
    BATON_CHECK_OR_RETURN(alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= 4096,
                          InvalidArgument, "alignment {} is not a power of two <= 4096", alignment);
    // aligned_alloc wants a multiple of the alignment; never ask for zero bytes.
    const auto aligned = checked_align_up(std::max<uint64_t>(bytes, 1), alignment);
    BATON_CHECK_OR_RETURN(aligned.has_value(), OutOfMemory,
                          "cannot allocate {} bytes of host memory: the size overflows", bytes);
    const size_t rounded = *aligned;
    void* p = std::aligned_alloc(alignment, rounded);
    BATON_CHECK_OR_RETURN(p != nullptr, OutOfMemory, "out of host memory allocating {} bytes",
                          rounded);
    return p;
  }

  void deallocate(Device, void* ptr) override { std::free(ptr); }

  Status copy(void* dst, Device dst_device, const void* src, Device src_device,
              size_t bytes) override {
    BATON_CHECK_OR_RETURN(dst_device.is_cpu() && src_device.is_cpu(), InvalidArgument,
                          "the cpu allocator cannot copy from {} to {}", src_device.to_string(),
                          dst_device.to_string());
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return Status();
  }
};

}  // namespace

DeviceAllocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace baton::runtime
