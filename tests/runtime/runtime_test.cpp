// Runtime: loading and executing methods, method I/O, delegates through the test backend, and the
// errors a user sees when something does not fit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "baton/baton.h"
#include "baton/runtime/device_allocator.h"
#include "baton/runtime/program.h"
#include "testing/program_fixture.h"
#include "testing/random.h"
#include "testing/sample_programs.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

using runtime::Method;
using runtime::Program;
using testing::make_add_relu_program;

using RuntimeTest = testing::ProgramTest;

TEST_F(RuntimeTest, ExecutesKernelsAndDelegateAndMatchesReference) {
  for (bool with_delegate : {false, true}) {
    auto p = make_add_relu_program(with_delegate);
    auto program = load(p.builder.bytes());
    ASSERT_TRUE(program);
    auto method = program->load_method("forward");
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    std::mt19937 rng(3);
    for (int trial = 0; trial < 3; ++trial) {
      Tensor x = testing::random_tensor(rng, {2, 3}, -2.0f, 2.0f);
      ASSERT_TRUE((*method)->set_input(0, x.view()).ok());
      ASSERT_TRUE((*method)->execute().ok());
      const TensorView out = (*method)->output(0);
      const std::vector<float> xs(x.data_as<float>(), x.data_as<float>() + 6);
      const std::vector<float> want = testing::add_relu_reference(p, xs);
      for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out.data_as<float>()[i], want[i]) << i;
    }
  }
  EXPECT_EQ(testing::test_backend_stats().executes, 3);
}

TEST_F(RuntimeTest, DelegateReceivesBlobSpecsAndOptionsAndIsDestroyed) {
  auto p = make_add_relu_program(true);
  auto program = load(p.builder.bytes());
  ASSERT_TRUE(program);
  {
    runtime::MethodOptions options;
    options.backend_options.push_back({"test_flag", "1"});
    auto method = program->load_method("forward", options);
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    auto& stats = testing::test_backend_stats();
    EXPECT_EQ(stats.inits, 1);
    EXPECT_EQ(stats.last_specs.at("target_device"), "cpu");
    EXPECT_EQ(stats.last_specs.at("flavor"), "mul");
    EXPECT_GT(stats.last_blob_size, 24u);
    ASSERT_EQ(stats.options_seen.size(), 1u);
    EXPECT_EQ(stats.options_seen[0], "test_flag=1");
    EXPECT_EQ(stats.destroys, 0);
    const runtime::InstructionInfo info = (*method)->instruction_info(2);
    EXPECT_EQ(info.kind, runtime::InstructionKind::Delegate);
    EXPECT_NE(info.description.find("test_0"), std::string::npos);
  }
  EXPECT_EQ(testing::test_backend_stats().destroys, 1);
}

// The runtime runs a delegate on the device the program records for it and tells the backend: not
// on the device of its first output (here a CPU tensor), as before format version 3.
TEST_F(RuntimeTest, DelegatesRunOnTheDeviceTheProgramRecords) {
  auto p = make_add_relu_program(false);
  const int extra = p.builder.tensor("extra", DType::Float32, {2, 3});
  const auto blob = testing::make_test_blob(1, 1, {}, 0, {{testing::TestOp::Relu, 0, 0, 1}}, 6);
  const int d = p.builder.delegate(testing::kTestBackendId, {}, blob, "recorded", Device::cuda(3));
  p.builder.delegate_call(d, {p.out}, {extra});
  auto program = load(p.builder.bytes());
  ASSERT_TRUE(program);
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  EXPECT_EQ(testing::test_backend_stats().last_device, Device::cuda(3));
  const size_t last = (*method)->num_instructions() - 1;
  const runtime::InstructionInfo info = (*method)->instruction_info(last);
  ASSERT_EQ(info.kind, runtime::InstructionKind::Delegate);
  EXPECT_EQ(info.device, Device::cuda(3));
}

