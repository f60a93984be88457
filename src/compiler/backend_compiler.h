// The compile-time side of a backend: which nodes it can take, and how a partition of them becomes
// the blob its runtime side (runtime::BackendInterface with the same id) executes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/core/device.h"
#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

// A maximal acyclic group of nodes one backend claimed.
struct Partition {
  int index = 0;
  std::string name;          // "cuda_0"
  int backend = 0;           // index into CompileOptions::backends
  std::vector<int> nodes;    // in execution order
  std::vector<int> inputs;   // non-constant values read from outside, in first-use order
  std::vector<int> outputs;  // values produced inside and read outside (or graph outputs)
};

struct LoweredPartition {
  std::vector<uint8_t> blob;
  // Backend-specific specs. The compiler adds "target_device" (the partition's label) itself.
  std::vector<std::pair<std::string, std::vector<uint8_t>>> compile_specs;
};

class BackendCompiler {
 public:
  virtual ~BackendCompiler() = default;
  // The runtime backend id the blob is for ("cuda").
  virtual std::string_view id() const = 0;
  virtual bool supports(const Graph& graph, const IrNode& node) const = 0;
  // Constants the partition reads are embedded in the blob (they are not partition inputs).
  virtual Result<LoweredPartition> lower(const Graph& graph, const Partition& partition) = 0;
  // The device a blob was built for, read back from the blob itself (the CUDA engine's header
  // device id). The compiler labels the partition with it, so label and blob cannot drift; an
  // unreadable blob is a compile-time error.
  virtual Result<Device> blob_device(std::span<const uint8_t> blob) const = 0;
};

}  // namespace baton::compiler
