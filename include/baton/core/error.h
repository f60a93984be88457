// Error codes, Status and Result<T>: how every fallible Baton call reports failure.
//
// Contract: the runtime, kernels and backends never throw. A failing call returns a Status (or a
// Result<T> holding one) whose code says the kind of failure and whose message says what failed,
// where, and what to do about it. A successful Status carries no message and allocates nothing, so
// returning Status from the hot path is free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace baton {

// Grouped by kind; the numeric ranges are stable and part of the public API.
enum class Error : uint16_t {
  Ok = 0,
  // The caller passed something wrong (0x10..).
  InvalidArgument = 0x10,
  NotFound = 0x11,
  // The program file (or an engine blob inside it) is malformed (0x20..).
  InvalidProgram = 0x20,
  // Valid request that Baton cannot serve (unsupported op, dtype, opset, device) (0x30..).
  NotSupported = 0x30,
  // Resources (0x40..).
  OutOfMemory = 0x40,
  // A device, driver or GPU library call failed (0x50..).
  DeviceError = 0x50,
  // File system and other I/O (0x60..).
  IoError = 0x60,
  // A bug in Baton itself (0x70..).
  Internal = 0x70,
};

// "InvalidArgument", "InvalidProgram", ...
std::string_view error_name(Error e);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == Error::Ok; }
  Error code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidProgram: methods[0].values[3].tensor.sizes[1] = -2 is negative"
  std::string to_string() const;

  // Lets BATON_TRY treat Status and Result<T> alike.
  const Status& status() const& { return *this; }
  Status&& status() && { return std::move(*this); }

 private:
  Error code_ = Error::Ok;
  std::string message_;
};

// Either a value or a failed Status. Constructing a Result from an ok Status is a bug and turns
// into Error::Internal.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Result(Status status)                                                 // NOLINT: implicit
      : data_(std::in_place_index<1>,
              status.ok() ? Status(Error::Internal, "Result built from an ok Status")
                          : std::move(status)) {}

  bool ok() const { return data_.index() == 0; }
  Error code() const { return ok() ? Error::Ok : std::get<1>(data_).code(); }

  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(data_);
  }
  Status status() && { return ok() ? Status() : std::move(std::get<1>(data_)); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace baton
