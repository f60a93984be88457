// Program file format: round trip, and rejection of every kind of damage with a typed error that
// names the field (run under ASan+UBSan in CI: none of these may crash or read out of bounds).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "baton/baton.h"
#include "baton/core/file.h"
#include "baton/extension/inspect.h"
#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "testing/aligned_bytes.h"
#include "testing/paths.h"
#include "testing/program_builder.h"
#include "testing/sample_programs.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

using format::ProgramFile;
using testing::AddReluProgram;
using testing::make_add_relu_program;

using Aligned = testing::AlignedBytes;

Status parse(const std::vector<uint8_t>& bytes, bool verify_checksums = true) {
  Aligned a(bytes);
  format::ParseOptions options;
  options.verify_checksums = verify_checksums;
  return ProgramFile::parse(a.span(), options).status();
}

void expect_invalid(const std::vector<uint8_t>& bytes, const std::string& needle,
                    Error code = Error::InvalidProgram) {
  const Status s = parse(bytes);
  ASSERT_FALSE(s.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

format::FileHeader header_of(const std::vector<uint8_t>& bytes) {
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}

// Recomputes the table checksum after the bytes of the header or table were edited, as a
// hand-made (hostile) file would have it: the checks below must hold without the checksum's help.
void reseal(std::vector<uint8_t>& bytes) {
  const uint64_t sum = format::table_checksum(bytes, header_of(bytes).segment_base_offset);
  std::memcpy(bytes.data() + format::kTableChecksumOffset, &sum, sizeof sum);
}

TEST(FormatTest, RoundTripPreservesEverything) {
  AddReluProgram p = make_add_relu_program(/*with_delegate=*/true);
  const std::vector<uint8_t> bytes = p.builder.bytes();
  Aligned a(bytes);
  auto file = ProgramFile::parse(a.span());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const format::FileHeader& h = file->header();
  EXPECT_EQ(std::memcmp(h.magic, "BATONPRG", 8), 0);
  EXPECT_EQ(h.format_version, format::kStatelessFormatVersion);
  EXPECT_EQ(h.file_size, bytes.size());
  EXPECT_EQ(h.segment_base_offset % format::kSegmentAreaAlignment, 0u);
  const fb::Program& prog = file->program();
  ASSERT_EQ(prog.methods()->size(), 1u);
  const fb::Method* m = prog.methods()->Get(0);
  EXPECT_EQ(m->name()->str(), "forward");
  EXPECT_EQ(m->instructions()->size(), 3u);
  const fb::Tensor* w = m->values()->Get(p.w)->value_as_Tensor();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->name()->str(), "w");
  EXPECT_EQ(w->allocation(), fb::AllocationKind::Constant);
  const auto seg = file->segment(w->constant_segment());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(seg.data()) % format::kSegmentAlignment, 0u);
  float w0;
  std::memcpy(&w0, seg.data() + w->offset(), 4);
  EXPECT_EQ(w0, p.w_values[0]);
  const fb::Delegate* d = m->delegates()->Get(0);
  EXPECT_EQ(d->backend()->str(), testing::kTestBackendId);
  EXPECT_EQ(d->compile_specs()->size(), 2u);
  EXPECT_EQ(d->compile_specs()->Get(0)->key()->str(), "target_device");
  EXPECT_GT(file->segment(d->blob_segment()).size(), 0u);
}

TEST(FormatTest, EmptyFile) { expect_invalid({}, "0 bytes, smaller than the 64-byte header"); }

TEST(FormatTest, NotABatonFile) {
  std::vector<uint8_t> bytes(200, 0x41);
  expect_invalid(bytes, "not a Baton program");
}

TEST(FormatTest, NewerFormatVersionIsNotSupported) {
  std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  bytes[12] = format::kFormatVersion + 1;
  expect_invalid(
      bytes,
      fmt::format("format version {} (header byte offset 12) is newer", format::kFormatVersion + 1),
      Error::NotSupported);
}

// Version 1 had no checksums and version 2 no delegate devices; such files are refused, naming
// both versions, with the command that makes a new one.
TEST(FormatTest, OlderVersionsSayRecompile) {
  std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  bytes[12] = 1;
  expect_invalid(bytes,
                 "format version 1 (header byte offset 12) is older than this runtime's version 3 "
                 "(checksums and recorded delegate devices): recompile the model with this version "
                 "of baton (baton compile MODEL.onnx -o FILE)",
                 Error::NotSupported);
  bytes[12] = 2;
  expect_invalid(bytes,
                 "format version 2 (header byte offset 12) is older than this runtime's version 3 "
                 "(recorded delegate devices): recompile the model",
                 Error::NotSupported);
}

TEST(FormatTest, EveryTruncationIsRejected) {
  const std::vector<uint8_t> bytes = make_add_relu_program(true).builder.bytes();
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(len));
    const Status s = parse(cut);
    ASSERT_FALSE(s.ok()) << "length " << len;
    ASSERT_EQ(s.code(), Error::InvalidProgram) << "length " << len << ": " << s.to_string();
  }
}

TEST(FormatTest, TrailingBytesAreRejected) {
  std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  bytes.push_back(0);
  expect_invalid(bytes, "truncated or has trailing data");
}

TEST(FormatTest, FlatbufferOverTwoGigabytesIsRejectedBeforeVerification) {
  std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.flatbuffer_size = uint64_t{1} << 31;
  std::memcpy(bytes.data(), &h, sizeof h);
  expect_invalid(bytes,
                 "flatbuffer_size = 2147483648 (header byte offset 24) exceeds FlatBuffers'");
}

TEST(FormatTest, MisalignedBufferIsAnArgumentError) {
  const std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  Aligned misaligned(bytes, /*offset=*/1);
  auto r = ProgramFile::parse(misaligned.span());
  EXPECT_EQ(r.code(), Error::InvalidArgument);
}

// Random bit flips anywhere in the file, loaded with checksums off so that the verifier alone
// stands between the damage and the kernels: parse either accepts (the flip hit data, or a field
// the verifier proves harmless) or returns InvalidProgram/NotSupported. Accepted files must then
// load and run without crashing, which ASan checks in CI.
TEST(FormatTest, BitFlipsNeverCrash) {
  register_builtins();
  testing::register_test_backend();
  const std::vector<uint8_t> bytes = make_add_relu_program(true).builder.bytes();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
  std::uniform_int_distribution<int> bit(0, 7);
  std::uniform_int_distribution<int> flips(1, 4);
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> damaged = bytes;
    const int n = flips(rng);
    for (int f = 0; f < n; ++f) damaged[pos(rng)] ^= static_cast<uint8_t>(1u << bit(rng));
    runtime::LoadOptions unchecked;
    unchecked.verify_checksums = false;
    auto program = runtime::Program::load_bytes(damaged, unchecked);
    if (!program.ok()) {
      const Error c = program.code();
      ASSERT_TRUE(c == Error::InvalidProgram || c == Error::NotSupported)
          << program.status().to_string();
      ++rejected;
      continue;
    }
    ++accepted;
    auto method = (*program)->load_method("forward");
    if (!method.ok()) continue;
    std::vector<float> x(6, 0.25f);
    std::vector<int64_t> sizes = {2, 3};
    TensorView view{x.data(), DType::Float32, sizes, Device::cpu()};
    if ((*method)->set_input(0, view).ok()) (void)(*method)->execute();
  }
  EXPECT_GT(rejected, 0);
  RecordProperty("accepted", accepted);
}