// A device map (MethodOptions::device_map) moves what the program records on one GPU to another:
// the backend is told both (it checks its blob against the recorded one and runs on the mapped
// one), the instruction reports the mapped device, and the CPU parts stay. Two delegates on two
// GPUs may be swapped.
TEST_F(RuntimeTest, ADeviceMapMovesDelegatesToAnotherGpu) {
  auto p = make_add_relu_program(false);
  const int mid = p.builder.tensor("mid", DType::Float32, {2, 3});
  const int last = p.builder.tensor("last", DType::Float32, {2, 3});
  const auto blob = testing::make_test_blob(1, 1, {}, 0, {{testing::TestOp::Relu, 0, 0, 1}}, 6);
  const int d3 = p.builder.delegate(testing::kTestBackendId, {}, blob, "on3", Device::cuda(3));
  const int d4 = p.builder.delegate(testing::kTestBackendId, {}, blob, "on4", Device::cuda(4));
  p.builder.delegate_call(d3, {p.out}, {mid});
  p.builder.delegate_call(d4, {mid}, {last});
  auto program = load(p.builder.bytes());
  ASSERT_TRUE(program);
  runtime::MethodOptions options;
  options.device_map = *runtime::parse_device_map("cuda:3=cuda:4,cuda:4=cuda:3");
  auto method = program->load_method("forward", options);
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  // The last init was delegate 1, recorded on cuda:4 and now on cuda:3.
  EXPECT_EQ(testing::test_backend_stats().last_device, Device::cuda(3));
  EXPECT_EQ(testing::test_backend_stats().last_recorded_device, Device::cuda(4));
  const size_t n = (*method)->num_instructions();
  EXPECT_EQ((*method)->instruction_info(n - 2).device, Device::cuda(4));
  EXPECT_EQ((*method)->instruction_info(n - 1).device, Device::cuda(3));
  EXPECT_EQ((*method)->instruction_info(0).device, Device::cpu()) << "CPU kernels stay";
  EXPECT_EQ((*method)->input_info(0).device, Device::cpu());

  // Without a map each runs where it was recorded.
  auto plain = program->load_method("forward");
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(testing::test_backend_stats().last_device, Device::cuda(4));
  EXPECT_EQ(testing::test_backend_stats().last_recorded_device, Device::cuda(4));

  // Maps that would break the program are refused before any delegate loads, naming the rule.
  struct Bad {
    const char* map;
    const char* message;
  };
  const int inits = testing::test_backend_stats().inits;
  for (const Bad& bad : {
           Bad{"cpu=cuda:0", "only GPUs are mapped"},
           Bad{"cuda:3=cpu", "only GPUs are mapped"},
           Bad{"cuda:5=cuda:0", "method 'forward' has nothing on cuda:5 (it uses cuda:3, cuda:4)"},
           Bad{"cuda:3=cuda:1,cuda:3=cuda:2", "cuda:3 is mapped twice"},
           Bad{"cuda:3=cuda:1,cuda:4=cuda:1", "cuda:3 and cuda:4 are both mapped to cuda:1"},
           Bad{"cuda:3=cuda:4", "also uses cuda:4, which the map leaves in place"},
       }) {
    runtime::MethodOptions o;
    o.device_map = *runtime::parse_device_map(bad.map);
    auto refused = program->load_method("forward", o);
    ASSERT_FALSE(refused.ok()) << bad.map;
    EXPECT_EQ(refused.status().code(), Error::InvalidArgument) << bad.map;
    EXPECT_NE(refused.status().message().find(bad.message), std::string::npos)
        << bad.map << ": " << refused.status().to_string();
  }
  EXPECT_EQ(testing::test_backend_stats().inits, inits);
}

TEST(DeviceMapTest, ParsesPairsAndRefusesWhatIsNotOne) {
  auto map = runtime::parse_device_map("cuda:0=cuda:1,cuda=cuda:7");
  ASSERT_TRUE(map.ok()) << map.status().to_string();
  ASSERT_EQ(map->size(), 2u);
  EXPECT_EQ((*map)[0].from, Device::cuda(0));
  EXPECT_EQ((*map)[0].to, Device::cuda(1));
  EXPECT_EQ((*map)[1].from, Device::cuda(0));
  EXPECT_EQ((*map)[1].to, Device::cuda(7));
  auto none = runtime::parse_device_map("");
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->empty()) << "no text, no map (as --prepare-shape's parser)";
  for (const char* bad : {",", "cuda:0", "cuda:0=", "=cuda:1", "cuda:0=cuda:1,", "gpu:0=cuda:1",
                          "cuda:0=cuda:1=cuda:2", "cuda:0=cuda:999"}) {
    auto refused = runtime::parse_device_map(bad);
    ASSERT_FALSE(refused.ok()) << "'" << bad << "'";
    EXPECT_EQ(refused.status().code(), Error::InvalidArgument);
    EXPECT_NE(refused.status().message().find("is not FROM=TO"), std::string::npos)
        << refused.status().to_string();
  }
}

