// The CUDA engine blob format: round trip and rejection of damaged blobs with typed errors. Plain
// C++: runs in CI without a GPU (and under ASan+UBSan).
#include "backends/cuda/engine_format.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/cuda/engine_describe.h"
#include "baton/core/file.h"
#include "testing/aligned_bytes.h"
#include "testing/paths.h"

namespace baton::cuda {
namespace {

BufferRef ref(Space space, uint32_t index, uint64_t offset, uint64_t bytes) {
  return BufferRef{static_cast<uint32_t>(space), index, offset, bytes};
}

// x[4, 6] -> gemm with weights [6, 5] + bias -> scratch -> kernel -> y[4, 5]
EngineDescription sample() {
  EngineDescription e;
  e.device_id = 1;
  e.sm_arch = 90;
  e.cuda_version = 13000;
  e.cublaslt_version = 130100;
  e.cudnn_version = 91900;
  e.nvrtc_version = 13000;
  e.precision = Precision::FP16;
  e.bindings = {{"x", DType::Float32, false, {4, 6}}, {"y", DType::Float32, true, {4, 5}}};
  e.scratch_bytes = 256;
  e.workspace_bytes = 1 << 20;
  e.weights.assign(512, 7);
  e.cubin.assign(100, 0xCB);
  e.kernel_names = {"k0_fused"};
  e.kernel_params = {{2, 0}};
  StepRecord gemm{};
  gemm.kind = static_cast<uint32_t>(StepKind::Gemm);
  GemmStep& g = gemm.gemm;
  g.a_dtype = g.b_dtype = g.c_dtype = g.d_dtype = g.bias_dtype =
      static_cast<uint8_t>(DType::Float32);
  g.trans_a = 0;
  g.trans_b = 0;
  g.epilogue = static_cast<uint8_t>(GemmEpilogue::Bias);
  g.batch = 1;
  g.m = 5;
  g.n = 4;
  g.k = 6;
  g.lda = 5;
  g.ldb = 6;
  g.ldc = g.ldd = 5;
  g.alpha = 1.0f;
  g.a = ref(Space::Weights, 0, 0, 120);
  g.b = ref(Space::Binding, 0, 0, 96);
  g.d = ref(Space::Scratch, 0, 0, 80);
  g.bias = ref(Space::Weights, 0, 256, 20);
  StepRecord kernel{};
  kernel.kind = static_cast<uint32_t>(StepKind::Kernel);
  kernel.kernel.kernel = 0;
  kernel.kernel.num_operands = 2;
  for (int d = 0; d < 3; ++d) kernel.kernel.grid[d] = kernel.kernel.block[d] = 1;
  kernel.kernel.block[0] = 256;
  kernel.kernel.operands[0] = ref(Space::Scratch, 0, 0, 80);
  kernel.kernel.operands[1] = ref(Space::Binding, 1, 0, 80);
  e.steps = {gemm, kernel};
  e.options = {"conv_rows=cudnn", "tune_candidates=1"};
  return e;
}

using Aligned = testing::AlignedBytes;

Status parse(const std::vector<uint8_t>& bytes) {
  Aligned a(bytes);
  return EngineBlob::parse(a.span()).status();
}

void expect_rejected(const EngineDescription& e, const std::string& needle) {
  auto bytes = write_engine_blob(e);
  ASSERT_TRUE(bytes.ok());
  const Status s = parse(*bytes);
  ASSERT_FALSE(s.ok()) << "expected an error mentioning " << needle;
  EXPECT_EQ(s.code(), Error::InvalidProgram) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

TEST(EngineFormatTest, RoundTrip) {
  auto bytes = write_engine_blob(sample());
  ASSERT_TRUE(bytes.ok());
  Aligned a(*bytes);
  auto blob = EngineBlob::parse(a.span());
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->header().device_id, 1);
  EXPECT_EQ(blob->header().sm_arch, 90u);
  EXPECT_EQ(blob->header().cudnn_version, 91900u);
  EXPECT_EQ(blob->precision(), Precision::FP16);
  ASSERT_EQ(blob->bindings().size(), 2u);
  EXPECT_EQ(blob->binding_name(1), "y");
  EXPECT_EQ(blob->num_inputs(), 1u);
  EXPECT_EQ(blob->kernel_name(0), "k0_fused");
  EXPECT_EQ(blob->weights().size(), 512u);
  EXPECT_EQ(blob->cubin()[99], 0xCB);
  EXPECT_EQ(blob->steps()[0].gemm.k, 6);
  EXPECT_EQ(blob->options(), "conv_rows=cudnn\ntune_candidates=1\n");
}

// The build options section: what inspect shows as the engine's options, so it must be lines of
// printable KEY=VALUE text, and not without bound.
TEST(EngineFormatTest, OptionsAreRecordedAndChecked) {
  EngineDescription e = sample();
  e.options = {};
  auto none = write_engine_blob(e);
  ASSERT_TRUE(none.ok());
  Aligned a(*none);
  auto blob = EngineBlob::parse(a.span());
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->options(), "");
  auto j = nlohmann::json::parse(*describe_engine_json(a.span()));
  EXPECT_EQ(j["options"], nlohmann::json::object());

  e.options = {"conv_rows=cudnn", "no value here"};
  expect_rejected(e, "options: line at byte 16 is not KEY=VALUE in printable ASCII");
  e.options = {"=cudnn"};
  expect_rejected(e, "options: line at byte 0 is not KEY=VALUE");
  e.options = {"conv_rows=cu\x01dnn"};
  expect_rejected(e, "not KEY=VALUE in printable ASCII");
  e.options = {"k=" + std::string(5000, 'v')};
  auto too_long = write_engine_blob(e);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("more than 4096"), std::string::npos);

  // A version 1 engine (before options were recorded) is refused with the rebuild advice.
  auto bytes = write_engine_blob(sample());
  ASSERT_TRUE(bytes.ok());
  EngineHeader h{};
  std::memcpy(&h, bytes->data(), sizeof h);
  h.version = 1;
  std::memcpy(bytes->data(), &h, sizeof h);
  Aligned old(*bytes);
  auto refused = EngineBlob::parse(old.span());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Error::NotSupported);
  EXPECT_NE(
      refused.status().message().find("engine blob version 1; this runtime reads versions 3 and 4"),
      std::string::npos)
      << refused.status().message();
}

