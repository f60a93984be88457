// Kernel::run allocates nothing and reads its tensors' data pointers at every call.
//
// Allocations are counted by tests/testing/alloc (malloc & co. replaced for this binary), so
// operator new, fmt and OpenBLAS's own allocations are all seen.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <set>

#include "baton/baton.h"
#include "kernels/kernel_test_util.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/thread_pool.h"
#include "testing/alloc/counting_allocator.h"

namespace baton::testing {
namespace {

// Each builder returns a tester for one op call with random inputs; the test runs it twice (the
// first call may warm up OpenBLAS) and counts allocations in the second.
std::vector<std::pair<std::string, std::function<std::unique_ptr<OpTester>(std::mt19937&)>>>
op_calls() {
  using Make = std::function<std::unique_ptr<OpTester>(std::mt19937&)>;
  std::vector<std::pair<std::string, Make>> calls;
  auto add = [&](std::string name, Make make) { calls.emplace_back(std::move(name), make); };
  add("Gemm", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Gemm");
    t->input(random_floats(rng, {33, 17})).input(random_floats(rng, {65, 17}));
    t->input(random_floats(rng, {65})).attr("transB", 1).attr("beta", 0.5);
    return t;
  });
  add("Gemm (large enough for OpenBLAS threads)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Gemm");
    t->input(random_floats(rng, {256, 300})).input(random_floats(rng, {300, 200}));
    return t;
  });
  add("MatMul (batched)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("MatMul");
    t->input(random_floats(rng, {2, 1, 17, 33})).input(random_floats(rng, {3, 33, 7}));
    return t;
  });
  add("MatMul (folded)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("MatMul");
    t->input(random_floats(rng, {4, 17, 33})).input(random_floats(rng, {33, 65}));
    return t;
  });
  // Every row of the elementwise table, broadcasting where binary, in float32 and float16 (bool
  // rows in bool).
  for (const ops::ElementwiseRow& row : ops::elementwise_rows()) {
    const std::string op(row.name);
    if (row.types == ops::kBoolTypes) {
      add(op + " bool", [op, row](std::mt19937& rng) {
        auto t = std::make_unique<OpTester>(op);
        t->input(random_bools(rng, {7, 1, 5}));
        if (row.arity == 2) t->input(random_bools(rng, {3, 1}));
        return t;
      });
      continue;
    }
    // B of PRelu broadcasts to A; the others broadcast both ways.
    const std::vector<int64_t> b_sizes = row.out == ops::ElementwiseOut::ShapeOfA
                                             ? std::vector<int64_t>{1, 5}
                                             : std::vector<int64_t>{3, 1};
    for (DType dtype : {DType::Float32, DType::Float16}) {
      if (!row.types.contains(dtype)) continue;
      add(op + " " + std::string(dtype_name(dtype)), [op, row, dtype, b_sizes](std::mt19937& rng) {
        auto t = std::make_unique<OpTester>(op);
        t->input(cast_floats(random_floats(rng, {7, 1, 5}, 0.5f, 2.0f), dtype));
        if (row.arity == 2) t->input(cast_floats(random_floats(rng, b_sizes, 0.5f, 2.0f), dtype));
        if (op == "Mod") t->attr("fmod", 1);  // floats need fmod = 1
        return t;
      });
    }
  }
  add("Mod int32 (fmod = 0)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Mod");
    t->input(random_ints<int32_t>(rng, {7, 5}, -50, 50))
        .input(random_ints<int32_t>(rng, {5}, -9, 9, /*nonzero=*/true));
    return t;
  });
  add("BitShift uint8", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("BitShift");
    t->input(random_ints<uint8_t>(rng, {3, 5}, 0, 255)).input(random_ints<uint8_t>(rng, {5}, 0, 9));
    t->attr("direction", std::string("LEFT"));
    return t;
  });
  add("Where", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Where");
    t->input(random_bools(rng, {3, 1, 5})).input(random_floats(rng, {4, 1}));
    t->input(random_floats(rng, {5}));
    return t;
  });
  add("Cast float32 -> float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Cast");
    t->input(random_floats(rng, {3, 17})).attr("to", static_cast<int>(DType::Float16));
    return t;
  });
  add("CastLike float16 -> int32", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("CastLike");
    t->input(cast_floats(random_floats(rng, {3, 17}, -9.0f, 9.0f), DType::Float16));
    t->input(HostTensor(DType::Int32, {1}));
    return t;
  });
  add("Clip", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Clip");
    t->input(random_floats(rng, {3, 17})).input(make_tensor<float>({}, {-0.5f}));
    t->input(make_tensor<float>({}, {0.5f}));
    return t;
  });
  for (const char* op : {"Max", "Min", "Mean", "Sum"}) {
    add(std::string(op) + " float16", [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(cast_floats(random_floats(rng, {2, 1, 5}), DType::Float16));
      t->input(cast_floats(random_floats(rng, {3, 1}), DType::Float16));
      t->input(cast_floats(random_floats(rng, {5}), DType::Float16));
      return t;
    });
  }
  add("Div int64", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Div");
    t->input(random_ints<int64_t>(rng, {7, 5}, -50, 50))
        .input(random_ints<int64_t>(rng, {5}, 1, 9));
    return t;
  });
  add("Pow float^int32", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Pow");
    t->input(random_floats(rng, {3, 17}, 0.5f, 2.0f)).input(random_ints<int32_t>(rng, {17}, -3, 3));
    return t;
  });
  add("MatMul float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("MatMul");
    t->input(cast_floats(random_floats(rng, {2, 17, 33}), DType::Float16))
        .input(cast_floats(random_floats(rng, {33, 7}), DType::Float16));
    return t;
  });
  add("Softmax bfloat16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Softmax");
    t->input(cast_floats(random_floats(rng, {2, 7, 5}), DType::BFloat16)).attr("axis", 1);
    return t;
  });
  for (const char* op : {"Gelu", "Identity"}) {
    add(op, [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(random_floats(rng, {3, 33}, 0.1f, 2.0f));
      return t;
    });
  }
  add("Softmax (inner)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Softmax");
    t->input(random_floats(rng, {2, 7, 5})).attr("axis", 1);
    return t;
  });
  add("Softmax (last)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Softmax");
    t->input(random_floats(rng, {3, 17}));
    return t;
  });
  add("Softmax opset 11 (flattened)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Softmax", "node_1", 11);
    t->input(cast_floats(random_floats(rng, {2, 7, 5}), DType::Float16)).attr("axis", 1);
    return t;
  });
  for (const char* op : {"LogSoftmax", "Hardmax"}) {
    add(std::string(op) + " (inner) float16", [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(cast_floats(random_floats(rng, {2, 7, 5}), DType::Float16)).attr("axis", 1);
      return t;
    });
    add(std::string(op) + " (last)", [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(random_floats(rng, {3, 17}));
      return t;
    });
  }
  add("BatchNormalization float16 with float32 statistics", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("BatchNormalization");
    t->input(cast_floats(random_floats(rng, {2, 3, 4, 5}), DType::Float16));
    for (int i = 0; i < 3; ++i) t->input(random_floats(rng, {3}));
    t->input(random_floats(rng, {3}, 0.5f, 2.0f));
    return t;
  });
  add("BatchNormalization spatial 0 (opset 7)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("BatchNormalization", "node_1", 7);
    t->input(random_floats(rng, {2, 3, 4}));
    for (int i = 0; i < 3; ++i) t->input(random_floats(rng, {3, 4}));
    t->input(random_floats(rng, {3, 4}, 0.5f, 2.0f)).attr("spatial", 0);
    return t;
  });
  add("InstanceNormalization bfloat16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("InstanceNormalization");
    t->input(cast_floats(random_floats(rng, {2, 3, 4, 5}), DType::BFloat16));
    t->input(cast_floats(random_floats(rng, {3}), DType::BFloat16));
    t->input(cast_floats(random_floats(rng, {3}), DType::BFloat16));
    return t;
  });
  add("GroupNormalization (opset 18, per-group scale)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("GroupNormalization", "node_1", 18);
    t->input(random_floats(rng, {2, 6, 4})).input(random_floats(rng, {3}));
    t->input(random_floats(rng, {3})).attr("num_groups", 3);
    return t;
  });
  add("MaxPool with Indices, ceil_mode and dilations", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("MaxPool");
    t->input(random_floats(rng, {2, 3, 9, 8})).attr("kernel_shape", std::vector<int64_t>{3, 2});
    t->attr("strides", std::vector<int64_t>{2, 2}).attr("dilations", std::vector<int64_t>{1, 2});
    t->attr("pads", std::vector<int64_t>{1, 1, 1, 1}).attr("ceil_mode", 1).outputs(2);
    return t;
  });
  add("MaxPool uint8", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("MaxPool");
    t->input(random_ints<uint8_t>(rng, {1, 2, 5, 5, 5}, 0, 255));
    t->attr("kernel_shape", std::vector<int64_t>{2, 2, 2});
    return t;
  });
  add("AveragePool count_include_pad float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("AveragePool");
    t->input(cast_floats(random_floats(rng, {2, 3, 11}), DType::Float16));
    t->attr("kernel_shape", std::vector<int64_t>{3}).attr("pads", std::vector<int64_t>{1, 1});
    t->attr("count_include_pad", 1);
    return t;
  });
  add("LpPool", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("LpPool");
    t->input(random_floats(rng, {2, 3, 6, 5})).attr("kernel_shape", std::vector<int64_t>{2, 2});
    t->attr("auto_pad", std::string("SAME_UPPER"));
    return t;
  });
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) {
    add(op, [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(random_floats(rng, {2, 3, 4, 5}));
      return t;
    });
  }
  add("Reshape", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Reshape");
    t->input(random_floats(rng, {3, 4})).input(int64s({2, -1}));
    return t;
  });
  add("Flatten", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Flatten");
    t->input(random_floats(rng, {3, 4, 5}));
    return t;
  });
  add("Transpose", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Transpose");
    t->input(random_floats(rng, {3, 4, 5})).attr("perm", std::vector<int64_t>{2, 0, 1});
    return t;
  });
  add("Squeeze", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Squeeze");
    t->input(random_floats(rng, {3, 1, 5}));
    return t;
  });
  add("Unsqueeze", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Unsqueeze");
    t->input(random_floats(rng, {3, 5})).input(int64s({0}));
    return t;
  });
  add("Concat", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Concat");
    t->input(random_floats(rng, {3, 5})).input(random_floats(rng, {3, 2})).attr("axis", 1);
    return t;
  });
  add("Gather int32 indices", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Gather");
    t->input(random_floats(rng, {5, 7})).input(random_ints<int32_t>(rng, {2, 3}, -7, 6));
    t->attr("axis", 1);
    return t;
  });
  add("GatherElements", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("GatherElements");
    t->input(random_floats(rng, {4, 5})).input(random_ints<int64_t>(rng, {6, 5}, -4, 3));
    return t;
  });
  add("GatherND", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("GatherND");
    t->input(random_floats(rng, {3, 4, 5})).input(random_ints<int64_t>(rng, {3, 2, 1}, -4, 3));
    t->attr("batch_dims", 1);
    return t;
  });
  add("ScatterND add float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("ScatterND");
    t->input(cast_floats(random_floats(rng, {4, 3}), DType::Float16))
        .input(random_ints<int64_t>(rng, {5, 1}, -4, 3))
        .input(cast_floats(random_floats(rng, {5, 3}), DType::Float16))
        .attr("reduction", std::string("add"));
    return t;
  });
  add("ScatterElements max int32 indices", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("ScatterElements");
    t->input(random_floats(rng, {4, 3, 5}))
        .input(random_ints<int32_t>(rng, {4, 3, 2}, -5, 4))
        .input(random_floats(rng, {4, 3, 2}))
        .attr("axis", int64_t{2})
        .attr("reduction", std::string("max"));
    return t;
  });
  add("Slice", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Slice");
    t->input(random_floats(rng, {6, 7})).input(int64s({5, 1})).input(int64s({0, 7}));
    t->input(int64s({0, 1})).input(int64s({-2, 3}));
    return t;
  });
  add("Split", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Split");
    t->input(random_floats(rng, {4, 7})).attr("axis", 1).attr("num_outputs", int64_t{3});
    t->outputs(3);
    return t;
  });
  add("Expand", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Expand");
    t->input(random_floats(rng, {3, 1})).input(int64s({2, 3, 4}));
    return t;
  });
  add("Tile", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Tile");
    t->input(random_floats(rng, {2, 3})).input(int64s({2, 3}));
    return t;
  });
  add("DepthToSpace", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("DepthToSpace");
    t->input(random_floats(rng, {2, 8, 3, 5}))
        .attr("blocksize", 2)
        .attr("mode", std::string("CRD"));
    return t;
  });
  add("SpaceToDepth", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("SpaceToDepth");
    t->input(random_floats(rng, {2, 3, 4, 6})).attr("blocksize", 2);
    return t;
  });
  add("CumSum", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("CumSum");
    t->input(random_floats(rng, {3, 4, 5})).input(int64s({1})).attr("reverse", 1);
    return t;
  });
  // The recurrent layers, both directions: Y and Y_h (and LSTM's Y_c).
  for (const auto& [op, gates] : {std::pair{"RNN", 1}, {"GRU", 3}, {"LSTM", 4}}) {
    add(op, [op = std::string(op), gates = int64_t{gates}](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(random_floats(rng, {5, 2, 3}))
          .input(random_floats(rng, {2, gates * 4, 3}))
          .input(random_floats(rng, {2, gates * 4, 4}))
          .attr("hidden_size", int64_t{4})
          .attr("direction", std::string("bidirectional"))
          .outputs(op == "LSTM" ? 3 : 2);
      return t;
    });
  }
  add("TopK", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("TopK");
    t->input(random_floats(rng, {3, 9, 4})).input(int64s({4})).attr("axis", 1);
    return t;
  });
  add("NonZero", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("NonZero");
    HostTensor x = random_floats(rng, {4, 5, 3});
    for (int64_t i = 0; i < x.numel(); i += 3) x.data<float>()[i] = 0.0f;
    t->input(std::move(x));
    return t;
  });
  add("Trilu", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Trilu");
    t->input(random_floats(rng, {2, 4, 5})).input(int64s({1}));
    return t;
  });
  add("Shape", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Shape");
    t->input(random_floats(rng, {2, 4, 5})).attr("start", 1);
    return t;
  });
  add("Size", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Size");
    t->input(random_floats(rng, {2, 4, 5}));
    return t;
  });
  add("Range", [](std::mt19937&) {
    auto t = std::make_unique<OpTester>("Range");
    t->input(make_tensor<float>({}, {0.5f}))
        .input(make_tensor<float>({}, {9.0f}))
        .input(make_tensor<float>({}, {0.25f}));
    return t;
  });
  add("ConstantOfShape", [](std::mt19937&) {
    auto t = std::make_unique<OpTester>("ConstantOfShape");
    t->input(int64s({3, 4}));
    return t;
  });
  add("Einsum", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Einsum");
    t->input(random_floats(rng, {2, 3, 4})).input(random_floats(rng, {2, 5, 4}));
    t->attr("equation", std::string("bij,bkj->bik"));
    return t;
  });
  add("LayerNormalization float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("LayerNormalization");
    t->input(cast_floats(random_floats(rng, {3, 4, 16}), DType::Float16))
        .input(cast_floats(random_floats(rng, {16}), DType::Float16))
        .input(cast_floats(random_floats(rng, {1, 16}), DType::Float16))
        .attr("axis", 1);
    return t;
  });
  add("AddLayerNorm (sum kept in a row buffer)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("AddLayerNorm", "node_1", kTestOpset, "baton");
    t->input(random_floats(rng, {5, 12})).input(random_floats(rng, {5, 12}));
    t->input(random_floats(rng, {12})).input(random_floats(rng, {12}));
    return t;
  });
  add("Linear float16 with splits", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Linear", "node_1", kTestOpset, "baton");
    t->input(cast_floats(random_floats(rng, {2, 3, 8}), DType::Float16))
        .input(cast_floats(random_floats(rng, {8, 9}), DType::Float16))
        .input(cast_floats(random_floats(rng, {9}), DType::Float16));
    t->attr("splits", std::vector<int64_t>{2, 3, 4}).outputs(3);
    return t;
  });
  add("Attention (K transposed, additive mask)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Attention", "node_1", kTestOpset, "baton");
    t->input(random_floats(rng, {2, 3, 5, 8})).input(random_floats(rng, {2, 3, 8, 7}));
    t->input(random_floats(rng, {2, 3, 7, 4})).input(random_floats(rng, {2, 1, 1, 7}));
    t->attr("scale", 0.35).attr("k_transposed", 1).attr("mask_kind", std::string("add"));
    return t;
  });
  // Every reduction in float16 (accumulated in a float buffer sized at create), over an inner
  // and an outer axis.
  for (const ops::ReduceRow& row : ops::reduce_rows()) {
    const std::string op(row.name);
    add(op + " float16", [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(cast_floats(random_floats(rng, {3, 4, 5}, 0.5f, 2.0f), DType::Float16));
      t->input(int64s({0, 2}));
      return t;
    });
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    add(op, [op](std::mt19937& rng) {
      auto t = std::make_unique<OpTester>(op);
      t->input(random_floats(rng, {3, 4, 5})).attr("axis", 1).attr("select_last_index", 1);
      return t;
    });
  }
  add("Pad reflect with a constant_value", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Pad");
    t->input(random_floats(rng, {3, 4})).input(int64s({2, -1, 1, 5}));
    t->input(make_tensor<float>({}, {0.5f})).attr("mode", std::string("reflect"));
    return t;
  });
  add("Resize cubic", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Resize");
    t->input(random_floats(rng, {1, 2, 4, 5})).absent_input().absent_input();
    t->input(int64s({1, 2, 7, 3})).attr("mode", std::string("cubic"));
    return t;
  });
  add("Resize nearest int32", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Resize");
    t->input(random_ints<int32_t>(rng, {2, 3, 5}, -9, 9)).absent_input();
    t->input(make_tensor<float>({3}, {1.0f, 2.5f, 0.5f}));
    return t;
  });
  add("Upsample linear", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Upsample", "node_1", 9);
    t->input(random_floats(rng, {2, 3})).input(make_tensor<float>({2}, {2.0f, 1.5f}));
    t->attr("mode", std::string("linear"));
    return t;
  });
  add("Conv im2col (small GEMM: OpenBLAS's allocating path avoided)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Conv");
    t->input(random_floats(rng, {2, 3, 9, 8})).input(random_floats(rng, {4, 3, 3, 3}));
    t->input(random_floats(rng, {4})).attr("pads", std::vector<int64_t>{1, 0, 1, 2});
    return t;
  });
  add("Conv im2col in column tiles, groups", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Conv");
    t->input(random_floats(rng, {1, 128, 40, 40})).input(random_floats(rng, {16, 64, 3, 3}));
    t->attr("group", 2).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
    return t;
  });
  add("Conv pointwise float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Conv");
    t->input(cast_floats(random_floats(rng, {2, 8, 5, 5}), DType::Float16))
        .input(cast_floats(random_floats(rng, {6, 8, 1, 1}), DType::Float16));
    return t;
  });
  add("Conv depthwise bfloat16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Conv");
    t->input(cast_floats(random_floats(rng, {2, 6, 9, 9}), DType::BFloat16))
        .input(cast_floats(random_floats(rng, {6, 1, 3, 3}), DType::BFloat16))
        .input(cast_floats(random_floats(rng, {6}), DType::BFloat16));
    t->attr("group", 6).attr("strides", std::vector<int64_t>{2, 2});
    t->attr("auto_pad", std::string("SAME_UPPER"));
    return t;
  });
  add("FusedConv float16 with a residual and HardSigmoid, on threads", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("FusedConv", "node_1", kTestOpset, "baton");
    t->input(cast_floats(random_floats(rng, {2, 3, 9, 8}), DType::Float16))
        .input(cast_floats(random_floats(rng, {4, 3, 3, 3}), DType::Float16))
        .input(cast_floats(random_floats(rng, {4}), DType::Float16))
        .input(cast_floats(random_floats(rng, {2, 4, 9, 8}), DType::Float16));
    t->attr("pads", std::vector<int64_t>{1, 1, 1, 1});
    t->attr("activation", std::string("HardSigmoid"));
    return t;
  });
  add("Linear with transW and Gelu", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Linear", "node_1", kTestOpset, "baton");
    t->input(random_floats(rng, {6, 8})).input(random_floats(rng, {5, 8}));
    t->input(random_floats(rng, {5}));
    t->attr("transW", 1).attr("activation", std::string("Gelu"));
    return t;
  });
  add("MatMul with a constant 2-D B (packed)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("MatMul");
    t->input(random_floats(rng, {3, 17, 64})).input(random_floats(rng, {64, 45}));
    t->constant_input(1);
    return t;
  });
  // A constant W is packed at create (kernels/cpu/packed_gemm.h); run() multiplies in place.
  add("Linear with a constant W (packed) and split outputs", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("Linear", "node_1", kTestOpset, "baton");
    t->input(random_floats(rng, {2, 30, 64})).input(random_floats(rng, {64, 90}));
    t->input(random_floats(rng, {90})).constant_input(1);
    t->attr("splits", std::vector<int64_t>{40, 50}).outputs(2);
    return t;
  });
  add("FusedConv with a constant W (packed by row blocks), a residual and Relu",
      [](std::mt19937& rng) {
        auto t = std::make_unique<OpTester>("FusedConv", "node_1", kTestOpset, "baton");
        t->input(random_floats(rng, {2, 8, 9, 11})).input(random_floats(rng, {20, 8, 3, 3}));
        t->input(random_floats(rng, {20})).input(random_floats(rng, {2, 20, 9, 11}));
        t->constant_input(1);
        t->attr("pads", std::vector<int64_t>{1, 1, 1, 1}).attr("activation", std::string("Relu"));
        return t;
      });
  add("ConvTranspose (col2im, output_shape)", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("ConvTranspose");
    t->input(random_floats(rng, {2, 4, 5, 6})).input(random_floats(rng, {4, 3, 3, 3}));
    t->input(random_floats(rng, {6})).attr("group", 2);
    t->attr("strides", std::vector<int64_t>{2, 2})
        .attr("output_shape", std::vector<int64_t>{12, 13});
    return t;
  });
  add("ConvTranspose pointwise float16", [](std::mt19937& rng) {
    auto t = std::make_unique<OpTester>("ConvTranspose");
    t->input(cast_floats(random_floats(rng, {2, 4, 5, 6}), DType::Float16))
        .input(cast_floats(random_floats(rng, {4, 3, 1, 1}), DType::Float16));
    return t;
  });
  return calls;
}

