// Placement on hand-built graphs, with no GPU: the fake test backend compiler stands in for a GPU
// backend built for "cuda:N" (its blobs say so), so each test checks exactly which device every
// partition and value gets, which copies the pass inserts, and each label's text.
#include "compiler/placement.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "baton/baton.h"
#include "baton/core/check.h"
#include "baton/core/log.h"
#include "compiler/memory_plan.h"
#include "compiler/onnx_import.h"
#include "compiler/partition.h"
#include "compiler/passes.h"
#include "format/program_file.h"
#include "testing/compiler/test_backend_compiler.h"
#include "testing/onnx_builder.h"

namespace baton {
namespace {

using compiler::CompileOptions;
using compiler::StepKind;
using testing::OnnxBuilder;
using testing::TestBackendCompiler;

const Device kCpu = Device::cpu();
const Device kCuda0 = Device::cuda(0);
const Device kCuda1 = Device::cuda(1);

// A graph taken through import, inference, partitioning, placement and lowering (by the fake
// backend), the way compile_graph does it.
struct Placed {
  compiler::Graph graph;
  compiler::PartitionResult partitions;
  std::vector<compiler::LoweredPartition> lowered;
  compiler::Schedule schedule;

  int value(const std::string& name) const {
    for (size_t v = 0; v < graph.values.size(); ++v) {
      if (graph.values[v].name == name) return static_cast<int>(v);
    }
    ADD_FAILURE() << "no value named '" << name << "'";
    return 0;
  }
  Device device_of(const std::string& name) const { return graph.values[value(name)].device; }
  // Each copy as (name of the copied value, from, to), in program order.
  std::vector<std::tuple<std::string, Device, Device>> copies() const {
    std::vector<std::tuple<std::string, Device, Device>> out;
    for (const compiler::Step& s : schedule.steps) {
      if (s.kind != StepKind::Copy) continue;
      const compiler::IrValue& from = graph.values[s.inputs[0]];
      const compiler::IrValue& to = graph.values[s.outputs[0]];
      EXPECT_EQ(to.device, s.device);
      EXPECT_EQ(to.name, from.name + "@" + to.device.to_string());
      out.emplace_back(from.name, from.device, to.device);
    }
    return out;
  }
  std::vector<StepKind> kinds() const {
    std::vector<StepKind> out;
    for (const compiler::Step& s : schedule.steps) out.push_back(s.kind);
    return out;
  }
  // The delegate call of partition `p`.
  const compiler::Step& call(int p) const {
    for (const compiler::Step& s : schedule.steps) {
      if (s.kind == StepKind::Delegate && s.partition == p) return s;
    }
    ADD_FAILURE() << "no call of partition " << p;
    return schedule.steps.front();
  }
  // The partition's "target_device" compile spec, which must come first.
  std::string label(int p) const {
    const auto& specs = lowered[p].compile_specs;
    EXPECT_FALSE(specs.empty());
    if (specs.empty()) return "";
    EXPECT_EQ(specs.front().first, "target_device");
    return std::string(specs.front().second.begin(), specs.front().second.end());
  }
};

Result<Placed> place(const OnnxBuilder& model, const CompileOptions& options) {
  register_builtins();  // import reads the kernel registry
  Placed out;
  BATON_ASSIGN_OR_RETURN(out.graph, compiler::import_onnx_bytes(model.bytes(), "t", ".", {}));
  BATON_TRY(compiler::infer_and_fold(out.graph));
  BATON_ASSIGN_OR_RETURN(const compiler::PlacementPolicy policy,
                         compiler::make_placement_policy(options));
  out.partitions =
      compiler::partition_graph(out.graph, options.backends, options.max_partition_nodes);
  BATON_TRY(compiler::assign_devices(policy, out.partitions));
  for (compiler::Partition& p : out.partitions.partitions) {
    compiler::BackendCompiler& backend = *options.backends[p.backend];
    BATON_ASSIGN_OR_RETURN(compiler::LoweredPartition lp, backend.lower(out.graph, p));
    BATON_TRY(compiler::label_partition(policy, backend, p, lp));
    out.lowered.push_back(std::move(lp));
  }
  out.schedule = compiler::place_values(policy, out.graph, out.partitions);
  return out;
}

CompileOptions on(std::vector<compiler::BackendCompiler*> backends,
                  std::vector<Device> round_robin = {}) {
  CompileOptions options;
  options.backends = std::move(backends);
  options.targets.round_robin = std::move(round_robin);
  return options;
}

// x -> Relu -> a -> Add(a, x) -> y: one partition.
OnnxBuilder one_partition() {
  OnnxBuilder b;
  b.input("x", {4, 4});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Add", {"a", "x"}, {"y"}, "add");
  b.output("y", {4, 4});
  return b;
}

// x -> Relu -> a [partition 0]; Tanh(a) -> t [cpu]; Add(a, t) -> y [partition 1]. Partition 1
// reads `a` from partition 0 and `t` from the CPU op.
OnnxBuilder cpu_op_between() {
  OnnxBuilder b;
  b.input("x", {8});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Tanh", {"a"}, {"t"}, "tanh_on_cpu");
  b.node("Add", {"a", "t"}, {"y"}, "add");
  b.output("y", {8});
  return b;
}

// x -> Relu -> a -> Relu -> b -> Relu -> y: three adjacent partitions of one node each with
// max_partition_nodes = 1.
OnnxBuilder chain_of_three() {
  OnnxBuilder b;
  b.input("x", {8});
  b.node("Relu", {"x"}, {"a"}, "r0");
  b.node("Relu", {"a"}, {"b"}, "r1");
  b.node("Relu", {"b"}, {"y"}, "r2");
  b.output("y", {8});
  return b;
}

using Copies = std::vector<std::tuple<std::string, Device, Device>>;

TEST(PlacementTest, OneGpuPartitionGetsItsDeviceAndTheCopiesInAndOut) {
  TestBackendCompiler gpu(kCuda0);
  auto placed = place(one_partition(), on({&gpu}));
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 1u);
  EXPECT_EQ(placed->partitions.partitions[0].target_device, kCuda0);
  EXPECT_EQ(placed->label(0), "cuda:0");
  EXPECT_EQ(placed->kinds(),
            (std::vector<StepKind>{StepKind::Copy, StepKind::Delegate, StepKind::Copy}));
  EXPECT_EQ(placed->copies(), (Copies{{"x", kCpu, kCuda0}, {"y", kCuda0, kCpu}}));
  EXPECT_EQ(placed->schedule.copies, 2u);
  // The call reads the copy of x and writes y, both on its device; the method's input and output
  // stay on the host (--io host).
  const compiler::Step& call = placed->call(0);
  EXPECT_EQ(call.device, kCuda0);
  EXPECT_EQ(call.inputs, std::vector<int>{placed->value("x@cuda:0")});
  EXPECT_EQ(placed->device_of("x@cuda:0"), kCuda0);
  EXPECT_EQ(placed->device_of("y"), kCuda0);
  EXPECT_EQ(placed->device_of("x"), kCpu);
  EXPECT_EQ(placed->schedule.inputs, std::vector<int>{placed->value("x")});
  EXPECT_EQ(placed->schedule.outputs, std::vector<int>{placed->value("y@cpu")});
  EXPECT_EQ(placed->device_of("y@cpu"), kCpu);
}

TEST(PlacementTest, WithoutTargetsAPartitionGoesWhereItsClaimantBuilds) {
  TestBackendCompiler gpu(kCuda1);
  auto placed = place(one_partition(), on({&gpu}));
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->partitions.partitions[0].target_device, kCuda1);
  EXPECT_EQ(placed->label(0), "cuda:1");
  EXPECT_EQ(placed->copies(), (Copies{{"x", kCpu, kCuda1}, {"y", kCuda1, kCpu}}));
}

