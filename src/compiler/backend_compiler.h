// What a backend compiler (baton/compiler/compiler.h: BackendCompiler) works on: the partitions
// it lowers and the blobs it returns.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/compiler/compiler.h"
#include "baton/core/device.h"
#include "baton/core/error.h"
#include "compiler/ir.h"

namespace baton::compiler {

// A maximal acyclic group of nodes one backend claimed.
struct Partition {
  int index = 0;
  std::string name;  // "cuda_0"
  // Index into CompileOptions::backends: the claimant after partitioning, the compiler that builds
  // for `target_device` after placement (compiler/placement.h: assign_devices).
  int backend = 0;
  // Where the partition runs and its tensors live: the device its blob is built for, or the
  // caller's --target-device. Set by placement; the program's "target_device" label.
  Device target_device;
  // The device the backend built its blob for (read back from the blob after lowering): the
  // program records it in the Delegate, and the runtime runs the delegate there.
  Device blob_device;
  std::vector<int> nodes;    // in execution order
  std::vector<int> inputs;   // non-constant values read from outside, in first-use order
  std::vector<int> outputs;  // values produced inside and read outside (or graph outputs)
  // State pairs (compiler/state.h) whose input and update are both this partition's: (input,
  // output) value ids that the method binds to one buffer. A backend that knows this writes the
  // update in place (a scatter that skips copying its data); one that does not still computes the
  // right result, since copying a buffer onto itself changes nothing.
  std::vector<std::pair<int, int>> in_place;
};

struct LoweredPartition {
  std::vector<uint8_t> blob;
  // Backend-specific specs. The compiler adds "target_device" (the partition's label) itself.
  std::vector<std::pair<std::string, std::vector<uint8_t>>> compile_specs;
};

}  // namespace baton::compiler
