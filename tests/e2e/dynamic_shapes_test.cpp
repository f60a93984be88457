// Dynamic shapes (issue 36, docs/dynamic_shapes.md) end to end on real torch exports: one program
// compiled with --dim ranges runs at every shape in them, equal bit for bit to the static program
// compiled at that shape; execute() allocates nothing when the shape changes; every bad shape is
// refused by name at the C++ entry points.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/compiler/request.h"
#include "baton/core/check.h"
#include "baton/extension/module.h"
#include "testing/alloc/counting_allocator.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"
#include "testing/random.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

// Every test compiles: the CPU kernels must be registered first.
class Registered : public ::testing::Environment {
 public:
  void SetUp() override { register_builtins(); }
};
const auto* const kRegistered = ::testing::AddGlobalTestEnvironment(new Registered);

// "torchscript17_bert" is a committed real model (models/real); "zoo/NAME" one of issue 38's
// (models/zoo).
fs::path real_model(const std::string& name) {
  const fs::path models = fs::path(testing::source_dir()) / "tests/e2e/models";
  return (name.find('/') == std::string::npos ? models / "real" : models) / (name + ".onnx");
}

// A model of the families with its dynamic inputs: images [batch, 3, H, W] or token ids and a
// mask [batch, sequence].
struct Family {
  std::string model;
  std::vector<compiler::DimRange> dims;
  bool tokens = false;              // input_ids and attention_mask, else one image input
  std::vector<int64_t> image = {};  // C, H, W
  bool mask = true;                 // token models: false for input_ids alone
};

std::vector<Family> families() {
  const std::vector<compiler::DimRange> batch = {{"batch", 1, 6, 0, {}}};
  // Up to 8 x 64 tokens: the largest call is above OpenBLAS's small-matrix limit, smaller ones are
  // below it (a kernel created at the largest must serve both).
  const std::vector<compiler::DimRange> tokens = {{"batch", 1, 8, 0, {}},
                                                  {"sequence", 1, 64, 0, {}}};
  return {
      {"torchscript17_resnet", batch, false, {3, 32, 32}},
      {"torchscript17_mobilenet", batch, false, {3, 64, 64}},
      {"torchscript17_squeezenet", batch, false, {3, 64, 64}},
      {"torchscript17_vit", batch, false, {3, 32, 32}},
      // torch.export's Dim.DYNAMIC names the batch s77 (the dynamo exporter's dim_param).
      {"dynamo18dyn_resnet", {{"s77", 1, 6, 0, {}}}, false, {3, 32, 32}},
      {"dynamo18dyn_mobilenet", {{"s77", 1, 6, 0, {}}}, false, {3, 64, 64}},
      {"dynamo18dyn_squeezenet", {{"s77", 1, 6, 0, {}}}, false, {3, 64, 64}},
      {"dynamo18dyn_vit", {{"s77", 1, 6, 0, {}}}, false, {3, 32, 32}},
      {"torchscript17_bert", tokens, true},
      {"torchscript17_gpt2", tokens, true},
      // torch.export names each input's dimensions: input_ids [s33, s50], attention_mask
      // [s6, s50] (GPT-2's [s6, s81]); --dim s6=s33 says they are one (batch first, then sequence).
      {"dynamo18dyn_bert",
       {{"s33", 1, 8, 0, {}}, {"s50", 1, 64, 0, {}}, {"s6", 0, 0, 0, "s33"}},
       true},
      {"dynamo18dyn_gpt2",
       {{"s33", 1, 8, 0, {}},
        {"s50", 1, 64, 0, {}},
        {"s6", 0, 0, 0, "s33"},
        {"s81", 0, 0, 0, "s50"}},
       true},
      // An LSTM tagger (issue 38): a bidirectional two-layer LSTM over a dynamic batch and
      // sequence length, token ids alone.
      {"zoo/torchscript17_lstm_tagger", tokens, true, {}, false},
  };
}

Result<std::shared_ptr<const runtime::Program>> compile(
    const Family& f, const std::vector<compiler::InputShape>& shapes) {
  compiler::CompileOptions options;
  if (shapes.empty()) {
    options.dims = f.dims;
  } else {
    options.input_shapes = shapes;
  }
  BATON_ASSIGN_OR_RETURN(auto compiled,
                         compiler::compile_file(real_model(f.model).string(), options));
  BATON_ASSIGN_OR_RETURN(auto bytes, compiled.serialize());
  return runtime::Program::load_bytes(bytes);
}

