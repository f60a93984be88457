// Emission: serializes a placed, planned method into the program table and its segments.
#pragma once

#include <string>
#include <vector>

#include "baton/compiler/compiler.h"
#include "compiler/backend_compiler.h"
#include "compiler/memory_plan.h"
#include "compiler/partition.h"
#include "compiler/placement.h"
#include "program_generated.h"

namespace baton::compiler {

struct EmitInput {
  const Graph* graph = nullptr;  // values carry their devices (placement)
  const PartitionResult* partitions = nullptr;
  const std::vector<LoweredPartition>* lowered = nullptr;  // per partition, labelled
  std::vector<std::string> backend_ids;                    // per partition
  const Schedule* schedule = nullptr;
  const ValuePlan* memory = nullptr;
  const std::vector<CpuFallback>* fallbacks = nullptr;  // written into the method
  const std::vector<StateBinding>* state = nullptr;     // Method.state (compiler/state.h)
  std::string producer;
};

struct EmitOutput {
  fb::ProgramT program;
  std::vector<std::vector<uint8_t>> segments;
  CompileSummary summary;
};

// Writes the schedule's steps as instructions (kernel calls with their bound attributes, delegate
// calls with their compile specs, device copies), every tensor with its device and its planned
// slot, and the segments: constants first (each 64-byte aligned), then one blob per delegate.
// Decides nothing: devices, copies and offsets come from placement and memory planning.
Result<EmitOutput> emit_program(const EmitInput& input);

}  // namespace baton::compiler
