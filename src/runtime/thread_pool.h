// The worker threads a Method's CPU kernels split their work over (MethodOptions::threads).
//
// Created at load with `threads - 1` workers; the thread that calls parallel_for is the last one
// and takes tasks too, so a pool of 1 has no worker and runs everything inline. parallel_for
// allocates nothing and returns when every task has run, so a kernel that calls it is as
// synchronous as one that does not.
//
// Workers wait for the next parallel_for by spinning for a short while (the tasks of one execute()
// come microseconds apart; waking a sleeping thread costs tens of microseconds) and then sleep on
// a condition variable, so an idle Method costs no CPU.
//
// Thread-safety: one parallel_for at a time per pool (a Method executes on one thread at a time);
// a task must not call parallel_for on its own pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace baton::runtime {

class ThreadPool {
 public:
  // threads >= 1: the caller plus threads - 1 workers.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads that run tasks, the caller included.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Runs task(i, slot) for every i in [0, count), over the pool; `slot` (< size()) is the running
  // thread's index, for per-thread scratch. Tasks are handed out one at a time in order.
  template <typename F>
  void parallel_for(int64_t count, F&& task) {
    using Fn = std::remove_reference_t<F>;
    if (count <= 0) return;
    if (count == 1 || workers_.empty()) {
      for (int64_t i = 0; i < count; ++i) task(i, 0u);
      return;
    }
    run(
        count, [](void* ctx, int64_t i, unsigned slot) { (*static_cast<Fn*>(ctx))(i, slot); },
        const_cast<void*>(static_cast<const void*>(&task)));
  }

  // parallel_for calls that were handed to the workers so far (not those run inline).
  uint64_t dispatched() const { return generation_.load(std::memory_order_relaxed); }

  // The CPUs this process may run on (its affinity mask), at least 1: MethodOptions::threads = 0.
  static unsigned available_cpus();

 private:
  using TaskFn = void (*)(void* ctx, int64_t index, unsigned slot);

  void run(int64_t count, TaskFn fn, void* ctx);
  void work_loop(unsigned slot);
  void take_tasks(unsigned slot);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};

  // The current job. Written by run() before `generation_` is bumped (release), read by the
  // workers after they see the new generation (acquire).
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> busy_{0};  // workers still inside the current job
};

}  // namespace baton::runtime
