// Dynamic GPU engines (issue 37, docs/gpu_dynamic_shapes.md), built for sm_90 without a GPU: a
// model with --dim ranges compiles for cuda into an engine whose size-dependent fields carry
// patches, and that engine, patched at a size, is the engine a static compile at that size
// writes, field for field (but where scratch ranges lie: planned once for the largest sizes).
// The loader refuses patches that would write anything but a size.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "backends/cuda/engine_describe.h"
#include "backends/cuda/engine_format.h"
#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "baton/cuda/compiler.h"
#include "baton/extension/module.h"
#include "dense_block_model.h"
#include "format/program_file.h"
#include "issue38_model.h"
#include "size_arithmetic_model.h"
#include "testing/aligned_bytes.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"
#include "testing/random.h"

namespace baton {
namespace {

using testing::OnnxBuilder;

// The engine blobs of a program compiled for cuda:0 (sm_90, fp32).
Result<std::vector<std::vector<uint8_t>>> build_blobs(const std::vector<uint8_t>& model,
                                                      compiler::CompileOptions options,
                                                      const std::string& precision = "fp32") {
  register_builtins();
  cuda::register_compiler();
  BATON_ASSIGN_OR_RETURN(
      auto backend, compiler::make_backend_compiler({Device::cuda(0), "sm_90", precision, {}}));
  options.backends.push_back(backend.get());
  BATON_ASSIGN_OR_RETURN(auto compiled, compiler::compile_bytes(model, options));
  BATON_ASSIGN_OR_RETURN(auto program, compiled.serialize());
  BATON_ASSIGN_OR_RETURN(auto file, format::ProgramFile::parse(program));
  const auto* m = file.program().methods()->Get(0);
  std::vector<std::vector<uint8_t>> blobs;
  for (uint32_t d = 0; m->delegates() && d < m->delegates()->size(); ++d) {
    const auto blob = file.segment(m->delegates()->Get(d)->blob_segment());
    blobs.emplace_back(blob.begin(), blob.end());
  }
  return blobs;
}

Result<std::vector<std::vector<uint8_t>>> build_file_blobs(const std::string& model,
                                                           compiler::CompileOptions options,
                                                           const std::string& precision = "fp32") {
  const std::filesystem::path path =
      std::filesystem::path(testing::source_dir()) / "tests/e2e/models/real" / (model + ".onnx");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (bytes.empty()) return BATON_ERROR(NotFound, "cannot read {}", path.string());
  return build_blobs(bytes, std::move(options), precision);
}

// The engines of a partition's blob: itself, or each bucket of a bucketed engine (in the order
// the delegate tries them).
std::vector<std::vector<uint8_t>> engines_of(const std::vector<uint8_t>& blob,
                                             std::vector<uint8_t>* shared = nullptr) {
  const testing::AlignedBytes aligned(blob);
  std::vector<std::vector<uint8_t>> out;
  const auto buckets = cuda::engine_buckets(aligned.span()).value();
  for (const auto& b : buckets) out.emplace_back(b.begin(), b.end());
  const auto weights = cuda::shared_bucket_weights(aligned.span());
  if (shared != nullptr) shared->assign(weights.begin(), weights.end());
  return out;
}

// What the engine does per call (ExecutionContext::resize), without a GPU: the blob's steps,
// arguments and binding sizes with every patch applied at `symbols`.
struct Patched {
  std::vector<cuda::StepRecord> steps;
  std::vector<int64_t> args;
  std::vector<std::vector<int64_t>> bindings;
};
Patched patch(const cuda::EngineBlob& blob, const std::vector<int64_t>& symbols) {
  Patched p;
  p.steps.assign(blob.steps().begin(), blob.steps().end());
  p.args.assign(blob.args().begin(), blob.args().end());
  std::vector<int64_t> sizes(blob.bindings().size() * cuda::kEngineMaxRank, 0);
  for (size_t b = 0; b < blob.bindings().size(); ++b) {
    const cuda::BindingRecord& r = blob.bindings()[b];
    std::copy(r.sizes, r.sizes + r.rank, sizes.begin() + b * cuda::kEngineMaxRank);
  }
  std::vector<int64_t> values(blob.exprs().size());
  EXPECT_TRUE(cuda::evaluate_exprs(blob.exprs(), symbols, values).ok());
  const Status patched = cuda::apply_patches(blob, values, p.steps, p.args, sizes);
  EXPECT_TRUE(patched.ok()) << patched.to_string();
  for (size_t b = 0; b < blob.bindings().size(); ++b) {
    const auto first = sizes.begin() + static_cast<std::ptrdiff_t>(b * cuda::kEngineMaxRank);
    p.bindings.emplace_back(first, first + blob.bindings()[b].rank);
  }
  return p;
}

// `r` with the offsets of its scratch ranges zeroed: a dynamic engine plans its scratch once, for
// its largest sizes, where a static engine plans it for its own; where each range lies is the
// planner's business (each is checked inside the buffer), what is compared is everything else.
cuda::StepRecord without_scratch_offsets(cuda::StepRecord r) {
  auto clear = [](cuda::BufferRef& b) {
    if (b.space == static_cast<uint32_t>(cuda::Space::Scratch)) b.offset = 0;
  };
  switch (static_cast<cuda::StepKind>(r.kind)) {
    case cuda::StepKind::Gemm:
    case cuda::StepKind::Matmul:
      for (cuda::BufferRef* b : {&r.gemm.a, &r.gemm.b, &r.gemm.c, &r.gemm.d, &r.gemm.bias})
        clear(*b);
      break;
    case cuda::StepKind::Kernel:
      for (uint32_t o = 0; o < r.kernel.num_operands; ++o) clear(r.kernel.operands[o]);
      break;
    case cuda::StepKind::Copy:
      clear(r.copy.src);
      clear(r.copy.dst);
      break;
    case cuda::StepKind::Conv:
      for (cuda::BufferRef* b : {&r.conv.x, &r.conv.w, &r.conv.bias, &r.conv.residual, &r.conv.y})
        clear(*b);
      break;
    case cuda::StepKind::Sdpa:
      for (cuda::BufferRef* b : {&r.sdpa.q, &r.sdpa.k, &r.sdpa.v, &r.sdpa.o, &r.sdpa.bias})
        clear(*b);
      break;
    default:
      break;
  }
  return r;
}

// The dynamic engine `dyn` patched at `symbols` against the static engine `st` built at those
// sizes: the same steps (scratch offsets aside), arguments and cubin; the patched copy is
// returned for further checks.
Patched expect_patched_is_static(const cuda::EngineBlob& dyn, const cuda::EngineBlob& st,
                                 const std::vector<int64_t>& symbols) {
  Patched p = patch(dyn, symbols);
  EXPECT_EQ(p.steps.size(), st.steps().size());
  bool switching = false;
  for (size_t s = 0; s < p.steps.size() && s < st.steps().size(); ++s) {
    SCOPED_TRACE(fmt::format("step {} ({})", s,
                             cuda::step_kind_name(static_cast<cuda::StepKind>(p.steps[s].kind))));
    cuda::StepRecord a = without_scratch_offsets(p.steps[s]);
    const cuda::StepRecord b = without_scratch_offsets(st.steps()[s]);
    if (a.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
        dyn.kernel_name(a.kernel.kernel).find("layer_norm") != std::string_view::npos) {
      // A dynamic engine's LayerNorm picks a warp or a block per row when it runs
      // (switching_row_launch): blocks of 128 threads, the grid the row count (its first
      // argument) below 1024 rows, else a quarter of it. The static engine's launch is its own.
      const int64_t rows = p.args[a.kernel.first_arg];
      EXPECT_EQ(a.kernel.block[0], 128u);
      EXPECT_EQ(a.kernel.grid[0], static_cast<uint32_t>(rows < 1024 ? rows : (rows + 3) / 4));
      std::copy(b.kernel.grid, b.kernel.grid + 3, a.kernel.grid);
      std::copy(b.kernel.block, b.kernel.block + 3, a.kernel.block);
      switching = true;
    }
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  }
  EXPECT_EQ(p.args, std::vector<int64_t>(st.args().begin(), st.args().end()));
  // The same kernels: one cubin serves every size of a bucket (but for the LayerNorm's, which
  // has both launches compiled in).
  if (!switching) {
    EXPECT_TRUE(
        std::equal(dyn.cubin().begin(), dyn.cubin().end(), st.cubin().begin(), st.cubin().end()));
  } else {
    EXPECT_EQ(dyn.kernels().size(), st.kernels().size());
  }
  return p;
}

// An MLP with a LayerNorm, a head split (Reshape, Transpose) and a Softmax over a dynamic batch:
// GEMMs whose M follows it, kernels whose sizes, grids, strides and division magics follow it.
// (A softmax along the dynamic axis would size its block for the longest row, where a static
// engine sizes it for its own: the same result, not the same launch.)
OnnxBuilder dynamic_mlp() {
  OnnxBuilder b(20);
  b.input("x", {-1, 64});
  std::vector<float> w(64 * 96), bias(96), w2(96 * 32), scale(96, 1.25f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.02f * static_cast<float>(i % 5);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.015f * static_cast<float>(i % 13) - 0.09f;
  b.initializer("w", {64, 96}, w);
  b.initializer("bias", {96}, bias);
  b.initializer("scale", {96}, scale);
  b.initializer("w2", {96, 32}, w2);
  b.initializer_int64("heads", {3}, {-1, 4, 8});
  b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  b.node("Add", {"h", "bias"}, {"hb"}, "bias");
  b.node("Gelu", {"hb"}, {"a"}, "act");
  auto& ln = b.node("LayerNormalization", {"a", "scale"}, {"n"}, "ln");
  OnnxBuilder::attr_int(ln, "axis", -1);
  b.node("MatMul", {"n", "w2"}, {"y"}, "mm2");
  b.node("Reshape", {"y", "heads"}, {"r"}, "split_heads");
  auto& t = b.node("Transpose", {"r"}, {"tr"}, "transpose");
  OnnxBuilder::attr_ints(t, "perm", {1, 0, 2});
  auto& sm = b.node("Softmax", {"tr"}, {"out"}, "softmax");
  OnnxBuilder::attr_int(sm, "axis", 2);
  b.output("out", {4, -1, 8});
  return b;
}

compiler::CompileOptions dims(int64_t max) {
  compiler::CompileOptions o;
  o.dims = {{"N", 1, max, 0, {}}};
  return o;
}

TEST(DynamicEngineTest, PatchedAtEverySizeItIsTheStaticEngineOfThatSize) {
  const OnnxBuilder model = dynamic_mlp();
  auto dynamic = build_blobs(model.bytes(), dims(48));
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  ASSERT_EQ(dynamic->size(), 1u);
  // N = 1 makes the transpose a view (no kernel): an engine of its own, then one for 2..48. The
  // second reads the first's weights: the file holds them once.
  std::vector<uint8_t> shared;
  const auto engines = engines_of((*dynamic)[0], &shared);
  ASSERT_EQ(engines.size(), 2u);
  {
    // The first engine's weights (both weight matrices at least), which it holds itself.
    cuda::EngineHeader first{};
    std::memcpy(&first, engines[0].data(), sizeof first);
    EXPECT_EQ(first.weights.size, shared.size());
    EXPECT_GE(shared.size(), (64u * 96 + 96 * 32) * 4);
  }
  std::vector<std::unique_ptr<testing::AlignedBytes>> keep;
  std::vector<cuda::EngineBlob> parsed;
  for (const auto& e : engines) {
    keep.push_back(std::make_unique<testing::AlignedBytes>(e));
    auto one = cuda::EngineBlob::parse(keep.back()->span(), shared);
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    ASSERT_TRUE(one->dynamic());
    EXPECT_EQ(one->header().version, cuda::kEngineVersion);
    ASSERT_EQ(one->symbols().size(), 1u);
    EXPECT_EQ(one->symbol_name(0), "N");
    parsed.push_back(std::move(*one));
  }
  EXPECT_EQ(parsed[0].symbols()[0].min, 1);
  EXPECT_EQ(parsed[0].symbols()[0].max, 1);
  EXPECT_EQ(parsed[1].symbols()[0].min, 2);
  EXPECT_EQ(parsed[1].symbols()[0].max, 48);
  {
    cuda::EngineHeader second{};
    std::memcpy(&second, engines[1].data(), sizeof second);
    EXPECT_EQ(second.weights.size, 0u);
    // Without the shared weights the second engine's GEMMs read outside its (empty) weights.
    const testing::AlignedBytes alone(engines[1]);
    EXPECT_FALSE(cuda::EngineBlob::parse(alone.span()).ok());
  }
  const cuda::EngineBlob& dyn = parsed[1];
  // GEMM sizes, kernel grids, kernel arguments and both bindings follow N.
  std::map<uint8_t, int> targets;
  bool magic = false;
  for (const cuda::PatchRecord& p : dyn.patches()) {
    ++targets[p.target];
    magic |= p.kind == static_cast<uint8_t>(cuda::PatchKind::DivisionMagic);
  }
  EXPECT_EQ(targets[static_cast<uint8_t>(cuda::PatchTarget::BindingSize)], 2);
  EXPECT_GT(targets[static_cast<uint8_t>(cuda::PatchTarget::StepField)], 2);
  EXPECT_GT(targets[static_cast<uint8_t>(cuda::PatchTarget::Arg)], 0);
  EXPECT_TRUE(magic) << "the transpose divides its indices by N";

  // Every size of the range, probes and others alike.
  for (int64_t n = 1; n <= 48; ++n) {
    SCOPED_TRACE(n);
    compiler::CompileOptions fixed;
    fixed.input_shapes = {{"x", {n, 64}}};
    auto stat = build_blobs(model.bytes(), fixed);
    ASSERT_TRUE(stat.ok()) << stat.status().to_string();
    const testing::AlignedBytes st_bytes((*stat)[0]);
    const cuda::EngineBlob st = cuda::EngineBlob::parse(st_bytes.span()).value();
    EXPECT_FALSE(st.dynamic());
    const cuda::EngineBlob& bucket = n == 1 ? parsed[0] : parsed[1];
    ASSERT_TRUE(cuda::holds_symbols(bucket, std::vector<int64_t>{n}));
    const Patched p = expect_patched_is_static(bucket, st, {n});
    ASSERT_EQ(p.bindings.size(), st.bindings().size());
    for (size_t b = 0; b < p.bindings.size(); ++b) {
      EXPECT_EQ(p.bindings[b],
                std::vector<int64_t>(st.bindings()[b].sizes,
                                     st.bindings()[b].sizes + st.bindings()[b].rank));
    }
    // And the patched steps pass the loader's checks at that size.
    std::vector<uint64_t> bytes;
    for (size_t b = 0; b < p.bindings.size(); ++b) {
      bytes.push_back(
          *checked_nbytes(static_cast<DType>(bucket.bindings()[b].dtype), p.bindings[b]));
    }
    EXPECT_TRUE(bucket.check_steps(p.steps, p.args, bytes).ok());
  }
}

// A blob whose patches were tampered with is refused at load, naming the patch.
TEST(DynamicEngineTest, TheLoaderRefusesPatchesThatWriteAnythingButSizes) {
  auto dynamic = build_blobs(dynamic_mlp().bytes(), dims(16));
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  std::vector<uint8_t> shared;
  const std::vector<uint8_t> good = engines_of((*dynamic)[0], &shared).back();  // N in 2..16
  cuda::EngineHeader h{};
  std::memcpy(&h, good.data(), sizeof h);
  ASSERT_GT(h.patches.size, 0u);
  auto parse = [&](const std::vector<uint8_t>& bytes) {
    const testing::AlignedBytes aligned(bytes);
    return cuda::EngineBlob::parse(aligned.span(), shared).status();
  };
  ASSERT_TRUE(parse(good).ok());
  auto with_patch = [&](auto&& change) {
    std::vector<uint8_t> bad = good;
    // The first step-field patch.
    for (uint64_t off = h.patches.offset; off < h.patches.offset + h.patches.size;
         off += sizeof(cuda::PatchRecord)) {
      cuda::PatchRecord p{};
      std::memcpy(&p, bad.data() + off, sizeof p);
      if (p.target != static_cast<uint8_t>(cuda::PatchTarget::StepField)) continue;
      change(p);
      std::memcpy(bad.data() + off, &p, sizeof p);
      break;
    }
    return parse(bad);
  };
  // Onto a step's kind (which selects what runs).
  Status s = with_patch([](cuda::PatchRecord& p) {
    p.offset = 0;
    p.width = 4;
  });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a size, stride, grid or range"), std::string::npos)
      << s.message();
  // An expression that does not exist.
  s = with_patch([](cuda::PatchRecord& p) { p.expr = 100000; });
  EXPECT_NE(s.message().find("reads exprs[100000]"), std::string::npos) << s.message();
  // A division magic written to a step (magics are for kernel arguments).
  s = with_patch([](cuda::PatchRecord& p) { p.kind = 1; });
  EXPECT_NE(s.message().find("division magics only"), std::string::npos) << s.message();
  // An expression that disagrees with the engine at the maxima.
  {
    std::vector<uint8_t> bad = good;
    cuda::ExprRecord e{};
    std::memcpy(&e, bad.data() + h.exprs.offset, sizeof e);
    ASSERT_EQ(e.op, static_cast<uint32_t>(cuda::ExprOp::Symbol));  // N comes first
    e.op = static_cast<uint32_t>(cuda::ExprOp::Const);
    e.value = 7;
    std::memcpy(bad.data() + h.exprs.offset, &e, sizeof e);
    s = parse(bad);
    EXPECT_NE(s.message().find("at the symbols' maxima but the engine holds"), std::string::npos)
        << s.message();
  }
  // An expression that reads a later one.
  {
    std::vector<uint8_t> bad = good;
    const uint64_t count = h.exprs.size / sizeof(cuda::ExprRecord);
    ASSERT_GE(count, 2u);
    cuda::ExprRecord e{static_cast<uint32_t>(cuda::ExprOp::Add), 1,
                       static_cast<uint32_t>(count - 1), 0, 0};
    std::memcpy(bad.data() + h.exprs.offset + sizeof e, &e, sizeof e);
    s = parse(bad);
    EXPECT_NE(s.message().find("operands must come before"), std::string::npos) << s.message();
  }
  // A symbol range that does not start at 1 or is empty.
  {
    std::vector<uint8_t> bad = good;
    cuda::SymbolRecord r{};
    std::memcpy(&r, bad.data() + h.symbols.offset, sizeof r);
    r.min = r.max + 1;
    std::memcpy(bad.data() + h.symbols.offset, &r, sizeof r);
    s = parse(bad);
    EXPECT_NE(s.message().find("has range"), std::string::npos) << s.message();
  }
}

// inspect's view (describe_engine_json): the widest bucket in full with its ranges and first
// patches, and one entry per bucket with its ranges.
TEST(DynamicEngineTest, TheDescriptionShowsTheBucketsAndHowFieldsFollowTheSizes) {
  auto dynamic = build_blobs(dynamic_mlp().bytes(), dims(16));
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  const testing::AlignedBytes bytes((*dynamic)[0]);
  auto text = cuda::describe_engine_json(bytes.span());
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const nlohmann::json j = nlohmann::json::parse(*text);
  ASSERT_TRUE(j.contains("buckets"));
  ASSERT_EQ(j["buckets"].size(), 2u);
  EXPECT_EQ(j["buckets"][0]["dynamic"]["symbols"][0]["max"], 1);
  EXPECT_EQ(j["buckets"][1]["dynamic"]["symbols"][0]["min"], 2);
  EXPECT_EQ(j["buckets"][1]["dynamic"]["symbols"][0]["max"], 16);
  ASSERT_TRUE(j.contains("dynamic"));
  EXPECT_EQ(j["dynamic"]["symbols"][0]["name"], "N");
  EXPECT_GT(j["dynamic"]["patches"].get<int>(), 2);
  // The input's first dimension is N; some GEMM's rows follow it.
  bool binding = false, gemm = false;
  for (const auto& p : j["dynamic"]["first_patches"]) {
    const std::string line = p.get<std::string>();
    binding |= line == "binding 'x' dimension 0 = N";
    gemm |= line.find("gemm.") != std::string::npos && line.find("N") != std::string::npos;
  }
  EXPECT_TRUE(binding) << j["dynamic"]["first_patches"].dump();
  EXPECT_TRUE(gemm) << j["dynamic"]["first_patches"].dump();
  EXPECT_FALSE(j["dynamic"]["opt_prepared_at_load"].get<bool>()) << "no OPT declared";

  // With an OPT of 8 the wider bucket holds it and is prepared at load; the unit batch's is not.
  compiler::CompileOptions with_opt = dims(16);
  with_opt.dims[0].opt = 8;
  auto opt = build_blobs(dynamic_mlp().bytes(), with_opt);
  ASSERT_TRUE(opt.ok()) << opt.status().to_string();
  const testing::AlignedBytes opt_bytes((*opt)[0]);
  auto opt_text = cuda::describe_engine_json(opt_bytes.span());
  ASSERT_TRUE(opt_text.ok()) << opt_text.status().to_string();
  const nlohmann::json o = nlohmann::json::parse(*opt_text);
  ASSERT_EQ(o["buckets"].size(), 2u);
  EXPECT_FALSE(o["buckets"][0]["dynamic"]["opt_prepared_at_load"].get<bool>());
  EXPECT_TRUE(o["buckets"][1]["dynamic"]["opt_prepared_at_load"].get<bool>());
  EXPECT_EQ(o["buckets"][1]["dynamic"]["symbols"][0]["opt"], 8);
}

// Patched steps are checked per call: sizes outside what the buffers hold are refused.
TEST(DynamicEngineTest, PatchedStepsOutsideTheirBuffersAreRefused) {
  auto dynamic = build_blobs(dynamic_mlp().bytes(), dims(16));
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  std::vector<uint8_t> shared;
  const testing::AlignedBytes bytes(engines_of((*dynamic)[0], &shared).back());
  const cuda::EngineBlob blob = cuda::EngineBlob::parse(bytes.span(), shared).value();
  // N = 17 is past the range: the scratch planned for 16 rows cannot hold it.
  const Patched p = patch(blob, {17});
  std::vector<uint64_t> binding_bytes;
  for (size_t b = 0; b < p.bindings.size(); ++b) {
    binding_bytes.push_back(
        *checked_nbytes(static_cast<DType>(blob.bindings()[b].dtype), p.bindings[b]));
  }
  const Status s = blob.check_steps(p.steps, p.args, binding_bytes);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside the"), std::string::npos) << s.message();
}

// The transformer families (both exporters) compile to dynamic engines over batch and sequence,
// one GPU partition each: their position ids and mask arithmetic (Shape, Range, GatherElements,
// integer Add and Mul, an int64 Concat) run on the GPU too, leaving no CPU kernel between
// engines (three partitions before they did). In fp16 too, with cuDNN's fused attention in the
// widest engine (its plan built per shape by the engine).
TEST(DynamicEngineTest, TransformersCompileToOneDynamicEngine) {
  const std::vector<compiler::DimRange> tokens = {{"batch", 1, 8, 0, {}},
                                                  {"sequence", 1, 64, 0, {}}};
  const std::vector<std::pair<std::string, std::vector<compiler::DimRange>>> models = {
      {"torchscript17_bert", tokens},
      {"torchscript17_gpt2", tokens},
      {"dynamo18dyn_bert", {{"s33", 1, 8, 0, {}}, {"s50", 1, 64, 0, {}}, {"s6", 0, 0, 0, "s33"}}},
      {"dynamo18dyn_gpt2",
       {{"s33", 1, 8, 0, {}},
        {"s50", 1, 64, 0, {}},
        {"s6", 0, 0, 0, "s33"},
        {"s81", 0, 0, 0, "s50"}}},
      {"dynamo18dyn_vit", {{"s77", 1, 6, 0, {}}}},
  };
  for (const auto& [name, ranges] : models) {
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(name + " " + precision);
      compiler::CompileOptions o;
      o.dims = ranges;
      auto blobs = build_file_blobs(name, o, precision);
      ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
      EXPECT_EQ(blobs->size(), 1u) << "GPU partitions";
      size_t dynamic = 0;
      for (const auto& b : *blobs) {
        std::vector<uint8_t> shared;
        const auto engines = engines_of(b, &shared);
        // The engines of one partition keep its weights once: every bucket after the first
        // reads the first's. (A constant a bucket lowered at a size of 1 stored otherwise than
        // the others made each bucket keep its own: BERT-base fp16 was 873 MB, not 224.)
        for (size_t i = 1; i < engines.size(); ++i) {
          cuda::EngineHeader h{};
          ASSERT_GE(engines[i].size(), sizeof h);
          std::memcpy(&h, engines[i].data(), sizeof h);
          EXPECT_EQ(h.weights.size, 0u) << "bucket " << i << " of " << engines.size()
                                        << " keeps a copy of the weights of its own";
        }
        if (engines.size() > 1) EXPECT_FALSE(shared.empty());
        for (const auto& e : engines) {
          const testing::AlignedBytes aligned(e);
          auto parsed = cuda::EngineBlob::parse(aligned.span(), shared);
          ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
          dynamic += parsed->dynamic();
          if (&e != &engines.back()) continue;
          // The widest bucket (the largest sizes): two layers, one attention each, fused in fp16
          // (fp32 engines run GEMMs; so does a bucket of one token, as its static engine does).
          size_t fused = 0;
          for (const cuda::StepRecord& r : parsed->steps()) {
            fused += r.kind == static_cast<uint32_t>(cuda::StepKind::Sdpa);
          }
          EXPECT_EQ(fused, std::string(precision) == "fp16" ? 2u : 0u);
        }
      }
      EXPECT_GE(dynamic, 1u);
    }
  }
}

// In fp16 a dynamic BERT runs cuDNN's fused attention: patched at a shape, each such step is the
// one a static compile at that shape writes, so the plan the engine builds for that shape is the
// static engine's operation graph. So is its exact GELU, in cuDNN's GELU matmul as in the static
// engine (gemm.cpp's cudnn_gelu): patched at a shape, each matmul is the static engine's.
TEST(DynamicEngineTest, FusedAttentionFollowsTheSizes) {
  compiler::CompileOptions o;
  o.dims = {{"batch", 1, 4, 0, {}}, {"sequence", 1, 32, 0, {}}};
  auto blobs = build_file_blobs("torchscript17_bert", o, "fp16");
  ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
  ASSERT_EQ(blobs->size(), 1u);
  std::vector<uint8_t> shared;
  const auto engines = engines_of((*blobs)[0], &shared);
  ASSERT_EQ(engines.size(), 4u) << "(1, 1), (1, 2..32), (2..4, 1), (2..4, 2..32)";
  const testing::AlignedBytes aligned(engines.back());
  const cuda::EngineBlob dyn = cuda::EngineBlob::parse(aligned.span(), shared).value();
  ASSERT_TRUE(dyn.dynamic());
  ASSERT_EQ(dyn.symbols()[0].min, 2);
  ASSERT_EQ(dyn.symbols()[1].min, 2);
  auto steps_of = [](std::span<const cuda::StepRecord> steps, cuda::StepKind kind) {
    std::vector<cuda::StepRecord> out;
    for (const cuda::StepRecord& r : steps) {
      if (r.kind == static_cast<uint32_t>(kind)) out.push_back(without_scratch_offsets(r));
    }
    return out;
  };
  auto fused_steps = [&](std::span<const cuda::StepRecord> steps) {
    return steps_of(steps, cuda::StepKind::Sdpa);
  };
  EXPECT_EQ(steps_of(dyn.steps(), cuda::StepKind::Matmul).size(), 2u) << "the GELUs";
  for (const auto& [b, s] : std::vector<std::pair<int64_t, int64_t>>{{3, 17}, {2, 32}, {4, 5}}) {
    SCOPED_TRACE(fmt::format("{} x {}", b, s));
    const Patched p = patch(dyn, {b, s});
    const std::vector<cuda::StepRecord> dyn_fused = fused_steps(p.steps);
    compiler::CompileOptions fixed;
    fixed.input_shapes = {{"input_ids", {b, s}}, {"attention_mask", {b, s}}};
    auto stat = build_file_blobs("torchscript17_bert", fixed, "fp16");
    ASSERT_TRUE(stat.ok()) << stat.status().to_string();
    const testing::AlignedBytes st_bytes((*stat)[0]);
    const cuda::EngineBlob st = cuda::EngineBlob::parse(st_bytes.span()).value();
    const std::vector<cuda::StepRecord> st_fused = fused_steps(st.steps());
    ASSERT_EQ(dyn_fused.size(), 2u) << "two layers' attentions";
    ASSERT_EQ(dyn_fused.size(), st_fused.size());
    const std::vector<cuda::StepRecord> dyn_gelu = steps_of(p.steps, cuda::StepKind::Matmul);
    const std::vector<cuda::StepRecord> st_gelu = steps_of(st.steps(), cuda::StepKind::Matmul);
    ASSERT_EQ(st_gelu.size(), 2u) << "the static GELUs";
    ASSERT_EQ(dyn_gelu.size(), st_gelu.size());
    for (size_t i = 0; i < dyn_gelu.size(); ++i) {
      EXPECT_TRUE(cuda::same_cudnn_graph(dyn_gelu[i], st_gelu[i])) << "GELU matmul " << i;
      EXPECT_EQ(dyn_gelu[i].gemm.n, st_gelu[i].gemm.n) << "GELU matmul " << i;
    }
    for (size_t i = 0; i < dyn_fused.size(); ++i) {
      SCOPED_TRACE(i);
      // (Their buffers lie elsewhere in the two engines: what is compared is the graph.)
      EXPECT_TRUE(cuda::same_cudnn_graph(dyn_fused[i], st_fused[i]));
      // One operation graph in every layer: the engine builds one plan for both.
      EXPECT_TRUE(cuda::same_cudnn_graph(dyn_fused[i], dyn_fused[0]));
    }
    EXPECT_EQ(dyn_fused[0].sdpa.b, static_cast<uint32_t>(b));
    EXPECT_EQ(dyn_fused[0].sdpa.sq, static_cast<uint32_t>(s));
    EXPECT_EQ(dyn_fused[0].sdpa.sk, static_cast<uint32_t>(s));
  }
}

// An attention whose additive mask is a slice [1, 1, N, N] of a computed [1, 1, 64, 64] tensor:
// at N = 64 the slice is the whole tensor, already laid out as cuDNN's bias and read where it
// is; at every other N it is copied into one. cuDNN's fused attention then does not follow the
// sizes (a step comes and goes), so the partition is lowered again without it, as GEMMs and a
// softmax kernel, and still compiles to one dynamic engine.
TEST(DynamicEngineTest, FusedStepsThatDoNotFollowTheSizesFallBackToGemms) {
  OnnxBuilder b(17);
  auto* imp = b.model().add_opset_import();
  imp->set_domain("baton");
  imp->set_version(1);
  for (const char* name : {"q", "k", "v"}) b.input(name, {2, 2, -1, 8});
  b.input("mask_base", {1, 1, 64, 64});
  b.initializer("zero", {1}, {0.0f});
  b.initializer_int64("two", {1}, {2});
  b.initializer_int64("three", {1}, {3});
  b.initializer_int64("origin", {2}, {0, 0});
  b.initializer_int64("last_axes", {2}, {2, 3});
  b.node("Add", {"mask_base", "zero"}, {"m"}, "computed");
  b.node("Shape", {"q"}, {"q_shape"}, "shape");
  b.node("Slice", {"q_shape", "two", "three"}, {"n"}, "n");
  auto& ends = b.node("Concat", {"n", "n"}, {"ends"}, "ends");
  OnnxBuilder::attr_int(ends, "axis", 0);
  b.node("Slice", {"m", "origin", "ends", "last_axes"}, {"mask"}, "mask");
  auto& att = b.node("Attention", {"q", "k", "v", "mask"}, {"y"}, "attention", "baton");
  OnnxBuilder::attr_float(att, "scale", 0.35f);
  OnnxBuilder::attr_string(att, "mask_kind", "add");
  b.output("y", {2, 2, -1, 8});
  std::string bytes;
  ASSERT_TRUE(b.model().SerializeToString(&bytes));
  const std::vector<uint8_t> model(bytes.begin(), bytes.end());

  // At a fixed N below 64 the static engine fuses it: the mask is copied into a bias first.
  compiler::CompileOptions fixed;
  for (const char* name : {"q", "k", "v"}) fixed.input_shapes.push_back({name, {2, 2, 24, 8}});
  auto stat = build_blobs(model, fixed, "fp16");
  ASSERT_TRUE(stat.ok()) << stat.status().to_string();
  auto count_sdpa = [](const std::vector<uint8_t>& engine, const std::vector<uint8_t>& shared) {
    const testing::AlignedBytes aligned(engine);
    const cuda::EngineBlob blob = cuda::EngineBlob::parse(aligned.span(), shared).value();
    size_t n = 0;
    for (const cuda::StepRecord& r : blob.steps()) {
      n += r.kind == static_cast<uint32_t>(cuda::StepKind::Sdpa);
    }
    return n;
  };
  ASSERT_EQ(stat->size(), 1u);
  EXPECT_EQ(count_sdpa((*stat)[0], {}), 1u);

  auto dyn = build_blobs(model, dims(64), "fp16");
  ASSERT_TRUE(dyn.ok()) << dyn.status().to_string();
  ASSERT_EQ(dyn->size(), 1u) << "GPU partitions";
  std::vector<uint8_t> shared;
  size_t engines = 0;
  for (const auto& e : engines_of((*dyn)[0], &shared)) {
    EXPECT_EQ(count_sdpa(e, shared), 0u);
    const testing::AlignedBytes aligned(e);
    EXPECT_TRUE(cuda::EngineBlob::parse(aligned.span(), shared).value().dynamic());
    ++engines;
  }
  EXPECT_GE(engines, 1u);
}

// Steps share a cuDNN plan when only their buffers differ: a different size, stride, dtype or
// fused operation is another operation graph.
TEST(DynamicEngineTest, StepsShareACudnnPlanOnlyWhenTheirGraphsAreEqual) {
  cuda::StepRecord a{};
  a.kind = static_cast<uint32_t>(cuda::StepKind::Sdpa);
  a.sdpa.dtype = static_cast<uint8_t>(DType::Float16);
  a.sdpa.b = 2;
  a.sdpa.h = 12;
  a.sdpa.sq = a.sdpa.sk = 128;
  a.sdpa.d = a.sdpa.dv = 64;
  a.sdpa.q = {static_cast<uint32_t>(cuda::Space::Scratch), 0, 0, 4096};
  cuda::StepRecord b = a;
  b.sdpa.q.offset = 8192;
  b.sdpa.o = {static_cast<uint32_t>(cuda::Space::Binding), 1, 0, 4096};
  EXPECT_TRUE(cuda::same_cudnn_graph(a, b)) << "only the buffers differ";
  for (auto change : std::vector<std::function<void(cuda::StepRecord&)>>{
           [](cuda::StepRecord& r) { r.sdpa.sq = 64; },
           [](cuda::StepRecord& r) { r.sdpa.q_strides[2] = 2304; },
           [](cuda::StepRecord& r) { r.sdpa.mask = static_cast<uint8_t>(cuda::SdpaMask::Causal); },
           [](cuda::StepRecord& r) { r.sdpa.scale = 0.5f; },
       }) {
    cuda::StepRecord c = a;
    change(c);
    EXPECT_FALSE(cuda::same_cudnn_graph(a, c));
  }
  cuda::StepRecord gemm = a;
  gemm.kind = static_cast<uint32_t>(cuda::StepKind::Gemm);
  EXPECT_FALSE(cuda::same_cudnn_graph(gemm, gemm)) << "not a cuDNN step";
  cuda::StepRecord conv{};
  conv.kind = static_cast<uint32_t>(cuda::StepKind::Conv);
  conv.conv.n = 8;
  cuda::StepRecord conv2 = conv;
  conv2.conv.y_channel_stride = 96;
  EXPECT_FALSE(cuda::same_cudnn_graph(conv, conv2)) << "a field after the buffers";
  conv2 = conv;
  conv2.conv.residual.offset = 256;
  EXPECT_TRUE(cuda::same_cudnn_graph(conv, conv2));
}

// Shape, Range, integer Add, Sub and Mul, an int64 Concat and GatherElements join the dynamic
// engine: the whole model is one GPU partition with no CPU kernel, and the program computes no
// size on the host but the inputs' (their values follow the call's N through the engine's
// patched arguments; dynamic_gpu_test checks them against the CPU).
TEST(DynamicEngineTest, SizeAndIndexArithmeticStaysOnTheGpu) {
  register_builtins();
  cuda::register_compiler();
  auto backend = compiler::make_backend_compiler({Device::cuda(0), "sm_90", "fp32", {}});
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  compiler::CompileOptions o = dims(48);
  o.backends.push_back(backend->get());
  auto compiled = compiler::compile_bytes(testing::size_arithmetic_model(), o);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->summary().delegate_calls, 1u);
  EXPECT_EQ(compiled->summary().kernel_calls, 0u) << "a node was left to the CPU";

