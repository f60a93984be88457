// A FIFO for tests of readers that must refuse one: opening a FIFO for reading blocks until a
// writer appears, so a reader that does not refuse it would hang the test forever. FifoWatchdog
// plays that writer after a delay (it opens the FIFO and closes it at once, which ends any
// blocked open or read with end-of-file), so a regression fails the test instead of hanging it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace baton::testing {

class FifoWatchdog {
 public:
  explicit FifoWatchdog(std::string path, std::chrono::milliseconds delay = std::chrono::seconds(3))
      : path_(std::move(path)) {
    ::unlink(path_.c_str());
    created_ = ::mkfifo(path_.c_str(), 0600) == 0;
    thread_ = std::thread([this, delay] {
      const auto deadline = std::chrono::steady_clock::now() + delay;
      while (!done_) {
        if (std::chrono::steady_clock::now() >= deadline) {
          // Succeeds only while a reader has the FIFO open or is blocked opening it.
          const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
          if (fd >= 0) {
            ::close(fd);
            fired_ = true;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~FifoWatchdog() {
    done_ = true;
    thread_.join();
    ::unlink(path_.c_str());
  }
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;

  bool created() const { return created_; }
  const std::string& path() const { return path_; }
  // True when the reader under test blocked on the FIFO and had to be released.
  bool fired() const { return fired_; }

 private:
  std::string path_;
  bool created_ = false;
  std::atomic<bool> done_{false};
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

}  // namespace baton::testing