// A load option no registered backend takes, or a value its backend refuses, fails the load before
// any delegate is initialized, naming the option and what is valid: a typo never leaves a default.
TEST_F(RuntimeTest, UnknownLoadOptionsAndValuesAreRefusedBeforeAnyDelegateLoads) {
  auto p = make_add_relu_program(true);
  auto program = load(p.builder.bytes());
  ASSERT_TRUE(program);
  const int inits = testing::test_backend_stats().inits;
  struct Case {
    runtime::BackendOption option;
    std::string message;
  };
  for (const Case& c : {Case{{"test_flags", "1"},
                             "unknown load option 'test_flags': the options "
                             "are test_flag (test_elementwise)"},
                        Case{{"test_flag", "yes"}, "test_flag='yes': the value is one of 0, 1"}}) {
    SCOPED_TRACE(c.option.key);
    runtime::MethodOptions options;
    options.backend_options = {{"test_flag", "0"}, c.option};
    auto method = program->load_method("forward", options);
    ASSERT_FALSE(method.ok()) << "'" << c.option.key << "=" << c.option.value << "' was taken";
    EXPECT_EQ(method.status().code(), Error::InvalidArgument);
    EXPECT_NE(method.status().message().find(c.message), std::string::npos)
        << method.status().message();
  }
  EXPECT_EQ(testing::test_backend_stats().inits, inits) << "a delegate was initialized";
}

TEST_F(RuntimeTest, FailedDelegateInitReleasesEarlierDelegates) {
  auto p = make_add_relu_program(true);
  // A second delegate that fails in init: the first one's handle must still be destroyed.
  const int extra = p.builder.tensor("extra", DType::Float32, {2, 3});
  const auto blob = testing::make_test_blob(1, 1, {}, 0, {{testing::TestOp::Relu, 0, 0, 1}}, 6);
  const int d = p.builder.delegate(testing::kTestBackendId, {{"fail_init", "1"}}, blob, "bad");
  p.builder.delegate_call(d, {p.out}, {extra});
  auto program = load(p.builder.bytes());
  auto method = program->load_method("forward");
  ASSERT_FALSE(method.ok());
  EXPECT_NE(method.status().message().find("delegate 1 ('bad'"), std::string::npos)
      << method.status().to_string();
  EXPECT_EQ(testing::test_backend_stats().inits, 1);
  EXPECT_EQ(testing::test_backend_stats().destroys, 1);
}

TEST_F(RuntimeTest, CorruptDelegateBlobIsAnInvalidProgram) {
  auto p = make_add_relu_program(false);
  const int out = p.builder.tensor("out", DType::Float32, {2, 3});
  const int d = p.builder.delegate(testing::kTestBackendId, {}, {'T', 'B', 'E', '1', 7}, "broken");
  p.builder.delegate_call(d, {p.z}, {out});
  auto program = load(p.builder.bytes());
  auto method = program->load_method("forward");
  EXPECT_EQ(method.code(), Error::InvalidProgram);
}

TEST_F(RuntimeTest, UnregisteredBackendIsNamed) {
  auto p = make_add_relu_program(false);
  const int out = p.builder.tensor("out", DType::Float32, {2, 3});
  const int d = p.builder.delegate("warp_drive", {}, {1, 2, 3}, "wd_0");
  p.builder.delegate_call(d, {p.z}, {out});
  auto method = load(p.builder.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::NotSupported);
  EXPECT_NE(method.status().message().find("needs backend 'warp_drive'"), std::string::npos);
  EXPECT_NE(method.status().message().find("test_elementwise"), std::string::npos);
}

TEST_F(RuntimeTest, UnavailableBackendIsNamedWithWhatToDo) {
  auto p = make_add_relu_program(true);
  auto program = load(p.builder.bytes());
  testing::test_backend_stats().available = false;
  auto method = program->load_method("forward");
  testing::test_backend_stats().available = true;
  ASSERT_EQ(method.code(), Error::NotSupported);
  EXPECT_NE(method.status().message().find("delegate 0 ('test_0') needs backend "
                                           "'test_elementwise', which is not available on this "
                                           "machine"),
            std::string::npos)
      << method.status().message();
  EXPECT_NE(method.status().message().find("compile the model again with --device cpu"),
            std::string::npos);
}