  // At every N, patched as the engine patches a call: the Shape kernel's values are [2, N] and
  // the Range kernel's start, delta and length 3, 1 and N.
  auto blobs = build_blobs(testing::size_arithmetic_model(), dims(48));
  ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
  ASSERT_EQ(blobs->size(), 1u);
  std::vector<uint8_t> shared;
  size_t checked = 0;
  for (const auto& e : engines_of((*blobs)[0], &shared)) {
    const testing::AlignedBytes aligned(e);
    auto blob = cuda::EngineBlob::parse(aligned.span(), shared);
    ASSERT_TRUE(blob.ok()) << blob.status().to_string();
    ASSERT_TRUE(blob->dynamic());
    const cuda::SymbolRecord& n_range = blob->symbols()[0];
    for (int64_t n = n_range.min; n <= n_range.max; ++n) {
      SCOPED_TRACE(n);
      const Patched p = patch(*blob, {n});
      bool shape = false, range = false;
      for (const cuda::StepRecord& r : p.steps) {
        if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel)) continue;
        const std::string_view name = blob->kernel_name(r.kernel.kernel);
        const std::vector<int64_t> args(p.args.begin() + r.kernel.first_arg,
                                        p.args.begin() + r.kernel.first_arg + r.kernel.num_args);
        if (name.find("shape") != std::string_view::npos) {
          EXPECT_EQ(args, (std::vector<int64_t>{2, n}));
          shape = true;
        } else if (name.find("range") != std::string_view::npos) {
          EXPECT_EQ(args, (std::vector<int64_t>{3, 1, n}));
          range = true;
        }
      }
      EXPECT_TRUE(shape && range) << "the engine has a Shape and a Range kernel";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48u) << "every N in 1..48, over the buckets";
}

