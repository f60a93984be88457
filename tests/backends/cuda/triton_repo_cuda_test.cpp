// write_triton_repo for a GPU program (built for sm_90 here; no GPU needed to write a repository):
// instances are KIND_GPU on the program's GPU or on --gpus (each loads the program there through
// a device map), the settings name the GPU the program was built for, and an output a --io host
// program copies to the host ("y@cpu") is served under the model's name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/cuda/compiler.h"
#include "baton/extension/triton_repo.h"
#include "testing/onnx_builder.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TritonRepoCudaTest, AGpuProgramGetsGpuInstancesAndItsDeviceRecorded) {
  register_builtins();
  cuda::register_compiler();
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("baton_triton_cuda_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  testing::OnnxBuilder b(17);
  b.input_named("x", {-1, 8}, {"batch"}, 1);
  b.initializer("w", {8, 4}, std::vector<float>(32, 0.25f));
  b.node("MatMul", {"x", "w"}, {"y"}, "project");
  b.output("y", {-1, 4});
  auto backend = compiler::make_backend_compiler({Device::cuda(1), "sm_90", "fp16", {}});
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  compiler::CompileOptions options;
  options.backends.push_back(backend->get());
  options.dims = {{"batch", 1, 32, 0, {}}};
  auto compiled = compiler::compile_bytes(b.bytes(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  const std::string program = (dir / "proj.baton").string();
  ASSERT_TRUE(compiled->write(program).ok());

  extension::TritonRepoOptions o;
  o.instances = 2;
  auto own = extension::write_triton_repo(program, (dir / "repo").string(), o);
  ASSERT_TRUE(own.ok()) << own.status().to_string();
  std::string config = read(dir / "repo/proj/config.pbtxt");
  EXPECT_NE(config.find("instance_group [ { count: 2 kind: KIND_GPU gpus: [ 1 ] } ]"),
            std::string::npos)
      << config;
  EXPECT_NE(config.find("{ name: \"y\" data_type: TYPE_FP32 dims: [ 4 ] }"), std::string::npos)
      << config;  // the host copy y@cpu, under the model's name
  EXPECT_EQ(config.find("@"), std::string::npos) << config;
  const auto settings = nlohmann::json::parse(read(dir / "repo/proj/1/baton_model.json"));
  EXPECT_EQ(settings["device"], "cuda:1");
  EXPECT_EQ(settings["outputs"], nlohmann::json::array({"y"}));

  o.gpus = {0, 2, 3};
  o.overwrite = true;
  ASSERT_TRUE(extension::write_triton_repo(program, (dir / "repo").string(), o).ok());
  config = read(dir / "repo/proj/config.pbtxt");
  EXPECT_NE(config.find("instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 2, 3 ] } ]"),
            std::string::npos)
      << config;
  // A GPU index past what a device names is refused.
  o.gpus = {300};
  auto refused = extension::write_triton_repo(program, (dir / "repo").string(), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--gpus: 300 is not a GPU index (0..255)"),
            std::string::npos)
      << refused.status().to_string();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace baton