// Inputs of one shape (batch, sequence) and their --shape equivalents.
struct Call {
  std::vector<Tensor> inputs;
  std::vector<compiler::InputShape> shapes;
};

Call make_call(const Family& f, int64_t batch, int64_t sequence, std::mt19937& rng) {
  Call c;
  if (f.tokens) {
    const std::vector<int64_t> sizes = {batch, sequence};
    c.inputs.push_back(testing::random_int64_tensor(rng, sizes, 0, 99));
    c.shapes = {{"input_ids", sizes}};
    if (f.mask) {
      c.inputs.push_back(testing::random_int64_tensor(rng, sizes, 0, 1));
      c.shapes.push_back({"attention_mask", sizes});
    }
  } else {
    std::vector<int64_t> sizes = {batch};
    sizes.insert(sizes.end(), f.image.begin(), f.image.end());
    c.inputs.push_back(testing::random_tensor(rng, sizes));
    c.shapes = {{"input", sizes}};
  }
  return c;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The property the design promises: at any in-range shape the dynamic program computes exactly
// what the static program compiled for that shape computes (same kernels, same order of
// operations), including the smallest and largest shapes.
TEST(DynamicShapes, EveryFamilyMatchesItsStaticProgramBitForBitAtRandomShapes) {
  std::mt19937 rng(2026);
  for (const Family& f : families()) {
    SCOPED_TRACE(f.model);
    auto dynamic = compile(f, {});
    ASSERT_TRUE(dynamic.ok()) << dynamic.status().to_string();
    auto module = extension::Module::from_program(*dynamic);
    ASSERT_TRUE(module.ok()) << module.status().to_string();
    const int64_t max_batch = f.dims[0].max;
    const int64_t max_seq = f.tokens ? f.dims[1].max : 0;
    std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {max_batch, max_seq}};
    for (int k = 0; k < 3; ++k) {
      shapes.emplace_back(std::uniform_int_distribution<int64_t>(1, max_batch)(rng),
                          f.tokens ? std::uniform_int_distribution<int64_t>(1, max_seq)(rng) : 0);
    }
    for (const auto& [batch, seq] : shapes) {
      SCOPED_TRACE(fmt::format("batch {} sequence {}", batch, seq));
      const Call call = make_call(f, batch, seq, rng);
      auto ours = module->run(call.inputs);
      ASSERT_TRUE(ours.ok()) << ours.status().to_string();
      auto fixed = compile(f, call.shapes);
      ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
      auto fixed_module = extension::Module::from_program(*fixed);
      ASSERT_TRUE(fixed_module.ok());
      auto theirs = fixed_module->run(call.inputs);
      ASSERT_TRUE(theirs.ok()) << theirs.status().to_string();
      ASSERT_EQ(ours->size(), theirs->size());
      for (size_t o = 0; o < ours->size(); ++o) {
        EXPECT_EQ((*ours)[o].sizes(), (*theirs)[o].sizes());
        EXPECT_TRUE(same_bytes((*ours)[o], (*theirs)[o])) << "output " << o;
      }
    }
  }
}

// Changing shape between calls costs no allocation: sizes are resolved into storage made at load
// and kernels resize in place. Each shape runs once first (OpenBLAS sets up per-thread buffers
// the first time a size class reaches it); then the shapes alternate under the counter.
TEST(DynamicShapes, ExecuteAllocatesNothingWhenTheShapeChanges) {
  if (!testing::counting_available())
    GTEST_SKIP() << "allocation counting is off (sanitizer build)";
  for (const Family& f : {families()[0], families()[8], families()[12]}) {
    SCOPED_TRACE(f.model);
    auto program = compile(f, {});
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    runtime::MethodOptions options;
    options.threads = 2;
    auto method = (*program)->load_method("forward", options);
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    std::mt19937 rng(5);
    std::vector<Call> calls;
    for (auto [b, s] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {6, 64}, {2, 7}, {3, 1}}) {
      calls.push_back(make_call(f, b, s, rng));
    }
    auto set = [&](const Call& c) {
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        ASSERT_TRUE((*method)->set_input(i, c.inputs[i].view()).ok());
      }
    };
    for (const Call& c : calls) {
      set(c);
      ASSERT_TRUE((*method)->execute().ok());
    }
    for (int round = 0; round < 2; ++round) {
      for (const Call& c : calls) {
        set(c);
        testing::CountAllocations count;
        const Status st = (*method)->execute();
        EXPECT_EQ(count.count(), 0) << "execute() at " << shape_to_string(c.inputs[0].sizes());
        ASSERT_TRUE(st.ok()) << st.to_string();
        EXPECT_EQ((*method)->output(0).sizes[0], c.inputs[0].sizes()[0]);
      }
    }
  }
}