class SemanticTest : public ::testing::Test {
 protected:
  AddReluProgram p = make_add_relu_program(/*with_delegate=*/true);
  fb::MethodT& m() { return p.builder.method(); }
  fb::KernelCallT& kernel(int i) { return *m().instructions[i]->instruction.AsKernelCall(); }
  void expect(const std::string& needle, Error code = Error::InvalidProgram) {
    expect_invalid(p.builder.bytes(), needle, code);
  }
};

TEST_F(SemanticTest, ValueIndexOutOfRange) {
  kernel(0).inputs[1] = 999;
  expect("methods[0] ('forward').instructions[0].inputs[1] = 999 is out of range");
}

TEST_F(SemanticTest, NegativeValueIndex) {
  m().outputs[0] = -5;
  expect("outputs[0] = -5 is out of range");
}

TEST_F(SemanticTest, InvalidDType) {
  p.builder.tensor_at(p.y).dtype = static_cast<fb::ScalarType>(42);
  expect("dtype = 42 is not a known element type");
}

TEST_F(SemanticTest, NegativeSize) {
  p.builder.tensor_at(p.y).sizes[1] = -3;
  expect("(tensor 'y').sizes[1] = -3 is negative");
}

TEST_F(SemanticTest, ElementCountOverflow) {
  p.builder.tensor_at(p.y).sizes = {int64_t{1} << 40, int64_t{1} << 40};
  expect("overflows");
}

TEST_F(SemanticTest, MisalignedTensorOffset) {
  p.builder.tensor_at(p.z).offset = 2;
  expect("(tensor 'z').offset = 2 is not a multiple of the 4-byte float32 element");
}

TEST_F(SemanticTest, TensorOutsideArena) {
  p.builder.tensor_at(p.z).offset = 1 << 20;
  expect("lie outside arena 0");
}

TEST_F(SemanticTest, ArenaOffsetOverflow) {
  p.builder.tensor_at(p.z).offset =
      ~uint64_t{0} - 7;  // element-aligned, and offset + 24 bytes wraps
  expect("lie outside arena 0");
}

TEST_F(SemanticTest, ConstantOutsideSegment) {
  p.builder.tensor_at(p.w).offset = 4096;
  expect("constant bytes [4096");
}

TEST_F(SemanticTest, ConstantSegmentOutOfRange) {
  p.builder.tensor_at(p.w).constant_segment = 17;
  expect("constant_segment = 17 is out of range");
}

TEST_F(SemanticTest, ArenaIndexOutOfRange) {
  p.builder.tensor_at(p.y).arena = 3;
  expect("arena = 3 is out of range");
}

TEST_F(SemanticTest, TensorDeviceDiffersFromItsArena) {
  p.builder.tensor_at(p.y).device_type = fb::DeviceType::CUDA;
  expect("(tensor 'y') is on cuda:0 but its arena 0 is on cpu");
}

TEST_F(SemanticTest, UnknownDeviceType) {
  m().arenas[0]->device_type = static_cast<fb::DeviceType>(9);
  expect("device_type = 9 is not a known device type");
}

TEST_F(SemanticTest, CpuWithNonZeroIndex) {
  m().arenas[0]->device_index = 2;
  expect("a cpu device must have device_index 0");
}

TEST_F(SemanticTest, KernelWritesAConstant) {
  kernel(0).outputs[0] = p.w;
  expect("(tensor 'w') is written by the instruction but is not in an arena");
}

TEST_F(SemanticTest, AttributeThatIsATensorInAnArena) {
  kernel(0).attributes.push_back(p.y);
  expect(
      "is a tensor that is not a constant ('y'); an attribute is a scalar, a list, a string or "
      "a constant tensor");
}

TEST_F(SemanticTest, OperatorIndexOutOfRange) {
  kernel(1).operator_ = 7;
  expect("instructions[1].operator = 7 is out of range");
}

TEST_F(SemanticTest, DelegateBlobMissing) {
  m().delegates[0]->blob_segment = -1;
  expect("has no blob (blob_segment = -1)");
}

TEST_F(SemanticTest, DelegateDeviceMustBeAKnownDevice) {
  m().delegates[0]->device_type = static_cast<fb::DeviceType>(7);
  expect("delegates[0] ('test_0'): device_type = 7 is not a known device type");
}

TEST_F(SemanticTest, DelegateIndexOutOfRange) {
  m().instructions[2]->instruction.AsDelegateCall()->delegate = 4;
  expect("delegate = 4 is out of range");
}

TEST_F(SemanticTest, CopyThatChangesShape) {
  const int other = p.builder.tensor("other", DType::Float32, {3, 2});
  p.builder.copy(p.z, other);
  expect("changes dtype or shape");
}

TEST_F(SemanticTest, ReadOfTensorWithoutStorage) {
  const int ghost = p.builder.unplanned_tensor("ghost", DType::Float32, {2, 3});
  kernel(0).inputs[1] = ghost;
  expect("(tensor 'ghost') is read by the instruction but has no storage");
}

TEST_F(SemanticTest, MethodInputThatIsAConstant) {
  m().inputs[0] = p.w;
  expect("inputs[0] = 1 (tensor 'w') is a constant; a method input must be in an arena");
}

TEST_F(SemanticTest, MethodOutputWithoutStorage) {
  const int ghost = p.builder.unplanned_tensor("ghost", DType::Float32, {2, 3});
  m().outputs[0] = ghost;
  expect("(tensor 'ghost') is read as a method output but has no storage");
}

TEST_F(SemanticTest, NonContiguousDimOrderIsNotSupported) {
  p.builder.tensor_at(p.y).dim_order = {1, 0};
  expect("only row-major", Error::NotSupported);
}

// A union whose type is set but whose table is absent passes FlatBuffers' own verifier; such a
// file (damaged, or written by a faulty tool) is rejected by name instead of crashing the loader.
// The field is cleared by zeroing its vtable slot, as a writer that omitted it would have left it.
std::vector<uint8_t> without_field(const std::vector<uint8_t>& bytes,
                                   const flatbuffers::Table* (*table_of)(const fb::Method&),
                                   flatbuffers::voffset_t field) {
  // Read without verification: the bytes may already be incomplete (e.g. no values at all).
  Aligned a(bytes);
  format::FileHeader h;
  std::memcpy(&h, a.span().data(), sizeof h);
  const fb::Program* program = fb::GetProgram(a.span().data() + h.flatbuffer_offset);
  const uint8_t* vtable = table_of(*program->methods()->Get(0))->GetVTable();
  EXPECT_LT(field, flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable));
  std::vector<uint8_t> damaged = bytes;
  const size_t slot = static_cast<size_t>(vtable - a.span().data()) + field;
  damaged[slot] = damaged[slot + 1] = 0;
  reseal(damaged);
  return damaged;
}

