// A test backend ("test_elementwise") that proves delegates work before any GPU exists: the
// compiler side (test_backend_compiler.h) claims same-shape float32 Relu/Add/Mul nodes and writes
// a small blob; this runtime side validates the blob, runs it, describes it (for inspect), and
// counts what it was asked to do.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "baton/runtime/backend.h"

namespace baton::testing {

inline constexpr char kTestBackendId[] = "test_elementwise";

// Blob layout (little-endian): "TBE1", u32 inputs, outputs, constants, temporaries, ops,
// u64 element count; constants (count x float32 each); ops (u8 code, 3 pad, i32 a, b, out).
// Slots: inputs, then constants, then temporaries, then outputs.
enum class TestOp : uint8_t { Relu = 0, Add = 1, Mul = 2 };

struct TestBackendStats {
  std::atomic<int> inits{0};
  std::atomic<int> executes{0};
  std::atomic<int> destroys{0};
  std::atomic<int> describes{0};
  std::atomic<bool> available{true};  // what is_available() answers
  std::map<std::string, std::string> last_specs;
  size_t last_blob_size = 0;
  std::vector<std::string> options_seen;
  Device last_device;                 // BackendInitContext::device of the last init
  Device last_recorded_device;        // and its recorded_device
  std::vector<int64_t> last_symbols;  // DelegateArgs::symbols of the last execute
  void reset();
};

struct TestBlobOp {
  TestOp code;
  int32_t a, b, out;
};

std::vector<uint8_t> make_test_blob(uint32_t inputs, uint32_t outputs,
                                    const std::vector<std::vector<float>>& constants,
                                    uint32_t temps, const std::vector<TestBlobOp>& ops,
                                    uint64_t numel);

TestBackendStats& test_backend_stats();
// Registers the backend (idempotent). A compile spec "fail_init" makes init fail.
void register_test_backend();

}  // namespace baton::testing
