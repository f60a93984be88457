#include "backends/cuda/allocator.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"

namespace baton::cuda {
namespace {

class CudaAllocator final : public runtime::DeviceAllocator {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }

  Result<void*> allocate(Device device, size_t bytes, size_t alignment) override {
    BATON_CHECK_OR_RETURN(device.is_cuda(), InvalidArgument,
                          "the CUDA allocator cannot allocate on {}", device.to_string());
    BATON_CHECK_OR_RETURN(device.index < device_count(), NotSupported,
                          "cannot allocate on {}: this machine has {} CUDA device(s)",
                          device.to_string(), device_count());
    DeviceGuard guard(device.index);
    BATON_TRY(guard.status());
    // cudaMalloc returns 256-byte aligned memory, enough for any `alignment` the runtime asks.
    (void)alignment;
    BATON_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           allocate_device_buffer(device.index, bytes, "device memory"));
    // The runtime owns it from here and hands it back to deallocate.
    return buffer.release();
  }

  void deallocate(Device device, void* ptr) override {
    // Adopted, then freed on its device.
    DeviceBuffer(ptr, device.index).reset();
  }

  Status copy(void* dst, Device dst_device, const void* src, Device src_device,
              size_t bytes) override {
    if (bytes == 0) return Status();
    const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
    DeviceGuard guard(gpu.index);
    BATON_TRY(guard.status());
    cudaStream_t stream = current_stream();
    if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
      // Between GPUs: a peer copy (direct over NVLink/PCIe where peer access is possible, staged
      // by the driver otherwise), ordered on the destination GPU's stream.
      BATON_CUDA_CHECK_ON(gpu.index, cudaMemcpyPeerAsync(dst, dst_device.index, src,
                                                         src_device.index, bytes, stream));
      return Status();
    }
    cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
    if (src_device.is_cpu()) kind = cudaMemcpyHostToDevice;
    if (dst_device.is_cpu()) kind = cudaMemcpyDeviceToHost;
    BATON_CUDA_CHECK_ON(gpu.index, cudaMemcpyAsync(dst, src, bytes, kind, stream));
    // The host side must be safe to touch when the copy instruction returns: device-to-host
    // results are read by the next CPU kernel, and a host source may be reused by the memory
    // plan. (From pageable memory CUDA already copies synchronously; pinned memory would not.)
    if (kind != cudaMemcpyDeviceToDevice) {
      BATON_CUDA_CHECK_ON(gpu.index, cudaStreamSynchronize(stream));
    }
    return Status();
  }
};

}  // namespace

runtime::DeviceAllocator& cuda_allocator() {
  static CudaAllocator allocator;
  return allocator;
}

}  // namespace baton::cuda
