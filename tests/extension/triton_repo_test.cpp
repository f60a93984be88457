// write_triton_repo (include/baton/extension/triton_repo.h): the repository it writes for a
// program with a dynamic batch and for a fixed one, and its refusals, each naming the fix.
// tests/serving/test_triton.py serves such repositories with a real tritonserver.
#include "baton/extension/triton_repo.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "testing/onnx_builder.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using testing::OnnxBuilder;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TritonRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtins();
    dir_ = fs::path(::testing::TempDir()) / ("baton_triton_repo_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // x [batch, 6] (or [3, 6]) -> Relu -> y, plus ArgMax -> k (int64 [batch]).
  // `min`, `max`: the batch range; `x`: the input's name.
  std::string program(const std::string& name, bool batch, int64_t max = 16, int64_t min = 1,
                      const std::string& x = "x") {
    OnnxBuilder b(17);
    if (batch) {
      b.input_named(x, {-1, 6}, {"batch"}, 1);
    } else {
      b.input(x, {3, 6});
    }
    b.node("Relu", {x}, {"y"}, "relu");
    auto& am = b.node("ArgMax", {"y"}, {"k"}, "argmax");
    OnnxBuilder::attr_int(am, "axis", 1);
    OnnxBuilder::attr_int(am, "keepdims", 0);
    b.output("y", {batch ? -1 : 3, 6});
    b.output("k", {batch ? -1 : 3}, 7);
    compiler::CompileOptions options;
    if (batch) options.dims = {{"batch", min, max, 0, {}}};
    auto compiled = compiler::compile_bytes(b.bytes(), options);
    EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
    if (!compiled.ok()) return "";
    const std::string path = (dir_ / (name + ".baton")).string();
    EXPECT_TRUE(compiled->write(path).ok());
    return path;
  }

  fs::path dir_;
};

TEST_F(TritonRepoTest, ABatchingProgramGetsTritonsBatchAndDynamicBatching) {
  const std::string p = program("mlp", true);
  extension::TritonRepoOptions o;
  o.max_batch = 8;
  o.instances = 3;
  o.queue_delay_us = 500;
  o.python_path = {"/opt/site"};
  auto r = extension::write_triton_repo(p, (dir_ / "repo").string(), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->max_batch_size, 8);
  EXPECT_EQ(r->batch_symbol, "batch");
  const std::string config = read(dir_ / "repo/mlp/config.pbtxt");
  EXPECT_NE(config.find("name: \"mlp\""), std::string::npos) << config;
  EXPECT_NE(config.find("backend: \"python\""), std::string::npos);
  EXPECT_NE(config.find("max_batch_size: 8"), std::string::npos);
  EXPECT_NE(config.find("{ name: \"x\" data_type: TYPE_FP32 dims: [ 6 ] }"), std::string::npos)
      << config;
  // A [batch] output: one value per request, reshaped to a scalar for the model.
  EXPECT_NE(
      config.find("{ name: \"k\" data_type: TYPE_INT64 dims: [ 1 ] reshape: { shape: [ ] } }"),
      std::string::npos)
      << config;
  EXPECT_NE(config.find("preferred_batch_size: [ 2, 4, 8 ]"), std::string::npos) << config;
  EXPECT_NE(config.find("max_queue_delay_microseconds: 500"), std::string::npos);
  EXPECT_NE(config.find("instance_group [ { count: 3 kind: KIND_CPU } ]"), std::string::npos)
      << config;
  const auto settings = nlohmann::json::parse(read(dir_ / "repo/mlp/1/baton_model.json"));
  EXPECT_EQ(settings["device"], "cpu");
  EXPECT_EQ(settings["batching"], true);
  EXPECT_EQ(settings["inputs"], nlohmann::json::array({"x"}));
  EXPECT_EQ(settings["outputs"], nlohmann::json::array({"y", "k"}));
  EXPECT_EQ(settings["python_path"], nlohmann::json::array({"/opt/site"}));
  EXPECT_EQ(read(dir_ / "repo/mlp/1/model.baton"), read(p));
  const std::string model = read(dir_ / "repo/mlp/1/model.py");
  EXPECT_NE(model.find("class TritonPythonModel"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "repo/.mlp.writing"));

  // Without --max-batch: the largest batch the program takes.
  o.max_batch = 0;
  o.overwrite = true;
  r = extension::write_triton_repo(p, (dir_ / "repo").string(), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->max_batch_size, 16);
}