// A dynamic engine's LayerNorm picks a warp or a block per row when it runs: the dynamic MLP's
// LayerNorm over N rows of 96, N in 1..2048, patched at row counts on both sides of 1024, launches
// N blocks (one a row) below 1024 rows and N / 4 blocks (a warp a row) from 1024 on, blocks of 128
// threads throughout, and its kernel compares the row count with 1024 itself. A choice fixed at
// the largest sizes gave every call a warp per row.
TEST(DynamicEngineTest, LayerNormPicksAWarpOrABlockPerRowAtEachCall) {
  auto dynamic = build_blobs(dynamic_mlp().bytes(), dims(2048));
  ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  std::vector<uint8_t> shared;
  const auto engines = engines_of((*dynamic)[0], &shared);
  const testing::AlignedBytes aligned(engines.back());
  auto blob = cuda::EngineBlob::parse(aligned.span(), shared);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  size_t ln = SIZE_MAX;
  for (size_t s = 0; s < blob->steps().size(); ++s) {
    const cuda::StepRecord& r = blob->steps()[s];
    if (r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
        blob->kernel_name(r.kernel.kernel).find("layer_norm") != std::string_view::npos) {
      ln = s;
    }
  }
  ASSERT_NE(ln, SIZE_MAX);
  for (const auto& [n, grid] : std::vector<std::pair<int64_t, uint32_t>>{
           {2, 2}, {5, 5}, {1023, 1023}, {1024, 256}, {1025, 257}, {2048, 512}}) {
    SCOPED_TRACE(n);
    const Patched p = patch(*blob, {n});
    EXPECT_EQ(p.steps[ln].kernel.grid[0], grid);
    EXPECT_EQ(p.steps[ln].kernel.block[0], 128u);
    EXPECT_EQ(p.args[p.steps[ln].kernel.first_arg], n) << "the row count it compares";
  }
}