// Method::prepare_shape (issue 37: shapes made ready ahead of their first call). On the CPU
// there is nothing to prepare, but the shape is checked by name and range, and preparing changes
// nothing a call sees: a call after it, with the inputs set before it, has their sizes and
// values (the prepared sizes are put back). Bad shapes, given here or as MethodOptions at load,
// are refused naming the symbol and what to give.
TEST(DynamicShapes, PreparingAShapeChecksItAndChangesNothingACallSees) {
  const Family bert = families()[8];
  auto program = compile(bert, {});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  runtime::MethodOptions options;
  options.threads = 1;
  options.prepare_shapes = {{{"batch", 1}, {"sequence", 16}}, {{"sequence", 64}, {"batch", 8}}};
  auto method = (*program)->load_method("forward", options);
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  runtime::Method& m = **method;
  std::mt19937 rng(11);
  const Call call = make_call(bert, 2, 5, rng);
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    ASSERT_TRUE(m.set_input(i, call.inputs[i].view()).ok());
  }
  ASSERT_TRUE(m.execute().ok());
  const TensorView first = m.output(0);
  ASSERT_EQ(first.sizes[0], 2);
  ASSERT_EQ(first.sizes[1], 5);
  std::vector<std::byte> want(static_cast<const std::byte*>(first.data),
                              static_cast<const std::byte*>(first.data) + first.nbytes());
  const std::vector<runtime::SymbolSize> other = {{"batch", 7}, {"sequence", 33}};
  ASSERT_TRUE(m.prepare_shape(other).ok());
  // The next call resolves nothing (its inputs did not change): it runs at the sizes left.
  ASSERT_TRUE(m.execute().ok());
  const TensorView again = m.output(0);
  EXPECT_EQ(std::vector<int64_t>(again.sizes.begin(), again.sizes.end()),
            std::vector<int64_t>(first.sizes.begin(), first.sizes.end()));
  ASSERT_EQ(again.nbytes(), want.size());
  EXPECT_EQ(std::memcmp(again.data, want.data(), want.size()), 0);
  EXPECT_EQ(m.input_info(0).sizes[1], 5);

  auto refused = [&](std::vector<runtime::SymbolSize> sizes, std::vector<std::string> needles) {
    const Status st = m.prepare_shape(sizes);
    EXPECT_EQ(st.code(), Error::InvalidArgument) << st.to_string();
    for (const std::string& needle : needles) {
      EXPECT_NE(st.message().find(needle), std::string::npos) << needle << " in " << st.message();
    }
  };
  refused({{"batch", 1}, {"sequnce", 8}}, {"no symbol 'sequnce'", "batch, sequence"});
  refused({{"batch", 1}}, {"no size for 'sequence'", "each of batch, sequence"});
  refused({{"batch", 9}, {"sequence", 8}}, {"batch=9", "1..8"});
  refused({{"batch", 1}, {"batch", 2}, {"sequence", 8}}, {"gives 'batch' twice"});
  // Refused at load too, by name.
  runtime::MethodOptions typo;
  typo.prepare_shapes = {{{"batch", 1}, {"sequence", 0}}};
  auto failed = (*program)->load_method("forward", typo);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("sequence=0, outside the range 1..64"),
            std::string::npos)
      << failed.status().message();
  // A static method prepares its one shape, named by nothing.
  const Family resnet = families()[0];
  auto fixed = compile(resnet, {{"input", {2, 3, 32, 32}}});
  ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
  auto fixed_method = (*fixed)->load_method("forward");
  ASSERT_TRUE(fixed_method.ok());
  EXPECT_TRUE((*fixed_method)->prepare_shape({}).ok());
  const std::vector<runtime::SymbolSize> named = {{"batch", 2}};
  const Status st = (*fixed_method)->prepare_shape(named);
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  EXPECT_NE(st.message().find("no dynamic dimension"), std::string::npos) << st.message();
}