TEST(PlacementTest, TwoGpusRoundRobinAndByMap) {
  TestBackendCompiler gpu0(kCuda0), gpu1(kCuda1);
  auto placed = place(cpu_op_between(), on({&gpu0, &gpu1}, {kCuda0, kCuda1}));
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 2u);
  EXPECT_EQ(placed->partitions.partitions[0].target_device, kCuda0);
  EXPECT_EQ(placed->partitions.partitions[1].target_device, kCuda1);
  EXPECT_EQ(placed->partitions.partitions[0].backend, 0);
  EXPECT_EQ(placed->partitions.partitions[1].backend, 1);
  EXPECT_EQ(gpu0.lowered_partitions, 1);
  EXPECT_EQ(gpu1.lowered_partitions, 1);
  EXPECT_EQ(placed->label(0), "cuda:0");
  EXPECT_EQ(placed->label(1), "cuda:1");
  // a crosses from cuda:0 to the CPU op and to partition 1 on cuda:1: one copy each, both from
  // the original on cuda:0.
  EXPECT_EQ(placed->copies(), (Copies{{"x", kCpu, kCuda0},
                                      {"a", kCuda0, kCpu},
                                      {"a", kCuda0, kCuda1},
                                      {"t", kCpu, kCuda1},
                                      {"y", kCuda1, kCpu}}));

  // The same with a map that swaps them: partition 0 is claimed by the first compiler (map0) but
  // lowered by the one that builds for cuda:1.
  TestBackendCompiler map0(kCuda0), map1(kCuda1);
  CompileOptions swapped = on({&map0, &map1});
  swapped.targets.by_partition = {{0, kCuda1}, {1, kCuda0}};
  placed = place(cpu_op_between(), swapped);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->partitions.partitions[0].target_device, kCuda1);
  EXPECT_EQ(placed->partitions.partitions[1].target_device, kCuda0);
  EXPECT_EQ(placed->partitions.partitions[0].backend, 1);
  EXPECT_EQ(placed->partitions.partitions[1].backend, 0);
  EXPECT_EQ(map0.lowered_partitions, 1);
  EXPECT_EQ(map1.lowered_partitions, 1);
  EXPECT_EQ(placed->label(0), "cuda:1");
  EXPECT_EQ(placed->label(1), "cuda:0");
  EXPECT_EQ(placed->device_of("a"), kCuda1);
  EXPECT_EQ(placed->device_of("y"), kCuda0);
}