// A dynamic BERT computes its token type and position ids and its attention mask's indices from
// the sizes (Shape, Range, integer arithmetic, comparisons: what a static compile folds). Those
// kernels are flagged kKernelSizeOnly, for the runtime to run once per shape: each reads only
// weights and what earlier flagged kernels wrote, and their results lie in one block at the end
// of scratch, within kMaxSizeOnlyBytes, that no other step's buffers straddle and no library step
// writes. The kernels that read the inputs (the word embeddings, the mask's values) are not
// flagged, and a static engine has no flagged kernel. The gather-view pass turns most of those
// chains into views (GatherViewsLeaveTheDynamicEngineTheStaticOnesKernels below); without it
// they are what the mechanism exists for (a causal mask's comparisons still are).
TEST(DynamicEngineTest, KernelsOfSizesAloneAreFlaggedToRunOncePerShape) {
  compiler::CompileOptions o;
  o.dims = {{"batch", 1, 8, 0, {}}, {"sequence", 1, 64, 0, {}}};
  o.disabled_passes = {"gather-view"};
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto blobs = build_file_blobs("torchscript17_bert", o, precision);
    ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
    ASSERT_EQ(blobs->size(), 1u);
    std::vector<uint8_t> shared;
    const auto engines = engines_of((*blobs)[0], &shared);
    const testing::AlignedBytes aligned(engines.back());  // the widest bucket
    auto blob = cuda::EngineBlob::parse(aligned.span(), shared);
    ASSERT_TRUE(blob.ok()) << blob.status().to_string();
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t flagged = 0;
    std::set<std::string> names;
    for (const cuda::StepRecord& r : blob->steps()) {
      if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel) ||
          (r.kernel.flags & cuda::kKernelSizeOnly) == 0) {
        continue;
      }
      ++flagged;
      names.insert(std::string(blob->kernel_name(r.kernel.kernel)));
      for (uint32_t i = 0; i < r.kernel.num_operands; ++i) {
        const cuda::BufferRef& ref = r.kernel.operands[i];
        EXPECT_NE(ref.space, static_cast<uint32_t>(cuda::Space::Binding))
            << blob->kernel_name(r.kernel.kernel) << " reads an input";
        if (ref.space != static_cast<uint32_t>(cuda::Space::Scratch)) continue;
        lo = std::min(lo, ref.offset);
        hi = std::max(hi, ref.offset + ref.bytes);
      }
    }
    EXPECT_GE(flagged, 10u);
    for (const char* what : {"shape", "range", "integer", "logical", "expand"}) {
      bool seen = false;
      for (const std::string& n : names) seen |= n.find(what) != std::string::npos;
      EXPECT_TRUE(seen) << "no flagged " << what << " kernel";
    }
    ASSERT_LT(lo, hi);
    EXPECT_LE(hi - lo, cuda::kMaxSizeOnlyBytes);
    EXPECT_LE(hi, blob->header().scratch_bytes);
    size_t readers = 0;
    for (const cuda::StepRecord& r : blob->steps()) {
      std::vector<cuda::BufferRef> refs;
      bool library = true;
      if (r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel)) {
        refs.assign(r.kernel.operands, r.kernel.operands + r.kernel.num_operands);
        library = false;
        if (r.kernel.flags & cuda::kKernelSizeOnly) continue;
      } else if (r.kind == static_cast<uint32_t>(cuda::StepKind::Gemm) ||
                 r.kind == static_cast<uint32_t>(cuda::StepKind::Matmul)) {
        refs = {r.gemm.d};  // what it writes
      } else if (r.kind == static_cast<uint32_t>(cuda::StepKind::Sdpa)) {
        refs = {r.sdpa.o};
      } else if (r.kind == static_cast<uint32_t>(cuda::StepKind::Conv)) {
        refs = {r.conv.y};
      } else if (r.kind == static_cast<uint32_t>(cuda::StepKind::Copy)) {
        refs = {r.copy.dst};
      }
      for (const cuda::BufferRef& ref : refs) {
        if (ref.space != static_cast<uint32_t>(cuda::Space::Scratch)) continue;
        const bool inside = ref.offset >= lo && ref.offset + ref.bytes <= hi;
        const bool outside = ref.offset + ref.bytes <= lo || ref.offset >= hi;
        EXPECT_TRUE(inside || outside) << "a buffer straddles the size-only block";
        EXPECT_FALSE(library && inside) << "a library step writes into the size-only block";
        readers += inside;
      }
    }
    EXPECT_GE(readers, 2u) << "the embeddings and the mask read size-only values";

    compiler::CompileOptions fixed;
    fixed.input_shapes = {{"input_ids", {8, 64}}, {"attention_mask", {8, 64}}};
    auto st = build_file_blobs("torchscript17_bert", fixed, precision);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    const testing::AlignedBytes st_aligned((*st)[0]);
    auto st_blob = cuda::EngineBlob::parse(st_aligned.span());
    ASSERT_TRUE(st_blob.ok()) << st_blob.status().to_string();
    for (const cuda::StepRecord& r : st_blob->steps()) {
      if (r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel)) {
        EXPECT_EQ(r.kernel.flags & cuda::kKernelSizeOnly, 0u);
      }
    }
    EXPECT_LT(st_blob->steps().size() + 6, blob->steps().size())
        << "the static engine folds what the dynamic one computes";
  }
}