// The text form the CLI's --prepare-shape and tools take.
TEST(DynamicShapes, ShapesToPrepareParseFromNameEqualsSizeLists) {
  auto parsed = runtime::parse_symbol_sizes("batch=1,sequence=16");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].name, "batch");
  EXPECT_EQ((*parsed)[0].size, 1);
  EXPECT_EQ((*parsed)[1].name, "sequence");
  EXPECT_EQ((*parsed)[1].size, 16);
  // No sizes at all: a static method's one shape.
  auto none = runtime::parse_symbol_sizes("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  for (const char* bad :
       {"batch", "batch=", "=4", "batch=1,", "batch=x", "batch=-1", "batch=1;s=2"}) {
    auto r = runtime::parse_symbol_sizes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Error::InvalidArgument);
    EXPECT_NE(r.status().message().find("is not NAME=SIZE"), std::string::npos)
        << r.status().message();
  }
}

// NonZero's count is a data-dependent size: a symbol the kernel binds while the call runs, after
// which the sizes that depend on it are resolved again. x [4, 6] -> NonZero -> Transpose ->
// GatherND(x) -> Sigmoid: at counts from 0 to all 24, the outputs have the count's sizes and the
// right values, the calls allocate nothing, and a static caller sees the program's one symbol.
TEST(DynamicShapes, NonZerosCountIsBoundWhileTheCallRunsWithoutAllocating) {
  testing::OnnxBuilder b;
  b.input("x", {4, 6});
  b.node("NonZero", {"x"}, {"nz"}, "nz");
  auto* perm = b.node("Transpose", {"nz"}, {"idx"}, "tr").add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  b.node("GatherND", {"x", "idx"}, {"vals"}, "gnd");
  b.node("Sigmoid", {"vals"}, {"y"}, "sig");
  b.output("idx", {-1, 2}, onnx::TensorProto::INT64);
  b.output("y", {-1});
  std::string bytes;
  ASSERT_TRUE(b.model().SerializeToString(&bytes));
  auto compiled = compiler::compile_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto serialized = compiled->serialize();
  ASSERT_TRUE(serialized.ok());
  auto program = runtime::Program::load_bytes(*serialized);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward", {});
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  std::mt19937 rng(11);
  std::vector<Tensor> inputs;
  for (double density : {0.5, 0.0, 1.0, 0.2, 0.8}) {
    Tensor x = testing::random_tensor(rng, {4, 6});
    auto* p = static_cast<float*>(x.data());
    for (int i = 0; i < 24; ++i) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= density) p[i] = 0.0f;
    }
    inputs.push_back(std::move(x));
  }
  for (int round = 0; round < 2; ++round) {
    for (const Tensor& x : inputs) {
      ASSERT_TRUE((*method)->set_input(0, x.view()).ok());
      Status st;
      int64_t allocations = 0;
      {
        testing::CountAllocations count;
        st = (*method)->execute();
        allocations = count.count();
      }
      ASSERT_TRUE(st.ok()) << st.to_string();
      if (testing::counting_available()) EXPECT_EQ(allocations, 0);
      const auto* p = static_cast<const float*>(x.data());
      std::vector<int64_t> want_idx;
      std::vector<float> want_y;
      for (int i = 0; i < 24; ++i) {
        if (p[i] == 0.0f) continue;
        want_idx.insert(want_idx.end(), {i / 6, i % 6});
        want_y.push_back(1.0f / (1.0f + std::exp(-p[i])));
      }
      const auto count = static_cast<int64_t>(want_y.size());
      const TensorView idx = (*method)->output(0);
      const TensorView y = (*method)->output(1);
      ASSERT_EQ(std::vector<int64_t>(idx.sizes.begin(), idx.sizes.end()),
                (std::vector<int64_t>{count, 2}));
      ASSERT_EQ(std::vector<int64_t>(y.sizes.begin(), y.sizes.end()), std::vector<int64_t>{count});
      const auto* got_idx = static_cast<const int64_t*>(idx.data);
      const auto* got_y = static_cast<const float*>(y.data);
      for (int64_t k = 0; k < count; ++k) {
        EXPECT_EQ(got_idx[2 * k], want_idx[2 * k]) << k;
        EXPECT_EQ(got_idx[2 * k + 1], want_idx[2 * k + 1]) << k;
        EXPECT_NEAR(got_y[k], want_y[k], 1e-6) << k;
      }
    }
  }
  // The method's one symbol is the count, which the data give, not a call: a shape to prepare
  // names no symbol, and naming the count is refused. The outputs stay the last call's.
  const int64_t last_count = (*method)->output(1).sizes[0];
  EXPECT_TRUE((*method)->prepare_shape({}).ok());
  const std::vector<runtime::SymbolSize> data = {{std::string((*method)->symbol(0).name), 3}};
  const Status st = (*method)->prepare_shape(data);
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  EXPECT_NE(st.message().find("a size the model computes from data"), std::string::npos)
      << st.message();
  EXPECT_EQ((*method)->output(1).sizes[0], last_count);
}