TEST_F(RuntimeTest, AccessorsPastTheCountReturnEmptyResults) {
  auto p = make_add_relu_program(true);
  auto method = std::move(load(p.builder.bytes())->load_method("forward")).value();
  EXPECT_EQ(method->input_info(0).name, "x");
  EXPECT_TRUE(method->input_info(1).name.empty());
  EXPECT_FALSE(method->input_info(1).has_storage);
  EXPECT_TRUE(method->output_info(7).name.empty());
  EXPECT_EQ(method->output(1).data, nullptr);
  EXPECT_TRUE(method->instruction_info(method->num_instructions()).description.empty());
  EXPECT_FALSE(method->instruction_device_time_ms(99).has_value());
  EXPECT_TRUE(method->delegate_counters(method->num_delegates()).empty());
}

TEST_F(RuntimeTest, UnknownOperatorIsNamed) {
  auto p = make_add_relu_program(false);
  p.builder.method().operators[1]->name = "Frobnicate";
  auto method = load(p.builder.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::NotSupported);
  EXPECT_NE(method.status().message().find(
                "operator 'Frobnicate' (domain 'ai.onnx') is not known to this runtime"),
            std::string::npos)
      << method.status().to_string();
}

TEST_F(RuntimeTest, OperatorFromAnotherDomainIsNamed) {
  auto p = make_add_relu_program(false);
  p.builder.method().operators[1]->domain = "com.microsoft";
  auto method = load(p.builder.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::NotSupported);
  EXPECT_NE(method.status().message().find(
                "operator 'Relu' (domain 'com.microsoft') is not known to this runtime"),
            std::string::npos)
      << method.status().to_string();
}