TEST_F(TritonRepoTest, AFixedProgramIsServedWithoutBatching) {
  const std::string p = program("fixed", false);
  extension::TritonRepoOptions o;
  o.name = "served";
  auto r = extension::write_triton_repo(p, (dir_ / "repo").string(), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->max_batch_size, 0);
  const std::string config = read(dir_ / "repo/served/config.pbtxt");
  EXPECT_NE(config.find("max_batch_size: 0"), std::string::npos);
  EXPECT_NE(config.find("dims: [ 3, 6 ]"), std::string::npos) << config;
  EXPECT_EQ(config.find("dynamic_batching"), std::string::npos) << config;
}

TEST_F(TritonRepoTest, WhatCannotBeServedIsRefusedByName) {
  const std::string batching = program("mlp", true);
  const std::string fixed = program("fixed", false);
  const std::string repo = (dir_ / "repo").string();
  struct Case {
    std::string program;
    extension::TritonRepoOptions options;
    std::string message;
  };
  extension::TritonRepoOptions big, gpus, name, preferred, none;
  big.max_batch = 32;
  gpus.gpus = {0};
  name.name = "a/b";
  preferred.preferred_batch_sizes = {4, 64};
  extension::TritonRepoOptions fixed_batch, no_instances;
  fixed_batch.max_batch = 4;
  no_instances.instances = 0;
  const std::string from_two = program("from_two", true, 16, 2);
  const std::string quoted = program("quoted", true, 16, 1, "x\"q");
  for (const Case& c : {
           Case{batching, big, "--max-batch 32: " + batching + " takes batches of 1..16"},
           Case{batching, gpus, "--gpus asks for GPU instances but the program runs on the CPU"},
           Case{batching, name, "model name 'a/b'"},
           Case{batching, preferred, "preferred batch size 64 is outside 1..16"},
           Case{fixed, fixed_batch, "has no dynamic batch dimension"},
           Case{(dir_ / "missing.baton").string(), none, "missing.baton"},
           Case{batching, no_instances, "--instances 0: at least one instance"},
           Case{from_two, none,
                "its batch dimension 'batch' starts at 2, but Triton sends batches from 1; "
                "compile with --dim batch=1..16"},
           Case{quoted, none, "the tensor name 'x\"q' has a character Triton's config cannot hold"},
       }) {
    auto r = extension::write_triton_repo(c.program, repo, c.options);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().to_string();
  }
  EXPECT_FALSE(fs::exists(dir_ / "repo/mlp")) << "nothing written for a refused request";

  // The model's directory never replaces the program, even with --overwrite.
  extension::TritonRepoOptions onto_program;
  onto_program.name = "mlp.baton";
  onto_program.overwrite = true;
  auto clobber = extension::write_triton_repo(batching, dir_.string(), onto_program);
  ASSERT_FALSE(clobber.ok());
  EXPECT_NE(clobber.status().message().find("is (or holds) the program"), std::string::npos)
      << clobber.status().to_string();
  EXPECT_TRUE(fs::is_regular_file(batching));
  EXPECT_FALSE(extension::write_triton_repo(batching, "", none).ok());

  // An existing model is kept unless --overwrite.
  ASSERT_TRUE(extension::write_triton_repo(batching, repo, none).ok());
  auto again = extension::write_triton_repo(batching, repo, none);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("exists; choose another --name, or replace it with "
                                          "--overwrite"),
            std::string::npos);
}

TEST_F(TritonRepoTest, AProgramWithStateIsRefused) {
  // A cache kept across calls (present = ScatterND(past, pos, rows), past as state): every
  // request would share it.
  OnnxBuilder b(18);
  b.input("past", {4, 6});
  b.input("pos", {1, 1}, 7);
  b.input("rows", {1, 6});
  b.node("ScatterND", {"past", "pos", "rows"}, {"present"}, "update");
  b.node("Relu", {"present"}, {"y"}, "relu");
  b.output("y", {4, 6});
  b.output("present", {4, 6});
  compiler::CompileOptions options;
  options.state = {{"past", "present"}};
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  const std::string p = (dir_ / "stateful.baton").string();
  ASSERT_TRUE(compiled->write(p).ok());
  auto r = extension::write_triton_repo(p, (dir_ / "repo").string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("keeps state"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace baton
