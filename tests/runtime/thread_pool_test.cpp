// The CPU kernels' ThreadPool (src/runtime/thread_pool.h) and MethodOptions::threads.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "baton/baton.h"
#include "baton/runtime/program.h"
#include "testing/sample_programs.h"

namespace baton {
namespace {

using runtime::ThreadPool;

// Every task runs exactly once, on a valid slot, and the pool's threads all take part in a job
// long enough for them to.
TEST(ThreadPool, RunsEveryTaskOnceOverAllThreads) {
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t count : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(count));
      std::vector<std::atomic<int>> per_slot(threads);
      pool.parallel_for(count, [&](int64_t i, unsigned slot) {
        ASSERT_LT(slot, threads);
        runs[static_cast<size_t>(i)].fetch_add(1);
        per_slot[slot].fetch_add(1);
        if (count == 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
      for (int64_t i = 0; i < count; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << i;
      if (count == 1000) {
        // 1000 tasks of 50 us: each thread gets some (the caller alone would take 50 ms).
        for (unsigned s = 0; s < threads; ++s) EXPECT_GT(per_slot[s].load(), 0) << "slot " << s;
      }
    }
  }
}

// A pool of one has no workers: tasks run in order on the calling thread.
TEST(ThreadPool, OneThreadRunsInlineInOrder) {
  ThreadPool pool(1);
  std::vector<int64_t> order;
  const auto caller = std::this_thread::get_id();
  pool.parallel_for(5, [&](int64_t i, unsigned slot) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(slot, 0u);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(pool.dispatched(), 0u);
}

// Jobs back to back (workers spinning) and after a pause (workers asleep on the condition
// variable) both complete, and every job's writes are visible when parallel_for returns.
TEST(ThreadPool, JobsBackToBackAndAfterSleepingComplete) {
  ThreadPool pool(3);
  std::vector<int64_t> data(64);
  for (int round = 0; round < 200; ++round) {
    if (round % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.parallel_for(64, [&](int64_t i, unsigned) { data[static_cast<size_t>(i)] += i; });
  }
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(data[static_cast<size_t>(i)], 200 * i);
  EXPECT_EQ(pool.dispatched(), 200u);
}

// Many short jobs back to back, with more threads than this machine has cores: workers often wake
// after the caller has run every task and closed the job. Such a worker must take no task of the
// next job through the closed one's function: every task of every job runs exactly once, by its
// own job's function, and parallel_for returns only when they all have.
TEST(ThreadPool, LateWorkersNeverRunAClosedJobsTasks) {
  for (unsigned threads : {2u, 5u}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    constexpr int kJobs = 3000;
    constexpr int64_t kTasks = 3;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(kJobs * kTasks));
    for (int job = 0; job < kJobs; ++job) {
      pool.parallel_for(kTasks, [&runs, job](int64_t i, unsigned) {
        runs[static_cast<size_t>(job * kTasks + i)].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < kTasks; ++i) {
        ASSERT_EQ(runs[static_cast<size_t>(job * kTasks + i)].load(), 1)
            << "job " << job << " task " << i;
      }
    }
    EXPECT_EQ(pool.dispatched(), static_cast<uint64_t>(kJobs));
    EXPECT_LE(pool.joins(), static_cast<uint64_t>(kJobs) * (threads - 1));
  }
}

// A job long enough for the workers to wake has them join: the caller does not do it all alone.
TEST(ThreadPool, WorkersJoinJobsLongEnoughToWakeThem) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> per_slot(3);
  pool.parallel_for(200, [&](int64_t, unsigned slot) {
    per_slot[slot].fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_GE(pool.joins(), 1u);
  EXPECT_GT(per_slot[1].load() + per_slot[2].load(), 0);
}

TEST(ThreadPool, AvailableCpusIsPositive) { EXPECT_GE(ThreadPool::available_cpus(), 1u); }

// Threads of this process, from /proc.
size_t process_threads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// MethodOptions::threads: a Method with CPU kernels makes its workers at load and ends them with
// itself; 1 makes none.
TEST(ThreadPool, MethodMakesItsWorkersAtLoad) {
  register_builtins();
  auto p = testing::make_add_relu_program(false);
  auto program = runtime::Program::load_bytes(p.builder.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  const size_t before = process_threads();
  for (unsigned threads : {1u, 3u}) {
    SCOPED_TRACE(threads);
    runtime::MethodOptions options;
    options.threads = threads;
    auto method = (*program)->load_method("forward", options);
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    EXPECT_EQ(process_threads(), before + threads - 1);
    method->reset();
    // A joined thread can stay listed in /proc for a moment after pthread_join returns (the
    // kernel clears its tid before it is reaped): wait for the count, up to a second.
    size_t after = process_threads();
    for (int i = 0; i < 100 && after != before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      after = process_threads();
    }
    EXPECT_EQ(after, before);
  }
}

}  // namespace
}  // namespace baton
