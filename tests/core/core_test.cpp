#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "baton/core/log.h"
#include "baton/core/tensor.h"
#include "baton/core/text.h"

namespace baton {
namespace {

Status fails_when_negative(int v) {
  BATON_CHECK_OR_RETURN(v >= 0, InvalidArgument, "value {} is negative", v);
  return Status();
}

Result<int> doubled(int v) {
  BATON_TRY(fails_when_negative(v));
  return v * 2;
}

Result<int> quadrupled(int v) {
  BATON_ASSIGN_OR_RETURN(int d, doubled(v));
  return d * 2;
}

TEST(ErrorTest, CheckMacrosCarryCodeAndMessage) {
  const Status s = fails_when_negative(-3);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_EQ(s.message(), "value -3 is negative");
  EXPECT_EQ(s.to_string(), "InvalidArgument: value -3 is negative");
  EXPECT_TRUE(fails_when_negative(1).ok());
}

TEST(ErrorTest, ResultPropagatesThroughTryAndAssign) {
  auto ok = quadrupled(5);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 20);
  auto bad = quadrupled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Error::InvalidArgument);
  EXPECT_NE(bad.status().message().find("-1"), std::string::npos);
}

TEST(ErrorTest, ResultFromOkStatusIsAnInternalError) {
  Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Error::Internal);
}

TEST(ErrorTest, EveryCodeHasAName) {
  for (Error e : {Error::Ok, Error::InvalidArgument, Error::NotFound, Error::InvalidProgram,
                  Error::NotSupported, Error::OutOfMemory, Error::DeviceError, Error::IoError,
                  Error::Internal}) {
    EXPECT_NE(error_name(e), "UnknownError");
  }
}

TEST(DeviceTest, ParsesAndPrints) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(3).to_string(), "cuda:3");
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  for (const char* bad :
       {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:256", "CPU", "cuda:01a"}) {
    EXPECT_FALSE(Device::parse(bad).has_value()) << bad;
  }
}

TEST(DTypeTest, SizesNamesAndValidity) {
  EXPECT_EQ(dtype_size(DType::Float32), 4u);
  EXPECT_EQ(dtype_size(DType::Int64), 8u);
  EXPECT_EQ(dtype_size(DType::Float16), 2u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_EQ(dtype_name(DType::BFloat16), "bfloat16");
  EXPECT_EQ(dtype_from_name("int32"), DType::Int32);
  EXPECT_FALSE(dtype_from_name("complex64").has_value());
  EXPECT_TRUE(is_valid_dtype(1));
  EXPECT_FALSE(is_valid_dtype(0));
  EXPECT_FALSE(is_valid_dtype(8));  // ONNX string
  EXPECT_FALSE(is_valid_dtype(200));
}

TEST(DTypeTest, HalfRoundTripsEveryHalfValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = half_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    EXPECT_EQ(float_to_half(f), h) << "bits " << bits;
  }
}

TEST(DTypeTest, HalfRoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float f = dist(rng) * (i % 2 ? 1.0f : 1e-4f);
    const uint16_t h = float_to_half(f);
    const float back = half_to_float(h);
    if (std::fabs(f) > 65504.0f) {
      EXPECT_TRUE(std::isinf(back) || std::fabs(back) == 65504.0f);
      continue;
    }
    // No other half is closer to f.
    const float up = half_to_float(static_cast<uint16_t>(h + 1));
    const float down = half_to_float(static_cast<uint16_t>(h - 1));
    EXPECT_LE(std::fabs(back - f), std::fabs(up - f) + 0.0f) << f;
    EXPECT_LE(std::fabs(back - f), std::fabs(down - f) + 0.0f) << f;
  }
}

TEST(DTypeTest, BFloat16RoundTrip) {
  for (float f : {1.0f, -2.5f, 3.140625f, std::ldexp(1.0f, -70), std::ldexp(1.5f, 100)}) {
    EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(f)), f);
  }
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.00390625f)), 1.0f);  // tie rounds to even
}

TEST(TensorTest, CheckedNumelCatchesOverflowAndNegatives) {
  const std::vector<int64_t> ok = {2, 3, 4};
  EXPECT_EQ(checked_numel(ok), 24);
  const std::vector<int64_t> negative = {2, -1};
  EXPECT_FALSE(checked_numel(negative).has_value());
  const std::vector<int64_t> huge = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_FALSE(checked_numel(huge).has_value());
  const std::vector<int64_t> bytes_overflow = {int64_t{1} << 62};
  EXPECT_FALSE(checked_nbytes(DType::Float32, bytes_overflow).has_value());
  EXPECT_EQ(checked_numel(std::vector<int64_t>{}), 1);
  EXPECT_EQ(shape_to_string(ok), "[2, 3, 4]");
}

