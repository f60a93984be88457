// The backend and device-allocator registries. Registration happens at start-up (explicitly);
// backend lookups take a shared lock and allocator lookups (on the copy path of every
// set_input) read an atomic, so late registration from another thread is still safe.
#include <array>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "baton/core/check.h"
#include "baton/runtime/backend.h"
#include "baton/runtime/device_allocator.h"

namespace baton::runtime {
namespace {

struct Registries {
  std::shared_mutex mutex;
  std::vector<BackendInterface*> backends;
  std::array<std::atomic<DeviceAllocator*>, 2> allocators{};
};

Registries& registries() {
  static Registries r;
  return r;
}

}  // namespace

void register_backend(BackendInterface* backend) {
  if (backend == nullptr) return;
  Registries& r = registries();
  std::unique_lock lock(r.mutex);
  for (auto& b : r.backends) {
    if (b->id() == backend->id()) {
      b = backend;
      return;
    }
  }
  r.backends.push_back(backend);
}

BackendInterface* find_backend(std::string_view id) {
  Registries& r = registries();
  std::shared_lock lock(r.mutex);
  for (BackendInterface* b : r.backends) {
    if (b->id() == id) return b;
  }
  return nullptr;
}

std::vector<std::string_view> registered_backends() {
  Registries& r = registries();
  std::shared_lock lock(r.mutex);
  std::vector<std::string_view> ids;
  for (BackendInterface* b : r.backends) ids.push_back(b->id());
  return ids;
}

void register_device_allocator(DeviceAllocator* allocator) {
  if (allocator == nullptr) return;
  const auto index = static_cast<size_t>(allocator->type());
  if (index < registries().allocators.size())
    registries().allocators[index].store(allocator, std::memory_order_release);
}

DeviceAllocator* find_device_allocator(DeviceType type) {
  const auto index = static_cast<size_t>(type);
  return index < registries().allocators.size()
             ? registries().allocators[index].load(std::memory_order_acquire)
             : nullptr;
}

DeviceAllocator* copy_allocator(Device dst, Device src) {
  return find_device_allocator(src.is_cpu() ? dst.type : src.type);
}

Result<Tensor> allocate_tensor(DType dtype, std::vector<int64_t> sizes, Device device) {
  if (device.is_cpu()) return Tensor::empty(dtype, std::move(sizes));
  DeviceAllocator* allocator = find_device_allocator(device.type);
  BATON_CHECK_OR_RETURN(allocator != nullptr, NotSupported,
                        "cannot allocate on {}: no allocator for {} is registered (for GPUs call "
                        "baton::cuda::register_backend())",
                        device.to_string(), device_type_name(device.type));
  const auto bytes = checked_nbytes(dtype, sizes);
  BATON_CHECK_OR_RETURN(bytes.has_value(), InvalidArgument,
                        "cannot allocate a {} tensor of shape {}", dtype_name(dtype),
                        shape_to_string(sizes));
  BATON_ASSIGN_OR_RETURN(void* p, allocator->allocate(device, *bytes, 256));
  std::shared_ptr<void> storage(p,
                                [allocator, device](void* q) { allocator->deallocate(device, q); });
  return Tensor::wrap(std::move(storage), dtype, std::move(sizes), device);
}

Status copy_tensor(const TensorView& dst, const TensorView& src) {
  BATON_CHECK_OR_RETURN(dst.dtype == src.dtype && dst.numel() == src.numel(), InvalidArgument,
                        "copy_tensor: cannot copy {} {} into {} {} (dtype or element count "
                        "differs)",
                        dtype_name(src.dtype), shape_to_string(src.sizes), dtype_name(dst.dtype),
                        shape_to_string(dst.sizes));
  DeviceAllocator* allocator = copy_allocator(dst.device, src.device);
  BATON_CHECK_OR_RETURN(allocator != nullptr, NotSupported,
                        "copy_tensor: no allocator can copy {} -> {} (for GPUs call "
                        "baton::cuda::register_backend())",
                        src.device.to_string(), dst.device.to_string());
  return allocator->copy(dst.data, dst.device, src.data, src.device, src.nbytes());
}

}  // namespace baton::runtime