// Token ids of batch 2 beside a mask of batch 3 (one symbol, `batch`, for both): refused when
// the call runs, naming the symbol and both sizes; with the mask fixed, the call runs at 2 x 5.
void expect_disagreeing_batches_refused(runtime::Method& m, const std::string& batch,
                                        std::mt19937& rng) {
  Tensor ids = testing::random_int64_tensor(rng, {2, 5}, 0, 9);
  Tensor mask = testing::random_int64_tensor(rng, {3, 5}, 0, 1);
  ASSERT_TRUE(m.set_input(0, ids.view()).ok());
  ASSERT_TRUE(m.set_input(1, mask.view()).ok());
  Status st = m.execute();
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  for (const std::string& needle : {"'" + batch + "'", std::string("size 2"),
                                    std::string("gives it 3"), std::string("must agree")}) {
    EXPECT_NE(st.message().find(needle), std::string::npos) << needle << " in " << st.message();
  }
  Tensor mask2 = testing::random_int64_tensor(rng, {2, 5}, 0, 1);
  ASSERT_TRUE(m.set_input(1, mask2.view()).ok());
  st = m.execute();
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(m.output(0).sizes[0], 2);
  EXPECT_EQ(m.output(0).sizes[1], 5);
}

TEST(DynamicShapes, BadShapesAreRefusedNamingInputAxisValueAndRange) {
  const Family bert = families()[8];
  auto program = compile(bert, {});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok());
  runtime::Method& m = **method;
  ASSERT_EQ(m.num_symbols(), 2u);
  EXPECT_EQ(m.symbol(0).name, "batch");
  EXPECT_EQ(m.symbol(1).max, 64);
  const std::vector<runtime::Method::Dim> dims = m.input_dims(0);
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_EQ(dims[0].expr, "batch");
  EXPECT_EQ(dims[1].expr, "sequence");
  EXPECT_EQ(dims[1].min, 1);

  std::mt19937 rng(1);
  // Outside the range.
  Tensor long_ids = testing::random_int64_tensor(rng, {2, 65}, 0, 9);
  Status st = m.set_input(0, long_ids.view());
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  for (const char* needle : {"input 0 ('input_ids')", "axis 1 ('sequence')", "size 65", "1..64",
                             "--dim sequence=MIN..MAX"}) {
    EXPECT_NE(st.message().find(needle), std::string::npos) << needle << " in " << st.message();
  }
  // The wrong rank, and the same through bind_input.
  Tensor flat = testing::random_int64_tensor(rng, {8}, 0, 9);
  EXPECT_EQ(m.set_input(0, flat.view()).code(), Error::InvalidArgument);
  EXPECT_EQ(m.bind_input(0, flat.view()).code(), Error::InvalidArgument);
  // Two inputs that share 'batch' but disagree: refused when the call runs.
  expect_disagreeing_batches_refused(m, "batch", rng);
  // A dynamic output binds only memory that holds it at its largest (its sizes are known only
  // once a call has its inputs; output_dims gives each dimension's largest value, output_info
  // the last call's sizes); ADynamicOutputIsWrittenIntoTheCallersMemory binds it.
  std::vector<int64_t> largest;
  for (const runtime::Method::Dim& d : m.output_dims(0)) largest.push_back(d.max);
  std::vector<int64_t> short_by_one = largest;
  --short_by_one[1];
  std::vector<float> sink(1 << 16);
  st = m.bind_output(0, TensorView{sink.data(), DType::Float32, short_by_one, Device::cpu()});
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  for (const std::string& needle : std::vector<std::string>{
           "output 0", "has dynamic sizes, at most " + shape_to_string(largest),
           "bind memory for its largest sizes"}) {
    EXPECT_NE(st.message().find(needle), std::string::npos) << needle << " in " << st.message();
  }
  st = m.bind_output(0, TensorView{sink.data(), DType::Int32, largest, Device::cpu()});
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  EXPECT_NE(st.message().find("expected float32, got int32"), std::string::npos) << st.message();
  st = m.bind_output(0, TensorView{nullptr, DType::Float32, largest, Device::cpu()});
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  EXPECT_NE(st.message().find("output 0 ('output'): the data pointer is null"), std::string::npos)
      << st.message();

  // A static dimension stays fixed.
  const Family resnet = families()[0];
  auto cnn = compile(resnet, {});
  ASSERT_TRUE(cnn.ok());
  auto cnn_method = (*cnn)->load_method("forward");
  ASSERT_TRUE(cnn_method.ok());
  Tensor wide = testing::random_tensor(rng, {2, 3, 32, 33});
  st = (*cnn_method)->set_input(0, wide.view());
  EXPECT_EQ(st.code(), Error::InvalidArgument);
  EXPECT_NE(st.message().find("axis 3 has size 33, but the program fixes it at 32"),
            std::string::npos)
      << st.message();
}