// What `baton inspect` shows of an engine (the cuda backend's describe_blob hook): header, sizes,
// bindings and one line per step, from the blob alone (no GPU, no CUDA call).
TEST(EngineFormatTest, DescribesTheEngineForInspect) {
  auto bytes = write_engine_blob(sample());
  ASSERT_TRUE(bytes.ok());
  Aligned a(*bytes);
  auto text = describe_engine_json(a.span());
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["device"], "cuda:1");
  EXPECT_EQ(j["sm_arch"], "sm_90");
  EXPECT_EQ(j["precision"], "fp16");
  EXPECT_EQ(j["cuda_version"], 13000);
  EXPECT_EQ(j["cublaslt_version"], 130100);
  EXPECT_EQ(j["cudnn_version"], 91900);
  EXPECT_EQ(j["nvrtc_version"], 13000);
  EXPECT_EQ(j["weights_bytes"], 512);
  EXPECT_EQ(j["cubin_bytes"], 100);
  EXPECT_EQ(j["kernels"], 1);
  EXPECT_EQ(j["scratch_bytes"], 256);
  EXPECT_EQ(j["workspace_bytes"], 1 << 20);
  EXPECT_EQ(j["options"],
            nlohmann::json::parse(R"({"conv_rows": "cudnn", "tune_candidates": "1"})"));
  EXPECT_EQ(j["bindings"], nlohmann::json::parse(R"([
      {"name": "x", "dtype": "float32", "shape": [4, 6], "io": "input"},
      {"name": "y", "dtype": "float32", "shape": [4, 5], "io": "output"}])"));
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][0]["kind"], "gemm");
  EXPECT_EQ(j["steps"][0]["what"],
            "cuBLASLt m=5 n=4 k=6 batch=1 trans=NN epilogue=bias A=weights@0 B=binding 0+0 "
            "D=scratch@0");
  EXPECT_EQ(j["steps"][1]["kind"], "kernel");
  EXPECT_EQ(j["steps"][1]["what"], "k0_fused grid 1 block 256 (scratch@0 binding 1+0)");

  // A damaged blob is the parser's error, which inspect shows in place of the engine.
  std::vector<uint8_t> cut(bytes->begin(), bytes->begin() + 100);
  Aligned c(cut);
  auto damaged = describe_engine_json(c.span());
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.code(), Error::InvalidProgram) << damaged.status().to_string();
}

// Binding and kernel names are bytes from the blob: not UTF-8 is shown as \xNN, never thrown about
// by the JSON writer.
TEST(EngineFormatTest, DescribesNamesThatAreNotUtf8) {
  EngineDescription e = sample();
  e.bindings[0].name = "x\xff\xfe";
  e.kernel_names[0] = "k\xc3";
  auto bytes = write_engine_blob(e);
  ASSERT_TRUE(bytes.ok());
  Aligned a(*bytes);
  auto text = describe_engine_json(a.span());
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << *text;
  EXPECT_EQ(j["bindings"][0]["name"], "x\\xff\\xfe");
  EXPECT_EQ(j["steps"][1]["what"], "k\\xc3 grid 1 block 256 (scratch@0 binding 1+0)");
}

TEST(EngineFormatTest, EveryTruncationIsRejected) {
  auto bytes = write_engine_blob(sample());
  ASSERT_TRUE(bytes.ok());
  for (size_t len = 0; len < bytes->size(); len += 7) {
    std::vector<uint8_t> cut(bytes->begin(), bytes->begin() + static_cast<long>(len));
    const Status s = parse(cut);
    ASSERT_FALSE(s.ok()) << len;
    ASSERT_EQ(s.code(), Error::InvalidProgram) << len << ": " << s.to_string();
  }
}

TEST(EngineFormatTest, RandomCorruptionNeverCrashes) {
  auto bytes = write_engine_blob(sample());
  ASSERT_TRUE(bytes.ok());
  std::mt19937 rng(5);
  int rejected = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<uint8_t> b = *bytes;
    // Damage the header and the records, where the structure lives.
    const size_t limit = std::min<size_t>(b.size(), 2048);
    for (int f = 0; f < 3; ++f) b[rng() % limit] ^= static_cast<uint8_t>(1u << (rng() % 8));
    const Status s = parse(b);
    if (!s.ok()) {
      ++rejected;
      ASSERT_TRUE(s.code() == Error::InvalidProgram || s.code() == Error::NotSupported)
          << s.to_string();
    }
  }
  EXPECT_GT(rejected, 1000);
}

TEST(EngineFormatTest, MisalignedAndForeignBytes) {
  auto bytes = write_engine_blob(sample());
  ASSERT_TRUE(bytes.ok());
  Aligned misaligned(*bytes, /*offset=*/8);
  EXPECT_NE(EngineBlob::parse(misaligned.span()).status().message().find("aligned"),
            std::string::npos);
  std::vector<uint8_t> foreign(bytes->size(), 0x55);
  EXPECT_NE(parse(foreign).message().find("not a Baton CUDA engine"), std::string::npos);
  std::vector<uint8_t> newer = *bytes;
  newer[8] = 9;  // version
  EXPECT_EQ(parse(newer).code(), Error::NotSupported);
}

TEST(EngineFormatTest, OperandsOutsideTheirBuffers) {
  EngineDescription e = sample();
  e.steps[1].kernel.operands[0].offset = 200;  // 200 + 80 > 256 bytes of scratch
  expect_rejected(e, "lie outside the 256-byte scratch buffer");
  e = sample();
  e.steps[1].kernel.operands[1].index = 5;
  expect_rejected(e, "names binding 5 of 2");
  e = sample();
  e.steps[1].kernel.operands[1].bytes = 81;
  expect_rejected(e, "lie outside binding 1 ('y', 80 bytes)");
  e = sample();
  e.steps[0].gemm.a.offset = 500;
  expect_rejected(e, "outside the 512-byte weights");
  e = sample();
  e.steps[1].kernel.operands[0].offset = ~uint64_t{0} - 10;
  expect_rejected(e, "range overflows");
}

TEST(EngineFormatTest, GemmShapesMustFitTheirOperands) {
  EngineDescription e = sample();
  e.steps[0].gemm.k = 7;  // A would need 5 x 7 floats
  expect_rejected(e, "steps[0] A needs");
  e = sample();
  e.steps[0].gemm.lda = 2;
  expect_rejected(e, "has ld 2 for 5 rows");
  e = sample();
  e.steps[0].gemm.bias.bytes = 8;
  expect_rejected(e, "bias of 8 bytes");
  e = sample();
  e.steps[0].gemm.m = 0;
  expect_rejected(e, "m=0");
}