// The steps a dynamic engine runs at every call (all but those flagged to run once per shape).
size_t steps_per_call(const cuda::EngineBlob& blob) {
  size_t n = 0;
  for (const cuda::StepRecord& r : blob.steps()) {
    n += !(r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
           (r.kernel.flags & cuda::kKernelSizeOnly) != 0);
  }
  return n;
}

// With the gather-view pass (the position and token type embeddings and the mask's gather become
// views and a constant row), the 1 MiB size-only block (GPT-2's causal comparisons) and
// AddLayerNorm's broadcast residual (the position embedding added to the tokens'), the dynamic
// BERT's and GPT-2's widest engines run no more steps per call than the static engines at their
// largest shape, which fold all of that; without the pass they run more.
TEST(DynamicEngineTest, GatherViewsLeaveTheDynamicEngineTheStaticOnesKernels) {
  for (const char* model : {"torchscript17_bert", "torchscript17_gpt2"}) {
    SCOPED_TRACE(model);
    compiler::CompileOptions fixed;
    fixed.input_shapes = {{"input_ids", {8, 64}}, {"attention_mask", {8, 64}}};
    auto st = build_file_blobs(model, fixed, "fp16");
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    const testing::AlignedBytes st_aligned((*st)[0]);
    auto st_blob = cuda::EngineBlob::parse(st_aligned.span());
    ASSERT_TRUE(st_blob.ok()) << st_blob.status().to_string();
    for (bool pass : {true, false}) {
      compiler::CompileOptions o;
      o.dims = {{"batch", 1, 8, 0, {}}, {"sequence", 1, 64, 0, {}}};
      if (!pass) o.disabled_passes = {"gather-view"};
      auto blobs = build_file_blobs(model, o, "fp16");
      ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
      std::vector<uint8_t> shared;
      const auto engines = engines_of((*blobs)[0], &shared);
      const testing::AlignedBytes aligned(engines.back());  // batch 2..8, sequence 2..64
      auto blob = cuda::EngineBlob::parse(aligned.span(), shared);
      ASSERT_TRUE(blob.ok()) << blob.status().to_string();
      if (pass) {
        EXPECT_LE(steps_per_call(*blob), st_blob->steps().size());
      } else {
        EXPECT_GT(steps_per_call(*blob), st_blob->steps().size());
      }
    }
  }
}