TEST_F(SemanticTest, ValueKindWithoutItsTable) {
  const auto damaged = without_field(
      p.builder.bytes(),
      [](const fb::Method& m) {
        return reinterpret_cast<const flatbuffers::Table*>(m.values()->Get(0));
      },
      fb::Value::VT_VALUE);
  expect_invalid(damaged, "values[0]: the value's Tensor table is missing");
}

// Values and instructions have the same layout, so FlatBuffers shares one vtable between them;
// with no values left, clearing the slot damages the instructions alone.
TEST_F(SemanticTest, InstructionKindWithoutItsTable) {
  m().values.clear();
  m().inputs.clear();
  m().outputs.clear();
  const auto damaged = without_field(
      p.builder.bytes(),
      [](const fb::Method& m) {
        return reinterpret_cast<const flatbuffers::Table*>(m.instructions()->Get(0));
      },
      fb::Instruction::VT_INSTRUCTION);
  expect_invalid(damaged, "instructions[0]: the instruction's KernelCall table is missing");
}

TEST_F(SemanticTest, DuplicateMethodNames) {
  const std::vector<uint8_t> single = p.builder.bytes();
  Aligned a(single);
  auto file = ProgramFile::parse(a.span());
  ASSERT_TRUE(file.ok());
  fb::ProgramT prog;
  file->program().UnPackTo(&prog);
  auto second = std::make_unique<fb::MethodT>();
  file->program().methods()->Get(0)->UnPackTo(second.get());
  prog.methods.push_back(std::move(second));
  std::vector<std::span<const uint8_t>> segs;
  for (uint32_t i = 0; i < file->program().segments()->size(); ++i)
    segs.push_back(file->segment(i));
  auto bytes = format::serialize_program(prog, segs);
  ASSERT_TRUE(bytes.ok());
  expect_invalid(*bytes, "are both named 'forward'");
}

// An instruction that writes bytes it also reads (or writes twice) is refused by the verifier:
// kernels are out-variant (Identity is a memcpy, which overlapping buffers turn into undefined
// behaviour and wrong results).
TEST_F(SemanticTest, KernelOutputOverlappingItsInputIsRefused) {
  p.builder.tensor_at(p.y).offset = p.builder.tensor_at(p.x).offset + 8;
  expect(
      "methods[0] ('forward').instructions[0] (Add node 'add'): outputs[0] = 2 (tensor 'y', arena "
      "0 bytes [8, 32)) overlaps inputs[0] = 0 (tensor 'x', arena 0 bytes [0, 24))");
}

TEST_F(SemanticTest, KernelWritingItsOwnInputIsRefused) {
  kernel(1).outputs[0] = p.y;
  expect(
      "instructions[1] (Relu node 'relu'): outputs[0] = 2 (tensor 'y', arena 0 bytes [64, 88)) "
      "overlaps inputs[0] = 2 (tensor 'y', arena 0 bytes [64, 88))");
}

TEST_F(SemanticTest, DelegateOutputOverlappingItsInputIsRefused) {
  p.builder.tensor_at(p.out).offset = p.builder.tensor_at(p.z).offset + 20;
  expect(
      "instructions[2] (call of delegate 0 'test_0'): outputs[0] = 4 (tensor 'out', arena 0 bytes "
      "[148, 172)) overlaps inputs[0] = 3 (tensor 'z', arena 0 bytes [128, 152))");
}

TEST_F(SemanticTest, OutputsSharingBytesAreRefused) {
  m().instructions[2]->instruction.AsDelegateCall()->outputs = {p.out, p.out};
  expect("outputs[1] = 4 (tensor 'out', arena 0 bytes [192, 216)) overlaps outputs[0] = 4");
}

TEST_F(SemanticTest, CopyOntoItsOwnSourceIsRefused) {
  const int c = p.builder.tensor("c", DType::Float32, {2, 3});
  p.builder.tensor_at(c).offset = p.builder.tensor_at(p.z).offset + 4;
  p.builder.copy(p.z, c);
  expect(
      "instructions[3] (copy): dst[0] = 5 (tensor 'c', arena 0 bytes [132, 156)) overlaps src[0] "
      "= 3 (tensor 'z', arena 0 bytes [128, 152))");
}

// The one overlap the compiler writes: a layout op's output planned exactly on its input (a view,
// compiler/memory_plan.h). Accepted for Reshape / Flatten / Squeeze / Unsqueeze / Identity only,
// and only when the bytes coincide exactly.
TEST_F(SemanticTest, LayoutOpOutputExactlyOnItsInputIsAView) {
  const int v = p.builder.tensor("v", DType::Float32, {3, 2});
  p.builder.tensor_at(v).offset = p.builder.tensor_at(p.y).offset;
  std::vector<uint8_t> shape(16, 0);
  shape[0] = 3;
  shape[8] = 2;
  const int shape_value = p.builder.constant("shape", DType::Int64, {2}, shape);
  p.builder.kernel(p.builder.op("Reshape", 14), {p.y, shape_value}, {p.builder.int_value(0)}, {v},
                   "view");
  EXPECT_TRUE(parse(p.builder.bytes()).ok()) << parse(p.builder.bytes()).to_string();
  // Shifted by 4 bytes: a partial overlap, refused as before.
  p.builder.tensor_at(v).offset += 4;
  expect("(Reshape node 'view'): outputs[0] = ");
}

TEST_F(SemanticTest, ExactOverlapIsRefusedForOtherOps) {
  const int v = p.builder.tensor("v", DType::Float32, {2, 3});
  p.builder.tensor_at(v).offset = p.builder.tensor_at(p.y).offset;
  p.builder.kernel(p.builder.op("Relu", 14), {p.y}, {}, {v}, "relu2");
  expect("(Relu node 'relu2'): outputs[0] = ");
}

// Reading one tensor twice, and outputs that touch their inputs without sharing a byte, are fine.
TEST_F(SemanticTest, SharedInputsAndAdjacentOutputsAreAccepted) {
  kernel(0).inputs = {p.x, p.x};
  p.builder.tensor_at(p.y).offset = 24;  // right after x's 24 bytes
  const Status s = parse(p.builder.bytes());
  EXPECT_TRUE(s.ok()) << s.to_string();
}

