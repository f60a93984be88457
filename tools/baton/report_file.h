// Files `baton run` and `baton compare` write besides outputs: JSON reports, times, profiles,
// traces. Each is written whole or not at all, through Baton's one file writer
// (write_file_atomically: a temporary file of a unique name, created exclusively and never through
// a symbolic link, then renamed over PATH).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "baton/core/error.h"

namespace baton::tool {

Status write_text_file(const std::string& path, const std::string& text);

// A JSON value as text for people and parsers: names from models may hold any bytes, so invalid
// UTF-8 is replaced rather than thrown on (names are escaped before they get here).
std::string json_text(const nlohmann::json& j, int indent = -1);

// The Chrome trace event format (chrome://tracing, https://ui.perfetto.dev): complete events
// ("ph": "X") with microsecond timestamps from `epoch`, one row per thread id, named with
// thread_name.
class ChromeTrace {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ChromeTrace(Clock::time_point epoch) : epoch_(epoch) {}

  void thread_name(int tid, const std::string& name);
  // A span from `start` lasting `duration_ms`.
  void span(const std::string& name, const std::string& category, int tid, Clock::time_point start,
            double duration_ms, nlohmann::json args = nlohmann::json::object());
  // A span at `start_us` (microseconds from the epoch).
  void span_us(const std::string& name, const std::string& category, int tid, double start_us,
               double duration_us, nlohmann::json args = nlohmann::json::object());
  double micros(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - epoch_).count();
  }
  size_t size() const { return events_.size(); }
  Status write(const std::string& path, const nlohmann::json& about) const;

 private:
  Clock::time_point epoch_;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace baton::tool