// Ids computed from the sizes and concatenated from 17 pieces: more than one kernel takes (16
// pointers), so the Concat is two kernels writing one output in parts. The second reads values of
// sizes alone too, but writes what the first wrote, so neither may run once per shape (the second
// would run at every call into a block the graph's copy keeps): no Concat kernel is flagged, nor
// the Gather that reads their output, while the Ranges before them are.
OnnxBuilder seventeen_ranges() {
  OnnxBuilder b(17);
  b.input("x", {-1, 4});
  b.node("Shape", {"x"}, {"shape"}, "shape");
  b.initializer_int64("zero", {}, {0});
  b.initializer_int64("one", {}, {1});
  b.node("Gather", {"shape", "zero"}, {"n"}, "n");
  std::vector<std::string> pieces;
  for (int i = 0; i < 17; ++i) {
    const std::string c = "c" + std::to_string(i), end = "end" + std::to_string(i),
                      r = "r" + std::to_string(i);
    b.initializer_int64(c, {}, {i});
    b.node("Add", {"n", c}, {end}, "end" + std::to_string(i));
    b.node("Range", {c, end, "one"}, {r}, "range" + std::to_string(i));
    pieces.push_back(r);
  }
  auto& concat = b.node("Concat", pieces, {"ids"}, "concat");
  OnnxBuilder::attr_int(concat, "axis", 0);
  std::vector<float> table(80 * 4);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.01f * static_cast<float>(i % 97);
  b.initializer("table", {80, 4}, table);
  b.node("Gather", {"table", "ids"}, {"rows"}, "rows");
  b.output("rows", {-1, 4});
  return b;
}

TEST(DynamicEngineTest, AValueWrittenInPartsIsNotKeptOncePerShape) {
  auto blobs = build_blobs(seventeen_ranges().bytes(), dims(48));
  ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
  ASSERT_EQ(blobs->size(), 1u) << "one GPU partition";
  std::vector<uint8_t> shared;
  const auto engines = engines_of((*blobs)[0], &shared);
  const testing::AlignedBytes aligned(engines.back());
  auto blob = cuda::EngineBlob::parse(aligned.span(), shared);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  size_t concats = 0, ranges = 0, gathers = 0;
  for (const cuda::StepRecord& r : blob->steps()) {
    if (r.kind != static_cast<uint32_t>(cuda::StepKind::Kernel)) continue;
    const std::string_view name = blob->kernel_name(r.kernel.kernel);
    const bool flagged = (r.kernel.flags & cuda::kKernelSizeOnly) != 0;
    if (name.find("concat") != std::string_view::npos) {
      ++concats;
      EXPECT_FALSE(flagged) << name << ": its output is written in parts";
    } else if (name.find("range") != std::string_view::npos) {
      ranges += flagged;
    } else if (name.find("gather") != std::string_view::npos) {
      ++gathers;
      EXPECT_FALSE(flagged) << name << " reads what the Concat kernels write";
    }
  }
  EXPECT_GE(concats, 2u) << "the Concat is more than one kernel";
  EXPECT_EQ(ranges, 17u) << "the Ranges compute from the sizes alone";
  EXPECT_GE(gathers, 1u);
}