// A cuDNN matmul step (StepKind::Matmul) is a GemmStep checked like a GEMM's, plus what cuDNN's
// graph takes: no C, one operand dtype, alpha 1, and no epilogue but none, bias or bias+gelu. The
// erf-GELU epilogue is refused in a cuBLASLt step. Its operands are A, B, bias, D for the plan.
TEST(EngineFormatTest, MatmulStepsAreCheckedAndDescribed) {
  auto matmul = [] {
    EngineDescription e = sample();
    e.steps[0].kind = static_cast<uint32_t>(StepKind::Matmul);
    e.steps[0].gemm.epilogue = static_cast<uint8_t>(GemmEpilogue::BiasGeluErf);
    return e;
  };
  EngineDescription e = matmul();
  auto bytes = write_engine_blob(e);
  ASSERT_TRUE(bytes.ok());
  Aligned a(*bytes);
  auto blob = EngineBlob::parse(a.span());
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_TRUE(is_cudnn_step(blob->steps()[0].kind));
  EXPECT_EQ(step_kind_name(StepKind::Matmul), "matmul");
  EXPECT_EQ(describe_step(*blob, 0).rfind("cuDNN matmul m=5 n=4 k=6", 0), 0u)
      << describe_step(*blob, 0);
  EXPECT_NE(describe_step(*blob, 0).find("epilogue=bias+gelu"), std::string::npos);
  BufferRef refs[5];
  ASSERT_EQ(cudnn_operands(blob->steps()[0], refs), 4);
  EXPECT_EQ(refs[0].space, static_cast<uint32_t>(Space::Weights));  // A
  EXPECT_EQ(refs[1].space, static_cast<uint32_t>(Space::Binding));  // B
  EXPECT_EQ(refs[2].offset, 256u);                                  // bias
  EXPECT_EQ(refs[3].space, static_cast<uint32_t>(Space::Scratch));  // D
  e.steps[0].gemm.epilogue = static_cast<uint8_t>(GemmEpilogue::None);
  bytes = write_engine_blob(e);
  ASSERT_TRUE(bytes.ok());
  Aligned b(*bytes);
  blob = EngineBlob::parse(b.span());
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(cudnn_operands(blob->steps()[0], refs), 3);  // no bias

  e = matmul();
  e.steps[0].gemm.k = 7;  // checked like a GEMM
  expect_rejected(e, "steps[0] A needs");
  e = matmul();
  e.steps[0].gemm.has_c = 1;
  e.steps[0].gemm.c = e.steps[0].gemm.d;
  expect_rejected(e, "is a cuDNN matmul with a C matrix");
  e = matmul();
  e.steps[0].gemm.alpha = 2.0f;
  expect_rejected(e, "an alpha other than 1");
  // Batches 0 elements apart pass a GEMM's extent checks (one shared matrix), but cuDNN's graph
  // takes no broadcast batch: a matmul has one batch.
  e = matmul();
  e.steps[0].gemm.batch = 3;
  e.steps[0].gemm.stride_a = e.steps[0].gemm.stride_b = e.steps[0].gemm.stride_d = 0;
  expect_rejected(e, "is a cuDNN matmul of 3 batches");
  e = matmul();
  e.steps[0].gemm.b_dtype = static_cast<uint8_t>(DType::Float16);
  expect_rejected(e, "mixed operand dtypes");
  e = matmul();
  e.steps[0].gemm.epilogue = static_cast<uint8_t>(GemmEpilogue::BiasRelu);
  expect_rejected(e, "an epilogue other than none, bias or bias+gelu");
  e = sample();
  e.steps[0].gemm.epilogue = static_cast<uint8_t>(GemmEpilogue::BiasGeluErf);
  expect_rejected(e, "asks cuBLASLt for the erf-GELU epilogue");
}

// A GEMM whose A claims 2^23 + 1 batches 2^39 elements apart: (2^39 * 2^23 + 30) floats is
// 2^64 + 120 bytes, which wraps around to exactly the 120 bytes A has. The check must see the
// 2^64, not the wrapped value, or cuBLASLt reads 16 EiB past the weights.
TEST(EngineFormatTest, GemmExtentsThatWrapAround2To64AreRejected) {
  EngineDescription e = sample();
  GemmStep& g = e.steps[0].gemm;
  g.batch = (1u << 23) + 1;
  g.stride_a = int64_t{1} << 39;
  expect_rejected(e, "steps[0] A spans more than 2^64 bytes");
  e = sample();
  e.steps[0].gemm.batch = (1u << 23) + 1;
  e.steps[0].gemm.stride_d = int64_t{1} << 39;
  expect_rejected(e, "steps[0] D spans more than 2^64 bytes");
}

// Whether every operand of a GEMM lies inside its buffer, computed in 128-bit arithmetic
// independently of the validator: the reference the sweep below holds it to.
bool gemm_fits(const EngineDescription& e, const GemmStep& g) {
  using Wide = __int128;
  auto capacity = [&](const BufferRef& r) -> Wide {
    switch (static_cast<Space>(r.space)) {
      case Space::Binding: {
        if (r.index >= e.bindings.size()) return -1;
        Wide n = 4;
        for (int64_t d : e.bindings[r.index].sizes) n *= d;
        return n;
      }
      case Space::Scratch:
        return static_cast<Wide>(e.scratch_bytes);
      case Space::Weights:
        return static_cast<Wide>(e.weights.size());
    }
    return -1;
  };
  auto fits = [&](const BufferRef& r, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    if (rows <= 0 || cols <= 0 || ld < rows || stride < 0 || g.batch < 1) return false;
    const Wide last = Wide{stride} * (Wide{g.batch} - 1) + Wide{ld} * (cols - 1) + rows;
    return last * 4 <= Wide{r.bytes} && Wide{r.offset} + Wide{r.bytes} <= capacity(r);
  };
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  return fits(g.a, a_rows, a_cols, g.lda, g.stride_a) &&
         fits(g.b, b_rows, b_cols, g.ldb, g.stride_b) && fits(g.d, g.m, g.n, g.ldd, g.stride_d) &&
         (!g.has_c || fits(g.c, g.m, g.n, g.ldc, g.stride_c)) &&
         Wide{g.bias.offset} + Wide{g.bias.bytes} <= capacity(g.bias) &&
         Wide{g.bias.bytes} >= Wide{g.m} * 4;
}

