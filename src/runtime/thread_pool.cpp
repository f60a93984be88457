#include "runtime/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace baton::runtime {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle worker keeps spinning before it sleeps: longer than the gap between two GEMMs
// of one execute() (a few elementwise kernels), shorter than anything a user would see as a
// busy idle thread.
constexpr auto kSpin = std::chrono::microseconds(200);
// Of those, the first microseconds only pause (the usual gap between two kernels of one
// execute()); the rest also yield the CPU. A worker that shares its CPU with the thread running
// the next kernel (more threads than free cores: a busy machine, or a pool as large as the
// machine beside any other process) would otherwise take that CPU from it for the whole spin:
// on two cores, a 5 us kernel run by the caller after a parallel one took 200 us, every call.
constexpr auto kPauseOnly = std::chrono::microseconds(20);

}  // namespace

unsigned ThreadPool::available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

ThreadPool::ThreadPool(unsigned threads) {
  const unsigned workers = threads > 1 ? threads - 1 : 0;
  workers_.reserve(workers);
  for (unsigned slot = 1; slot <= workers; ++slot) {
    workers_.emplace_back([this, slot] { work_loop(slot); });
    pthread_setname_np(workers_.back().native_handle(), "baton-worker");
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_relaxed);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::take_tasks(unsigned slot) {
  for (int64_t i = next_.fetch_add(1, std::memory_order_relaxed); i < count_;
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    fn_(ctx_, i, slot);
  }
}

void ThreadPool::run(int64_t count, TaskFn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  count_ = count;
  next_.store(0, std::memory_order_relaxed);
  {
    // Under the mutex, so that a worker about to sleep either sees the new generation in its
    // wait predicate or is already waiting when notify_all comes. The previous job is closed with
    // no worker inside, so the new state is the next generation, open, nobody joined.
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t next = generation_of(state_.load(std::memory_order_relaxed)) + 1;
    state_.store(next << kGenerationShift, std::memory_order_release);
  }
  wake_.notify_all();
  take_tasks(0);
  // No task left to take: close the job, so that a worker that has not joined yet never will,
  // and wait for those that did (each finishing the task it took).
  uint64_t state = state_.fetch_or(kClosed, std::memory_order_acq_rel);
  for (unsigned spins = 0; (state & kJoinedMask) != 0; ++spins) {
    if (spins < 4096) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
    state = state_.load(std::memory_order_acquire);
  }
}

bool ThreadPool::join(uint64_t generation) {
  uint64_t state = state_.load(std::memory_order_acquire);
  while (generation_of(state) == generation && (state & kClosed) == 0) {
    if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      joins_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

void ThreadPool::work_loop(unsigned slot) {
  uint64_t seen = 0;
  for (;;) {
    const auto spun_from = std::chrono::steady_clock::now();
    bool found = false, yielding = false;
    for (unsigned spins = 0;; ++spins) {
      if (generation_of(state_.load(std::memory_order_acquire)) != seen) {
        found = true;
        break;
      }
      if (stopping_.load(std::memory_order_relaxed)) return;
      if (yielding) {
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
      // The clock every few spins (a yield is a system call, a pause a few to a hundred cycles).
      if (spins % (yielding ? 16 : 64) == 0) {
        const auto spun = std::chrono::steady_clock::now() - spun_from;
        if (spun > kSpin) break;
        yielding = spun > kPauseOnly;
      }
    }
    if (!found) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_.load(std::memory_order_relaxed) ||
               generation_of(state_.load(std::memory_order_acquire)) != seen;
      });
      if (stopping_.load(std::memory_order_relaxed)) return;
    }
    seen = generation_of(state_.load(std::memory_order_acquire));
    // Too late (the caller already took every task and closed the job): nothing to do; the job's
    // fields may already be the next job's, so they are not read.
    if (!join(seen)) continue;
    take_tasks(slot);
    state_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace baton::runtime
