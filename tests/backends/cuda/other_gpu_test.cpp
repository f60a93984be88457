// A program built for cuda:1 runs on GPU 1 the way users run it: in a fresh process, through the
// `baton` CLI and through the C++ API, for a real MLP, CNN and transformer, in fp32 and fp16, with
// host and with device I/O. Every run happens in a process of its own (the CLI, or this binary
// re-executed with --child), because a process that ran something on GPU 0 first hides the defect
// this guards against (issue 34: every cuda:1 program faulted with an illegal address when it was
// the first thing its process ran, while an in-process test that ran a cuda:0 program first
// passed). Each cuda:1 run must match the same model built for cuda:0, and its process must hold
// no CUDA context on GPU 0. Skips visibly on a machine with fewer than two GPUs.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/cuda/backend.h"
#include "baton/extension/module.h"
#include "baton/extension/npy.h"
#include "testing/paths.h"
#include "testing/process.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

std::string g_self;  // this binary, re-executed for the C++ API runs

using Process = testing::CommandResult;

// `command` through the shell; stdout only when `stdout_only` (a JSON document), else both.
Process shell(const std::string& command, bool stdout_only = false) {
  return testing::run_command(command + (stdout_only ? " 2>/dev/null" : " 2>&1"));
}

std::string cli() {
  const char* env = std::getenv("BATON_CLI");  // a relocated bundle points at its own binary
  return env ? env : BATON_CLI;
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DType::Float32:
        out[i] = t.data_as<float>()[i];
        break;
      case DType::Float16:
        out[i] = half_to_float(t.data_as<uint16_t>()[i]);
        break;
      default:
        ADD_FAILURE() << "unexpected output dtype " << dtype_name(t.dtype());
        return {};
    }
  }
  return out;
}

// max |a - b| over max(1, max |b|).
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

struct Case {
  const char* name;
  const char* model;  // under tests/e2e/models
  int inputs;
  const char* compile_flags = "";
};

// Small configurations of real exports: cuBLASLt only (MLP), cuDNN convolutions (ResNet),
// attention, LayerNorm and generated kernels (BERT); and BERT as a dynamic program whose OPT shape
// (the inputs' 1 x 16) is prepared at load, its choices timed there, on the program's GPU.
constexpr Case kCases[] = {
    {"mlp", "dynamo18_mlp_gelu", 1},
    {"resnet", "real/dynamo18_resnet", 1},
    {"bert", "real/dynamo18_bert", 2},
    {"bert_dynamic_opt", "real/torchscript17_bert", 2,
     " --dim batch=1..4@1 --dim sequence=1..64@16"},
};

class OtherGpuTest : public ::testing::TestWithParam<std::tuple<Case, std::string, bool>> {
 protected:
  virtual int gpus_wanted() const { return 2; }
  void SetUp() override {
    const int gpus = static_cast<int>(cuda::devices().size());
    if (gpus < gpus_wanted()) {
      GTEST_SKIP() << "needs " << gpus_wanted() << " GPU(s) (this host has " << gpus
                   << "): run on nvidia-h200-x2";
    }
    const auto& [c, precision, io_device] = GetParam();
    dir_ = fs::path(::testing::TempDir()) / fmt::format("baton_other_gpu_{}_{}_{}_{}", ::getpid(),
                                                        c.name, precision,
                                                        io_device ? "device" : "host");
    fs::create_directories(dir_);
    const fs::path base = fs::path(testing::source_dir()) / "tests/e2e/models" / c.model;
    model_ = base.string() + ".onnx";
    for (int i = 0; i < c.inputs; ++i) {
      inputs_.push_back(fmt::format("{}.input_{}.npy", base.string(), i));
    }
  }

  // baton compile for cuda:N (`extra`: more flags); the program's path.
  std::string compile(int gpu, const std::string& extra = "") {
    const auto& [c, precision, io_device] = GetParam();
    const std::string program = (dir_ / fmt::format("cuda{}.baton", gpu)).string();
    const Process r = shell(fmt::format("{} compile {} -o {} --device cuda:{} --precision {}{}{}{}",
                                        cli(), model_, program, gpu, precision,
                                        io_device ? " --io device" : "", c.compile_flags, extra));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return program;
  }