TEST_F(RuntimeTest, NullDataPointerIsRefused) {
  auto p = make_add_relu_program(false);
  auto method = std::move(load(p.builder.bytes())->load_method("forward")).value();
  const TensorView null_view{nullptr, DType::Float32, sizes_, Device::cpu()};
  const std::pair<Status, std::string> cases[] = {
      {method->set_input(0, null_view), "input 0 ('x'): the data pointer is null"},
      {method->bind_input(0, null_view), "input 0 ('x'): the data pointer is null"},
      {method->bind_output(0, null_view), "output 0 ('z'): the data pointer is null"}};
  for (const auto& [s, needle] : cases) {
    EXPECT_EQ(s.code(), Error::InvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
}

TEST_F(RuntimeTest, DeclaredShapeThatTheOpDoesNotProduceIsRejected) {
  auto p = make_add_relu_program(false);
  // Make the Add output (and the Relu that reads it) claim a different, larger shape: a kernel
  // would write past the declared tensor.
  p.builder.tensor_at(p.y).sizes = {2, 4};
  p.builder.method().arenas[0]->size += 64;
  auto method = load(p.builder.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::InvalidProgram);
  EXPECT_NE(method.status().message().find("instruction 0 (Add node 'add')"), std::string::npos)
      << method.status().to_string();
}

// A program written before a canonical op gained attributes (a Linear from before `transW` and
// `activation`: only `splits`) is refused at load with the command that rebuilds it.
TEST_F(RuntimeTest, ACanonicalOpWithFewerAttributesThanThisBatonIsRefusedWithTheRebuildCommand) {
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {2, 4});
  const int w = b.constant_floats("w", {4, 3}, std::vector<float>(12, 0.5f));
  const int y = b.tensor("y", DType::Float32, {2, 3});
  const int linear = b.op("Linear", 1);
  b.method().operators[linear]->domain = "baton";
  b.kernel(linear, {x, w}, {b.ints_value({})}, {y}, "old_linear");
  b.inputs({x});
  b.outputs({y});
  auto method = load(b.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::InvalidProgram) << method.status().to_string();
  const std::string& m = method.status().message();
  for (const char* needle :
       {"Linear node 'old_linear'",
        "baton.Linear-1 has 4 attributes in this "
        "Baton, the program binds 1",
        "compiled by another Baton version", "baton compile MODEL.onnx -o PROGRAM.baton"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
  }
}

TEST_F(RuntimeTest, OpsetBelowTheKernelsIsNotSupported) {
  auto p = make_add_relu_program(false);
  p.builder.method().operators[0]->opset = 6;  // Add is defined from opset 7
  auto method = load(p.builder.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::NotSupported);
  EXPECT_NE(method.status().message().find("opset 6"), std::string::npos);
}

TEST_F(RuntimeTest, MissingMethodListsTheOnesThatExist) {
  auto program = load(make_add_relu_program(false).builder.bytes());
  auto method = program->load_method("backward");
  ASSERT_EQ(method.code(), Error::NotFound);
  EXPECT_NE(method.status().message().find("'forward'"), std::string::npos);
}

TEST_F(RuntimeTest, WrongInputsGetClearErrors) {
  auto program = load(make_add_relu_program(false).builder.bytes());
  auto method = std::move(program->load_method("forward")).value();
  std::vector<float> data(8, 1.0f);
  std::vector<int64_t> bad_shape = {2, 4};
  Status s =
      method->set_input(0, TensorView{data.data(), DType::Float32, bad_shape, Device::cpu()});
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_EQ(s.message(), "input 0 ('x'): expected float32 [2, 3], got float32 [2, 4]");
  s = method->set_input(0, TensorView{data.data(), DType::Int32, sizes_, Device::cpu()});
  EXPECT_EQ(s.message(), "input 0 ('x'): expected float32 [2, 3], got int32 [2, 3]");
  s = method->set_input(3, TensorView{data.data(), DType::Float32, sizes_, Device::cpu()});
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("has 1 inputs"), std::string::npos);
  s = method->bind_input(0, TensorView{data.data(), DType::Float32, sizes_, Device::cuda(0)});
  EXPECT_NE(s.message().find("lives on cpu in this program but the bound memory is on cuda:0"),
            std::string::npos)
      << s.message();
}

TEST_F(RuntimeTest, BoundInputsAndOutputsAreUsedInPlace) {
  auto p = make_add_relu_program(false);
  auto program = load(p.builder.bytes());
  auto method = std::move(program->load_method("forward")).value();
  std::vector<float> x = {-1.0f, 2.0f, 0.5f, 1.0f, -3.0f, 0.25f};
  std::vector<float> out(6, -7.0f);
  ASSERT_TRUE(
      method->bind_input(0, TensorView{x.data(), DType::Float32, sizes_, Device::cpu()}).ok());
  ASSERT_TRUE(
      method->bind_output(0, TensorView{out.data(), DType::Float32, sizes_, Device::cpu()}).ok());
  ASSERT_TRUE(method->execute().ok());
  EXPECT_EQ(method->output(0).data, out.data());
  auto want = testing::add_relu_reference(p, x);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[i], want[i]);
  // Changing the caller's input and executing again reads the new values.
  x[0] = 5.0f;
  ASSERT_TRUE(method->execute().ok());
  EXPECT_FLOAT_EQ(out[0], 5.5f);
  // set_input goes back to the planned buffer.
  std::vector<float> y(6, 1.0f);
  ASSERT_TRUE(
      method->set_input(0, TensorView{y.data(), DType::Float32, sizes_, Device::cpu()}).ok());
  x[0] = 100.0f;
  ASSERT_TRUE(method->execute().ok());
  EXPECT_FLOAT_EQ(out[0], 1.5f);
}

// Memory on another device may be bound only where delegates alone read or write the value: the
// backend then decides (CUDA: bind device memory directly, stage host memory, refuse other GPUs).
TEST_F(RuntimeTest, OtherDeviceMemoryMayBeBoundOnlyWhereOnlyDelegatesTouchIt) {
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {2, 3});
  const int y = b.tensor("y", DType::Float32, {2, 3});
  const int z = b.tensor("z", DType::Float32, {2, 3});
  const auto blob = testing::make_test_blob(1, 1, {}, 0, {{testing::TestOp::Relu, 0, 0, 1}}, 6);
  b.delegate_call(b.delegate(testing::kTestBackendId, {}, blob), {x}, {y});
  b.kernel(b.op("Relu"), {y}, {}, {z}, "relu");
  b.inputs({x});
  b.outputs({y, z});
  auto method = std::move(load(b.bytes())->load_method("forward")).value();
  std::vector<float> data(6, 1.0f);
  const TensorView on_gpu{data.data(), DType::Float32, sizes_, Device::cuda(0)};
  // x is read only by the delegate: accepted, and the delegate sees the declared device.
  EXPECT_TRUE(method->bind_input(0, on_gpu).ok());
  // y is also read by a CPU kernel: refused.
  const Status s = method->bind_output(0, on_gpu);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("lives on cpu in this program but the bound memory is on cuda:0"),
            std::string::npos)
      << s.message();
  // z is written by a CPU kernel: refused.
  EXPECT_FALSE(method->bind_output(1, on_gpu).ok());
  // input_info still reports the planned device.
  EXPECT_TRUE(method->input_info(0).device.is_cpu());
}