// A dynamic output bound to the caller's memory (sized for its largest sizes, as a serving
// system allocates once): each call writes its result there at the call's sizes, which output()
// reports with the caller's pointer, bit for bit the result the same program writes into its own
// memory; unbinding returns to the program's memory.
TEST(DynamicShapes, ADynamicOutputIsWrittenIntoTheCallersMemory) {
  const Family bert = families()[8];
  auto program = compile(bert, {});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto bound_method = (*program)->load_method("forward");
  auto own_method = (*program)->load_method("forward");
  ASSERT_TRUE(bound_method.ok() && own_method.ok());
  runtime::Method& m = **bound_method;
  runtime::Method& own = **own_method;
  std::vector<int64_t> largest;
  for (const runtime::Method::Dim& d : m.output_dims(0)) largest.push_back(d.max);
  int64_t count = 1;
  for (int64_t d : largest) count *= d;
  std::vector<float> sink(static_cast<size_t>(count), -7.0f);
  ASSERT_TRUE(
      m.bind_output(0, TensorView{sink.data(), DType::Float32, largest, Device::cpu()}).ok());
  std::mt19937 rng(5);
  for (const auto& [batch, sequence] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 5}, {1, 1}, {largest[0], largest[1]}, {3, 17}}) {
    SCOPED_TRACE(fmt::format("{} x {}", batch, sequence));
    const Tensor ids = testing::random_int64_tensor(rng, {batch, sequence}, 0, 99);
    const Tensor mask = testing::random_int64_tensor(rng, {batch, sequence}, 0, 1);
    for (runtime::Method* method : {&m, &own}) {
      ASSERT_TRUE(method->set_input(0, ids.view()).ok());
      ASSERT_TRUE(method->set_input(1, mask.view()).ok());
      const Status st = method->execute();
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    const TensorView got = m.output(0);
    const TensorView want = own.output(0);
    EXPECT_EQ(got.data, static_cast<void*>(sink.data()));
    ASSERT_EQ(std::vector<int64_t>(got.sizes.begin(), got.sizes.end()),
              std::vector<int64_t>(want.sizes.begin(), want.sizes.end()));
    EXPECT_EQ(got.sizes[0], batch);
    EXPECT_EQ(got.sizes[1], sequence);
    EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes()), 0);
  }
  m.unbind_output(0);
  ASSERT_TRUE(m.execute().ok());
  EXPECT_NE(m.output(0).data, static_cast<void*>(sink.data()));
}

