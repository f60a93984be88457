// Scheduling, transfers, memory planning and emission of the program table.
#pragma once

#include <vector>

#include "baton/compiler/compiler.h"
#include "compiler/backend_compiler.h"
#include "compiler/partition.h"
#include "program_generated.h"

namespace baton::compiler {

struct EmitInput {
  const Graph* graph = nullptr;
  const PartitionResult* partitions = nullptr;
  const std::vector<LoweredPartition>* lowered = nullptr;
  std::vector<std::string> backend_ids;  // per partition
  std::vector<Device> labels;            // per partition: its target_device
  MethodIo io = MethodIo::Host;
  std::string producer;
};

struct EmitOutput {
  fb::ProgramT program;
  std::vector<std::vector<uint8_t>> segments;
  CompileSummary summary;
};

// Orders instructions; propagates each delegate's target_device onto the tensors at its inputs
// and outputs; inserts a copy wherever a value crosses devices (method inputs and outputs follow
// `io`); plans one arena per device; builds the program table with its segments (constants
// first, then one blob per delegate).
Result<EmitOutput> emit_program(const EmitInput& input);

}  // namespace baton::compiler