// Large values in every size, leading dimension, stride, batch count and byte range of a GEMM
// step, alone and in random combinations: whatever the validator accepts must really fit.
TEST(EngineFormatTest, SweepOfLargeGemmValuesNeverPassesOutOfBounds) {
  const int64_t kSizes[] = {0,
                            1,
                            5,
                            6,
                            (int64_t{1} << 31) - 1,
                            int64_t{1} << 31,
                            int64_t{1} << 32,
                            int64_t{1} << 39,
                            (int64_t{1} << 40) - 1,
                            int64_t{1} << 40,
                            int64_t{1} << 62,
                            INT64_MAX,
                            -1,
                            INT64_MIN};
  const uint32_t kBatches[] = {1, 2, (1u << 23) + 1, 1u << 24, (1u << 24) + 1, UINT32_MAX};
  const uint64_t kBytes[] = {0, 80, 96, 120, uint64_t{1} << 32, uint64_t{1} << 63, UINT64_MAX};
  using Field = int64_t GemmStep::*;
  const Field kFields[] = {&GemmStep::m,        &GemmStep::n,        &GemmStep::k,
                           &GemmStep::lda,      &GemmStep::ldb,      &GemmStep::ldc,
                           &GemmStep::ldd,      &GemmStep::stride_a, &GemmStep::stride_b,
                           &GemmStep::stride_c, &GemmStep::stride_d};
  BufferRef GemmStep::*const kRefs[] = {&GemmStep::a, &GemmStep::b, &GemmStep::c, &GemmStep::d,
                                        &GemmStep::bias};
  int accepted = 0, checked = 0;
  auto check = [&](const EngineDescription& e) {
    auto bytes = write_engine_blob(e);
    ASSERT_TRUE(bytes.ok());
    const Status s = parse(*bytes);
    ++checked;
    if (!s.ok()) {
      ASSERT_EQ(s.code(), Error::InvalidProgram) << s.to_string();
      return;
    }
    ++accepted;
    const GemmStep& g = e.steps[0].gemm;
    ASSERT_TRUE(gemm_fits(e, g)) << "accepted out of bounds: m=" << g.m << " n=" << g.n
                                 << " k=" << g.k << " batch=" << g.batch << " lda=" << g.lda
                                 << " ldb=" << g.ldb << " ldd=" << g.ldd
                                 << " stride_a=" << g.stride_a << " stride_b=" << g.stride_b
                                 << " stride_d=" << g.stride_d;
  };
  // One field at a time, with the batch count varied too.
  for (const Field f : kFields) {
    for (const int64_t v : kSizes) {
      for (const uint32_t batch : kBatches) {
        EngineDescription e = sample();
        e.steps[0].gemm.*f = v;
        e.steps[0].gemm.batch = batch;
        check(e);
      }
    }
  }
  for (BufferRef GemmStep::*const r : kRefs) {
    for (const uint64_t v : kBytes) {
      EngineDescription e = sample();
      (e.steps[0].gemm.*r).bytes = v;
      check(e);
      e = sample();
      (e.steps[0].gemm.*r).offset = v;
      check(e);
    }
  }
  // Random combinations of several large values at once.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20000; ++trial) {
    EngineDescription e = sample();
    GemmStep& g = e.steps[0].gemm;
    g.batch = kBatches[rng() % std::size(kBatches)];
    for (int changes = 1 + static_cast<int>(rng() % 4); changes > 0; --changes) {
      g.*kFields[rng() % std::size(kFields)] = kSizes[rng() % std::size(kSizes)];
    }
    if (rng() % 2) (g.*kRefs[rng() % std::size(kRefs)]).bytes = kBytes[rng() % std::size(kBytes)];
    if (rng() % 4 == 0) g.has_c = 1;
    check(e);
  }
  EXPECT_GT(accepted, 0);  // the sweep includes valid blobs, which must still pass
  EXPECT_EQ(checked, static_cast<int>(std::size(kFields) * std::size(kSizes) * std::size(kBatches) +
                                      std::size(kRefs) * std::size(kBytes) * 2 + 20000));
}

// Copies and kernel operands: byte ranges near 2^64 and copies onto themselves.
TEST(EngineFormatTest, CopyAndKernelRangesAreChecked) {
  EngineDescription e = sample();
  StepRecord copy{};
  copy.kind = static_cast<uint32_t>(StepKind::Copy);
  copy.copy.src = ref(Space::Scratch, 0, 0, 80);
  copy.copy.dst = ref(Space::Scratch, 0, 128, 80);
  e.steps.push_back(copy);
  auto ok = write_engine_blob(e);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(parse(*ok).ok()) << parse(*ok).to_string();
  e.steps.back().copy.dst.offset = 40;
  expect_rejected(e, "overlapping");
  for (const uint64_t offset : {~uint64_t{0}, ~uint64_t{0} - 79, uint64_t{1} << 63}) {
    e = sample();
    e.steps.push_back(copy);
    e.steps.back().copy.src.offset = offset;
    expect_rejected(e, "steps[2] source");
    e = sample();
    e.steps[1].kernel.operands[1].offset = offset;
    expect_rejected(e, "steps[1] operand 1");
  }
}

