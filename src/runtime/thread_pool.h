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
// The pool backs off on a loaded machine by itself: a worker takes part in a job only if it
// joins before the job is closed, and the caller closes the job as soon as it finds no task left
// to take, then waits only for the workers that joined (each finishing the task it holds). A
// worker that the OS has not scheduled (another process holds its core) therefore costs the
// caller nothing: the caller runs the tasks itself, as a pool of one would. Waiting for every
// worker to check in, as this pool once did, cost a scheduler time slice (milliseconds) whenever
// a worker was descheduled: on a busy 2-core machine a small BERT ran slower with 2 threads than
// with 1.
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
  uint64_t dispatched() const { return state_.load(std::memory_order_relaxed) >> kGenerationShift; }
  // How many times a worker joined a job (at most size() - 1 per job; fewer when the caller had
  // run every task before a worker woke).
  uint64_t joins() const { return joins_.load(std::memory_order_relaxed); }

  // The CPUs this process may run on (its affinity mask), at least 1: MethodOptions::threads = 0.
  static unsigned available_cpus();

 private:
  using TaskFn = void (*)(void* ctx, int64_t index, unsigned slot);

  void run(int64_t count, TaskFn fn, void* ctx);
  void work_loop(unsigned slot);
  void take_tasks(unsigned slot);
  // Joins the job of `generation` if it is still open: true when the worker is then counted in
  // and may read the job and take its tasks.
  bool join(uint64_t generation);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};

  // The job's state in one word, so that joining and closing cannot interleave: the job's
  // generation (bits 33 and up), whether it is closed (bit 32: no worker may join any more), and
  // how many joined workers are still inside it (bits 0-31).
  static constexpr int kGenerationShift = 33;
  static constexpr uint64_t kClosed = uint64_t{1} << 32;
  static constexpr uint64_t kJoinedMask = kClosed - 1;
  static uint64_t generation_of(uint64_t state) { return state >> kGenerationShift; }

  // The current job. Written by run() before state_ announces a new generation (release), read
  // by a worker only after it joined that generation (acquire), and never again once the job is
  // closed and its joined workers have left, which is when run() returns.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> state_{0};
  std::atomic<uint64_t> joins_{0};
};

}  // namespace baton::runtime