// The counter itself works: a heap allocation while counting is seen.
TEST(KernelRun, AllocationCounterSeesAllocations) {
  if (!counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  int64_t seen = 0;
  {
    CountAllocations count;
    std::vector<int>* volatile sink = new std::vector<int>(100);  // volatile: not elided
    seen = count.count();
    delete sink;
  }
  EXPECT_GE(seen, 2);
}

// Runs every op call (on `pool`, or on the calling thread when null), `warmups` runs first, and
// expects the next run to allocate nothing.
void expect_no_allocations(runtime::ThreadPool* pool, int warmups) {
  register_builtins();
  std::mt19937 rng(77);
  for (auto& [name, make] : op_calls()) {
    SCOPED_TRACE(name);
    std::unique_ptr<OpTester> t = make(rng);
    t->pool(pool);
    BATON_ASSERT_OK(t->run());
    for (int i = 1; i < warmups; ++i) BATON_ASSERT_OK(t->kernel()->run());
    int64_t allocations = 0;
    Status status;
    {
      CountAllocations count;
      status = t->kernel()->run();
      allocations = count.count();
    }
    EXPECT_TRUE(status.ok());
    EXPECT_EQ(allocations, 0) << name << " allocated during run()";
  }
}

// No kernel allocates in run(). register_builtins() puts OpenBLAS on the calling thread: its
// threaded level-3 path (taken once a GEMM is large enough to split) mallocs a job array on every
// cblas_sgemm call, which the "threads"-sized case below would catch. The first run may warm up
// OpenBLAS.
TEST(KernelRun, AllocatesNothing) {
  if (!counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  expect_no_allocations(nullptr, 1);
}

// The same with a pool of 3 threads: handing tasks to the workers allocates nothing, and neither
// do the per-thread parts of the kernels (four warm-up runs: a worker's first task may come in any
// of them).
TEST(KernelRun, AllocatesNothingOnThreads) {
  if (!counting_available()) GTEST_SKIP() << "allocation counting is off under ASan";
  runtime::ThreadPool pool(3);
  expect_no_allocations(&pool, 4);
  EXPECT_GT(pool.dispatched(), 0u) << "no op call handed work to the workers";
}

TEST(KernelRun, EveryRegisteredOpIsCovered) {
  std::set<std::string> covered;
  for (auto& [name, make] : op_calls()) covered.insert(name.substr(0, name.find(' ')));
  for (std::string_view op : kernel_registry().names()) {
    EXPECT_TRUE(covered.count(std::string(op))) << op << " has no allocation check";
  }
}

// Rebinding the inputs and the output between runs: the kernel must follow the new pointers.
TEST(KernelRun, ReadsDataPointersAtEveryRun) {
  std::mt19937 rng(78);
  for (auto& [name, make] : op_calls()) {
    SCOPED_TRACE(name);
    std::unique_ptr<OpTester> t = make(rng);
    BATON_ASSERT_OK(t->run());
    // Same shapes, new data (constant inputs such as Reshape's shape are equal in both), and a
    // new output buffer: the rebound kernel must produce what a fresh kernel produces. An input
    // marked a constant of the program (a weight, which a kernel may pack at create) keeps its
    // values, as in a program; the fresh kernel gets them too.
    std::unique_ptr<OpTester> fresh = make(rng);
    for (size_t i = 0; i < fresh->num_inputs(); ++i) {
      if (!fresh->input_is_tensor(i)) continue;
      if (t->input_is_constant(i)) {
        fresh->rebind_input(i, t->input_tensor(i));
      } else {
        t->rebind_input(i, fresh->input_tensor(i));
      }
    }
    t->rebind_output(0);
    BATON_ASSERT_OK(fresh->run());
    BATON_ASSERT_OK(t->rerun());
    ASSERT_EQ(t->output().nbytes(), fresh->output().nbytes());
    EXPECT_EQ(std::memcmp(t->output().storage.data(), fresh->output().storage.data(),
                          fresh->output().nbytes()),
              0);
  }
}

}  // namespace
}  // namespace baton::testing