// A kernel step's arguments lie inside the args section, at most 256 of them; the parsed blob
// hands each step its own, and inspect shows them.
TEST(EngineFormatTest, KernelArgumentsAreCheckedAndDescribed) {
  EngineDescription e = sample();
  e.args = {7, 4, 5, 1, 0, 20};
  e.kernel_params = {{2, 3}};
  e.steps[1].kernel.first_arg = 2;
  e.steps[1].kernel.num_args = 3;
  auto bytes = write_engine_blob(e);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  Aligned a(*bytes);
  auto blob = EngineBlob::parse(a.span());
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->args().size(), 6u);
  const std::span<const int64_t> args = blob->kernel_args(blob->steps()[1].kernel);
  EXPECT_EQ(std::vector<int64_t>(args.begin(), args.end()), (std::vector<int64_t>{5, 1, 0}));
  EXPECT_EQ(describe_step(*blob, 1),
            "k0_fused grid 1 block 256 (scratch@0 binding 1+0) args 5 1 0");
  struct Case {
    uint32_t first, count;
  };
  // Ranges outside the section (the kernel takes as many as the step passes).
  for (const Case c : {Case{4, 3}, Case{7, 0}, Case{0, 7}, Case{~0u, 2}, Case{2, 250}}) {
    SCOPED_TRACE(fmt::format("args [{}, +{})", c.first, c.count));
    e.kernel_params = {{2, c.count}};
    e.steps[1].kernel.first_arg = c.first;
    e.steps[1].kernel.num_args = c.count;
    expect_rejected(e, "steps[1] passes arguments");
  }
  // A step that passes another count than its kernel takes: the launch would read past the
  // arguments it was given (or a pointer it was not).
  e.kernel_params = {{2, 3}};
  e.steps[1].kernel.first_arg = 5;
  e.steps[1].kernel.num_args = 1;
  expect_rejected(e, "steps[1] passes 2 pointers and 1 arguments to kernel 0, which takes 2 and 3");
  e.steps[1].kernel.first_arg = 0;
  e.steps[1].kernel.num_args = 0;
  expect_rejected(e, "which takes 2 and 3");
  e.steps[1].kernel.num_args = 3;
  e.steps[1].kernel.num_operands = 1;
  expect_rejected(e, "passes 1 pointers and 3 arguments");
  e.steps[1].kernel.num_operands = 2;
  e.args.assign(300, 1);
  e.kernel_params = {{2, 257}};
  e.steps[1].kernel.num_args = 257;
  expect_rejected(e, "kernels[0] takes 2 pointers and 257 arguments (at most 16 and 256)");
  e.kernel_params = {{2, 256}};
  e.steps[1].kernel.num_args = 256;
  auto most = write_engine_blob(e);
  ASSERT_TRUE(most.ok());
  EXPECT_TRUE(parse(*most).ok()) << parse(*most).to_string();
  e.kernel_params.clear();
  EXPECT_FALSE(write_engine_blob(e).ok()) << "kernels without their parameters are written";
}

// A conv step: x [1, 4, 4, 8] NHWC in the binding-sized scratch, w [2, 3, 3, 8], y [1, 2, 2, 2].
StepRecord conv_step() {
  StepRecord r{};
  r.kind = static_cast<uint32_t>(StepKind::Conv);
  ConvStep& c = r.conv;
  c.x_dtype = c.w_dtype = c.y_dtype = c.bias_dtype = static_cast<uint8_t>(DType::Float32);
  c.has_bias = 1;
  c.activation = static_cast<uint8_t>(ConvActivation::Relu);
  c.n = 1;
  c.c = 8;
  c.k = 2;
  c.groups = 1;
  c.in_h = c.in_w = 4;
  c.out_h = c.out_w = 2;
  c.kernel_h = c.kernel_w = 3;
  c.stride_h = c.stride_w = c.dilation_h = c.dilation_w = 1;
  c.x = ref(Space::Scratch, 0, 0, 4 * 4 * 8 * 4);  // 512 bytes: the whole scratch below
  c.w = ref(Space::Weights, 0, 0, 2 * 9 * 8 * 4);  // 576 bytes
  c.bias = ref(Space::Weights, 0, 576, 8);
  c.y = ref(Space::Binding, 1, 0, 32);
  return r;
}

TEST(EngineFormatTest, ConvStepsAreCheckedAndDescribed) {
  auto with_conv = [](auto edit) {
    EngineDescription e = sample();
    e.scratch_bytes = 512;
    e.weights.assign(1024, 7);
    e.bindings[1].sizes = {1, 2, 2, 2};
    e.steps = {conv_step()};
    edit(e.steps[0].conv);
    return e;
  };
  const EngineDescription good = with_conv([](ConvStep&) {});
  auto bytes = write_engine_blob(good);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(parse(*bytes).ok()) << parse(*bytes).to_string();
  Aligned a(*bytes);
  auto text = describe_engine_json(a.span());
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["steps"][0]["kind"], "conv");
  EXPECT_NE(j["steps"][0]["what"].get<std::string>().find("epilogue=bias+relu"), std::string::npos);

  expect_rejected(with_conv([](ConvStep& c) { c.kernel_h = 0; }), "outside [1, 2^24]");
  expect_rejected(with_conv([](ConvStep& c) { c.pad_left = -1; }), "has padding -1");
  expect_rejected(with_conv([](ConvStep& c) { c.groups = 3; }), "groups=3");
  expect_rejected(with_conv([](ConvStep& c) { c.activation = 9; }), "invalid flags");
  expect_rejected(with_conv([](ConvStep& c) {
                    c.activation = static_cast<uint8_t>(ConvActivation::HardSigmoid);
                    c.act_alpha = std::numeric_limits<float>::quiet_NaN();
                  }),
                  "activation parameters nan");
  {
    auto hard = write_engine_blob(with_conv([](ConvStep& c) {
      c.activation = static_cast<uint8_t>(ConvActivation::HardSigmoid);
      c.act_alpha = 0.2f;
      c.act_beta = 0.5f;
    }));
    ASSERT_TRUE(hard.ok());
    Aligned h(*hard);
    auto described = describe_engine_json(h.span());
    ASSERT_TRUE(described.ok()) << described.status().to_string();
    EXPECT_NE(described->find("epilogue=bias+hardsigmoid(0.2,0.5)"), std::string::npos)
        << *described;
  }
  expect_rejected(with_conv([](ConvStep& c) { c.x_dtype = 7; }), "tensor dtype 7");
  expect_rejected(with_conv([](ConvStep& c) { c.in_h = 5; }), "steps[0] x needs 640 bytes");
  expect_rejected(with_conv([](ConvStep& c) { c.out_w = 3; }), "steps[0] y needs 48 bytes");
  expect_rejected(with_conv([](ConvStep& c) { c.bias.bytes = 4; }), "bias needs 8 bytes");
  expect_rejected(with_conv([](ConvStep& c) {
                    c.has_residual = 1;
                    c.residual = ref(Space::Scratch, 0, 0, 16);
                  }),
                  "residual needs 32 bytes");
  // y written with a channel pitch of 3 (into channels 0-1 of a 3-channel tensor): 4 pixels, the
  // last one's 2 channels at elements 9 and 10, so 11 elements (44 bytes) are needed.
  expect_rejected(with_conv([](ConvStep& c) { c.y_channel_stride = 1; }),
                  "y channel stride 1 for K=2");
  expect_rejected(with_conv([](ConvStep& c) { c.y_channel_stride = 3; }),
                  "steps[0] y needs 44 bytes");
  {
    EngineDescription pitched = with_conv([](ConvStep& c) {
      c.y_channel_stride = 3;
      c.y = ref(Space::Scratch, 0, 0, 44);
    });
    auto written = write_engine_blob(pitched);
    ASSERT_TRUE(written.ok());
    ASSERT_TRUE(parse(*written).ok()) << parse(*written).to_string();
    Aligned p(*written);
    auto described = describe_engine_json(p.span());
    ASSERT_TRUE(described.ok()) << described.status().to_string();
    EXPECT_NE(described->find("(channel pitch 3)"), std::string::npos) << *described;
  }
  // A pitched y of 2^24 x 2^24 pixels 2^24 elements apart: its extent overflows, while x is small.
  expect_rejected(
      with_conv([](ConvStep& c) { c.out_h = c.out_w = c.y_channel_stride = int64_t{1} << 24; }),
      "y needs more than 2^64");
  // 2^24 in each of N, H, W, C: the product overflows 2^64 and must be caught, not wrapped.
  expect_rejected(with_conv([](ConvStep& c) {
                    c.n = c.in_h = c.in_w = c.c = int64_t{1} << 24;
                    c.k = 1 << 24;
                  }),
                  "more than 2^64");
}

