// Program file format: round trip, and rejection of every kind of damage with a typed error that
// names the field (run under ASan+UBSan in CI: none of these may crash or read out of bounds).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "baton/baton.h"
#include "baton/runtime/program.h"
#include "format/program_file.h"
#include "testing/aligned_bytes.h"
#include "testing/sample_programs.h"
#include "testing/test_backend.h"

namespace baton {
namespace {

using format::ProgramFile;
using testing::AddReluProgram;
using testing::make_add_relu_program;

using Aligned = testing::AlignedBytes;

Status parse(const std::vector<uint8_t>& bytes) {
  Aligned a(bytes);
  return ProgramFile::parse(a.span()).status();
}

void expect_invalid(const std::vector<uint8_t>& bytes, const std::string& needle,
                    Error code = Error::InvalidProgram) {
  const Status s = parse(bytes);
  ASSERT_FALSE(s.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

TEST(FormatTest, RoundTripPreservesEverything) {
  AddReluProgram p = make_add_relu_program(/*with_delegate=*/true);
  const std::vector<uint8_t> bytes = p.builder.bytes();
  Aligned a(bytes);
  auto file = ProgramFile::parse(a.span());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const format::FileHeader& h = file->header();
  EXPECT_EQ(std::memcmp(h.magic, "BATONPRG", 8), 0);
  EXPECT_EQ(h.format_version, format::kFormatVersion);
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
  bytes[12] = 2;
  expect_invalid(bytes, "format version 2", Error::NotSupported);
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

// Random bit flips anywhere in the file: parse either accepts (the flip hit data, or a field the
// verifier proves harmless) or returns InvalidProgram/NotSupported. Accepted files must then load
// and run without crashing, which ASan checks in CI.
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
    auto program = runtime::Program::load_bytes(damaged);
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

TEST_F(SemanticTest, AttributeThatIsATensor) {
  kernel(0).attributes.push_back(p.y);
  expect("is a tensor; attributes are scalars, lists or strings");
}

TEST_F(SemanticTest, OperatorIndexOutOfRange) {
  kernel(1).operator_ = 7;
  expect("instructions[1].operator = 7 is out of range");
}

TEST_F(SemanticTest, DelegateBlobMissing) {
  m().delegates[0]->blob_segment = -1;
  expect("has no blob (blob_segment = -1)");
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
  ASSERT_TRUE(format::write_file_atomically(path, bytes).ok());
  auto r = runtime::Program::load_file(path);
  EXPECT_EQ(r.code(), Error::InvalidProgram);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace baton
