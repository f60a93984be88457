#include "baton/core/error.h"

namespace baton {

std::string_view error_name(Error e) {
  switch (e) {
    case Error::Ok:
      return "Ok";
    case Error::InvalidArgument:
      return "InvalidArgument";
    case Error::NotFound:
      return "NotFound";
    case Error::InvalidProgram:
      return "InvalidProgram";
    case Error::NotSupported:
      return "NotSupported";
    case Error::OutOfMemory:
      return "OutOfMemory";
    case Error::DeviceError:
      return "DeviceError";
    case Error::IoError:
      return "IoError";
    case Error::Internal:
      return "Internal";
  }
  return "UnknownError";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  std::string out(error_name(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace baton