// An attention step: B=1, H=2, Sq=Sk=4, D=Dv=8 fp16. Q, K and V are views of one [4, 3 * 16]
// projection in scratch (row stride 48, head stride 8, offsets 0, 16 and 32), O is [1, 4, 2, 8]
// (written transposed) in binding 1, the bias [1, 1, 4, 4] in weights.
StepRecord sdpa_step() {
  StepRecord r{};
  r.kind = static_cast<uint32_t>(StepKind::Sdpa);
  SdpaStep& a = r.sdpa;
  a.dtype = static_cast<uint8_t>(DType::Float16);
  a.mask = static_cast<uint8_t>(SdpaMask::Bias);
  a.scale = 0.125f;
  a.b = 1;
  a.h = 2;
  a.sq = a.sk = 4;
  a.d = a.dv = 8;
  for (int64_t* st : {a.q_strides, a.k_strides, a.v_strides}) {
    st[0] = 4 * 48;
    st[1] = 8;
    st[2] = 48;
  }
  a.o_strides[0] = 64;
  a.o_strides[1] = 8;
  a.o_strides[2] = 16;
  // The last element of a view at element offset x: x + 3 * 48 + 8 + 8 elements.
  auto view = [](uint64_t first) { return ref(Space::Scratch, 0, first * 2, (3 * 48 + 16) * 2); };
  a.q = view(0);
  a.k = view(16);
  a.v = view(32);
  a.o = ref(Space::Binding, 1, 0, 64 * 2);
  a.bias = ref(Space::Weights, 0, 0, 16 * 2);
  return r;
}

TEST(EngineFormatTest, AttentionStepsAreCheckedAndDescribed) {
  auto with_sdpa = [](auto edit) {
    EngineDescription e = sample();
    e.scratch_bytes = 4 * 48 * 2;
    e.weights.assign(256, 0);
    e.bindings[1].dtype = DType::Float16;
    e.bindings[1].sizes = {1, 4, 16};
    e.steps = {sdpa_step()};
    edit(e.steps[0].sdpa);
    return e;
  };
  const EngineDescription good = with_sdpa([](SdpaStep&) {});
  auto bytes = write_engine_blob(good);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ASSERT_TRUE(parse(*bytes).ok()) << parse(*bytes).to_string();
  Aligned a(*bytes);
  auto blob = EngineBlob::parse(a.span());
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(blob->num_choice_steps(), 1u);  // its cuDNN plan is a choice
  BufferRef refs[5];
  ASSERT_EQ(cudnn_operands(blob->steps()[0], refs), 5);  // q, k, v, bias, o
  EXPECT_EQ(refs[3].space, static_cast<uint32_t>(Space::Weights));
  EXPECT_EQ(refs[4].space, static_cast<uint32_t>(Space::Binding));
  auto text = describe_engine_json(a.span());
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["steps"][0]["kind"], "sdpa");
  EXPECT_NE(j["steps"][0]["what"].get<std::string>().find("B=1 H=2 Sq=4 Sk=4 D=8 Dv=8 float16"),
            std::string::npos)
      << j["steps"][0]["what"];

  expect_rejected(with_sdpa([](SdpaStep& s) { s.dtype = static_cast<uint8_t>(DType::Float32); }),
                  "attention dtype 1");
  expect_rejected(with_sdpa([](SdpaStep& s) { s.mask = 7; }), "has mask 7");
  expect_rejected(with_sdpa([](SdpaStep& s) { s.d = 0; }), "outside [1, 2^24]");
  // One more head reaches 8 elements past each view.
  expect_rejected(with_sdpa([](SdpaStep& s) { s.h = 3; }), "steps[0] q needs");
  expect_rejected(with_sdpa([](SdpaStep& s) { s.o_strides[2] = 17; }), "steps[0] o needs");
  expect_rejected(with_sdpa([](SdpaStep& s) { s.k_strides[0] = -1; }), "k has stride -1");
  expect_rejected(with_sdpa([](SdpaStep& s) { s.bias_heads = 1; }), "bias needs 64 bytes");
  // Strides of 2^39 times 2^24 batches and rows: the extent passes 2^64 bytes, caught, not
  // wrapped.
  expect_rejected(with_sdpa([](SdpaStep& s) {
                    s.b = s.sq = 1 << 24;
                    s.q_strides[0] = s.q_strides[2] = int64_t{1} << 39;
                  }),
                  "q needs more than 2^64");
  // Without a bias its range is not read.
  expect_rejected(with_sdpa([](SdpaStep& s) { s.bias.bytes = 4; }), "bias needs 32 bytes");
  auto no_mask = write_engine_blob(with_sdpa([](SdpaStep& s) {
    s.mask = static_cast<uint8_t>(SdpaMask::Causal);
    s.bias = {};
  }));
  ASSERT_TRUE(no_mask.ok());
  EXPECT_TRUE(parse(*no_mask).ok()) << parse(*no_mask).to_string();
}

