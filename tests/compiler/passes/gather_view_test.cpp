// gather-view: in a dynamic graph, Gathers whose indices are computed from the sizes become
// views (a run of consecutive positions: Slice and Reshape) or a constant row the Add after them
// broadcasts (one index everywhere); near-misses keep their Gather. Each rewritten graph runs at
// several sizes against the same model compiled without the optimizer.
#include "passes/pass_test.h"

namespace baton::testing {
namespace {

class GatherViewPassTest : public PassTest {
 public:
  // Import, inference, folding and the optimizer, with the symbols' ranges.
  static compiler::Graph optimized_dynamic(const OnnxBuilder& b,
                                           const std::vector<compiler::DimRange>& dims,
                                           compiler::OptimizeOptions options = {}) {
    const std::vector<uint8_t> bytes = b.bytes();
    compiler::ImportOptions io;
    io.dims = dims;
    auto graph = compiler::import_onnx_bytes(bytes, "<test>", ".", io);
    EXPECT_TRUE(graph.ok()) << graph.status().to_string();
    if (!graph.ok()) return {};
    auto folded = compiler::infer_and_fold(*graph);
    EXPECT_TRUE(folded.ok()) << folded.status().to_string();
    compiler::eliminate_dead_nodes(*graph);
    auto reports = compiler::optimize(*graph, options);
    EXPECT_TRUE(reports.ok()) << reports.status().to_string();
    return std::move(graph).value();
  }

  static std::vector<Tensor> run_dynamic(const OnnxBuilder& b,
                                         const std::vector<compiler::DimRange>& dims,
                                         const std::vector<Tensor>& inputs, bool optimize) {
    compiler::CompileOptions options;
    options.optimize = optimize;
    options.dims = dims;
    auto compiled = compiler::compile_bytes(b.bytes(), options);
    EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
    if (!compiled.ok()) return {};
    auto bytes = compiled->serialize();
    auto program = runtime::Program::load_bytes(*bytes);
    EXPECT_TRUE(program.ok()) << program.status().to_string();
    if (!program.ok()) return {};
    auto module = extension::Module::from_program(*program);
    EXPECT_TRUE(module.ok()) << module.status().to_string();
    auto out = module->run(inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? *out : std::vector<Tensor>{};
  }

  // The optimized program's outputs equal the unoptimized one's (a view copies nothing, a
  // broadcast row adds the same numbers): exactly.
  static void expect_same_at(const OnnxBuilder& b, const std::vector<compiler::DimRange>& dims,
                             const std::vector<Tensor>& inputs) {
    const std::vector<Tensor> want = run_dynamic(b, dims, inputs, false);
    const std::vector<Tensor> got = run_dynamic(b, dims, inputs, true);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(want.empty());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].sizes(), want[o].sizes()) << "output " << o;
      const float* g = got[o].data_as<float>();
      const float* w = want[o].data_as<float>();
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        ASSERT_EQ(g[i], w[i]) << "output " << o << " element " << i;
      }
    }
  }

  // The size of axis `axis` of `input`, as a 0-d int64 (Shape, Gather).
  static std::string size_of(OnnxBuilder& b, const std::string& input, int64_t axis,
                             const std::string& name) {
    b.node("Shape", {input}, {name + "_shape"}, name + "_shape");
    b.initializer_int64(name + "_axis", {}, {axis});
    auto& g = b.node("Gather", {name + "_shape", name + "_axis"}, {name}, name);
    OnnxBuilder::attr_int(g, "axis", 0);
    return name;
  }
};

// GPT-2's position embedding: Gather(table, Unsqueeze(Range(0, seq, 1) * scale)) added to the
// input. With scale 1 it is the table's first `seq` rows: a Slice and a Reshape. `rows` is the
// table's length. (The sizes' own Shape and Gather become expressions and are removed.)
OnnxBuilder positions(int64_t scale, int64_t rows) {
  OnnxBuilder b;
  b.input_named("x", {1, -1, 4}, {"seq"});
  std::mt19937 rng(7);
  b.initializer("table", {rows, 4}, PassTest::random_floats(rng, static_cast<size_t>(rows * 4)));
  b.initializer_int64("zero", {}, {0});
  b.initializer_int64("one", {}, {1});
  b.initializer_int64("scale", {}, {scale});
  b.initializer_int64("axes0", {1}, {0});
  GatherViewPassTest::size_of(b, "x", 1, "seq");
  b.node("Range", {"zero", "seq", "one"}, {"r"}, "range");
  b.node("Mul", {"r", "scale"}, {"rs"}, "scale");
  b.node("Unsqueeze", {"rs", "axes0"}, {"ids"}, "unsqueeze");
  b.node("Gather", {"table", "ids"}, {"pos"}, "gather");
  b.node("Add", {"x", "pos"}, {"y"}, "add");
  b.output("y", {1, -1, 4});
  return b;
}

const std::vector<compiler::DimRange> kSeq = {{"seq", 1, 16, 0, ""}};