  // baton run in a process of its own (--device-io binds device buffers when the program keeps
  // its I/O on the device): the outputs and the GPUs its process held contexts on.
  // `extra`: more flags (--device-map).
  std::vector<std::vector<float>> run_cli(const std::string& program, std::vector<int>* contexts,
                                          const std::string& extra = "") {
    const bool io_device = std::get<2>(GetParam());
    const fs::path out = dir_ / (fs::path(program).stem().string() + "_cli");
    std::string args = extra;
    for (const std::string& in : inputs_) args += " --input " + in;
    const Process r =
        shell(fmt::format("{} run {}{} --output-dir {} --json --iterations 3 --warmup 1 "
                          "--profile-runs 0{}",
                          cli(), program, args, out.string(), io_device ? " --device-io" : ""),
              /*stdout_only=*/true);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto doc = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(doc.is_object()) << r.output;
    if (!doc.is_object() || r.exit_code != 0) return {};
    *contexts = doc.value("gpu_contexts", std::vector<int>{-1});
    std::ifstream manifest(out / "outputs.json");
    const auto files = nlohmann::json::parse(manifest, nullptr, false);
    std::vector<std::vector<float>> outputs;
    for (const auto& o : files["outputs"]) {
      auto t = extension::read_npy(o.value("file", ""));
      EXPECT_TRUE(t.ok()) << t.status().to_string();
      if (t.ok()) outputs.push_back(as_floats(*t));
    }
    return outputs;
  }

  // This binary re-executed: the C++ API (Module) in a fresh process, with MethodOptions::
  // device_map parsed from `device_map` where one is given.
  std::vector<std::vector<float>> run_api(const std::string& program, std::vector<int>* contexts,
                                          const std::string& device_map = "") {
    const fs::path out = dir_ / (fs::path(program).stem().string() + "_api");
    fs::create_directories(out);
    std::string args;
    for (const std::string& in : inputs_) args += " " + in;
    const std::string env = device_map.empty() ? "" : "BATON_TEST_DEVICE_MAP=" + device_map + " ";
    const Process r =
        shell(fmt::format("{}{} --child {} {}{}", env, g_self, program, out.string(), args));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.exit_code != 0) return {};
    std::ifstream report(out / "report.json");
    const auto doc = nlohmann::json::parse(report, nullptr, false);
    *contexts = doc.value("gpu_contexts", std::vector<int>{-1});
    std::vector<std::vector<float>> outputs;
    for (int i = 0; i < doc.value("outputs", 0); ++i) {
      auto t = extension::read_npy((out / fmt::format("output_{}.npy", i)).string());
      EXPECT_TRUE(t.ok()) << t.status().to_string();
      if (t.ok()) outputs.push_back(as_floats(*t));
    }
    return outputs;
  }

  void expect_same(const std::vector<std::vector<float>>& on1,
                   const std::vector<std::vector<float>>& on0, const char* how) {
    const std::string& precision = std::get<1>(GetParam());
    // Both GPUs are the same model, but each build times its own algorithm choices: another
    // algorithm may sum in another order. fp32 is strict (no TF32); fp16 keeps 11 bits.
    const double bound = precision == "fp32" ? 1e-4 : 1e-2;
    ASSERT_EQ(on1.size(), on0.size()) << how;
    ASSERT_FALSE(on0.empty()) << how;
    for (size_t o = 0; o < on0.size(); ++o) {
      EXPECT_LE(relative_error(on1[o], on0[o]), bound) << how << ": output " << o;
    }
  }

  fs::path dir_;
  std::string model_;
  std::vector<std::string> inputs_;
};

TEST_P(OtherGpuTest, ACuda1ProgramMatchesCuda0AndLeavesGpu0Alone) {
  const std::string on0_program = compile(0);
  const std::string on1_program = compile(1);
  ASSERT_FALSE(HasFailure());
  for (const char* how : {"baton run", "C++ API"}) {
    const bool api = std::strcmp(how, "C++ API") == 0;
    std::vector<int> contexts0, contexts1;
    const auto on0 = api ? run_api(on0_program, &contexts0) : run_cli(on0_program, &contexts0);
    const auto on1 = api ? run_api(on1_program, &contexts1) : run_cli(on1_program, &contexts1);
    expect_same(on1, on0, how);
    EXPECT_EQ(contexts0, std::vector<int>{0}) << how << ": the cuda:0 program's process";
    EXPECT_EQ(contexts1, std::vector<int>{1})
        << how << ": the cuda:1 program's process (a context on GPU 0 costs about 0.5 GiB there)";
  }
}

std::string case_name(const ::testing::TestParamInfo<OtherGpuTest::ParamType>& info) {
  const auto& [c, precision, io_device] = info.param;
  return fmt::format("{}_{}_{}", c.name, precision, io_device ? "device_io" : "host_io");
}

INSTANTIATE_TEST_SUITE_P(Models, OtherGpuTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values("fp32", "fp16"), ::testing::Bool()),
                         case_name);

// A device map relocates a program (docs/serving.md): one built for cuda:1 (here for sm_90 by name:
// a one-GPU host has no GPU 1 to read it from) runs on GPU 0 with --device-map cuda:1=cuda:0, in a
// fresh process through the CLI and the C++ API, matching the model built for cuda:0 and holding a
// context on GPU 0 alone; without the map it is refused with the map suggested. With two GPUs the
// cuda:0 program also runs on GPU 1 (cuda:0=cuda:1), touching only GPU 1.
class DeviceMapGpuTest : public OtherGpuTest {
 protected:
  int gpus_wanted() const override { return 1; }
};

