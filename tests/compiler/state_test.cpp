// State (docs/state.md): a model input and the output that updates it, compiled with --state,
// become one tensor the method keeps across calls and updates in place. Checked against the
// cache a plain loop computes: what accumulates across calls, what readers before the update see,
// reset and set, the format version, and the errors for pairs that cannot be state.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/compiler/request.h"
#include "baton/core/check.h"
#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "testing/aligned_bytes.h"
#include "testing/alloc/counting_allocator.h"
#include "testing/onnx_builder.h"

namespace baton::testing {
namespace {

constexpr int64_t kMax = 8;  // cache positions
constexpr int64_t kDim = 4;  // features per position

// A decode step's cache update: present = ScatterND(past, positions, rows) ([kMax, kDim], one
// row per new position), y = 2 * present, and (when `read_before`) old = -past computed before
// the update, or (when `read_after`) late = -past listed after it. `n` new positions (-1: the
// dynamic symbol "n").
OnnxBuilder cache_model(int64_t n, bool read_before = false, bool read_after = false) {
  OnnxBuilder b;
  b.input("past", {kMax, kDim});
  if (n < 0) {
    b.input_named("pos", {-1, 1}, {"n"}, 7);
    b.input_named("rows", {-1, kDim}, {"n"}, 1);
  } else {
    b.input("pos", {n, 1}, 7);
    b.input("rows", {n, kDim});
  }
  b.initializer("two", {1}, {2.0f});
  if (read_before) b.node("Neg", {"past"}, {"old"}, "old");
  b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
  if (read_after) b.node("Neg", {"past"}, {"late"}, "late");
  b.node("Mul", {"present", "two"}, {"y"}, "double");
  b.output("y", {kMax, kDim});
  b.output("present", {kMax, kDim});
  if (read_before) b.output("old", {kMax, kDim});
  if (read_after) b.output("late", {kMax, kDim});
  return b;
}

Result<compiler::CompiledProgram> compile(const OnnxBuilder& b, std::vector<std::string> state,
                                          std::vector<compiler::DimRange> dims = {}) {
  compiler::CompileRequest request;
  request.state = std::move(state);
  request.dims = std::move(dims);
  BATON_ASSIGN_OR_RETURN(compiler::CompileSetup setup, compiler::make_compile_setup(request));
  return compiler::compile_bytes(b.bytes(), setup.options);
}

struct Loaded {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const runtime::Program> program;
  std::unique_ptr<runtime::Method> method;
};

Loaded load(const compiler::CompiledProgram& compiled) {
  Loaded l;
  auto bytes = compiled.serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  l.bytes = std::move(bytes).value();
  auto program = runtime::Program::load_bytes(l.bytes);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  l.program = std::move(program).value();
  auto method = l.program->load_method();
  EXPECT_TRUE(method.ok()) << method.status().to_string();
  l.method = std::move(method).value();
  return l;
}

// One call: rows[i] written at positions[i]; returns y.
std::vector<float> step(runtime::Method& m, std::vector<int64_t> positions,
                        std::vector<float> rows) {
  const std::vector<int64_t> pos_sizes{static_cast<int64_t>(positions.size()), 1};
  const std::vector<int64_t> row_sizes{static_cast<int64_t>(positions.size()), kDim};
  EXPECT_TRUE(m.set_input(0, {positions.data(), DType::Int64, pos_sizes}).ok());
  EXPECT_TRUE(m.set_input(1, {rows.data(), DType::Float32, row_sizes}).ok());
  const Status st = m.execute();
  EXPECT_TRUE(st.ok()) << st.to_string();
  const TensorView y = m.output(0);
  return std::vector<float>(y.data_as<float>(), y.data_as<float>() + y.numel());
}

std::vector<float> row(float base) {
  std::vector<float> r(kDim);
  for (int64_t d = 0; d < kDim; ++d) r[d] = base + 0.25f * static_cast<float>(d);
  return r;
}

std::vector<float> doubled(const std::vector<float>& cache) {
  std::vector<float> y(cache);
  for (float& v : y) v *= 2.0f;
  return y;
}

void write(std::vector<float>& cache, int64_t position, const std::vector<float>& r) {
  std::copy(r.begin(), r.end(), cache.begin() + position * kDim);
}

std::vector<float> state_of(const runtime::Method& m) {
  const TensorView s = m.state(0);
  return std::vector<float>(s.data_as<float>(), s.data_as<float>() + s.numel());
}

class StateTest : public ::testing::Test {
 protected:
  void SetUp() override { register_builtins(); }
};

TEST_F(StateTest, DeclaredStateAccumulatesAcrossCallsInPlace) {
  auto compiled = compile(cache_model(1), {"past=present"});
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  ASSERT_EQ(compiled->summary().state.size(), 1u);
  EXPECT_EQ(compiled->summary().state[0].input, "past");
  EXPECT_EQ(compiled->summary().state[0].output, "present");
  Loaded l = load(*compiled);
  runtime::Method& m = *l.method;
  // The caller passes neither the cache nor receives it: inputs pos and rows, output y.
  ASSERT_EQ(m.num_inputs(), 2u);
  EXPECT_EQ(m.input_info(0).name, "pos");
  ASSERT_EQ(m.num_outputs(), 1u);
  EXPECT_EQ(m.output_info(0).name, "y");
  ASSERT_EQ(m.num_states(), 1u);
  EXPECT_EQ(m.state_info(0).name, "past");
  EXPECT_EQ(m.state_update_name(0), "present");
  EXPECT_EQ(std::vector<int64_t>(m.state_info(0).sizes.begin(), m.state_info(0).sizes.end()),
            (std::vector<int64_t>{kMax, kDim}));

  std::vector<float> cache(kMax * kDim, 0.0f);
  EXPECT_EQ(state_of(m), cache) << "state is zero after load";
  const int64_t order[] = {0, 3, 1, 7, 3};
  for (int i = 0; i < 5; ++i) {
    const std::vector<float> r = row(1.5f + static_cast<float>(i));
    write(cache, order[i], r);
    EXPECT_EQ(step(m, {order[i]}, r), doubled(cache)) << "call " << i;
    EXPECT_EQ(state_of(m), cache) << "call " << i;
  }

  ASSERT_TRUE(m.reset_state().ok());
  std::fill(cache.begin(), cache.end(), 0.0f);
  EXPECT_EQ(state_of(m), cache);
  write(cache, 2, row(-3.0f));
  EXPECT_EQ(step(m, {2}, row(-3.0f)), doubled(cache)) << "after reset_state";

  std::vector<float> set(kMax * kDim);
  for (size_t i = 0; i < set.size(); ++i) set[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const std::vector<int64_t> sizes{kMax, kDim};
  ASSERT_TRUE(m.set_state(0, {set.data(), DType::Float32, sizes}).ok());
  write(set, 5, row(9.0f));
  EXPECT_EQ(step(m, {5}, row(9.0f)), doubled(set)) << "after set_state";

  const std::vector<int64_t> wrong{kMax, kDim + 1};
  std::vector<float> big(kMax * (kDim + 1));
  const Status bad = m.set_state(0, {big.data(), DType::Float32, wrong});
  EXPECT_EQ(bad.code(), Error::InvalidArgument) << bad.to_string();
  EXPECT_EQ(m.set_state(1, {set.data(), DType::Float32, sizes}).code(), Error::InvalidArgument);
}

TEST_F(StateTest, AutoFindsTheScatterPairAndWritesVersionFive) {
  auto with = compile(cache_model(2), {"auto"});
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  ASSERT_EQ(with->summary().state.size(), 1u);
  EXPECT_EQ(with->summary().state[0].input, "past");
  Loaded l = load(*with);
  ASSERT_EQ(l.method->num_states(), 1u);
  std::vector<float> cache(kMax * kDim, 0.0f);
  std::vector<float> rows = row(1.0f);
  const std::vector<float> r2 = row(-2.0f);
  rows.insert(rows.end(), r2.begin(), r2.end());
  write(cache, 6, row(1.0f));
  write(cache, 0, r2);
  EXPECT_EQ(step(*l.method, {6, 0}, rows), doubled(cache));

  uint32_t version = 0;
  std::memcpy(&version, l.bytes.data() + 12, sizeof version);
  EXPECT_EQ(version, format::kFormatVersion);
  EXPECT_EQ(version, 5u);
  // Without state the file stays version 4, which readers from before state load.
  auto without = compile(cache_model(2), {});
  ASSERT_TRUE(without.ok()) << without.status().to_string();
  auto bytes = without->serialize();
  ASSERT_TRUE(bytes.ok());
  std::memcpy(&version, bytes->data() + 12, sizeof version);
  EXPECT_EQ(version, format::kStatelessFormatVersion);
  auto program = runtime::Program::load_bytes(*bytes);
  ASSERT_TRUE(program.ok());
  auto method = (*program)->load_method();
  ASSERT_TRUE(method.ok());
  EXPECT_EQ((*method)->num_states(), 0u);
  EXPECT_EQ((*method)->num_inputs(), 3u);
  EXPECT_EQ((*method)->num_outputs(), 2u);
}

TEST_F(StateTest, AReaderBeforeTheUpdateSeesTheOldCache) {
  auto compiled = compile(cache_model(1, /*read_before=*/true), {"past=present"});
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  Loaded l = load(*compiled);
  runtime::Method& m = *l.method;
  ASSERT_EQ(m.num_outputs(), 2u);
  ASSERT_EQ(m.output_info(1).name, "old");
  std::vector<float> cache(kMax * kDim, 0.0f);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> old(cache);
    for (float& v : old) v = -v;
    write(cache, i * 2, row(static_cast<float>(i) + 0.5f));
    EXPECT_EQ(step(m, {i * 2}, row(static_cast<float>(i) + 0.5f)), doubled(cache));
    const TensorView o = m.output(1);
    EXPECT_EQ(std::vector<float>(o.data_as<float>(), o.data_as<float>() + o.numel()), old)
        << "call " << i;
  }
}

TEST_F(StateTest, DynamicNewPositionsShareOneCache) {
  auto compiled = compile(cache_model(-1), {"past=present"}, {{"n", 1, kMax, 0, ""}});
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  Loaded l = load(*compiled);
  runtime::Method& m = *l.method;
  std::vector<float> cache(kMax * kDim, 0.0f);
  // A prefill of 3 positions, then one at a time, then 2.
  std::vector<float> rows;
  for (int64_t p = 0; p < 3; ++p) {
    const std::vector<float> r = row(static_cast<float>(p) * 1.5f);
    rows.insert(rows.end(), r.begin(), r.end());
    write(cache, p, r);
  }
  EXPECT_EQ(step(m, {0, 1, 2}, rows), doubled(cache));
  write(cache, 3, row(-1.0f));
  EXPECT_EQ(step(m, {3}, row(-1.0f)), doubled(cache));
  rows = row(4.0f);
  const std::vector<float> r5 = row(5.0f);
  rows.insert(rows.end(), r5.begin(), r5.end());
  write(cache, 4, row(4.0f));
  write(cache, 5, r5);
  EXPECT_EQ(step(m, {4, 5}, rows), doubled(cache));
}

void expect_refused(const Result<compiler::CompiledProgram>& r, Error code,
                    const std::string& needle) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

TEST_F(StateTest, PairsThatCannotBeStateAreRefusedByName) {
  expect_refused(compile(cache_model(1), {"cache=present"}), Error::InvalidArgument,
                 "'cache' is not an input of the model (its inputs: 'past', 'pos', 'rows')");
  expect_refused(compile(cache_model(1), {"past=next"}), Error::InvalidArgument,
                 "'next' is not an output of the model");
  expect_refused(compile(cache_model(1), {"past"}), Error::InvalidArgument,
                 "--state 'past': expected INPUT=OUTPUT");
  expect_refused(compile(cache_model(1), {"past=present", "past=present"}), Error::InvalidArgument,
                 "is in another state pair already");
  // y has the cache's shape but is a Mul of the update, not a scatter of the input.
  expect_refused(compile(cache_model(1), {"past=y"}), Error::InvalidArgument,
                 "the output is computed by Mul node 'double'");
  // rows [1, 4] is not the output's shape.
  expect_refused(compile(cache_model(1), {"rows=present"}), Error::InvalidArgument,
                 "the input is float32 [1, 4] and the output float32 [8, 4]");
  // A reader of the input after the update would read the new entries.
  expect_refused(compile(cache_model(1, false, /*read_after=*/true), {"past=present"}),
                 Error::InvalidArgument, "Neg node 'late' reads the state after its update");
  // auto leaves such a model alone only if the reader is not there: with it, the error too.
  expect_refused(compile(cache_model(1, false, true), {"auto"}), Error::InvalidArgument,
                 "reads the state after its update");
}

// Views of the state share its bytes: a reshape of it made before the update and read after it
// would read the new entries too, and a scatter whose updates are a slice of the state would
// read what it writes. Both are refused; a view read before the update is fine.
TEST_F(StateTest, ViewsOfTheStateReadAfterTheUpdateAreRefused) {
  auto with_view = [](bool read_late) {
    OnnxBuilder b;
    b.input("past", {kMax, kDim});
    b.input("pos", {1, 1}, 7);
    b.input("rows", {1, kDim});
    b.initializer_int64("flat_shape", {1}, {kMax * kDim});
    b.node("Reshape", {"past", "flat_shape"}, {"flat"}, "flatten_cache");
    if (!read_late) b.node("Neg", {"flat"}, {"early"}, "early");
    b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
    if (read_late) b.node("Neg", {"flat"}, {"early"}, "late_through_view");
    b.output("early", {kMax * kDim});
    b.output("present", {kMax, kDim});
    return b;
  };
  expect_refused(compile(with_view(true), {"past=present"}), Error::InvalidArgument,
                 "Neg node 'late_through_view' reads the state (through 'flat', a view of it) "
                 "after its update");
  auto fine = compile(with_view(false), {"past=present"});
  EXPECT_TRUE(fine.ok()) << fine.status().to_string();

  OnnxBuilder shift;
  shift.input("past", {kMax, kDim});
  shift.input("pos", {kMax - 1, 1}, 7);
  shift.initializer_int64("starts", {1}, {1});
  shift.initializer_int64("ends", {1}, {kMax});
  shift.initializer_int64("axes", {1}, {0});
  shift.node("Slice", {"past", "starts", "ends", "axes"}, {"tail"}, "window");
  shift.node("ScatterND", {"past", "pos", "tail"}, {"present"}, "shift");
  shift.output("present", {kMax, kDim});
  expect_refused(compile(shift, {"past=present"}), Error::InvalidArgument,
                 "the scatter's updates ('tail') is a view of the state itself");
}

TEST_F(StateTest, AStateSizeNoOtherInputGivesIsRefused) {
  // The cache's length is a symbol only the cache has: with the cache no longer an input, no
  // call could size it.
  OnnxBuilder b;
  b.input_named("past", {-1, kDim}, {"t"});
  b.input("pos", {1, 1}, 7);
  b.input("rows", {1, kDim});
  b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
  b.output("present", {-1, kDim});
  expect_refused(compile(b, {"past=present"}, {{"t", 1, kMax, 0, ""}}), Error::InvalidArgument,
                 "axis 0 of the state has size t, which no other input has");
}

TEST_F(StateTest, ExecuteAllocatesNothingAcrossCallsAndShapes) {
  if (!counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  auto compiled = compile(cache_model(-1), {"past=present"}, {{"n", 1, kMax, 0, ""}});
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  Loaded l = load(*compiled);
  runtime::Method& m = *l.method;
  std::vector<int64_t> one{3}, two{4, 5};
  std::vector<float> rows(2 * kDim, 1.25f);
  const std::vector<int64_t> one_pos{1, 1}, one_row{1, kDim}, two_pos{2, 1}, two_row{2, kDim};
  auto call = [&](bool first) {
    const Status a =
        m.set_input(0, {first ? one.data() : two.data(), DType::Int64, first ? one_pos : two_pos});
    const Status b = m.set_input(1, {rows.data(), DType::Float32, first ? one_row : two_row});
    return a.ok() && b.ok() && m.execute().ok();
  };
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(call(i % 2 == 0));
  int64_t allocations = 0;
  {
    CountAllocations count;
    // set_input copies into planned memory; execute() resolves the new sizes and scatters in
    // place. Neither may allocate, at either shape.
    for (int i = 0; i < 20; ++i) {
      if (!call(i % 2 == 0)) break;
    }
    allocations = count.count();
  }
  EXPECT_EQ(allocations, 0);
  std::vector<float> cache(kMax * kDim, 0.0f);
  write(cache, 3, std::vector<float>(kDim, 1.25f));
  write(cache, 4, std::vector<float>(kDim, 1.25f));
  write(cache, 5, std::vector<float>(kDim, 1.25f));
  EXPECT_EQ(state_of(m), cache);
}

// The loader's checks of Method.state, on a compiled program with one entry changed.
class StateFormatTest : public StateTest {
 protected:
  // Compiles cache_model(1) with state, lets `change` edit the unpacked program, and loads it.
  Status load_changed(const std::function<void(fb::ProgramT&)>& change) {
    auto compiled = compile(cache_model(1), {"past=present"});
    if (!compiled.ok()) return compiled.status();
    auto bytes = compiled->serialize();
    if (!bytes.ok()) return bytes.status();
    AlignedBytes aligned(*bytes);
    auto file = format::ProgramFile::parse(aligned.span());
    if (!file.ok()) return file.status();
    fb::ProgramT program;
    file->program().UnPackTo(&program);
    std::vector<std::span<const uint8_t>> segments;
    for (uint32_t i = 0; i < file->program().segments()->size(); ++i) {
      segments.push_back(file->segment(i));
    }
    change(program);
    auto changed = format::serialize_program(program, segments);
    if (!changed.ok()) return changed.status();
    return runtime::Program::load_bytes(*changed).status();
  }
  static void expect_invalid(const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), Error::InvalidProgram) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  }
};

TEST_F(StateFormatTest, TheUnchangedProgramLoads) {
  EXPECT_TRUE(load_changed([](fb::ProgramT&) {}).ok());
}

TEST_F(StateFormatTest, ValueAndUpdateOnOtherBytesAreRefused) {
  expect_invalid(load_changed([](fb::ProgramT& p) {
                   fb::MethodT& m = *p.methods[0];
                   m.values[m.state[0]->update]->value.AsTensor()->offset += 256;
                 }),
                 "must be one tensor's bytes");
}

TEST_F(StateFormatTest, StateThatIsAlsoAnInputIsRefused) {
  expect_invalid(load_changed([](fb::ProgramT& p) {
                   fb::MethodT& m = *p.methods[0];
                   m.inputs.push_back(m.state[0]->value);
                 }),
                 "is also a method input or output");
}

TEST_F(StateFormatTest, TwoEntriesOfOneNameAreRefused) {
  expect_invalid(load_changed([](fb::ProgramT& p) {
                   fb::MethodT& m = *p.methods[0];
                   m.state.push_back(std::make_unique<fb::StateT>(*m.state[0]));
                 }),
                 "names an earlier entry too");
}

TEST_F(StateFormatTest, TheScatterOverItsInputWithoutStateIsAnOverlap) {
  // Without the entry the scatter writing over its own input is what any other kernel's overlap
  // is: refused (only a state's update may be made in place).
  expect_invalid(load_changed([](fb::ProgramT& p) { p.methods[0]->state.clear(); }), "overlaps");
}

}  // namespace
}  // namespace baton::testing