// A zero dimension does not excuse the others: [0, 2^40, 2^40] holds no elements, but outer and
// inner sizes of it (2^80) overflow wherever a kernel or an inference multiplies a sub-range.
TEST(TensorTest, CheckedNumelRefusesZeroSizedShapesWhoseOtherSizesOverflow) {
  const int64_t big = int64_t{1} << 40;
  for (const std::vector<int64_t>& sizes :
       std::vector<std::vector<int64_t>>{{0, big, big}, {big, 0, big}, {big, big, 0}, {big, big}}) {
    SCOPED_TRACE(shape_to_string(sizes));
    EXPECT_FALSE(checked_numel(sizes).has_value());
    EXPECT_FALSE(checked_nbytes(DType::Float32, sizes).has_value());
  }
  // Empty tensors whose nonzero sizes fit are fine, and so is their byte size.
  EXPECT_EQ(checked_numel(std::vector<int64_t>{0, big, 1 << 20}), 0);
  EXPECT_EQ(checked_nbytes(DType::Float32, std::vector<int64_t>{big, 0}), 0u);
  // The bytes the nonzero sizes would make must fit too.
  EXPECT_FALSE(checked_nbytes(DType::Float64, std::vector<int64_t>{0, int64_t{1} << 62}));
  EXPECT_EQ(checked_nbytes(DType::Float64, std::vector<int64_t>{0, int64_t{1} << 58}), 0u);
}

TEST(TensorTest, EmptyAllocatesAlignedHostMemory) {
  auto t = Tensor::empty(DType::Float32, {3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->numel(), 15);
  EXPECT_EQ(t->nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
  EXPECT_TRUE(t->device().is_cpu());
  auto bad = Tensor::empty(DType::Float32, {-1});
  EXPECT_EQ(bad.code(), Error::InvalidArgument);
  auto zero = Tensor::empty(DType::Float32, {0, 4});
  ASSERT_TRUE(zero.ok());
  EXPECT_NE(zero->data(), nullptr);
  // 2^64 - 4 bytes fit in uint64 but rounding them up to 64 does not: an error, not a tiny buffer.
  auto wraps = Tensor::empty(DType::Float32, {(int64_t{1} << 62) - 1});
  EXPECT_EQ(wraps.code(), Error::InvalidArgument);
}

TEST(TensorTest, AlignUpAndItsOverflow) {
  EXPECT_EQ(align_up(0, 64), 0u);
  EXPECT_EQ(align_up(1, 64), 64u);
  EXPECT_EQ(align_up(128, 64), 128u);
  EXPECT_EQ(checked_align_up(65, 64), 128u);
  EXPECT_EQ(checked_align_up(UINT64_MAX - 63, 64), UINT64_MAX - 63);
  EXPECT_FALSE(checked_align_up(UINT64_MAX - 62, 64).has_value());
}

struct Captured {
  std::vector<std::string> lines;
};

void capture(LogLevel level, std::string_view component, std::string_view message, void* user) {
  static_cast<Captured*>(user)->lines.push_back(std::string(log_level_name(level)) + " " +
                                                std::string(component) + " " +
                                                std::string(message));
}

TEST(LogTest, CallbackReceivesMessagesAtOrAboveTheLevel) {
  Captured captured;
  const LogLevel saved = log_level();
  set_log_callback(&capture, &captured);
  set_log_level(LogLevel::Info);
  log_message(LogLevel::Debug, "test", "hidden");
  log_message(LogLevel::Info, "test", "shown");
  log_message(LogLevel::Error, "test", "also shown");
  set_log_callback(nullptr, nullptr);
  set_log_level(saved);
  ASSERT_EQ(captured.lines.size(), 2u);
  EXPECT_EQ(captured.lines[0], "info test shown");
  EXPECT_EQ(captured.lines[1], "error test also shown");
}

// Names are bytes; what JSON and terminals get of them.
TEST(TextTest, InvalidUtf8IsEscapedAndValidUtf8Kept) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xcf\x89 \xe2\x82\xac \xf0\x9f\x98\x80"));  // omega, euro, emoji
  for (const char* bad : {"\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                          "\xe2\x82", "\x80", "\xf8\x88\x80\x80\x80"}) {
    EXPECT_FALSE(is_valid_utf8(bad)) << escape_invalid_utf8(bad);
  }
  EXPECT_EQ(escape_invalid_utf8("NODE\xff\xfe"), "NODE\\xff\\xfe");
  EXPECT_EQ(escape_invalid_utf8("\xcf\x89\xff"), "\xcf\x89\\xff");
  EXPECT_EQ(escape_invalid_utf8("\xe2\x82x"), "\\xe2\\x82x");  // a cut sequence, byte by byte
  EXPECT_EQ(escape_invalid_utf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(escape_invalid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(escape_invalid_utf8("back\\slash \xcf\x89"), "back\\slash \xcf\x89");
  // The result is always valid UTF-8.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes(rng() % 12, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    EXPECT_TRUE(is_valid_utf8(escape_invalid_utf8(bytes)));
    EXPECT_TRUE(is_valid_utf8(printable_text(bytes)));
  }
  // For terminals, control characters too.
  EXPECT_EQ(printable_text("a\nb\x1b[2J\x7f\xff\xcf\x89"), "a\\x0ab\\x1b[2J\\x7f\\xff\xcf\x89");
}

TEST(TextTest, SizesForPeople) {
  EXPECT_EQ(size_text(0), "0 B");
  EXPECT_EQ(size_text(1023), "1023 B");
  EXPECT_EQ(size_text(1024), "1.0 KiB");
  EXPECT_EQ(size_text(10752), "10.5 KiB");
  EXPECT_EQ(size_text(uint64_t{3} << 20), "3.00 MiB");
  EXPECT_EQ(size_text((uint64_t{5} << 30) / 4), "1.25 GiB");
}

}  // namespace
}  // namespace baton