// Choices timed on a GPU: recorded in (and replaced within) a blob, read back, described, and
// checked both when recorded and when a blob is parsed.
TEST(EngineFormatTest, ChoicesAreRecordedCheckedAndDescribed) {
  auto plain = write_engine_blob(sample());  // step 0 a GEMM, step 1 a kernel
  ASSERT_TRUE(plain.ok());
  {
    Aligned a(*plain);
    auto blob = EngineBlob::parse(a.span());
    ASSERT_TRUE(blob.ok()) << blob.status().to_string();
    EXPECT_TRUE(blob->choices().empty());
    EXPECT_EQ(blob->choice(0), nullptr);
    EXPECT_EQ(blob->num_choice_steps(), 1u);  // the GEMM, not the kernel
    const auto j = nlohmann::json::parse(*describe_engine_json(a.span()));
    EXPECT_EQ(j["choices"], "none recorded: chosen at load");
  }
  EngineChoices c;
  c.cublaslt_version = 130100;
  c.gpu = "NVIDIA H100 80GB HBM3";
  StepChoice g{};
  g.step = 0;
  g.kind = static_cast<uint32_t>(StepKind::Gemm);
  g.time_us = 12.5f;
  g.candidates = 4;
  g.cublaslt_algo[0] = 0x1234;
  g.cublaslt_algo[7] = 0x5678;
  c.steps = {g};
  auto recorded = record_choices(*plain, c);
  ASSERT_TRUE(recorded.ok()) << recorded.status().to_string();
  {
    Aligned a(*recorded);
    auto blob = EngineBlob::parse(a.span());
    ASSERT_TRUE(blob.ok()) << blob.status().to_string();
    ASSERT_EQ(blob->choices().size(), 1u);
    ASSERT_NE(blob->choice(0), nullptr);
    EXPECT_EQ(blob->choice(0)->cublaslt_algo[0], 0x1234u);
    EXPECT_EQ(blob->choice(0)->cublaslt_algo[7], 0x5678u);
    EXPECT_EQ(blob->choice(1), nullptr);
    EXPECT_EQ(blob->choices_gpu(), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(blob->header().choices_cublaslt_version, 130100u);
    // Everything else is as it was.
    EXPECT_EQ(blob->cubin()[99], 0xCB);
    EXPECT_EQ(blob->weights().size(), 512u);
    EXPECT_EQ(blob->steps()[0].gemm.k, 6);
    const auto j = nlohmann::json::parse(*describe_engine_json(a.span()));
    EXPECT_EQ(j["choices"]["gpu"], "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(j["choices"]["steps"], 1);
    EXPECT_EQ(j["steps"][0]["choice"], "cuBLASLt algorithm; 12.5 us, fastest of 4");
    EXPECT_FALSE(j["steps"][1].contains("choice"));
  }
  // Recording again replaces the section instead of adding one.
  c.steps[0].time_us = 7.0f;
  auto again = record_choices(*recorded, c);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->size(), recorded->size());
  {
    Aligned a(*again);
    auto blob = EngineBlob::parse(a.span());
    ASSERT_TRUE(blob.ok());
    ASSERT_EQ(blob->choices().size(), 1u);
    EXPECT_EQ(blob->choice(0)->time_us, 7.0f);
  }

  auto refused = [&](auto edit, const std::string& needle) {
    EngineChoices bad = c;
    edit(bad);
    auto r = record_choices(*plain, bad);
    ASSERT_FALSE(r.ok()) << "expected an error mentioning " << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  };
  refused([](EngineChoices& b) { b.steps[0].step = 5; }, "names step 5 of 2");
  refused(
      [](EngineChoices& b) {
        b.steps[0].step = 1;
        b.steps[0].kind = static_cast<uint32_t>(StepKind::Kernel);
      },
      "only GEMM, convolution and attention steps have choices");
  refused([](EngineChoices& b) { b.steps[0].kind = static_cast<uint32_t>(StepKind::Conv); },
          "but steps[0] is of kind 1");
  refused([](EngineChoices& b) { std::memset(b.steps[0].cudnn_plan, 'e', 264); },
          "plan name is not NUL-terminated");
  refused([](EngineChoices& b) { b.steps.push_back(b.steps[0]); }, "second choice for steps[0]");
  refused([](EngineChoices& b) { b.gpu = std::string(40, 'G'); }, "longer than 39 bytes");

  // A damaged choices section or GPU name is rejected when the blob is parsed.
  EngineHeader h{};
  std::memcpy(&h, recorded->data(), sizeof h);
  auto damaged = [&](auto edit, const std::string& needle) {
    std::vector<uint8_t> bytes = *recorded;
    edit(bytes);
    const Status st = parse(bytes);
    ASSERT_FALSE(st.ok()) << "expected an error mentioning " << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
  };
  damaged(
      [&](std::vector<uint8_t>& b) {
        const uint32_t step = 9;
        std::memcpy(b.data() + h.choices.offset + offsetof(StepChoice, step), &step, sizeof step);
      },
      "names step 9 of 2");
  damaged(
      [&](std::vector<uint8_t>& b) {
        const uint64_t size = 100;
        std::memcpy(b.data() + offsetof(EngineHeader, choices) + offsetof(Section, size), &size,
                    sizeof size);
      },
      "not a whole number of 352-byte records");
  damaged(
      [&](std::vector<uint8_t>& b) {
        std::memset(b.data() + offsetof(EngineHeader, choices_gpu), 'G', sizeof h.choices_gpu);
      },
      "not NUL-terminated");
}

TEST(EngineFormatTest, ConvChoicesNameTheCudnnPlan) {
  EngineDescription e = sample();
  e.scratch_bytes = 512;
  e.weights.assign(1024, 7);
  e.bindings[1].sizes = {1, 2, 2, 2};
  e.steps = {conv_step()};
  auto bytes = write_engine_blob(e);
  ASSERT_TRUE(bytes.ok());
  EngineChoices c;
  c.cudnn_version = 91900;
  c.gpu = "NVIDIA H200";
  StepChoice conv{};
  conv.kind = static_cast<uint32_t>(StepKind::Conv);
  conv.cudnn_engine = 12;
  std::strcpy(conv.cudnn_plan, "eng12_k2=1_k3=0");
  conv.time_us = 41.25f;
  conv.candidates = 3;
  c.steps = {conv};
  auto recorded = record_choices(*bytes, c);
  ASSERT_TRUE(recorded.ok()) << recorded.status().to_string();
  Aligned a(*recorded);
  const auto j = nlohmann::json::parse(*describe_engine_json(a.span()));
  EXPECT_EQ(j["steps"][0]["choice"],
            "cuDNN engine 12 (plan eng12_k2=1_k3=0); 41.2 us, fastest of 3");
  EXPECT_EQ(j["choices"]["cudnn_version"], 91900);
}

TEST(EngineFormatTest, KernelAndBindingRecordsAreChecked) {
  EngineDescription e = sample();
  e.steps[1].kernel.kernel = 3;
  expect_rejected(e, "launches kernel 3 of 1");
  e = sample();
  e.steps[1].kernel.block[0] = 4096;
  expect_rejected(e, "launch shape");
  e = sample();
  e.steps[1].kernel.num_operands = 40;
  expect_rejected(e, "has 40 operands");
  e = sample();
  e.bindings[0].dtype = static_cast<DType>(42);
  expect_rejected(e, "dtype 42");
  e = sample();
  std::swap(e.bindings[0], e.bindings[1]);
  expect_rejected(e, "input after an output");
  e = sample();
  e.steps[0].kind = 9;
  expect_rejected(e, "unknown kind 9");
}

TEST(EngineFormatTest, ArchAndPrecisionNames) {
  uint32_t arch = 0;
  EXPECT_TRUE(parse_sm_arch("sm_90", &arch));
  EXPECT_EQ(arch, 90u);
  EXPECT_TRUE(parse_sm_arch("sm_100", &arch));
  EXPECT_EQ(arch, 100u);
  for (const char* bad : {"90", "sm_", "sm_9", "sm_9x", "compute_90", "sm_12345"}) {
    EXPECT_FALSE(parse_sm_arch(bad, &arch)) << bad;
  }
  Precision p;
  EXPECT_TRUE(parse_precision("bf16", &p));
  EXPECT_EQ(p, Precision::BF16);
  EXPECT_FALSE(parse_precision("fp8", &p));
  EXPECT_EQ(sm_arch_name(86), "sm_86");
  EXPECT_TRUE(cubin_runs_on(80, 86));
  EXPECT_TRUE(cubin_runs_on(90, 90));
  EXPECT_FALSE(cubin_runs_on(86, 80));
  EXPECT_FALSE(cubin_runs_on(80, 90));
  EXPECT_EQ(epilogue_name(GemmEpilogue::BiasGeluTanh), "bias+gelu_tanh");
  EXPECT_TRUE(epilogue_has_bias(GemmEpilogue::BiasRelu));
  EXPECT_FALSE(epilogue_has_bias(GemmEpilogue::Relu));
}

// The fuzz_engine_blob regression inputs (fuzz/regressions/fuzz_engine_blob) are still refused
// for what they were recorded for, past the header: an input refused at the version check (they
// were written as version 1 engines and ported by hand to versions 2 and 3) tests nothing.
TEST(EngineFormatTest, RegressionInputsAreRefusedPastTheVersionCheck) {
  struct Case {
    const char* file;
    const char* message;
  };
  for (const Case& c : {Case{"handmade-gemm-batch-stride-wraps", "spans more than 2^64 bytes"}}) {
    SCOPED_TRACE(c.file);
    const std::filesystem::path path =
        std::filesystem::path(testing::source_dir()) / "fuzz/regressions/fuzz_engine_blob" / c.file;
    auto bytes = read_regular_file(path.string(), uint64_t{1} << 30, "regression input");
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    Aligned a(*bytes);
    const Status s = EngineBlob::parse(a.span()).status();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Error::InvalidProgram) << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.to_string();
  }
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(testing::source_dir()) / "fuzz/regressions/fuzz_engine_blob")) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u) << "a new regression input: add it to the cases above";
}

