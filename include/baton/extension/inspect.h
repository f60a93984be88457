// The description of a program file: what `baton inspect --json` prints and what the Python binding
// returns. One JSON object: the file (size, format version, producer, segments) and, per method,
// its values, operators, delegates, arenas and instructions (docs/cli.md lists every key).
//
// A delegate's blob is described by its backend (runtime::BackendInterface::describe_blob) when
// that backend is registered: register_builtins() alone describes none, and a CUDA engine is
// described once baton::cuda::register_backend() has run (no GPU is needed). The description goes
// under the delegate's "engine" key ({"error": ...} when the blob does not validate), with its
// "device" and "sm_arch" repeated as "engine_device" and "sm_arch".
//
// Allocates. Thread-safe: reads the program only.
#pragma once

#include <string>
#include <string_view>

#include "baton/core/error.h"
#include "baton/runtime/program.h"

namespace baton::extension {

// Both return the JSON text indented by two spaces.

// Loads and verifies PATH (the errors of runtime::Program::load_file, naming the file; `options`
// can skip the checksums) and describes it; the description's "file" is PATH.
Result<std::string> describe_program_json(const std::string& path,
                                          const runtime::LoadOptions& options = {});

// Describes a loaded program; the description's "file" is the program's origin (its path, or
// "<memory>").
Result<std::string> describe_program_json(const runtime::Program& program);

// The model's name of a program value: a method output that a GPU partition computes and the
// program copies to the host is the copy, named NAME@cpu (compiler/placement.cpp names a copy
// NAME@DEVICE); other values keep the model's NAME.
std::string model_name(std::string_view value_name);

}  // namespace baton::extension