// What the builder cannot make one engine of is refused, saying what differs, where, and the way
// out. Two cases: more symbols than the probe grid takes (five; 3^5 lowerings), and a lowering
// that changes with the sizes in more than sizes: an elementwise chain over [3, N] is read 4
// floats at a time where 3N divides by 4 and one at a time elsewhere, a different kernel (a
// limit of step 2, docs/gpu_dynamic_shapes.md).
// An elementwise chain over [3, N] reads 4 floats at a time where 3N divides by 4 and one at a
// time elsewhere: the kernel checks the divisibility when it runs (codegen.cpp's vector_width),
// so it is one kernel at every N, and one engine (with the unit N's bucket); dynamic_gpu_test
// runs it at every N against the CPU.
TEST(DynamicEngineTest, AVectorizedChainChecksItsDivisibilityWhenItRuns) {
  OnnxBuilder b(17);
  b.input("x", {3, -1});
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Sigmoid", {"r"}, {"y"}, "sigmoid");
  b.output("y", {3, -1});
  auto blobs = build_blobs(b.bytes(), dims(4096));
  ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
  ASSERT_EQ(blobs->size(), 1u);
  const auto engines = engines_of((*blobs)[0]);
  ASSERT_GE(engines.size(), 1u);
  const testing::AlignedBytes aligned(engines.back());
  const cuda::EngineBlob blob = cuda::EngineBlob::parse(aligned.span()).value();
  ASSERT_TRUE(blob.dynamic());
  EXPECT_EQ(blob.symbols()[0].max, 4096);
  ASSERT_EQ(blob.steps().size(), 1u);
  // The vector loop's grid follows 3N through one expression, 4 elements per thread.
  for (const int64_t n : {5, 8, 1001, 4096}) {
    const Patched p = patch(blob, {n});
    EXPECT_EQ(p.steps[0].kernel.grid[0], static_cast<uint32_t>((3 * n + 1023) / 1024)) << n;
    EXPECT_EQ(p.bindings[0], (std::vector<int64_t>{3, n}));
  }
}

TEST(DynamicEngineTest, WhatCannotBeOneEngineIsRefusedWithTheWayOut) {
  {
    OnnxBuilder five(17);
    five.input("x", {-1, -1, -1, -1, -1});
    five.node("Relu", {"x"}, {"y"}, "relu");
    five.output("y", {-1, -1, -1, -1, -1});
    // OnnxBuilder names every open dimension "N": give them names of their own.
    onnx::ModelProto model;
    const std::vector<uint8_t> bytes = five.bytes();
    ASSERT_TRUE(model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
    for (auto* list :
         {model.mutable_graph()->mutable_input(), model.mutable_graph()->mutable_output()}) {
      auto* shape = list->Mutable(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
      for (int d = 0; d < shape->dim_size(); ++d) {
        shape->mutable_dim(d)->set_dim_param(std::string(1, static_cast<char>('A' + d)));
      }
    }
    std::string renamed;
    model.SerializeToString(&renamed);
    compiler::CompileOptions o;
    for (char c = 'A'; c <= 'E'; ++c) o.dims.push_back({std::string(1, c), 1, 2, 0, {}});
    auto blobs = build_blobs(std::vector<uint8_t>(renamed.begin(), renamed.end()), o);
    ASSERT_FALSE(blobs.ok());
    EXPECT_EQ(blobs.code(), Error::NotSupported);
    EXPECT_NE(blobs.status().message().find(
                  "has 5 dynamic symbols; a GPU engine takes at most 4: fix the others with "
                  "--shape"),
              std::string::npos)
        << blobs.status().message();
  }
  // A sum that keeps a dynamic innermost axis reads it in vectors of 4 floats where its length
  // allows (64) and one at a time where it does not (2): two kernels, which one engine cannot be.
  OnnxBuilder b(17);
  b.input("x", {64, -1});
  b.initializer_int64("axes", {1}, {0});
  b.node("ReduceSum", {"x", "axes"}, {"y"}, "sum");
  b.output("y", {1, -1});
  auto blobs = build_blobs(b.bytes(), dims(64));
  ASSERT_FALSE(blobs.ok());
  EXPECT_EQ(blobs.code(), Error::NotSupported);
  const std::string& m = blobs.status().message();
  for (const char* needle :
       {"partition 'cuda_0' cannot be one dynamic engine: at N=", "(against N=64)",
        "kernel k0_reduce is generated differently", "a choice made from the sizes",
        "fix that dimension with --shape, or compile for --device cpu"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << " in " << m;
  }
}

// Convolutions are cuDNN plans built for one shape: a dynamic CNN is refused for the GPU with
// the way out, until dynamic cuDNN graphs land.
// The convolutional families compile over a batch range (issue 37 step 3): one GPU partition,
// dynamic engines whose cuDNN convolutions take the batch through their `n` (the engine builds a
// plan per batch at run time), and MobileNetV3's squeeze-excite layers on cuDNN rather than the
// rows kernel (its image count is a template argument). Patched at each batch, ResNet's engine is
// the static engine of that batch: the same steps, arguments and cubin.
// Patched at a batch, the engine is the static engine of that batch. (With groups, the static
// engine keeps the grouped kernel's sizes in its code, which is faster there: conv.cpp. So the
// comparison takes an ungrouped convolution, and the grouped one is checked to build.)
TEST(DynamicEngineTest, IssueThirtyEightOpsFollowABatchRange) {
  compiler::CompileOptions o;
  o.dims = {{"N", 1, 8, 0, {}}};
  auto grouped = build_blobs(testing::issue_38_ops(-1, 2).bytes(), o);
  ASSERT_TRUE(grouped.ok()) << grouped.status().to_string();
  ASSERT_EQ(grouped->size(), 1u) << "GPU partitions";
  // The CPU path runs the model over the range too (dynamic_gpu_test's reference).
  {
    auto cpu = compiler::compile_bytes(testing::issue_38_ops(-1, 2).bytes(), o);
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    auto program = runtime::Program::load_bytes(*cpu->serialize()).value();
    auto module = extension::Module::from_program(program).value();
    std::mt19937 rng(38);
    auto out = module.run({testing::random_tensor(rng, {3, 8, 6, 6})});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->size(), 4u);
    EXPECT_EQ((*out)[0].sizes(), (std::vector<int64_t>{3, 1, 24, 24}));
    EXPECT_EQ((*out)[3].sizes(), (std::vector<int64_t>{3, 8, 6, 3}));
  }
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto dynamic = build_blobs(testing::issue_38_ops(-1, 1).bytes(), o, precision);
    ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
    ASSERT_EQ(dynamic->size(), 1u) << "GPU partitions";
    std::vector<uint8_t> shared;
    const auto engines = engines_of((*dynamic)[0], &shared);
    const testing::AlignedBytes aligned(engines.back());
    const cuda::EngineBlob dyn = cuda::EngineBlob::parse(aligned.span(), shared).value();
    ASSERT_TRUE(dyn.dynamic());
    EXPECT_EQ(dyn.symbols()[0].max, 8);
    for (const int64_t n : {3, 8}) {
      SCOPED_TRACE(n);
      auto fixed = build_blobs(testing::issue_38_ops(n, 1).bytes(), {}, precision);
      ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
      ASSERT_EQ(fixed->size(), 1u);
      const testing::AlignedBytes st_bytes((*fixed)[0]);
      const cuda::EngineBlob st = cuda::EngineBlob::parse(st_bytes.span()).value();
      const Patched p = expect_patched_is_static(dyn, st, {n});
      EXPECT_EQ(p.bindings.back(), (std::vector<int64_t>{n, 8, 6, 3}));
    }
  }
}

// Concats read in place by their elementwise readers (no Concat kernel) follow the sizes: a dense
// block over a batch range, and a Concat along a dynamic axis (its inputs' extents, where each
// ends and the axis's extent are kernel arguments of the sizes), patched to a size, are the
// static engines there.
TEST(DynamicEngineTest, ConcatsReadInPlaceFollowTheSizes) {
  auto concat_kernels = [](const cuda::EngineBlob& blob) {
    size_t n = 0;
    for (const cuda::StepRecord& r : blob.steps()) {
      n += r.kind == static_cast<uint32_t>(cuda::StepKind::Kernel) &&
           std::string(blob.kernel_name(r.kernel.kernel)).find("concat") != std::string::npos;
    }
    return n;
  };
  // x [2, N, 16] joined with its Tanh along N, read by a Sigmoid: [2, 2N, 16].
  auto along_n = [](int64_t n) {
    OnnxBuilder b(17);
    b.input("x", {2, n, 16});
    b.node("Tanh", {"x"}, {"t"}, "tanh");
    auto& cat = b.node("Concat", {"x", "t"}, {"c"}, "cat");
    OnnxBuilder::attr_int(cat, "axis", 1);
    b.node("Sigmoid", {"c"}, {"y"}, "sigmoid");
    b.output("y", {2, n < 0 ? n : 2 * n, 16});
    // The output's length is 2N, not N: declared without a shape.
    if (n < 0) b.graph().mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    return b;
  };
  compiler::CompileOptions o;
  o.dims = {{"N", 1, 8, 0, {}}};
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    for (const bool block : {true, false}) {
      SCOPED_TRACE(block ? "dense block" : "along N");
      auto dynamic =
          build_blobs((block ? testing::dense_block(-1, 3, 8) : along_n(-1)).bytes(), o, precision);
      ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
      ASSERT_EQ(dynamic->size(), 1u) << "GPU partitions";
      std::vector<uint8_t> shared;
      const auto engines = engines_of((*dynamic)[0], &shared);
      const testing::AlignedBytes aligned(engines.back());
      const cuda::EngineBlob dyn = cuda::EngineBlob::parse(aligned.span(), shared).value();
      ASSERT_TRUE(dyn.dynamic());
      EXPECT_EQ(concat_kernels(dyn), 0u);
      for (const int64_t n : {3, 8}) {
        SCOPED_TRACE(n);
        auto fixed = build_blobs((block ? testing::dense_block(n, 3, 8) : along_n(n)).bytes(), {},
                                 precision);
        ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
        ASSERT_EQ(fixed->size(), 1u);
        const testing::AlignedBytes st_bytes((*fixed)[0]);
        const cuda::EngineBlob st = cuda::EngineBlob::parse(st_bytes.span()).value();
        EXPECT_EQ(concat_kernels(st), 0u);
        expect_patched_is_static(dyn, st, {n});
      }
    }
  }
}