TEST(PlacementTest, ARoundRobinListMayRepeatADevice) {
  TestBackendCompiler gpu0(kCuda0), gpu1(kCuda1);
  CompileOptions options = on({&gpu0, &gpu1}, {kCuda1, kCuda1, kCuda0});
  options.max_partition_nodes = 1;
  auto placed = place(chain_of_three(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 3u);
  std::vector<std::string> labels;
  for (int p = 0; p < 3; ++p) labels.push_back(placed->label(p));
  EXPECT_EQ(labels, (std::vector<std::string>{"cuda:1", "cuda:1", "cuda:0"}));
  EXPECT_EQ(gpu0.lowered_partitions, 1);
  EXPECT_EQ(gpu1.lowered_partitions, 2);
  EXPECT_EQ(placed->copies(),
            (Copies{{"x", kCpu, kCuda1}, {"b", kCuda1, kCuda0}, {"y", kCuda0, kCpu}}));
}

// The CPU op reads a copy of `a` on the host, but partition 1 (on the same GPU as partition 0)
// reads the original `a` in device memory: no device -> host -> device round trip, and exactly
// the copies the CPU op needs.
TEST(PlacementTest, ACpuOpBetweenPartitionsGetsExactlyTheCopiesItNeeds) {
  TestBackendCompiler gpu(kCuda0);
  auto placed = place(cpu_op_between(), on({&gpu}, {kCuda0}));
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 2u);
  EXPECT_EQ(
      placed->copies(),
      (Copies{{"x", kCpu, kCuda0}, {"a", kCuda0, kCpu}, {"t", kCpu, kCuda0}, {"y", kCuda0, kCpu}}));
  EXPECT_EQ(placed->call(1).inputs,
            (std::vector<int>{placed->value("a"), placed->value("t@cuda:0")}));
  EXPECT_EQ(placed->device_of("a"), kCuda0);
  EXPECT_EQ(placed->device_of("t"), kCpu);
  EXPECT_EQ(
      placed->kinds(),
      (std::vector<StepKind>{StepKind::Copy, StepKind::Delegate, StepKind::Copy, StepKind::Kernel,
                             StepKind::Copy, StepKind::Delegate, StepKind::Copy}));
}