// The size-only block the runtime keeps per CUDA graph (size_only_block): the scratch its
// flagged kernels touch, or nothing, with the reason, when the steps do not lay it out as the
// builder does (the runtime then runs every step at every call).
TEST(EngineFormatTest, TheSizeOnlyBlockIsWhatItsFlaggedKernelsTouchOrRefused) {
  auto kernel = [](bool flagged, std::vector<BufferRef> operands) {
    StepRecord r{};
    r.kind = static_cast<uint32_t>(StepKind::Kernel);
    r.kernel.num_operands = static_cast<uint32_t>(operands.size());
    std::copy(operands.begin(), operands.end(), r.kernel.operands);
    r.kernel.flags = flagged ? kKernelSizeOnly : 0;
    return r;
  };
  // A Range into [4096, 4352), a comparison of it into [4352, 4416), read by a gather of an input.
  const StepRecord range = kernel(true, {ref(Space::Scratch, 0, 4096, 256)});
  const StepRecord compare =
      kernel(true, {ref(Space::Scratch, 0, 4096, 256), ref(Space::Weights, 0, 0, 8),
                    ref(Space::Scratch, 0, 4352, 64)});
  const StepRecord gather =
      kernel(false, {ref(Space::Binding, 0, 0, 512), ref(Space::Scratch, 0, 4352, 64),
                     ref(Space::Scratch, 0, 0, 1024)});
  std::vector<StepRecord> steps = {range, compare, gather};
  SizeOnlyBlock b = size_only_block(steps);
  EXPECT_EQ(b.begin, 4096u);
  EXPECT_EQ(b.end, 4416u);
  EXPECT_EQ(b.steps, 2u);
  EXPECT_TRUE(b.refused.empty());

  // Nothing flagged: no block, nothing refused.
  b = size_only_block(std::vector<StepRecord>{gather});
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.refused.empty());

  // A flagged kernel reading an input.
  steps[1] = kernel(true, {ref(Space::Binding, 1, 0, 8), ref(Space::Scratch, 0, 4352, 64)});
  b = size_only_block(steps);
  EXPECT_TRUE(b.empty());
  EXPECT_NE(b.refused.find("size-only step 1 reads binding 1"), std::string::npos) << b.refused;

  // Another step's buffer across the block's edge.
  steps = {range, compare, kernel(false, {ref(Space::Scratch, 0, 4000, 200)})};
  b = size_only_block(steps);
  EXPECT_TRUE(b.empty());
  EXPECT_NE(b.refused.find("step 2 touches scratch [4000, 4200)"), std::string::npos) << b.refused;

  // A block larger than the builder makes one.
  steps = {kernel(true, {ref(Space::Scratch, 0, 0, kMaxSizeOnlyBytes + 256)})};
  b = size_only_block(steps);
  EXPECT_TRUE(b.empty());
  EXPECT_NE(b.refused.find("more than"), std::string::npos) << b.refused;
}

}  // namespace
}  // namespace baton::cuda
