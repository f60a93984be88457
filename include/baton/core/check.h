// Check-log-return macros used throughout Baton's implementation.
//
// BATON_CHECK_OR_RETURN(cond, Kind, "fmt {}", args...)  returns Status(Error::Kind, message) when
//                                                     cond is false, after logging it at debug
//                                                     level.
// BATON_ERROR(Kind, "fmt {}", args...)                  builds such a Status (for `return`).
// BATON_TRY(expr)                                      returns expr's Status if it failed.
// BATON_ASSIGN_OR_RETURN(lhs, expr)                    unwraps a Result<T> into lhs or returns.
//
// Messages say what failed, where, and how to fix it; the formatting runs only on failure.
#pragma once

#include <fmt/format.h>

#include <new>
#include <stdexcept>

#include "baton/core/error.h"
#include "baton/core/log.h"

namespace baton::detail {

template <typename... Args>
Status make_status(Error code, fmt::format_string<Args...> format, Args&&... args) {
  std::string message = fmt::format(format, std::forward<Args>(args)...);
  if (log_enabled(LogLevel::Debug)) {
    log_message(LogLevel::Debug, "error", fmt::format("{}: {}", error_name(code), message));
  }
  return Status(code, std::move(message));
}

}  // namespace baton::detail

#define BATON_ERROR(kind, ...) ::baton::detail::make_status(::baton::Error::kind, __VA_ARGS__)

#define BATON_CHECK_OR_RETURN(cond, kind, ...)          \
  do {                                                  \
    if (!(cond)) return BATON_ERROR(kind, __VA_ARGS__); \
  } while (0)

#define BATON_CONCAT_INNER_(a, b) a##b
#define BATON_CONCAT_(a, b) BATON_CONCAT_INNER_(a, b)

#define BATON_TRY(expr)                                                        \
  do {                                                                         \
    auto&& baton_try_result_ = (expr);                                         \
    if (!baton_try_result_.ok()) return std::move(baton_try_result_).status(); \
  } while (0)

#define BATON_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#define BATON_ASSIGN_OR_RETURN(lhs, expr) \
  BATON_ASSIGN_OR_RETURN_IMPL_(BATON_CONCAT_(baton_result_, __LINE__), lhs, expr)

namespace baton {

// Runs `body` (returning a Status or a Result) and turns a std::bad_alloc or std::length_error
// thrown inside it into Error::OutOfMemory naming what was done ("loading method 'forward'").
// The library's public entry points that allocate (Program::load_*, load_method, Module) run
// through it, so that an allocation failure is an error for the caller, never an exception out of
// a library that otherwise throws nothing. Nothing is allocated before `body` runs (the message
// is formatted only on failure).
template <typename F>
auto out_of_memory_as_error(std::string_view doing, std::string_view name, F&& body)
    -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status(Error::OutOfMemory,
                  fmt::format("{} '{}': the host is out of memory", doing, name));
  } catch (const std::length_error&) {
    return Status(
        Error::OutOfMemory,
        fmt::format("{} '{}': a buffer would exceed what one allocation can hold", doing, name));
  }
}

}  // namespace baton
