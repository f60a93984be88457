// What the fuzz targets share: one-time set-up, the oracles beyond "does not crash", and the
// exercise of a verified program (its methods loaded, the small ones executed).
#pragma once

#include <cstdint>
#include <string_view>

#include "baton/core/error.h"
#include "baton/runtime/program.h"

namespace baton::fuzz {

// Methods whose planned memory (all arenas together) exceeds this are not loaded: a valid
// program may ask for any amount of memory, and allocating it would only exhaust the fuzzer.
inline constexpr uint64_t kMaxLoadBytes = uint64_t{256} << 20;
// Methods whose planned memory is at most this are executed once after loading. (16 MiB let a 3-D
// MaxPool of 2.3M elements and 24 taps per output through: 0.2 s in a release build, 31 s under
// the fuzz build's instrumentation, reported as a hang.)
inline constexpr uint64_t kMaxExecuteBytes = uint64_t{8} << 20;

// Logging off (every rejected input would print a line), CPU kernels and allocator registered.
void init();

// Prints `what` and the status, then aborts: libFuzzer records the input as a crash.
[[noreturn]] void fail(std::string_view what, const Status& status);

// Error::Internal means Baton broke one of its own invariants: a bug whatever the input was.
void check_not_internal(std::string_view what, const Status& status);

// Describes the program (what `baton inspect` prints), loads each method whose arenas fit
// kMaxLoadBytes, reads everything a caller can ask of it, and executes it when its arenas fit
// kMaxExecuteBytes. With `must_load`, a method that fits but fails to load aborts (a program the
// compiler just wrote must load).
void exercise_program(const runtime::Program& program, bool must_load);

}  // namespace baton::fuzz