// An output that is a method input is not computed by the method: it cannot be redirected.
TEST_F(RuntimeTest, AnOutputThatIsAnInputCannotBeRedirected) {
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {2, 3});
  const int y = b.tensor("y", DType::Float32, {2, 3});
  b.kernel(b.op("Relu"), {x}, {}, {y}, "relu");
  b.inputs({x});
  b.outputs({y, x});
  auto method = std::move(load(b.bytes())->load_method("forward")).value();
  std::vector<float> out(6);
  const TensorView view{out.data(), DType::Float32, sizes_, Device::cpu()};
  EXPECT_TRUE(method->bind_output(0, view).ok());
  const Status s = method->bind_output(1, view);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("output 1 ('x') is a constant or a method input, not computed by the "
                             "method; it cannot be redirected"),
            std::string::npos)
      << s.message();
}

TEST_F(RuntimeTest, UnplannedInputMustBeBound) {
  testing::ProgramBuilder b;
  const int x = b.unplanned_tensor("x", DType::Float32, {4});
  const int y = b.tensor("y", DType::Float32, {4});
  b.kernel(b.op("Relu"), {x}, {}, {y}, "relu");
  b.inputs({x});
  b.outputs({y});
  auto method = std::move(load(b.bytes())->load_method("forward")).value();
  EXPECT_FALSE(method->input_info(0).has_storage);
  Status s = method->execute();
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("bind it with bind_input"), std::string::npos);
  std::vector<float> data = {1, -1, 2, -2};
  std::vector<int64_t> sizes = {4};
  EXPECT_NE(method->set_input(0, TensorView{data.data(), DType::Float32, sizes, Device::cpu()})
                .message()
                .find("no planned memory"),
            std::string::npos);
  ASSERT_TRUE(
      method->bind_input(0, TensorView{data.data(), DType::Float32, sizes, Device::cpu()}).ok());
  ASSERT_TRUE(method->execute().ok());
  EXPECT_FLOAT_EQ(method->output(0).data_as<float>()[3], 0.0f);
}

// Without the CUDA backend registered (as in this binary), copies from GPU memory are refused by
// name, with what to call; copy_tensor also says when the tensors do not match.
TEST_F(RuntimeTest, CopiesWithoutAnAllocatorAreNamed) {
  auto p = make_add_relu_program(false);
  auto method = std::move(load(p.builder.bytes())->load_method("forward")).value();
  std::vector<float> data(6, 1.0f);
  const TensorView on_gpu{data.data(), DType::Float32, sizes_, Device::cuda(0)};
  Status s = method->set_input(0, on_gpu);
  EXPECT_EQ(s.code(), Error::NotSupported);
  EXPECT_NE(s.message().find("method 'forward' input 0 ('x'): no allocator can copy from cuda:0 "
                             "to cpu (for GPUs call baton::cuda::register_backend())"),
            std::string::npos)
      << s.message();

  std::vector<float> host(6);
  const TensorView to_host{host.data(), DType::Float32, sizes_, Device::cpu()};
  s = runtime::copy_tensor(to_host, on_gpu);
  EXPECT_EQ(s.code(), Error::NotSupported);
  EXPECT_NE(s.message().find("copy_tensor: no allocator can copy cuda:0 -> cpu"), std::string::npos)
      << s.message();
  const std::vector<int64_t> other = {3, 3};
  s = runtime::copy_tensor(to_host, TensorView{data.data(), DType::Float32, other, Device::cpu()});
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("(dtype or element count differs)"), std::string::npos) << s.message();
}

