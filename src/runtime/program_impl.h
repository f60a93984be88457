// Program's private state, shared by program.cpp and method.cpp.
#pragma once

#include <span>
#include <string>

#include "baton/runtime/program.h"
#include "format/program_file.h"

namespace baton::runtime {

struct Program::Impl {
  std::string origin;  // path, or "<memory>"
  void* mapped = nullptr;
  size_t mapped_size = 0;
  void* owned = nullptr;
  std::span<const uint8_t> bytes;
  format::ProgramFile file;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();
};

}  // namespace baton::runtime
