// What the optimizer pass tests share: hand-built ONNX graphs taken through import, inference
// and folding, then through the optimizer (all passes, or all but some), with helpers to count
// the live nodes of each op, and to run a model compiled with and without the optimizer and
// compare the outputs (the canonical ops' CPU kernels against the decomposition they replace).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/extension/module.h"
#include "compiler/onnx_import.h"
#include "compiler/passes.h"
#include "compiler/passes/pass.h"
#include "testing/onnx_builder.h"
#include "testing/random.h"

namespace baton::testing {

class PassTest : public ::testing::Test {
 public:
  void SetUp() override { register_builtins(); }

  // The graph after import, inference, folding and the optimizer with `options`.
  static compiler::Graph optimized(const OnnxBuilder& b, compiler::OptimizeOptions options = {}) {
    const std::vector<uint8_t> bytes = b.bytes();
    auto graph = compiler::import_onnx_bytes(bytes, "<test>", ".", {});
    EXPECT_TRUE(graph.ok()) << graph.status().to_string();
    if (!graph.ok()) return {};
    auto folded = compiler::infer_and_fold(*graph);
    EXPECT_TRUE(folded.ok()) << folded.status().to_string();
    compiler::eliminate_dead_nodes(*graph);
    auto reports = compiler::optimize(*graph, options);
    EXPECT_TRUE(reports.ok()) << reports.status().to_string();
    return std::move(graph).value();
  }

  // The one live node of op type `op` (null when there is none; more than one fails the test).
  static const compiler::IrNode* only(const compiler::Graph& g, const std::string& op) {
    const compiler::IrNode* found = nullptr;
    for (const compiler::IrNode& n : g.nodes) {
      if (n.dead || n.op_type != op) continue;
      EXPECT_EQ(found, nullptr) << "more than one " << op;
      found = &n;
    }
    return found;
  }

  // Live nodes per op type ("Attention", "MatMul").
  static std::map<std::string, int> op_counts(const compiler::Graph& g) {
    std::map<std::string, int> out;
    for (const compiler::IrNode& n : g.nodes) {
      if (!n.dead) ++out[n.op_type];
    }
    return out;
  }

  // Compiles (optimizer on or off), loads and runs on the CPU.
  static std::vector<Tensor> run(const OnnxBuilder& b, const std::vector<Tensor>& inputs,
                                 bool optimize) {
    compiler::CompileOptions options;
    options.optimize = optimize;
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

  // The optimized program's outputs match the unoptimized one's within `tolerance` (relative to
  // the largest reference magnitude), element by element.
  static void expect_same_outputs(const OnnxBuilder& b, const std::vector<Tensor>& inputs,
                                  double tolerance = 1e-5) {
    const std::vector<Tensor> want = run(b, inputs, false);
    const std::vector<Tensor> got = run(b, inputs, true);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].sizes(), want[o].sizes()) << "output " << o;
      const float* g = got[o].data_as<float>();
      const float* w = want[o].data_as<float>();
      double scale = 0.0;
      for (int64_t i = 0; i < want[o].numel(); ++i)
        scale = std::max(scale, std::fabs(double(w[i])));
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        ASSERT_NEAR(g[i], w[i], tolerance * std::max(1.0, scale))
            << "output " << o << " element " << i;
      }
    }
  }

  static std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f,
                                          float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }

  static void scalar(OnnxBuilder& b, const std::string& name, float v) {
    b.initializer(name, {}, {v});
  }
};

}  // namespace baton::testing
