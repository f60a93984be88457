// Logging with levels and a user callback.
//
// By default messages at or above the threshold (Info unless BATON_LOG_LEVEL says otherwise:
// debug|info|warn|error|off) go to stderr as "baton [level] component: message". An application
// can route them elsewhere with set_log_callback. Thread-safe: the callback may be called from any
// thread that runs Baton code, and it is never called concurrently with itself.
#pragma once

#include <optional>
#include <string_view>

namespace baton {

enum class LogLevel : int { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

std::string_view log_level_name(LogLevel level);

// The level BATON_LOG_LEVEL names, or none when it is unset or names no level (the default
// threshold is then Info). A tool that lowers its own default (baton's -q) leaves a named one be.
std::optional<LogLevel> log_level_from_environment();

// Receives every message at or above the threshold. `component` names the emitter ("runtime",
// "compiler", "cuda", ...). The strings are valid only during the call.
using LogCallback = void (*)(LogLevel level, std::string_view component, std::string_view message,
                             void* user_data);

// Replaces the sink; nullptr restores the default stderr sink.
void set_log_callback(LogCallback callback, void* user_data);
void set_log_level(LogLevel level);
LogLevel log_level();
bool log_enabled(LogLevel level);

void log_message(LogLevel level, std::string_view component, std::string_view message);

}  // namespace baton