// A second reader on a device shares the first reader's copy: x is copied to the GPU once,
// though both partitions read it.
TEST(PlacementTest, ASecondReaderOnADeviceSharesTheCopy) {
  OnnxBuilder b;
  b.input("x", {4});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Tanh", {"a"}, {"t"}, "tanh_on_cpu");
  b.node("Mul", {"t", "x"}, {"y"}, "mul");
  b.output("y", {4});
  TestBackendCompiler gpu(kCuda0);
  auto placed = place(b, on({&gpu}));
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 2u);
  EXPECT_EQ(
      placed->copies(),
      (Copies{{"x", kCpu, kCuda0}, {"a", kCuda0, kCpu}, {"t", kCpu, kCuda0}, {"y", kCuda0, kCpu}}));
  EXPECT_EQ(placed->call(0).inputs, std::vector<int>{placed->value("x@cuda:0")});
  EXPECT_EQ(placed->call(1).inputs,
            (std::vector<int>{placed->value("t@cuda:0"), placed->value("x@cuda:0")}));
}

TEST(PlacementTest, AdjacentPartitionsOnOneDeviceHandOverInDeviceMemory) {
  TestBackendCompiler gpu(kCuda0);
  CompileOptions options = on({&gpu});
  options.max_partition_nodes = 1;
  auto placed = place(chain_of_three(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 3u);
  EXPECT_EQ(placed->copies(), (Copies{{"x", kCpu, kCuda0}, {"y", kCuda0, kCpu}}));
  EXPECT_EQ(placed->call(1).inputs, std::vector<int>{placed->value("a")});
  EXPECT_EQ(placed->call(2).inputs, std::vector<int>{placed->value("b")});
  EXPECT_EQ(placed->device_of("a"), kCuda0);
  EXPECT_EQ(placed->device_of("b"), kCuda0);
}

TEST(PlacementTest, AdjacentPartitionsOnTwoDevicesCopyDeviceToDevice) {
  TestBackendCompiler gpu0(kCuda0), gpu1(kCuda1);
  CompileOptions options = on({&gpu0, &gpu1}, {kCuda0, kCuda1});
  options.max_partition_nodes = 1;
  auto placed = place(chain_of_three(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(
      placed->copies(),
      (Copies{
          {"x", kCpu, kCuda0}, {"a", kCuda0, kCuda1}, {"b", kCuda1, kCuda0}, {"y", kCuda0, kCpu}}));
  EXPECT_EQ(placed->call(1).inputs, std::vector<int>{placed->value("a@cuda:1")});
  EXPECT_EQ(placed->call(2).inputs, std::vector<int>{placed->value("b@cuda:0")});
}

// Every output of a multi-output call is on the call's device; the host copy of `a` made for the
// CPU op is the method output too (one copy, not two).
TEST(PlacementTest, EveryOutputOfAMultiOutputCallIsAnnotated) {
  OnnxBuilder b;
  b.input("x", {6});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Mul", {"a", "a"}, {"m"}, "square");
  b.node("Tanh", {"a"}, {"t"}, "tanh_on_cpu");
  b.output("a", {6});
  b.output("m", {6});
  b.output("t", {6});
  TestBackendCompiler gpu(kCuda1);
  auto placed = place(b, on({&gpu}));
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  ASSERT_EQ(placed->partitions.partitions.size(), 1u);
  const compiler::Step& call = placed->call(0);
  EXPECT_EQ(call.outputs, (std::vector<int>{placed->value("a"), placed->value("m")}));
  for (int v : call.outputs) EXPECT_EQ(placed->graph.values[v].device, kCuda1);
  EXPECT_EQ(placed->copies(),
            (Copies{{"x", kCpu, kCuda1}, {"a", kCuda1, kCpu}, {"m", kCuda1, kCpu}}));
  EXPECT_EQ(placed->schedule.outputs,
            (std::vector<int>{placed->value("a@cpu"), placed->value("m@cpu"), placed->value("t")}));
}

// --io device: an input lives where its first reader runs, an output where it is produced.
TEST(PlacementTest, IoDeviceKeepsInputsAndOutputsWhereTheyAreUsed) {
  TestBackendCompiler gpu(kCuda0);
  CompileOptions options = on({&gpu});
  options.io = compiler::MethodIo::Device;
  auto placed = place(cpu_op_between(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->device_of("x"), kCuda0);
  EXPECT_EQ(placed->device_of("y"), kCuda0);
  EXPECT_EQ(placed->schedule.inputs, std::vector<int>{placed->value("x")});
  EXPECT_EQ(placed->schedule.outputs, std::vector<int>{placed->value("y")});
  EXPECT_EQ(placed->copies(), (Copies{{"a", kCuda0, kCpu}, {"t", kCpu, kCuda0}}));

  // An input whose first reader is a CPU op stays on the host, and is copied for the partition.
  OnnxBuilder b;
  b.input("x", {4});
  b.node("Tanh", {"x"}, {"t"}, "tanh_on_cpu");
  b.node("Add", {"t", "x"}, {"y"}, "add");
  b.output("y", {4});
  placed = place(b, options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->device_of("x"), kCpu);
  EXPECT_EQ(placed->copies(), (Copies{{"t", kCpu, kCuda0}, {"x", kCpu, kCuda0}}));
  EXPECT_EQ(placed->schedule.outputs, std::vector<int>{placed->value("y")});
}

struct Captured {
  std::vector<std::string> warnings;
};

void capture(LogLevel level, std::string_view, std::string_view message, void* user) {
  if (level == LogLevel::Warn) static_cast<Captured*>(user)->warnings.emplace_back(message);
}

// --target-device is written verbatim ("cuda" stays "cuda") and decides where the tensors are
// planned; a label that disagrees with the blob is allowed, with a warning naming both.
TEST(PlacementTest, TargetDeviceIsWrittenVerbatim) {
  Captured log;
  set_log_callback(&capture, &log);
  TestBackendCompiler gpu(kCuda0);
  CompileOptions options = on({&gpu});
  options.target_device = "cuda";
  auto placed = place(one_partition(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->label(0), "cuda");
  EXPECT_EQ(placed->partitions.partitions[0].target_device, kCuda0);
  EXPECT_TRUE(log.warnings.empty());

  options.target_device = "cuda:5";
  placed = place(one_partition(), options);
  set_log_callback(nullptr, nullptr);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->label(0), "cuda:5");
  EXPECT_EQ(placed->partitions.partitions[0].target_device, Device::cuda(5));
  EXPECT_EQ(placed->device_of("y"), Device::cuda(5));
  EXPECT_EQ(placed->copies(), (Copies{{"x", kCpu, Device::cuda(5)}, {"y", Device::cuda(5), kCpu}}));
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_NE(log.warnings[0].find("partition 'test_elementwise_0' is labelled cuda:5 "
                                 "(--target-device) but its engine is built for cuda:0"),
            std::string::npos)
      << log.warnings[0];
}

// A backend whose blob says another device than the one it was asked for is a bug the compiler
// catches: label and blob must not drift.
TEST(PlacementTest, ABlobBuiltForAnotherDeviceThanAssignedIsRefused) {
  TestBackendCompiler gpu(kCuda1);
  gpu.misbuilt_for = kCuda0;
  auto placed = place(one_partition(), on({&gpu}));
  ASSERT_EQ(placed.code(), Error::Internal);
  EXPECT_NE(placed.status().message().find("partition 'test_elementwise_0' was placed on cuda:1, "
                                           "but the test_elementwise backend built its blob for "
                                           "cuda:0"),
            std::string::npos)
      << placed.status().to_string();

  // The same through the whole compiler: no program.
  register_builtins();
  auto compiled = compiler::compile_bytes(one_partition().bytes(), on({&gpu}));
  EXPECT_EQ(compiled.code(), Error::Internal);
}

TEST(PlacementTest, PoliciesThatCannotBeAppliedAreRefusedByName) {
  TestBackendCompiler gpu0(kCuda0), gpu1(kCuda1);
  CompileOptions both = on({&gpu0, &gpu1}, {kCuda0});
  both.targets.by_partition = {{0, kCuda1}};
  auto r = compiler::make_placement_policy(both);
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("both as a list and as a partition map"), std::string::npos)
      << r.status().to_string();

  r = compiler::make_placement_policy(on({&gpu0}, {kCuda0, Device::cuda(2)}));
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("target device cuda:2 has no backend compiler that builds "
                                      "for it (the backends given build for: cuda:0 "
                                      "(test_elementwise))"),
            std::string::npos)
      << r.status().to_string();

  CompileOptions bad_label = on({&gpu0});
  bad_label.target_device = "gpu7";
  r = compiler::make_placement_policy(bad_label);
  EXPECT_EQ(r.code(), Error::InvalidArgument);
  EXPECT_NE(r.status().message().find("--target-device 'gpu7' is not a device"), std::string::npos)
      << r.status().to_string();

  CompileOptions partial = on({&gpu0, &gpu1});
  partial.targets.by_partition = {{0, kCuda1}};
  auto placed = place(cpu_op_between(), partial);
  EXPECT_EQ(placed.code(), Error::InvalidArgument);
  EXPECT_NE(placed.status().message().find("partition 1 ('test_elementwise_1') has no device in "
                                           "the partition map: give every partition one (e.g. "
                                           "--device 1=cuda:0; this model has 2 partitions)"),
            std::string::npos)
      << placed.status().to_string();
}

// What the emitter writes is what placement decided: the serialized program's copies, tensor
// devices, arenas and labels (no GPU needed to compile; the program is not loaded).
TEST(PlacementTest, TheProgramRecordsThePlacement) {
  register_builtins();
  TestBackendCompiler gpu0(kCuda0), gpu1(kCuda1);
  CompileOptions options = on({&gpu0, &gpu1}, {kCuda0, kCuda1});
  options.max_partition_nodes = 1;
  auto compiled = compiler::compile_bytes(chain_of_three().bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().copies, 4u);
  EXPECT_EQ(compiled->summary().partitions,
            (std::vector<std::pair<std::string, std::string>>{{"test_elementwise_0", "cuda:0"},
                                                              {"test_elementwise_1", "cuda:1"},
                                                              {"test_elementwise_2", "cuda:0"}}));
  auto bytes = compiled->serialize();
  ASSERT_TRUE(bytes.ok());
  auto file = format::ProgramFile::parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const fb::Method& m = *file->program().methods()->Get(0);
  auto device_of = [&](int v) {
    return format::device_of(*m.values()->Get(v)->value_as_Tensor()).to_string();
  };
  std::vector<std::pair<std::string, std::string>> copies;
  std::vector<std::string> boundary;
  for (const fb::Instruction* ins : *m.instructions()) {
    if (const auto* c = ins->instruction_as_DeviceCopy()) {
      copies.emplace_back(device_of(c->src()), device_of(c->dst()));
    } else if (const auto* call = ins->instruction_as_DelegateCall()) {
      for (int v : *call->inputs()) boundary.push_back(device_of(v));
      for (int v : *call->outputs()) boundary.push_back(device_of(v));
    }
  }
  EXPECT_EQ(copies,
            (std::vector<std::pair<std::string, std::string>>{
                {"cpu", "cuda:0"}, {"cuda:0", "cuda:1"}, {"cuda:1", "cuda:0"}, {"cuda:0", "cpu"}}));
  EXPECT_EQ(boundary,
            (std::vector<std::string>{"cuda:0", "cuda:0", "cuda:1", "cuda:1", "cuda:0", "cuda:0"}));
  std::vector<std::string> arenas;
  for (const fb::Arena* a : *m.arenas()) arenas.push_back(format::device_of(*a).to_string());
  EXPECT_EQ(arenas, (std::vector<std::string>{"cpu", "cuda:0", "cuda:1"}));
  EXPECT_EQ(device_of(m.inputs()->Get(0)), "cpu");
  EXPECT_EQ(device_of(m.outputs()->Get(0)), "cpu");
}

// Memory is planned where placement put each value: one arena per device, and a value and its
// copy on another device never share an arena.
TEST(PlacementTest, ValuesArePlannedOnTheirOwnDevices) {
  TestBackendCompiler gpu0(kCuda0), gpu1(kCuda1);
  CompileOptions options = on({&gpu0, &gpu1}, {kCuda0, kCuda1});
  options.max_partition_nodes = 1;
  auto placed = place(chain_of_three(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  auto memory = compiler::plan_values(placed->graph, placed->schedule);
  ASSERT_TRUE(memory.ok()) << memory.status().to_string();
  ASSERT_EQ(memory->arenas.size(), 3u);
  for (const char* name : {"x", "x@cuda:0", "a", "a@cuda:1", "b", "b@cuda:0", "y", "y@cpu"}) {
    const int v = placed->value(name);
    ASSERT_TRUE(memory->slots.count(v)) << name;
    EXPECT_EQ(memory->arenas[memory->slots.at(v).arena].device, placed->graph.values[v].device)
        << name;
  }
  EXPECT_EQ(memory->slots.size(), 8u);
}

}  // namespace
}  // namespace baton
