#include "testing/alloc/counting_allocator.h"

#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<int> g_scopes{0};
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_other_threads{0};
std::atomic<pthread_t> g_owner{};
bool g_backtraces = false;  // BATON_ALLOC_BACKTRACES=1, read when a scope opens

constexpr int kStacks = 8;
constexpr int kFrames = 32;
void* g_stack[kStacks][kFrames];
int g_depth[kStacks];
bool g_other[kStacks];
std::atomic<int> g_recorded{0};
thread_local bool t_recording = false;

// Failure injection (FailAllocation): the owner thread's countdown; 0 = disarmed.
std::atomic<pthread_t> g_fail_owner{};
std::atomic<int64_t> g_fail_countdown{0};
std::atomic<bool> g_fail_fired{false};

// Whether this allocation is the one to fail.
bool fail_now() {
  if (g_fail_countdown.load(std::memory_order_relaxed) <= 0) return false;
  if (!pthread_equal(pthread_self(), g_fail_owner.load(std::memory_order_relaxed))) return false;
  if (g_fail_countdown.fetch_sub(1) != 1) return false;
  g_fail_fired.store(true);
  return true;
}

void note() {
  if (g_scopes.load(std::memory_order_relaxed) <= 0) return;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const bool other = !pthread_equal(pthread_self(), g_owner.load(std::memory_order_relaxed));
  if (other) g_other_threads.fetch_add(1, std::memory_order_relaxed);
  if (g_backtraces && !t_recording) {
    const int slot = g_recorded.fetch_add(1);
    if (slot < kStacks) {
      t_recording = true;
      g_depth[slot] = backtrace(g_stack[slot], kFrames);
      g_other[slot] = other;
      t_recording = false;
    }
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
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  note();
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  note();
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) {
  note();
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  note();
  if (fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  note();
  if (fail_now()) return ENOMEM;
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

CountAllocations::CountAllocations()
    : start_(g_allocations.load()), start_other_(g_other_threads.load()) {
  const char* env = std::getenv("BATON_ALLOC_BACKTRACES");
  g_backtraces = env != nullptr && std::strcmp(env, "1") == 0;
  if (g_backtraces) {
    void* warm[1];
    backtrace(warm, 1);  // its first call loads the unwinder (and allocates): not in the scope
    g_recorded.store(0);
  }
  g_owner.store(pthread_self());
  g_scopes.fetch_add(1);
}
CountAllocations::~CountAllocations() { g_scopes.fetch_sub(1); }
int64_t CountAllocations::count() const { return g_allocations.load() - start_; }
int64_t CountAllocations::other_threads() const { return g_other_threads.load() - start_other_; }

FailAllocation::FailAllocation(int64_t nth) {
  g_fail_fired.store(false);
  g_fail_owner.store(pthread_self());
  g_fail_countdown.store(nth);
}
FailAllocation::~FailAllocation() { g_fail_countdown.store(0); }
bool FailAllocation::fired() const { return g_fail_fired.load(); }

void CountAllocations::print_backtraces() {
  const int n = g_recorded.load() < kStacks ? g_recorded.load() : kStacks;
  for (int i = 0; i < n; ++i) {
    std::fprintf(stderr, "allocation %d (%s thread):\n", i,
                 g_other[i] ? "another" : "the counting");
    std::fflush(stderr);
    backtrace_symbols_fd(g_stack[i], g_depth[i], STDERR_FILENO);
  }
}

}  // namespace baton::testing