// The regression the fuzzing campaign found: Identity (a memcpy) whose output overlaps its input
// loaded, and executing it was an overlapping memcpy (ASan) with a wrong result.
TEST(ProgramLoadTest, AliasingIdentityIsRefusedAtLoad) {
  register_builtins();
  testing::ProgramBuilder b;
  const int x = b.tensor("x", DType::Float32, {4, 4});
  const int y = b.tensor("y", DType::Float32, {4, 4});
  b.kernel(b.op("Identity", 16), {x}, {}, {y}, "id");
  b.inputs({x});
  b.outputs({y});
  b.tensor_at(y).offset = 16;
  auto program = runtime::Program::load_bytes(b.bytes());
  if (program.ok()) {  // without the check: show what it did
    auto method = (*program)->load_method("forward");
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    std::vector<float> in(16, 1.0f);
    std::vector<int64_t> sizes = {4, 4};
    ASSERT_TRUE((*method)->set_input(0, {in.data(), DType::Float32, sizes, Device::cpu()}).ok());
    (void)(*method)->execute();
    FAIL() << "a program whose Identity writes over its own input loaded";
  }
  EXPECT_EQ(program.code(), Error::InvalidProgram);
  EXPECT_NE(program.status().message().find(
                "<memory>: methods[0] ('forward').instructions[0] (Identity node 'id'): outputs[0] "
                "= 1 (tensor 'y', arena 0 bytes [16, 80)) overlaps inputs[0] = 0 (tensor 'x', "
                "arena 0 bytes [0, 64))"),
            std::string::npos)
      << program.status().to_string();
}

// ---- Byte-level damage that FlatBuffers' verifier lets through

// Moves the vector that `field` of the table picked by `table_of` points to into the padding after
// the flatbuffer, with its 4-byte length on an 8-byte boundary so that its 8-byte fields are 4
// bytes off. FlatBuffers' verifier checks only the length's alignment, so it accepts the file.
std::vector<uint8_t> misalign_vector(
    const std::vector<uint8_t>& bytes,
    const std::function<const flatbuffers::Table*(const fb::Program&)>& table_of,
    flatbuffers::voffset_t field, size_t element_size) {
  Aligned a(bytes);
  const uint8_t* base = a.span().data();
  format::FileHeader h = header_of(bytes);
  const fb::Program* program = fb::GetProgram(base + h.flatbuffer_offset);
  const uint8_t* slot = table_of(*program)->GetAddressOf(field);
  EXPECT_NE(slot, nullptr);
  const uint8_t* vec = slot + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(slot);
  const size_t length = 4 + element_size * flatbuffers::ReadScalar<flatbuffers::uoffset_t>(vec);
  const uint64_t to = align_up(h.flatbuffer_offset + h.flatbuffer_size, 8);
  EXPECT_LE(to + length, h.segment_base_offset);
  std::vector<uint8_t> damaged = bytes;
  std::memcpy(damaged.data() + to, vec, length);
  const auto moved = static_cast<flatbuffers::uoffset_t>(to - static_cast<uint64_t>(slot - base));
  std::memcpy(damaged.data() + (slot - base), &moved, sizeof moved);
  h.flatbuffer_size = to + length - h.flatbuffer_offset;
  std::memcpy(damaged.data(), &h, sizeof h);
  reseal(damaged);
  return damaged;
}

const flatbuffers::Table* value_table(const fb::Program& program, int value) {
  const fb::Value* v = program.methods()->Get(0)->values()->Get(value);
  return reinterpret_cast<const flatbuffers::Table*>(v->value());
}

// Reading these in place (the verifier's own loops, the runtime's shape spans) was a misaligned
// 8-byte load, which UBSan reports (build-asan runs these tests with it, aborting on any report).
TEST(AlignmentTest, MisalignedTensorSizesAreRejected) {
  AddReluProgram p = make_add_relu_program(false);
  const auto damaged = misalign_vector(
      p.builder.bytes(), [&](const fb::Program& g) { return value_table(g, p.y); },
      fb::Tensor::VT_SIZES, 8);
  expect_invalid(damaged,
                 "methods[0] ('forward').values[2] (tensor 'y').sizes: its 2 elements (8-byte "
                 "fields) start at file byte offset");
}

TEST(AlignmentTest, MisalignedIntListIsRejected) {
  AddReluProgram p = make_add_relu_program(false);
  const int list = p.builder.ints_value({1, 2, 3});
  const auto damaged = misalign_vector(
      p.builder.bytes(), [&](const fb::Program& g) { return value_table(g, list); },
      fb::IntList::VT_ITEMS, 8);
  expect_invalid(damaged,
                 fmt::format("methods[0] ('forward').values[{}].items: its 3 elements (8-byte "
                             "fields) start at file byte offset",
                             list));
}

TEST(AlignmentTest, MisalignedSegmentTableIsRejected) {
  const auto damaged = misalign_vector(
      make_add_relu_program(true).builder.bytes(),
      [](const fb::Program& g) { return reinterpret_cast<const flatbuffers::Table*>(&g); },
      fb::Program::VT_SEGMENTS, sizeof(fb::Segment));
  expect_invalid(damaged, "program.segments: its 2 elements (8-byte fields) start at file byte");
}

// ---- Regression inputs of the fuzz targets (fuzz/regressions)

// The two misaligned-read findings of fuzz_program, as files of the current format: an int64 vector
// (a tensor's sizes) and the segment table, each 4 bytes off an 8-byte boundary. Their first
// reproducers were format-version-1 files, which the loader now refuses at the version check,
// before the code they were named for. Regenerate them after a format change with
//   build/tests/format/format_test --gtest_also_run_disabled_tests
//   --gtest_filter='*WritePortedRegressionInputs'
// (writes into the source tree's fuzz/regressions/fuzz_program).
TEST(RegressionInputs, DISABLED_WritePortedRegressionInputs) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::source_dir()) / "fuzz/regressions/fuzz_program";
  AddReluProgram p = make_add_relu_program(false);
  const auto sizes = misalign_vector(
      p.builder.bytes(), [&](const fb::Program& g) { return value_table(g, p.y); },
      fb::Tensor::VT_SIZES, 8);
  ASSERT_TRUE(
      write_file_atomically((dir / "misaligned-int64-vector-verify_tensor").string(), sizes).ok());
  const auto segments = misalign_vector(
      make_add_relu_program(true).builder.bytes(),
      [](const fb::Program& g) { return reinterpret_cast<const flatbuffers::Table*>(&g); },
      fb::Program::VT_SEGMENTS, sizeof(fb::Segment));
  ASSERT_TRUE(
      write_file_atomically((dir / "misaligned-segment-struct-parse").string(), segments).ok());
}