TEST(DynamicShapes, CompileErrorsNameEveryOpenDimensionAndEveryBadRange) {
  const std::string bert = real_model("torchscript17_bert").string();
  compiler::CompileOptions none;
  auto r = compiler::compile_file(bert, none);
  ASSERT_FALSE(r.ok());
  for (const char* needle : {"--dim batch=MIN..MAX", "--dim sequence=MIN..MAX",
                             "--shape input_ids=<batch>x<sequence>"}) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << needle << " in " << r.status().message();
  }
  // Only one of the two dimensions given a range: the other is still named.
  compiler::CompileOptions half;
  half.dims = {{"batch", 1, 8, 0, {}}};
  r = compiler::compile_file(bert, half);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'sequence' at axis 1"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find("'batch' at axis 0"), std::string::npos)
      << r.status().message();
  // A range for a dimension the model does not have.
  compiler::CompileOptions typo = half;
  typo.dims.push_back({"sequnce", 1, 8, 0, {}});
  typo.dims.push_back({"sequence", 1, 8, 0, {}});
  r = compiler::compile_file(bert, typo);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'sequnce' is not a symbolic dimension"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("'batch', 'sequence'"), std::string::npos)
      << r.status().message();
  // Ranges that are empty or start at zero, and an OPT outside the range.
  for (const char* text :
       {"batch=0..8", "batch=9..8", "batch=1..8@9", "batch=1-8", "=1..2", "batch=1..x"}) {
    auto d = compiler::parse_dim_range(text);
    EXPECT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.code(), Error::InvalidArgument) << text;
    EXPECT_NE(d.status().message().find(text), std::string::npos) << d.status().message();
  }
  auto d = compiler::parse_dim_range("batch=1..32@8");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->name, "batch");
  EXPECT_EQ(d->min, 1);
  EXPECT_EQ(d->max, 32);
  EXPECT_EQ(d->opt, 8);
}

// torch.export names each input's dimensions separately (input_ids [s33, s50], GPT-2's
// attention_mask [s6, s81]). With a range for each, the model's Reshape (which needs the batches
// equal) fails at compile with the fix named; --dim s6=s33 makes them one symbol, and a call whose
// inputs disagree is refused naming both.
TEST(DynamicShapes, DimensionsTorchExportNamesSeparatelyAreMadeOneWithSameAs) {
  auto alias = compiler::parse_dim_range("s6=s33");
  ASSERT_TRUE(alias.ok()) << alias.status().to_string();
  EXPECT_EQ(alias->name, "s6");
  EXPECT_EQ(alias->same_as, "s33");
  for (const char* text : {"s6=s6", "s6=", "s6=8", "s6=s3 3"}) {
    EXPECT_EQ(compiler::parse_dim_range(text).code(), Error::InvalidArgument) << text;
  }
  // An alias of a dimension without a range, and a chain of aliases.
  compiler::CompileRequest request;
  request.dims = {*alias};
  auto setup = compiler::make_compile_setup(request);
  ASSERT_FALSE(setup.ok());
  EXPECT_NE(setup.status().message().find("'s33', which has no range"), std::string::npos)
      << setup.status().message();
  request.dims.push_back({"s33", 0, 0, 0, "s50"});
  request.dims.push_back({"s50", 1, 8, 0, {}});
  setup = compiler::make_compile_setup(request);
  ASSERT_FALSE(setup.ok());
  EXPECT_NE(setup.status().message().find("itself the same as 's50'"), std::string::npos)
      << setup.status().message();

  const std::string gpt2 = real_model("dynamo18dyn_gpt2").string();
  compiler::CompileOptions separate;
  separate.dims = {
      {"s33", 1, 8, 0, {}}, {"s6", 1, 8, 0, {}}, {"s50", 1, 64, 0, {}}, {"s81", 1, 64, 0, {}}};
  auto r = compiler::compile_file(gpt2, separate);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("say so with --dim s6=s33"), std::string::npos)
      << r.status().message();

  const Family f = families()[11];
  ASSERT_EQ(f.model, "dynamo18dyn_gpt2");
  auto program = compile(f, {});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status().to_string();
  runtime::Method& m = **method;
  EXPECT_EQ(m.num_symbols(), 2u);
  std::mt19937 rng(6);
  expect_disagreeing_batches_refused(m, "s33", rng);
}

}  // namespace
}  // namespace baton