TEST_P(DeviceMapGpuTest, AProgramRunsOnTheGpuItIsMappedTo) {
  const std::string on0_program = compile(0);
  const std::string on1_program = compile(1, " --arch sm_90");
  ASSERT_FALSE(HasFailure());
  std::vector<int> contexts0, mapped_contexts;
  const auto on0 = run_cli(on0_program, &contexts0);
  const auto mapped = run_cli(on1_program, &mapped_contexts, " --device-map cuda:1=cuda:0");
  expect_same(mapped, on0, "cuda:1 program mapped to cuda:0 (baton run)");
  EXPECT_EQ(mapped_contexts, std::vector<int>{0});
  std::vector<int> api_contexts;
  const auto api = run_api(on1_program, &api_contexts, "cuda:1=cuda:0");
  expect_same(api, on0, "cuda:1 program mapped to cuda:0 (C++ API)");
  EXPECT_EQ(api_contexts, std::vector<int>{0});
  if (cuda::devices().size() < 2) {
    const Process r = shell(fmt::format("{} run {} --iterations 1", cli(), on1_program));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("--device-map cuda:1=cuda:0"), std::string::npos) << r.output;
  } else {
    std::vector<int> contexts1;
    const auto on1 = run_cli(on0_program, &contexts1, " --device-map cuda:0=cuda:1");
    expect_same(on1, on0, "cuda:0 program mapped to cuda:1 (baton run)");
    EXPECT_EQ(contexts1, std::vector<int>{1});
  }
  // A map that names a GPU the program does not use is refused by name.
  const Process wrong =
      shell(fmt::format("{} run {} --iterations 1 --device-map cuda:3=cuda:0", cli(), on0_program));
  EXPECT_NE(wrong.exit_code, 0) << wrong.output;
  EXPECT_NE(wrong.output.find("has nothing on cuda:3"), std::string::npos) << wrong.output;
}

constexpr Case kMapCases[] = {kCases[0], kCases[2]};  // cuBLASLt alone; attention and kernels

INSTANTIATE_TEST_SUITE_P(Models, DeviceMapGpuTest,
                         ::testing::Combine(::testing::ValuesIn(kMapCases),
                                            ::testing::Values("fp32", "fp16"), ::testing::Bool()),
                         case_name);

// --child PROGRAM OUT_DIR INPUT.npy...: loads PROGRAM with the C++ API, runs it three times on the
// inputs (host tensors; the runtime copies them to the program's devices), writes the last
// outputs to OUT_DIR/output_<i>.npy and OUT_DIR/report.json (output count, gpu_contexts).
int child(int argc, char** argv) {
  if (argc < 4) return 2;
  register_builtins();
  cuda::register_backend();
  runtime::MethodOptions options;
  if (const char* map = std::getenv("BATON_TEST_DEVICE_MAP")) {
    auto parsed = runtime::parse_device_map(map);
    if (!parsed.ok()) {
      std::fprintf(stderr, "error: %s\n", parsed.status().to_string().c_str());
      return 1;
    }
    options.device_map = std::move(parsed).value();
  }
  auto module = extension::Module::load(argv[2], "forward", options);
  if (!module.ok()) {
    std::fprintf(stderr, "error: %s\n", module.status().to_string().c_str());
    return 1;
  }
  std::vector<Tensor> inputs;
  for (int i = 4; i < argc; ++i) {
    auto t = extension::read_npy(argv[i]);
    if (!t.ok()) {
      std::fprintf(stderr, "error: %s\n", t.status().to_string().c_str());
      return 1;
    }
    inputs.push_back(std::move(t).value());
  }
  std::vector<Tensor> last;
  for (int run = 0; run < 3; ++run) {
    auto outputs = module->run(inputs);
    if (!outputs.ok()) {
      std::fprintf(stderr, "error: %s\n", outputs.status().to_string().c_str());
      return 1;
    }
    last = std::move(outputs).value();
  }
  const std::vector<Tensor>* outputs = &last;
  const fs::path out = argv[3];
  for (size_t o = 0; o < outputs->size(); ++o) {
    const Status s = extension::write_npy((out / fmt::format("output_{}.npy", o)).string(),
                                          (*outputs)[o].view());
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  const nlohmann::json report = {{"outputs", outputs->size()},
                                 {"gpu_contexts", cuda::active_contexts()}};
  std::ofstream(out / "report.json") << report.dump();
  return 0;
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return baton::child(argc, argv);
  baton::g_self = std::filesystem::canonical("/proc/self/exe").string();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