// Every fuzz_program regression input is listed in fuzz/regressions/stages.txt with the parse
// stage its bug lived in, and still reaches that stage (checksums off, as the fuzz target loads
// it): an input refused earlier (by the version check, say) no longer tests anything.
TEST(RegressionInputs, EveryProgramInputReachesTheStageItWasRecordedFor) {
  const std::filesystem::path root =
      std::filesystem::path(testing::source_dir()) / "fuzz/regressions";
  std::ifstream manifest(root / "stages.txt");
  ASSERT_TRUE(manifest.good()) << (root / "stages.txt");
  std::map<std::string, std::string> stages;
  for (std::string line; std::getline(manifest, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, stage;
    fields >> name >> stage;
    stages[name] = stage;
  }
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root / "fuzz_program")) {
    const std::string name = "fuzz_program/" + entry.path().filename().string();
    SCOPED_TRACE(name);
    ASSERT_TRUE(stages.count(name)) << "not listed in fuzz/regressions/stages.txt";
    auto bytes = read_regular_file(entry.path().string(), uint64_t{1} << 30, "regression input");
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    Aligned aligned(*bytes);
    format::ParseStage reached = format::ParseStage::Nothing;
    format::ParseOptions options;
    options.verify_checksums = false;
    options.reached = &reached;
    const auto parsed = format::ProgramFile::parse(aligned.span(), options);
    EXPECT_EQ(format::parse_stage_name(reached), stages[name])
        << (parsed.ok() ? std::string("accepted") : parsed.status().to_string());
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

// FlatBuffers' verifier says only "fails"; the message names the first element that does.
TEST(FormatTest, StructuralDamageNamesTheElement) {
  std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  {
    Aligned a(bytes);
    const uint8_t* base = a.span().data();
    const fb::Program* program = fb::GetProgram(base + header_of(bytes).flatbuffer_offset);
    const uint8_t* element = program->methods()->Get(0)->values()->Data() + 4 * 2;
    const uint32_t far = 0x40000000;  // far past the end of the table
    std::memcpy(bytes.data() + (element - base), &far, sizeof far);
  }
  reseal(bytes);
  expect_invalid(bytes,
                 "fails FlatBuffers' structural verification in methods[0] ('forward').values[2]");
}

// ---- Checksums

// Every single-bit flip of the header, the table and the padding before the segments is caught:
// most by the table checksum, the rest by the header checks that run before it (magic, version,
// sizes).
TEST(ChecksumTest, EveryBitFlipOfHeaderAndTableIsDetected) {
  const std::vector<uint8_t> bytes = make_add_relu_program(true).builder.bytes();
  const uint64_t end = header_of(bytes).segment_base_offset;
  std::vector<uint8_t> damaged = bytes;
  uint64_t by_checksum = 0;
  for (uint64_t i = 0; i < end; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      damaged[i] ^= static_cast<uint8_t>(1u << bit);
      const Status s = parse(damaged);
      damaged[i] = bytes[i];
      ASSERT_FALSE(s.ok()) << "flipping bit " << bit << " of byte " << i << " went unnoticed";
      ASSERT_TRUE(s.code() == Error::InvalidProgram || s.code() == Error::NotSupported)
          << s.to_string();
      by_checksum += s.message().find("table_checksum (byte offset 56)") != std::string::npos;
    }
  }
  EXPECT_GT(by_checksum, 8 * end * 9 / 10);
}

class SegmentChecksumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    testing::register_test_backend();
    bytes_ = p_.builder.bytes();
    aligned_ = std::make_unique<Aligned>(bytes_);
    auto file = ProgramFile::parse(aligned_->span());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    file_ = *file;
  }
  // [begin, end) of segment `index` in the file.
  std::pair<uint64_t, uint64_t> range(int index) const {
    const auto seg = file_.segment(index);
    const uint64_t begin = static_cast<uint64_t>(seg.data() - aligned_->span().data());
    return {begin, begin + seg.size()};
  }
  const fb::Method& method() const { return *file_.program().methods()->Get(0); }

  AddReluProgram p_ = make_add_relu_program(/*with_delegate=*/true);
  std::vector<uint8_t> bytes_;
  std::unique_ptr<Aligned> aligned_;
  ProgramFile file_;
};

TEST_F(SegmentChecksumTest, WriterRecordsEachSegmentsChecksum) {
  for (uint32_t i = 0; i < file_.program().segments()->size(); ++i) {
    EXPECT_EQ(file_.program().segments()->Get(i)->checksum(),
              format::segment_checksum(file_.segment(i)));
  }
  EXPECT_EQ(file_.header().table_checksum,
            format::table_checksum(bytes_, file_.header().segment_base_offset));
}

// A byte changed anywhere in a segment of either kind is an error that names the segment, what it
// holds and its byte range; with checksums off the same file loads (and computes with the damage).
TEST_F(SegmentChecksumTest, DamagedSegmentIsNamedAndSkippingChecksumsLoadsIt) {
  const int constants = method().values()->Get(p_.w)->value_as_Tensor()->constant_segment();
  const int blob = method().delegates()->Get(0)->blob_segment();
  const std::pair<int, std::string> cases[] = {
      {constants, "constants of method 'forward': 1 tensor, the first 'w'"},
      {blob, fmt::format("the blob of method 'forward' delegate 0 ('test_0', backend '{}')",
                         testing::kTestBackendId)}};
  for (const auto& [segment, what] : cases) {
    const auto [begin, end] = range(segment);
    for (uint64_t at : {begin, (begin + end) / 2, end - 1}) {
      SCOPED_TRACE(fmt::format("segment {} byte {}", segment, at));
      std::vector<uint8_t> damaged = bytes_;
      damaged[at] ^= 0x10;
      expect_invalid(damaged, fmt::format("segments[{}] ({}) at file bytes [{}, {}) hashes to 0x",
                                          segment, what, begin, end));
      auto checked = runtime::Program::load_bytes(damaged);
      EXPECT_EQ(checked.code(), Error::InvalidProgram);
      EXPECT_NE(checked.status().message().find("--no-checksums"), std::string::npos)
          << checked.status().to_string();
      runtime::LoadOptions unchecked;
      unchecked.verify_checksums = false;
      auto loaded = runtime::Program::load_bytes(damaged, unchecked);
      ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
      // A damaged weight computes (wrongly); a damaged blob may still be refused by its backend.
      auto method = (*loaded)->load_method("forward");
      if (segment == constants) {
        EXPECT_TRUE(method.ok()) << method.status().to_string();
      }
    }
  }
}

// ---- Verification time is linear in the size of the table