TEST(DynamicEngineTest, ConvolutionalFamiliesCompileOverABatchRange) {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"torchscript17_resnet", "batch"},     {"dynamo18dyn_resnet", "s77"},
      {"torchscript17_mobilenet", "batch"},  {"dynamo18dyn_mobilenet", "s77"},
      {"torchscript17_squeezenet", "batch"}, {"dynamo18dyn_squeezenet", "s77"}};
  for (const auto& [name, symbol] : models) {
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(name + " " + precision);
      compiler::CompileOptions o;
      o.dims = {{symbol, 1, 16, 0, {}}};
      auto blobs = build_file_blobs(name, o, precision);
      ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
      ASSERT_EQ(blobs->size(), 1u) << "GPU partitions";
      std::vector<uint8_t> shared;
      const auto engines = engines_of((*blobs)[0], &shared);
      ASSERT_EQ(engines.size(), 2u) << "the unit batch, then 2..16";
      const testing::AlignedBytes aligned(engines[1]);
      const cuda::EngineBlob blob = cuda::EngineBlob::parse(aligned.span(), shared).value();
      ASSERT_TRUE(blob.dynamic());
      EXPECT_EQ(blob.symbols()[0].min, 2);
      EXPECT_EQ(blob.symbols()[0].max, 16);
      std::set<uint32_t> n_patched;
      for (const cuda::PatchRecord& p : blob.patches()) {
        // The steps are a union: the same offset is another field of another kind's step.
        if (p.target == static_cast<uint8_t>(cuda::PatchTarget::StepField) &&
            blob.steps()[p.index].kind == static_cast<uint32_t>(cuda::StepKind::Conv) &&
            p.offset == offsetof(cuda::StepRecord, conv) + offsetof(cuda::ConvStep, n)) {
          n_patched.insert(p.index);
        }
      }
      size_t convs = 0;
      for (size_t s = 0; s < blob.steps().size(); ++s) {
        if (blob.steps()[s].kind != static_cast<uint32_t>(cuda::StepKind::Conv)) continue;
        ++convs;
        EXPECT_EQ(n_patched.count(static_cast<uint32_t>(s)), 1u) << "conv step " << s;
      }
      EXPECT_GE(convs, 5u);
      EXPECT_EQ(n_patched.size(), convs);
    }
  }
  // ResNet patched at each batch against its static engine at that batch (above 8 images: at 8
  // or fewer the static engine runs its last 1x1-over-1x1 convolution as the rows kernel, which
  // a dynamic batch does not; dynamic_gpu_test checks those batches' results).
  compiler::CompileOptions o;
  o.dims = {{"batch", 1, 16, 0, {}}};
  auto blobs = build_file_blobs("torchscript17_resnet", o);
  ASSERT_TRUE(blobs.ok()) << blobs.status().to_string();
  std::vector<uint8_t> shared;
  const auto engines = engines_of((*blobs)[0], &shared);
  ASSERT_EQ(engines.size(), 2u);
  const testing::AlignedBytes aligned(engines[1]);
  const cuda::EngineBlob dyn = cuda::EngineBlob::parse(aligned.span(), shared).value();
  for (const int64_t n : {9, 12, 15, 16}) {
    SCOPED_TRACE(n);
    compiler::CompileOptions fixed;
    fixed.input_shapes = {{"input", {n, 3, 32, 32}}};
    auto stat = build_file_blobs("torchscript17_resnet", fixed);
    ASSERT_TRUE(stat.ok()) << stat.status().to_string();
    const testing::AlignedBytes st_bytes((*stat)[0]);
    const cuda::EngineBlob st = cuda::EngineBlob::parse(st_bytes.span()).value();
    EXPECT_FALSE(st.dynamic());
    expect_patched_is_static(dyn, st, {n});
  }
}

// Compiles `model(-1)` over N in 1..max and `model(max)` static, in `precision`: one GPU partition
// each, and the dynamic one's widest engine patched at N = max is the static engine, field for
// field. Returns the static engine's step count.
size_t expect_widest_engine_is_static_at_max(const std::function<OnnxBuilder(int64_t)>& model,
                                             int64_t max, const std::string& precision) {
  auto dynamic = build_blobs(model(-1).bytes(), dims(max), precision);
  EXPECT_TRUE(dynamic.ok()) << dynamic.status().to_string();
  if (!dynamic.ok() || dynamic->size() != 1) {
    ADD_FAILURE() << "expected one GPU partition";
    return 0;
  }
  std::vector<uint8_t> shared;
  const auto engines = engines_of((*dynamic)[0], &shared);
  const testing::AlignedBytes aligned(engines.back());
  const cuda::EngineBlob dyn = cuda::EngineBlob::parse(aligned.span(), shared).value();
  EXPECT_TRUE(dyn.dynamic());
  EXPECT_EQ(dyn.symbols()[0].max, max);
  auto fixed = build_blobs(model(max).bytes(), {}, precision);
  EXPECT_TRUE(fixed.ok()) << fixed.status().to_string();
  if (!fixed.ok() || fixed->size() != 1) return 0;
  const testing::AlignedBytes st_bytes((*fixed)[0]);
  const cuda::EngineBlob st = cuda::EngineBlob::parse(st_bytes.span()).value();
  expect_patched_is_static(dyn, st, {max});
  return st.steps().size();
}

// A GEMM whose columns are not a multiple of 8 has them padded when it is large enough (gemm.cpp):
// at the engine's maxima, so that a classifier of 1001 classes over a batch range pads at every
// batch (it was refused at batch 2, which lowered without the padding), and patched to batch 64
// it is the static engine of batch 64.
TEST(DynamicEngineTest, AGemmPaddedAtItsMaximaIsPaddedAtEverySize) {
  auto model = [](int64_t n) {
    OnnxBuilder b(17);
    b.input("x", {n, 1024});
    std::vector<float> w(1024 * 1001);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.002f * static_cast<float>((i * 7) % 13) - 0.01f;
    b.initializer("w", {1024, 1001}, w);
    b.node("MatMul", {"x", "w"}, {"y"}, "classifier");
    b.output("y", {n, 1001});
    return b;
  };
  // The static engine of batch 64 pads (a GEMM step and the gather of the padded columns).
  EXPECT_EQ(expect_widest_engine_is_static_at_max(model, 64, "fp32"), 2u);
}

// A squeeze-excite block's pool (channels-last, 28x28 positions of 72 channels) is a few blocks
// of columns at a few images, which the lowering gives a wider block. That choice is made at the
// engine's maxima, so the batch range stays one engine (MobileNetV3-Large over batch 1..16 was
// refused at batch 2: a wide block there, the usual one at 16), and patched to batch 16 it is
// the static engine of batch 16.
TEST(DynamicEngineTest, APoolOfFewColumnBlocksKeepsOneBlockSizeOverTheBatchRange) {
  auto model = [](int64_t n) {
    OnnxBuilder b(17);
    b.input("x", {n, 8, 28, 28});
    std::vector<float> w(72 * 8);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>((i * 7) % 13) - 0.06f;
    b.initializer("w", {72, 8, 1, 1}, w);
    b.node("Conv", {"x", "w"}, {"c"}, "conv");
    b.node("GlobalAveragePool", {"c"}, {"y"}, "pool");
    b.output("y", {n, 72, 1, 1});
    return b;
  };
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    // The convolution's layout copy, the convolution, the pool.
    EXPECT_GE(expect_widest_engine_is_static_at_max(model, 16, precision), 3u);
  }
}

}  // namespace
}  // namespace baton
