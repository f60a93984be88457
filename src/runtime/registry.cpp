// The backend and device-allocator registries. Registration happens at start-up (explicitly);
// lookups take a shared lock so late registration from another thread is still safe.
#include <array>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "baton/runtime/backend.h"
#include "baton/runtime/device_allocator.h"

namespace baton::runtime {
namespace {

struct Registries {
  std::shared_mutex mutex;
  std::vector<BackendInterface*> backends;
  std::array<DeviceAllocator*, 2> allocators{};
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
  Registries& r = registries();
  std::unique_lock lock(r.mutex);
  r.allocators.at(static_cast<size_t>(allocator->type())) = allocator;
}

DeviceAllocator* find_device_allocator(DeviceType type) {
  Registries& r = registries();
  std::shared_lock lock(r.mutex);
  const auto index = static_cast<size_t>(type);
  return index < r.allocators.size() ? r.allocators[index] : nullptr;
}

}  // namespace baton::runtime
