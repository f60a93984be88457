#include "baton/core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace baton {

std::optional<LogLevel> log_level_from_environment() {
  const char* env = std::getenv("BATON_LOG_LEVEL");
  if (env == nullptr) return std::nullopt;
  for (const LogLevel level :
       {LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error, LogLevel::Off}) {
    if (log_level_name(level) == env) return level;
  }
  return std::nullopt;
}

namespace {

struct LogState {
  std::mutex mutex;
  LogCallback callback = nullptr;
  void* user_data = nullptr;
  std::atomic<int> level{static_cast<int>(log_level_from_environment().value_or(LogLevel::Info))};
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "debug";
    case LogLevel::Info:
      return "info";
    case LogLevel::Warn:
      return "warn";
    case LogLevel::Error:
      return "error";
    case LogLevel::Off:
      return "off";
  }
  return "?";
}

void set_log_callback(LogCallback callback, void* user_data) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.callback = callback;
  s.user_data = user_data;
}

void set_log_level(LogLevel level) { state().level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(state().level.load()); }
bool log_enabled(LogLevel level) {
  return level != LogLevel::Off && static_cast<int>(level) >= state().level.load();
}

void log_message(LogLevel level, std::string_view component, std::string_view message) {
  if (!log_enabled(level)) return;
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.callback != nullptr) {
    s.callback(level, component, message, s.user_data);
    return;
  }
  std::fprintf(stderr, "baton [%.*s] %.*s: %.*s\n", static_cast<int>(log_level_name(level).size()),
               log_level_name(level).data(), static_cast<int>(component.size()), component.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace baton