TEST_F(GatherViewPassTest, ARangeOfPositionsBecomesASliceOfTheTable) {
  std::mt19937 rng(1);
  const OnnxBuilder b = positions(1, 20);
  const auto ops = op_counts(optimized_dynamic(b, kSeq));
  EXPECT_EQ(ops.count("Gather"), 0u);
  EXPECT_EQ(ops.at("Slice"), 1);
  EXPECT_EQ(ops.at("Reshape"), 1);
  for (int64_t seq : {1, 7, 16}) expect_same_at(b, kSeq, {random_tensor(rng, {1, seq, 4})});

  compiler::OptimizeOptions off;
  off.disabled = {"gather-view"};
  const auto kept = op_counts(optimized_dynamic(b, kSeq, off));
  EXPECT_EQ(kept.at("Gather"), 2) << "the table's and the size's";
  EXPECT_EQ(kept.count("Slice"), 0u);
}

// Positions times 2 skip rows, and a table shorter than the longest sequence would be read past
// its end: both keep their Gather (and still run).
TEST_F(GatherViewPassTest, RangesThatAreNotARunOfTheTableKeepTheirGather) {
  std::mt19937 rng(2);
  const OnnxBuilder every_other = positions(2, 40);
  EXPECT_EQ(op_counts(optimized_dynamic(every_other, kSeq)).at("Gather"), 2);
  expect_same_at(every_other, kSeq, {random_tensor(rng, {1, 5, 4})});
  const OnnxBuilder short_table = positions(1, 10);
  EXPECT_EQ(op_counts(optimized_dynamic(short_table, kSeq)).at("Gather"), 2);
}

// BERT's position ids: a constant arange sliced from `start` to `start + seq`, gathered from
// the table: rows start.. of the table.
TEST_F(GatherViewPassTest, ASliceOfAConstantArangeBecomesASliceOfTheTable) {
  std::mt19937 rng(3);
  for (int64_t start : {0, 3}) {
    OnnxBuilder b;
    b.input_named("x", {1, -1, 4}, {"seq"});
    b.initializer("table", {24, 4}, random_floats(rng, 96));
    std::vector<int64_t> arange(24);
    for (int64_t i = 0; i < 24; ++i) arange[static_cast<size_t>(i)] = i;
    b.initializer_int64("position_ids", {1, 24}, arange);
    b.initializer_int64("start", {1}, {start});
    b.initializer_int64("axes1", {1}, {1});
    b.initializer_int64("axes0", {1}, {0});
    size_of(b, "x", 1, "seq");
    b.node("Unsqueeze", {"seq", "axes0"}, {"seq1"}, "seq1");
    b.node("Add", {"seq1", "start"}, {"end"}, "end");
    b.node("Slice", {"position_ids", "start", "end", "axes1"}, {"ids"}, "slice_ids");
    b.node("Gather", {"table", "ids"}, {"pos"}, "gather");
    b.node("Add", {"x", "pos"}, {"y"}, "add");
    b.output("y", {1, -1, 4});
    const auto ops = op_counts(optimized_dynamic(b, kSeq));
    EXPECT_EQ(ops.count("Gather"), 0u) << "start " << start;
    EXPECT_EQ(ops.at("Slice"), 1) << "start " << start;
    for (int64_t seq : {1, 9, 16}) expect_same_at(b, kSeq, {random_tensor(rng, {1, seq, 4})});
  }
}