TEST_F(RuntimeTest, CpuAllocatorRefusesSizesThatOverflowWhenAligned) {
  runtime::DeviceAllocator* cpu = runtime::find_device_allocator(DeviceType::CPU);
  ASSERT_NE(cpu, nullptr);
  auto p = cpu->allocate(Device::cpu(), SIZE_MAX - 10, 64);
  EXPECT_EQ(p.code(), Error::OutOfMemory);
  EXPECT_NE(p.status().message().find("the size overflows"), std::string::npos)
      << p.status().to_string();
}

TEST_F(RuntimeTest, ArenaOnADeviceWithoutAllocatorIsNamed) {
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {4}, Device::cuda(1));
  b.inputs({x});
  b.outputs({x});
  auto method = load(b.bytes())->load_method("forward");
  ASSERT_EQ(method.code(), Error::NotSupported);
  EXPECT_NE(method.status().message().find("arena 0 is on cuda:1 but no allocator for cuda"),
            std::string::npos)
      << method.status().to_string();
}

TEST_F(RuntimeTest, ProfilingRecordsEveryInstruction) {
  auto program = load(make_add_relu_program(true).builder.bytes());
  auto method = std::move(program->load_method("forward")).value();
  method->set_profiling(true);
  std::vector<float> x(6, 1.0f);
  ASSERT_TRUE(
      method->set_input(0, TensorView{x.data(), DType::Float32, sizes_, Device::cpu()}).ok());
  ASSERT_TRUE(method->execute().ok());
  ASSERT_EQ(method->instruction_times().size(), 3u);
  for (auto t : method->instruction_times()) EXPECT_GT(t.count(), 0);
  EXPECT_EQ(method->instruction_info(0).description, "Add (node 'add')");
  EXPECT_TRUE(method->instruction_info(0).device.is_cpu());
}

// What a method measures is chosen per level: nothing by default (timing loops), instruction
// times and each delegate's device time, or each delegate's steps; the backend sees which.
TEST_F(RuntimeTest, ProfilingLevelsReachTheBackend) {
  auto program = load(make_add_relu_program(true).builder.bytes());
  auto method = std::move(program->load_method("forward")).value();
  std::vector<float> x = {1, -2, 3, -4, 5, -6};
  ASSERT_TRUE(
      method->set_input(0, TensorView{x.data(), DType::Float32, sizes_, Device::cpu()}).ok());
  const size_t delegate = 2;
  ASSERT_EQ(method->instruction_info(delegate).kind, runtime::InstructionKind::Delegate);
  EXPECT_EQ(method->instruction_info(delegate).op, "delegate");
  EXPECT_EQ(method->instruction_info(delegate).name, "test_0");
  EXPECT_EQ(method->instruction_info(0).op, "Add");
  EXPECT_EQ(method->instruction_info(0).name, "add");

  ASSERT_TRUE(method->execute().ok());  // nothing measured
  EXPECT_FALSE(method->instruction_device_time_ms(delegate).has_value());
  EXPECT_TRUE(method->instruction_step_times(delegate).empty());

  method->set_profiling(runtime::Method::Profiling{true, true, false});
  ASSERT_TRUE(method->execute().ok());
  const auto starts = method->instruction_start_times();
  ASSERT_EQ(starts.size(), method->num_instructions());
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_GE(starts[i], starts[i - 1]);
  EXPECT_TRUE(method->instruction_device_time_ms(delegate).has_value());
  EXPECT_FALSE(method->instruction_device_time_ms(0).has_value());  // a CPU kernel
  EXPECT_TRUE(method->instruction_step_times(delegate).empty());

  method->set_profiling(runtime::Method::Profiling{false, false, true});
  ASSERT_TRUE(method->execute().ok());
  EXPECT_FALSE(method->instruction_device_time_ms(delegate).has_value());
  const std::vector<runtime::StepTime> steps = method->instruction_step_times(delegate);
  ASSERT_FALSE(steps.empty());
  for (size_t s = 0; s < steps.size(); ++s) {
    EXPECT_FALSE(steps[s].kind.empty());
    EXPECT_EQ(steps[s].what, "op " + std::to_string(s));
    EXPECT_GE(steps[s].ms, 0.0);
    if (s > 0) {
      EXPECT_GE(steps[s].start_ms, steps[s - 1].start_ms);
    }
  }
  method->set_profiling(runtime::Method::Profiling{});
  ASSERT_TRUE(method->execute().ok());
  EXPECT_TRUE(method->instruction_step_times(delegate).empty());
}

}  // namespace
}  // namespace baton
