#include "testing/alloc/counting_allocator.h"

#include <atomic>
#include <cerrno>
#include <cstddef>

namespace {

std::atomic<int> g_scopes{0};
std::atomic<int64_t> g_allocations{0};

void note() {
  if (g_scopes.load(std::memory_order_relaxed) > 0) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
namespace baton::testing {
bool counting_available() { return false; }
}  // namespace baton::testing
#else
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);

void* malloc(size_t size) {
  note();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  note();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  note();
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) {
  note();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  note();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  note();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}

namespace baton::testing {
bool counting_available() { return true; }
}  // namespace baton::testing
#endif

namespace baton::testing {

CountAllocations::CountAllocations() : start_(g_allocations.load()) { g_scopes.fetch_add(1); }
CountAllocations::~CountAllocations() { g_scopes.fetch_sub(1); }
int64_t CountAllocations::count() const { return g_allocations.load() - start_; }

}  // namespace baton::testing