// transformers' attention-mask code: mask[batch_index, kv_index] as a Gather of the flattened
// mask at batch_index * seq + kv_index, from two Ranges: every element in order, a Reshape.
TEST_F(GatherViewPassTest, AMaskGatheredAtBatchTimesSeqPlusPositionBecomesAReshape) {
  std::mt19937 rng(4);
  OnnxBuilder b;
  b.input_named("m", {-1, -1}, {"batch", "seq"});
  b.initializer_int64("zero", {}, {0});
  b.initializer_int64("one", {}, {1});
  b.initializer_int64("axes123", {3}, {1, 2, 3});
  b.initializer_int64("axes012", {3}, {0, 1, 2});
  size_of(b, "m", 0, "batch");
  size_of(b, "m", 1, "seq");
  b.node("Range", {"zero", "batch", "one"}, {"rb"}, "range_batch");
  b.node("Range", {"zero", "seq", "one"}, {"rs"}, "range_seq");
  b.node("Unsqueeze", {"rb", "axes123"}, {"b4"}, "b4");
  b.node("Unsqueeze", {"rs", "axes012"}, {"s4"}, "s4");
  b.node("Mul", {"b4", "seq"}, {"bs"}, "mul");
  b.node("Add", {"s4", "bs"}, {"idx"}, "add");
  auto& f = b.node("Flatten", {"m"}, {"flat"}, "flatten");
  OnnxBuilder::attr_int(f, "axis", 2);
  auto& g = b.node("Gather", {"flat", "idx"}, {"g"}, "gather");
  OnnxBuilder::attr_int(g, "axis", 0);
  b.node("Tanh", {"g"}, {"y"}, "tanh");
  b.output("y", {-1, 1, 1, -1, 1});
  const std::vector<compiler::DimRange> dims = {{"batch", 1, 8, 0, ""}, {"seq", 1, 32, 0, ""}};
  const auto ops = op_counts(optimized_dynamic(b, dims));
  EXPECT_EQ(ops.count("Gather"), 0u);
  EXPECT_EQ(ops.at("Reshape"), 1);
  EXPECT_EQ(ops.count("Slice"), 0u);
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {8, 32}, {2, 17}}) {
    expect_same_at(b, dims, {random_tensor(rng, {batch, seq})});
  }

  // seq * batch_index + kv_index with the roles swapped (kv_index * batch + batch_index) is not
  // the mask's order: the Gather stays.
  OnnxBuilder swapped;
  swapped.input_named("m", {-1, -1}, {"batch", "seq"});
  swapped.initializer_int64("zero", {}, {0});
  swapped.initializer_int64("one", {}, {1});
  swapped.initializer_int64("axes123", {3}, {1, 2, 3});
  swapped.initializer_int64("axes012", {3}, {0, 1, 2});
  size_of(swapped, "m", 0, "batch");
  size_of(swapped, "m", 1, "seq");
  swapped.node("Range", {"zero", "batch", "one"}, {"rb"}, "range_batch");
  swapped.node("Range", {"zero", "seq", "one"}, {"rs"}, "range_seq");
  swapped.node("Unsqueeze", {"rb", "axes123"}, {"b4"}, "b4");
  swapped.node("Unsqueeze", {"rs", "axes012"}, {"s4"}, "s4");
  swapped.node("Mul", {"s4", "batch"}, {"sb"}, "mul");
  swapped.node("Add", {"b4", "sb"}, {"idx"}, "add");
  auto& f2 = swapped.node("Flatten", {"m"}, {"flat"}, "flatten");
  OnnxBuilder::attr_int(f2, "axis", 2);
  auto& g2 = swapped.node("Gather", {"flat", "idx"}, {"g"}, "gather");
  OnnxBuilder::attr_int(g2, "axis", 0);
  swapped.node("Tanh", {"g"}, {"y"}, "tanh");
  swapped.output("y", {-1, 1, 1, -1, 1});
  EXPECT_EQ(op_counts(optimized_dynamic(swapped, dims)).at("Gather"), 3);
  expect_same_at(swapped, dims, {random_tensor(rng, {3, 5})});
}

// BERT's token types: a zero buffer sliced to the sequence and expanded to the batch, gathered
// from the type table: row 0 everywhere, which the Add broadcasts. A reader that is not an
// elementwise op with the full shape on its other side keeps the Gather.
TEST_F(GatherViewPassTest, OneRowGatheredEverywhereBecomesAConstantTheAddBroadcasts) {
  std::mt19937 rng(5);
  for (bool other_reader : {false, true}) {
    OnnxBuilder b;
    b.input_named("x", {-1, -1, 4}, {"batch", "seq"});
    b.initializer("types", {2, 4}, random_floats(rng, 8));
    b.initializer_int64("zeros", {1, 24}, std::vector<int64_t>(24, 0));
    b.initializer_int64("zero1", {1}, {0});
    b.initializer_int64("axes1", {1}, {1});
    b.initializer_int64("axes0", {1}, {0});
    size_of(b, "x", 0, "batch");
    size_of(b, "x", 1, "seq");
    b.node("Unsqueeze", {"seq", "axes0"}, {"seq1"}, "seq1");
    b.node("Unsqueeze", {"batch", "axes0"}, {"batch1"}, "batch1");
    b.node("Slice", {"zeros", "zero1", "seq1", "axes1"}, {"z"}, "slice");
    auto& c = b.node("Concat", {"batch1", "seq1"}, {"bs"}, "concat");
    OnnxBuilder::attr_int(c, "axis", 0);
    b.node("Expand", {"z", "bs"}, {"ids"}, "expand");
    b.node("Gather", {"types", "ids"}, {"t"}, "gather");
    b.node("Add", {"x", "t"}, {"y"}, "add");
    b.output("y", {-1, -1, 4});
    if (other_reader) {
      b.node("Tanh", {"t"}, {"y2"}, "tanh");
      b.output("y2", {-1, -1, 4});
    }
    const std::vector<compiler::DimRange> dims = {{"batch", 1, 4, 0, ""}, {"seq", 1, 24, 0, ""}};
    const auto ops = op_counts(optimized_dynamic(b, dims));
    EXPECT_EQ(ops.count("Gather"), other_reader ? 1u : 0u) << "other reader " << other_reader;
    for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 9}, {4, 24}}) {
      expect_same_at(b, dims, {random_tensor(rng, {batch, seq, 4})});
    }
  }
}

}  // namespace
}  // namespace baton::testing