// CPU time of this thread: the work a parse does, unlike wall time, does not grow when other
// processes take the CPU away (a small parse can run unpreempted while a large one cannot).
double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best of three parses (one when a parse takes over a second: the quadratic code would take
// minutes more).
double parse_seconds(const std::vector<uint8_t>& bytes) {
  Aligned a(bytes);
  double best = 1e9;
  for (int run = 0; run < 3 && (run == 0 || best < 1.0); ++run) {
    const double start = thread_cpu_seconds();
    const auto file = ProgramFile::parse(a.span());
    const double took = thread_cpu_seconds() - start;
    EXPECT_TRUE(file.ok()) << file.status().to_string();
    best = std::min(best, took);
  }
  return best;
}

// Verifying 4x the table must take about 4x the work, not 16x (the pairwise checks took 36 s for
// 100,000 methods).
void expect_linear(const std::function<std::vector<uint8_t>(int)>& make, int n) {
  const double small = parse_seconds(make(n / 4));
  const double large = parse_seconds(make(n));
  ::testing::Test::RecordProperty("small_us", static_cast<int>(small * 1e6));
  ::testing::Test::RecordProperty("large_us", static_cast<int>(large * 1e6));
  EXPECT_LT(large, 8 * small + 0.02) << "CPU time for n/4: " << small << " s, n: " << large << " s";
  EXPECT_LT(large, 5.0) << "CPU time for n: " << large << " s";
}

// The shape of the 2.4 MB file from the fuzzing campaign: 100,000 methods with nothing but a name
// (every name was compared with every earlier one).
std::vector<uint8_t> many_methods(int n) {
  fb::ProgramT program;
  for (int i = 0; i < n; ++i) {
    auto m = std::make_unique<fb::MethodT>();
    m->name = fmt::format("method_{}", i);
    program.methods.push_back(std::move(m));
  }
  return format::serialize_program(program, {}).value();
}

// One method whose 100,000 inputs are all read as outputs (each read searched the inputs).
std::vector<uint8_t> many_inputs(int n) {
  testing::ProgramBuilder b;
  std::vector<int> io;
  for (int i = 0; i < n; ++i) {
    io.push_back(b.unplanned_tensor(fmt::format("t{}", i), DType::Float32, {1}));
  }
  b.inputs(io);
  b.outputs(io);
  return b.bytes();
}

TEST(VerificationTimeTest, LinearInMethods) { expect_linear(many_methods, 100000); }

TEST(VerificationTimeTest, LinearInMethodInputs) { expect_linear(many_inputs, 100000); }

// Any method of a many-method program loads; a missing one's error lists a few names, not all.
TEST(VerificationTimeTest, ManyMethodsLoadAndAMissingOneIsReportedBriefly) {
  auto program = runtime::Program::load_bytes(many_methods(100000));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_TRUE((*program)->load_method("method_99999").ok());
  auto missing = (*program)->load_method("predict");
  EXPECT_EQ(missing.code(), Error::NotFound);
  EXPECT_NE(missing.status().message().find(
                "has no method 'predict' (it has 'method_0', 'method_1', 'method_2', 'method_3', "
                "'method_4', 'method_5', 'method_6', 'method_7' and 99992 more)"),
            std::string::npos)
      << missing.status().message().substr(0, 300);
}

TEST(VerificationTimeTest, DuplicateNameAmongManyMethodsIsNamed) {
  fb::ProgramT program;
  for (int i = 0; i < 1000; ++i) {
    auto m = std::make_unique<fb::MethodT>();
    m->name = i == 777 ? "method_12" : fmt::format("method_{}", i);
    program.methods.push_back(std::move(m));
  }
  expect_invalid(format::serialize_program(program, {}).value(),
                 "methods[12] and methods[777] are both named 'method_12'");
}

TEST(ProgramLoadTest, MissingFileIsAnIoError) {
  auto r = runtime::Program::load_file("/nonexistent/model.baton");
  EXPECT_EQ(r.code(), Error::IoError);
  EXPECT_NE(r.status().message().find("/nonexistent/model.baton"), std::string::npos);
}

TEST(ProgramLoadTest, DirectoryIsAnIoError) {
  auto r = runtime::Program::load_file("/tmp");
  EXPECT_EQ(r.code(), Error::IoError);
  EXPECT_NE(r.status().message().find("program '/tmp' is a directory, not a regular file"),
            std::string::npos)
      << r.status().to_string();
}

TEST(ProgramLoadTest, ErrorsNameTheFile) {
  const std::string path = ::testing::TempDir() + "/truncated.baton";
  std::vector<uint8_t> bytes = make_add_relu_program(false).builder.bytes();
  bytes.resize(bytes.size() / 2);
  ASSERT_TRUE(write_file_atomically(path, bytes).ok());
  auto r = runtime::Program::load_file(path);
  EXPECT_EQ(r.code(), Error::InvalidProgram);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace baton

namespace baton {
namespace {

// A dynamic method (format version 4, docs/dynamic_shapes.md) made by hand: x [N, 3] -> Relu ->
// y [N, 3], N in 1..4, and an output `u` that no instruction writes (so that its size expression
// is checked by the runtime alone).
class DynamicFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    x = b.tensor("x", DType::Float32, {4, 3});
    y = b.tensor("y", DType::Float32, {4, 3});
    b.kernel(b.op("Relu", 14), {x}, {}, {y}, "relu");
    b.inputs({x});
    b.outputs({y});
    auto& m = b.method();
    auto symbol = std::make_unique<fb::SymbolT>();
    symbol->name = "N";
    symbol->min = 1;
    symbol->max = 4;
    m.symbols.push_back(std::move(symbol));
    n = expr(fb::SizeOp::Symbol, 0);
    three = expr(fb::SizeOp::Const, 3);
    b.tensor_at(x).dims = {n, three};
    b.tensor_at(y).dims = {n, three};
  }

  uint32_t expr(fb::SizeOp op, int64_t value, std::vector<uint32_t> operands = {}) {
    auto e = std::make_unique<fb::SizeExprT>();
    e->op = op;
    e->value = value;
    e->operands = std::move(operands);
    b.method().size_exprs.push_back(std::move(e));
    return static_cast<uint32_t>(b.method().size_exprs.size() - 1);
  }

  void expect(const std::string& needle) { expect_invalid(b.bytes(), needle); }

  testing::ProgramBuilder b;
  int x = -1, y = -1;
  uint32_t n = 0, three = 0;
};

TEST_F(DynamicFormatTest, AWellFormedDynamicMethodRunsAtEveryShapeInRange) {
  const std::vector<uint8_t> bytes = b.bytes();
  ASSERT_TRUE(parse(bytes).ok()) << parse(bytes).to_string();
  auto program = runtime::Program::load_bytes(bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  for (int64_t rows : {2, 4, 1}) {
    std::vector<float> in(static_cast<size_t>(rows * 3));
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) - 2.5f;
    std::vector<int64_t> sizes = {rows, 3};
    ASSERT_TRUE((*method)->set_input(0, TensorView{in.data(), DType::Float32, sizes}).ok());
    ASSERT_TRUE((*method)->execute().ok());
    const TensorView out = (*method)->output(0);
    ASSERT_EQ(out.sizes.size(), 2u);
    EXPECT_EQ(out.sizes[0], rows);
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(out.data_as<float>()[i], std::max(0.0f, in[i]));
    }
  }
  std::vector<float> big(15);
  std::vector<int64_t> five = {5, 3};
  const Status st = (*method)->set_input(0, TensorView{big.data(), DType::Float32, five});
  EXPECT_NE(st.message().find("axis 0 ('N') has size 5, outside the range 1..4"), std::string::npos)
      << st.to_string();
}

TEST_F(DynamicFormatTest, SymbolRangesMustBeWithinOneAndTwoToTheForty) {
  b.method().symbols[0]->min = 0;
  expect("symbols[0] ('N'): the range 0..4 is not within 1..");
  b.method().symbols[0]->min = 5;
  expect("the range 5..4 is not within");
  b.method().symbols[0]->min = 1;
  b.method().symbols[0]->opt = 9;
  expect("opt = 9 lies outside 1..4");
}

// A data-dependent symbol (Symbol.source: NonZero's count) may start at 0, and its source must be
// a tensor with the symbol as a dimension, written by one kernel instruction and nothing else.
TEST_F(DynamicFormatTest, ADataDependentSymbolNeedsATensorOneKernelWrites) {
  auto count = std::make_unique<fb::SymbolT>();
  count->name = "count";
  count->min = 0;
  count->max = 12;
  b.method().symbols.push_back(std::move(count));
  const uint32_t c = expr(fb::SizeOp::Symbol, 1);
  const int z = b.tensor("z", DType::Float32, {12});
  b.tensor_at(z).dims = {c};
  b.method().outputs.push_back(z);
  b.method().symbols[1]->source = 99;
  expect("symbols[1] ('count'): source = 99 is not a tensor value");
  b.method().symbols[1]->source = y;
  expect("its source 'y' has no dimension that is the symbol");
  b.method().symbols[1]->source = z;
  expect(
      "its source 'z' must be written by one kernel instruction and nothing else; 0 kernel "
      "calls and 0 other instructions write it");
  b.method().symbols[1]->min = -1;
  expect("symbols[1] ('count'): the range -1..12 is not within 0..");
  // Without a source, a range must start at 1 (a call's inputs give it).
  b.method().symbols[1]->min = 0;
  b.method().symbols[1]->source = -1;
  expect("symbols[1] ('count'): the range 0..12 is not within 1..");
  // With one, at 0: the kernel may produce any count from none.
  b.method().symbols[1]->min = 1;
  b.method().symbols[1]->source = z;
  expect("a data-dependent size's range starts at 0, not 1");
  b.method().symbols[1]->min = 0;
  // A kernel writes z from here on (the verifier checks the wiring, not the op). The program
  // verifies, but a Relu gives no count: refused when the method loads, naming both.
  const int u = b.tensor("u", DType::Float32, {12});
  b.method().inputs.push_back(u);
  b.kernel(b.op("Relu", 14), {u}, {}, {z}, "relu2");
  {
    auto program = runtime::Program::load_bytes(b.bytes());
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    auto method = (*program)->load_method("forward");
    ASSERT_FALSE(method.ok());
    EXPECT_EQ(method.code(), Error::InvalidProgram);
    EXPECT_NE(method.status().message().find("symbol 'count' is the data-dependent size of 'z', "
                                             "but instruction 1"),
              std::string::npos)
        << method.status().to_string();
    EXPECT_NE(method.status().message().find("produces no size"), std::string::npos);
  }
  // Two symbols cannot share a source.
  auto twin = std::make_unique<fb::SymbolT>();
  twin->name = "twin";
  twin->max = 12;
  twin->source = z;
  b.method().symbols.push_back(std::move(twin));
  expect("symbols[2] ('twin'): source = " + std::to_string(z) + " is another symbol's source too");
  b.method().symbols.pop_back();
  // An input's sizes cannot depend on a data-dependent size.
  const int w = b.tensor("w", DType::Float32, {12});
  b.tensor_at(w).dims = {c};
  b.method().inputs.push_back(w);
  expect("input 'w' axis 0 depends on a data-dependent size");
}

TEST_F(DynamicFormatTest, ExpressionsMustBeWellFormedAndInDependencyOrder) {
  b.method().size_exprs[n]->value = 3;
  expect("size_exprs[0]: symbol 3 is out of range [0, 1)");
  b.method().size_exprs[n]->value = 0;
  const uint32_t later = expr(fb::SizeOp::Add, 0, {n, 7});
  (void)later;
  expect("operands must come earlier in the list");
  b.method().size_exprs.back()->operands = {n};
  expect("Add needs two or more operands, has 1");
  b.method().size_exprs.back()->op = fb::SizeOp::Min;
  b.method().size_exprs.back()->operands = {n, three, n};
  expect("Min needs two operands, has 3");
  b.method().size_exprs.back()->op = static_cast<fb::SizeOp>(42);
  expect("op 42 is not a known size operation");
}

TEST_F(DynamicFormatTest, ArithmeticThatCannotBeEvaluatedIsRefused) {
  const uint32_t zero = expr(fb::SizeOp::Const, 0);
  expr(fb::SizeOp::FloorDiv, 0, {n, zero});
  expect("cannot be evaluated");
  b.method().size_exprs.pop_back();
  const uint32_t huge = expr(fb::SizeOp::Const, int64_t{1} << 62);
  expr(fb::SizeOp::Mul, 0, {huge, huge});
  expect("cannot be evaluated");
}

TEST_F(DynamicFormatTest, TensorDimsMustMatchTheirRankAndLargestSizes) {
  b.tensor_at(y).dims = {n};
  expect("(tensor 'y').dims has 1 entries for a rank-2 tensor");
  b.tensor_at(y).dims = {n, 99};
  expect("(tensor 'y').dims[1] = 99 is out of range");
  b.tensor_at(y).dims = {three, three};
  expect("(tensor 'y').dims[0]: the expression's largest value 3 disagrees with sizes[0] = 4");
  b.tensor_at(y).dims = {n, three};
  const int c = b.constant_floats("c", {4, 3}, std::vector<float>(12, 1.0f));
  b.tensor_at(c).dims = {n, three};
  expect("a constant cannot have dynamic dims");
}

// An expression that is not monotone (hand-made: the compiler writes none) is consistent at the
// maxima, where the verifier checks it, but larger at a smaller call: the runtime checks every
// size against the planned memory before anything reads it.
TEST_F(DynamicFormatTest, ASizeAboveThePlannedMemoryIsRefusedWhenTheCallResolves) {
  const uint32_t eight = expr(fb::SizeOp::Const, 8);
  const uint32_t shrinking = expr(fb::SizeOp::FloorDiv, 0, {eight, n});  // 2 at N = 4, 8 at N = 1
  const int u = b.tensor("u", DType::Float32, {2, 3});
  b.tensor_at(u).dims = {shrinking, three};
  b.outputs({y, u});
  auto program = runtime::Program::load_bytes(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  // The loader's own check at the smallest sizes already sees it.
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.code(), Error::InvalidProgram) << method.status().to_string();
  EXPECT_NE(method.status().message().find("would have size 8"), std::string::npos)
      << method.status().to_string();
  EXPECT_NE(method.status().message().find("outside the 0..2 its memory was planned for"),
            std::string::npos)
      << method.status().to_string();
}

// An input dimension that is an expression of a symbol another input binds is checked when the
// call resolves: z's rows must be N + 1.
TEST_F(DynamicFormatTest, AnInputThatBreaksARelationIsRefusedNamingTheExpression) {
  const uint32_t one = expr(fb::SizeOp::Const, 1);
  const uint32_t n_plus_one = expr(fb::SizeOp::Add, 0, {n, one});
  const int z = b.tensor("z", DType::Float32, {5, 3});
  b.tensor_at(z).dims = {n_plus_one, three};
  b.inputs({x, z});
  auto program = runtime::Program::load_bytes(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  std::vector<float> in(15, 0.5f);
  std::vector<int64_t> two = {2, 3}, three_rows = {3, 3}, four_rows = {4, 3};
  ASSERT_TRUE((*method)->set_input(0, TensorView{in.data(), DType::Float32, two}).ok());
  ASSERT_TRUE((*method)->set_input(1, TensorView{in.data(), DType::Float32, three_rows}).ok());
  ASSERT_TRUE((*method)->execute().ok());
  ASSERT_TRUE((*method)->set_input(1, TensorView{in.data(), DType::Float32, four_rows}).ok());
  const Status st = (*method)->execute();
  EXPECT_EQ(st.code(), Error::InvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("input 1 ('z') axis 0 has size 4, but the other inputs' sizes make "
                              "it (N + 1) = 3"),
            std::string::npos)
      << st.to_string();
  // The next call at agreeing sizes runs.
  ASSERT_TRUE((*method)->set_input(1, TensorView{in.data(), DType::Float32, three_rows}).ok());
  EXPECT_TRUE((*method)->execute().ok());
}

// A hand-made expression that cannot be evaluated at some size inside the range (a division by
// (N - 2)^2, fine at N = 1 and N = 4, where the loader checks) is an error at that call, not a
// wrapped or garbage size, and the next call at another size runs.
TEST_F(DynamicFormatTest, AnExpressionThatCannotBeEvaluatedAtACallsSizesIsAnError) {
  const uint32_t minus_two = expr(fb::SizeOp::Const, -2);
  const uint32_t n_minus_two = expr(fb::SizeOp::Add, 0, {n, minus_two});
  const uint32_t square = expr(fb::SizeOp::Mul, 0, {n_minus_two, n_minus_two});
  expr(fb::SizeOp::FloorDiv, 0, {three, square});
  auto program = runtime::Program::load_bytes(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  std::vector<float> in(12, 0.5f);
  std::vector<int64_t> two = {2, 3}, three_rows = {3, 3};
  ASSERT_TRUE((*method)->set_input(0, TensorView{in.data(), DType::Float32, two}).ok());
  const Status st = (*method)->execute();
  EXPECT_EQ(st.code(), Error::InvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("cannot be evaluated at these sizes"), std::string::npos)
      << st.to_string();
  ASSERT_TRUE((*method)->set_input(0, TensorView{in.data(), DType::Float32, three_rows}).ok());
  EXPECT_TRUE((*method)->execute().ok());
}

// One tensor listed twice as an input is refused by the verifier: the runtime keeps one record
// per input tensor (and sized resolve()'s tables by tensor, so a duplicate would overrun them).
TEST_F(DynamicFormatTest, AnInputListedTwiceIsRefused) {
  b.inputs({x, x});
  expect("('forward').inputs[1] = " + std::to_string(x) +
         " (tensor 'x') is listed as an input twice");
}

// A symbol that no input dimension is (hand-made: the compiler refuses such a model, since no
// call could give it a size) is refused when the method loads, rather than at every call.
TEST_F(DynamicFormatTest, ASymbolNoInputBindsIsRefusedAtLoad) {
  auto symbol = std::make_unique<fb::SymbolT>();
  symbol->name = "M";
  symbol->min = 1;
  symbol->max = 2;
  b.method().symbols.push_back(std::move(symbol));
  const uint32_t m = expr(fb::SizeOp::Symbol, 1);
  const int u = b.tensor("u", DType::Float32, {2, 3});
  b.tensor_at(u).dims = {m, three};
  b.outputs({y, u});
  auto program = runtime::Program::load_bytes(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.code(), Error::InvalidProgram) << method.status().to_string();
  EXPECT_NE(method.status().message().find("no input dimension is the symbol 'M'"),
            std::string::npos)
      << method.status().to_string();
}

// A delegate call with a dynamic tensor (a dynamic GPU engine, issue 37) loads, and each call
// hands the delegate the symbols it was resolved at (DelegateArgs::symbols).
TEST_F(DynamicFormatTest, ADelegateCallWithADynamicTensorGetsTheCallsSymbols) {
  testing::register_test_backend();
  testing::test_backend_stats().reset();
  const int out = b.tensor("out", DType::Float32, {4, 3});
  b.tensor_at(out).dims = {n, three};
  const auto blob = testing::make_test_blob(1, 1, {std::vector<float>(12, 2.0f)}, 0,
                                            {{testing::TestOp::Mul, 0, 1, 2}}, 12);
  const int d = b.delegate(testing::kTestBackendId, {{"target_device", "cpu"}, {"flavor", "mul"}},
                           blob, "test_0");
  b.delegate_call(d, {y}, {out});
  b.outputs({out});
  auto program = runtime::Program::load_bytes(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  // The test delegate computes 12 elements: N = 4.
  std::vector<float> in(12, 0.5f);
  std::vector<int64_t> four = {4, 3};
  ASSERT_TRUE((*method)->set_input(0, TensorView{in.data(), DType::Float32, four}).ok());
  ASSERT_TRUE((*method)->execute().ok());
  EXPECT_EQ(testing::test_backend_stats().last_symbols, std::vector<int64_t>{4});
  const TensorView result = (*method)->output(0);
  EXPECT_EQ(std::vector<int64_t>(result.sizes.begin(), result.sizes.end()), four);
  EXPECT_EQ(result.data_as<float>()[11], 1.0f);
}

}  // namespace
}  // namespace baton

namespace baton {
namespace {

// Expressions may share operands: max(e, e) nested 60 deep has a 2^60-node text. Describing it
// (input_dims, inspect) must stay short and quick, never walk the whole tree.
TEST_F(DynamicFormatTest, ADeeplySharedExpressionIsDescribedInShortText) {
  uint32_t e = n;
  for (int level = 0; level < 60; ++level) e = expr(fb::SizeOp::Max, 0, {e, e});
  b.tensor_at(y).dims = {e, three};
  const std::vector<uint8_t> bytes = b.bytes();
  auto program = runtime::Program::load_bytes(bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  const auto dims = (*method)->output_dims(0);
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_LT(dims[0].expr.size(), 2000u);
  EXPECT_NE(dims[0].expr.find("..."), std::string::npos) << dims[0].expr;
  auto json = extension::describe_program_json(**program);
  ASSERT_TRUE(json.ok()) << json.status().to_string();
  EXPECT_LT(json->size(), 100000u);
}

}  // namespace
}  // namespace baton
