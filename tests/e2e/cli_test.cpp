// The baton command-line tool as a user drives it: compile, run, inspect, and the errors a user
// sees for bad input. Runs the real binary.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "baton/extension/npy.h"
#include "kernels/cpu/packed_gemm.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"
#include "testing/process.h"
#include "testing/random.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

// `prefix` goes before the binary (e.g. "timeout 60" for a command that must not hang). The
// output is stdout and stderr, or stdout alone (a JSON document) without `with_stderr`.
CliRun baton(const std::string& args, const std::string& prefix = "", bool with_stderr = true) {
  const char* cli = std::getenv("BATON_CLI");  // a relocated bundle points at its own binary
  const std::string command = prefix + (prefix.empty() ? "" : " ") +
                              std::string(cli ? cli : BATON_CLI) + " " + args +
                              (with_stderr ? " 2>&1" : " 2>/dev/null");
  const testing::CommandResult r = testing::run_command(command);
  return CliRun{r.exit_code, r.output};
}

// The file `baton run -o DIR` wrote output `index` to, as DIR/outputs.json (the manifest) names
// it: output_<index>_<tensor name>.npy.
std::string output_file(const fs::path& dir, size_t index) {
  std::ifstream in(dir / "outputs.json");
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("outputs") || index >= j["outputs"].size()) return "";
  return j["outputs"][index].value("file", "");
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One folder per process: ctest runs these tests as parallel processes.
    dir_ = fs::path(::testing::TempDir()) / ("baton_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    models_ = testing::e2e_models_dir();
    const CliRun r = baton("compile " + (models_ / "dynamo20_mlp_gelu.onnx").string() + " -o " +
                           (dir_ / "mlp.baton").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static std::string program() { return (dir_ / "mlp.baton").string(); }
  static fs::path dir_;
  static fs::path models_;
};

fs::path CliTest::dir_;
fs::path CliTest::models_;

TEST_F(CliTest, CompileReportsPhasesAndResult) {
  const CliRun r = baton("compile " + (models_ / "ts17_mlp_gelu.onnx").string() + " -o " +
                         (dir_ / "ts.baton").string() + " --shape input=8x64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* phase :
       {"import", "infer", "partition", "lower", "place", "plan", "emit", "wrote"}) {
    EXPECT_NE(r.output.find(phase), std::string::npos) << phase << "\n" << r.output;
  }
  EXPECT_NE(r.output.find(" ms"), std::string::npos);
}

TEST_F(CliTest, RunWithNamedInputWritesOutputsMatchingOnnxRuntime) {
  const std::string out_dir = (dir_ / "out").string();
  const CliRun r = baton("run " + program() +
                         " --input x=" + (models_ / "dynamo20_mlp_gelu.input_0.npy").string() +
                         " --output-dir " + out_dir + " --iterations 5 --warmup 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("output 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[8, 16]"), std::string::npos);
  EXPECT_NE(r.output.find("where it ran"), std::string::npos);
  EXPECT_NE(r.output.find("cpu"), std::string::npos);
  for (const char* stat : {"min", "median", "p90", "p99"}) {
    EXPECT_NE(r.output.find(stat), std::string::npos) << stat;
  }
  auto got = extension::read_npy(output_file(out_dir, 0));
  auto want = extension::read_npy((models_ / "dynamo20_mlp_gelu.output_0.npy").string());
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_LE(testing::relative_error(got->data_as<float>(), want->data_as<float>(), want->numel()),
            1e-5);
}

TEST_F(CliTest, RunWithPositionalAndRandomInputs) {
  CliRun r = baton("run " + program() + " " + "--input " +
                   (models_ / "dynamo20_mlp_gelu.input_0.npy").string() + " -n 2 --warmup 0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = baton("run " + program() + " -n 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(random)"), std::string::npos) << r.output;
  // The load time is reported, split into the program and the method.
  EXPECT_NE(r.output.find("loaded in "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" ms (program "), std::string::npos) << r.output;
}

// --threads sets the CPU kernels' threads (reported), the same outputs come back, and a count out
// of range is refused before loading.
TEST_F(CliTest, RunThreadsOption) {
  const std::string input = " --input " + (models_ / "dynamo20_mlp_gelu.input_0.npy").string();
  const fs::path one = dir_ / "threads1", three = dir_ / "threads3";
  CliRun r = baton("run " + program() + input + " -n 2 --threads 1 -o " + one.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu threads 1\n"), std::string::npos) << r.output;
  r = baton("run " + program() + input + " -n 2 --threads 3 -o " + three.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu threads 3\n"), std::string::npos) << r.output;
  auto a = extension::read_npy(output_file(one, 0));
  auto b = extension::read_npy(output_file(three, 0));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LE(testing::relative_error(b->data_as<float>(), a->data_as<float>(), a->numel()), 1e-6);
  r = baton("run " + program() + " --threads 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
}

// --saturate-rest needs --sms (refused before the program loads, GPU or not); on a GPU, the run
// says how the other SMs were kept busy and that they were for the whole timed loop.
TEST_F(CliTest, SaturateRestNeedsSmsAndKeepsTheOtherSmsBusy) {
  CliRun r = baton("run " + program() + " --saturate-rest -n 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--saturate-rest keeps the SMs outside the green context of --sms N "
                          "busy: give --sms N too"),
            std::string::npos)
      << r.output;
  r = baton("run " + program() + " --saturate-rest --device-io -n 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("give --sms N too"), std::string::npos) << r.output;

  // Compiled for the GPU that is here (no --arch): refused without one.
  const std::string model = (models_ / "dynamo20_mlp_gelu.onnx").string();
  const std::string gpu_program = (dir_ / "saturate.baton").string();
  r = baton("compile -q " + model + " -o " + gpu_program + " --device cuda:0 --io device");
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  if (r.output.find("this machine has no GPU") != std::string::npos)
    GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("run " + gpu_program + " --device-io --sms 16 --saturate-rest -n 200 --warmup 5",
            "timeout 120");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stream: green context of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SMs kept busy by a competing kernel"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all resident) for the whole timed loop"), std::string::npos) << r.output;
  std::printf("%s", r.output.substr(r.output.find("stream: green")).c_str());
}

TEST_F(CliTest, WrongInputShapeDtypeAndCountAreExplained) {
  std::mt19937 rng(1);
  const std::string wrong_shape = (dir_ / "wrong_shape.npy").string();
  ASSERT_TRUE(extension::write_npy(wrong_shape, testing::random_tensor(rng, {8, 63}).view()).ok());
  CliRun r = baton("run " + program() + " --input x=" + wrong_shape);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("input 0 ('x') expects float32 [8, 64], but '" + wrong_shape +
                          "' holds float32 [8, 63]"),
            std::string::npos)
      << r.output;

  const std::string wrong_dtype = (dir_ / "wrong_dtype.npy").string();
  ASSERT_TRUE(
      extension::write_npy(wrong_dtype, testing::random_int64_tensor(rng, {8, 64}, 0, 9).view())
          .ok());
  r = baton("run " + program() + " --input " + wrong_dtype);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("holds int64 [8, 64]"), std::string::npos) << r.output;

  const std::string good = (models_ / "dynamo20_mlp_gelu.input_0.npy").string();
  r = baton("run " + program() + " --input " + good + " --input " + good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("takes only 1 input(s)"), std::string::npos) << r.output;

  r = baton("run " + program() + " --input x=/nonexistent.npy");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot open '/nonexistent.npy'"), std::string::npos) << r.output;

  r = baton("run " + program() + " --input typo=" + good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("the program has no input named 'typo' (its inputs: 'x')"),
            std::string::npos)
      << r.output;
}

TEST_F(CliTest, TwoInputsByNameAndMissingOne) {
  ASSERT_EQ(baton("compile -q " + (models_ / "two_inputs_folded.onnx").string() + " -o " +
                  (dir_ / "two.baton").string())
                .exit_code,
            0);
  const std::string a = (models_ / "two_inputs_folded.input_0.npy").string();
  const std::string b = (models_ / "two_inputs_folded.input_1.npy").string();
  CliRun r = baton("run " + (dir_ / "two.baton").string() + " --input b=" + b + " --input a=" + a +
                   " -o " + (dir_ / "two_out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto got = extension::read_npy(output_file(dir_ / "two_out", 0));
  auto want = extension::read_npy((models_ / "two_inputs_folded.output_0.npy").string());
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_LE(testing::relative_error(got->data_as<float>(), want->data_as<float>(), want->numel()),
            1e-5);
  r = baton("run " + (dir_ / "two.baton").string() + " --input b=" + b);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing --input for 'a' float32 [3, 5]"), std::string::npos) << r.output;
}

// The done-when of the CPU milestone: `baton compile` + `baton run` reproduce onnxruntime on
// MLPs exported by torch.onnx.export with both exporters.
TEST_F(CliTest, ReproducesOnnxRuntimeOnRealTorchExports) {
  const fs::path models = fs::path(testing::source_dir()) / "tests/e2e/models";
  struct Case {
    const char* name;
    const char* shape;
  };
  for (const Case& c : {Case{"torchscript17_mlp_gelu", " --shape input=8x48"},
                        Case{"torchscript17_mlp_relu", " --shape input=8x48"},
                        Case{"dynamo18_mlp_gelu", ""}, Case{"dynamo20_mlp_gelu_odd", ""}}) {
    SCOPED_TRACE(c.name);
    const std::string prog = (dir_ / (std::string(c.name) + ".baton")).string();
    CliRun r = baton("compile -q " + (models / (std::string(c.name) + ".onnx")).string() + " -o " +
                     prog + c.shape);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string out = (dir_ / (std::string(c.name) + "_out")).string();
    r = baton("run -q " + prog + " --input input=" +
              (models / (std::string(c.name) + ".input_0.npy")).string() + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto got = extension::read_npy(output_file(out, 0));
    auto want = extension::read_npy((models / (std::string(c.name) + ".output_0.npy")).string());
    ASSERT_TRUE(got.ok() && want.ok());
    ASSERT_EQ(got->sizes(), want->sizes());
    EXPECT_LE(testing::relative_error(got->data_as<float>(), want->data_as<float>(), want->numel()),
              1e-5);
  }
}

// Device options: an engine needs no GPU to build (--arch), and `--device cuda` means cuda:0.
TEST_F(CliTest, GpuTargetsAndDeviceLabels) {
  const std::string model = (models_ / "dynamo20_mlp_gelu.onnx").string();
  const std::string a = (dir_ / "gpu_a.baton").string(), b = (dir_ / "gpu_b.baton").string();
  // On a GPU host the engine's algorithms are timed and recorded, and timings differ between
  // builds: the build option tune_candidates=1 makes the builds reproducible (docs/options.md).
  const std::string reproducible = " --cuda-option tune_candidates=1";
  CliRun r =
      baton("compile -q " + model + " -o " + a + " --device cuda --arch sm_90" + reproducible);
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("compile -q " + model + " -o " + b +
            " --device cuda:0 --arch sm_90 --target-device cuda:0" + reproducible);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::string bytes_a((std::istreambuf_iterator<char>(fa)), {}),
      bytes_b((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_EQ(bytes_a, bytes_b)
      << "--device cuda and an explicit cuda:0 label must give the same file";

  r = baton("inspect --json " + a);
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.output);
  const auto& d = j["methods"][0]["delegates"][0];
  EXPECT_EQ(d["target_device"], "cuda:0");
  EXPECT_EQ(d["engine_device"], "cuda:0");
  EXPECT_EQ(d["device"], "cuda:0");  // recorded in the program (format version 3)
  EXPECT_EQ(d["sm_arch"], "sm_90");
  bool saw_copy = false;
  for (const auto& ins : j["methods"][0]["instructions"]) {
    if (ins["kind"] != "copy") continue;
    saw_copy = true;
    EXPECT_TRUE(ins.contains("src_device") && ins.contains("dst_device"));
  }
  EXPECT_TRUE(saw_copy);

  r = baton("compile -q " + model + " -o " + a + " --device cuda:0 --arch sm_90 --io device");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("inspect --json " + a);
  const auto k = nlohmann::json::parse(r.output);
  for (const auto& ins : k["methods"][0]["instructions"]) EXPECT_NE(ins["kind"], "copy");

  // A list of GPUs is assigned round robin (every partition labelled with its own engine's GPU,
  // device-to-device copies between them); a map gives a partition its GPU.
  auto labels_and_copies = [&](const std::string& file) {
    const CliRun i = baton("inspect --json " + file);
    EXPECT_EQ(i.exit_code, 0) << i.output;
    const auto m = nlohmann::json::parse(i.output)["methods"][0];
    std::vector<std::string> labels, engines, copies;
    for (const auto& del : m["delegates"]) {
      labels.push_back(del["target_device"]);
      engines.push_back(del["engine_device"]);
      EXPECT_EQ(del["device"], del["engine_device"]) << "the recorded device is the engine's";
    }
    EXPECT_EQ(labels, engines);
    for (const auto& ins : m["instructions"]) {
      if (ins["kind"] == "copy") {
        copies.push_back(ins["src_device"].get<std::string>() + ">" +
                         ins["dst_device"].get<std::string>());
      }
    }
    return std::make_pair(labels, copies);
  };
  r = baton("compile -q " + model + " -o " + a +
            " --device cuda:1,cuda:0 --arch sm_90 --max-partition-nodes 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto [labels, copies] = labels_and_copies(a);
  ASSERT_GE(labels.size(), 2u);
  for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(labels[i], i % 2 ? "cuda:0" : "cuda:1");
  ASSERT_EQ(copies.size(), labels.size() + 1);  // in, one between each pair, out
  EXPECT_EQ(copies.front(), "cpu>cuda:1");
  EXPECT_EQ(copies[1], "cuda:1>cuda:0");
  EXPECT_EQ(copies.back(), labels.back() + ">cpu");
  r = baton("compile -q " + model + " -o " + a + " --device 0=cuda:1 --arch sm_90");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(labels_and_copies(a).first, std::vector<std::string>{"cuda:1"});

  for (const char* bad : {"--device gpu0", "--device cuda:0,cpu", "--device 0=cuda:0,cuda:1",
                          "--device 0=cuda:0,0=cuda:1", "--device cpu --precision fp16"}) {
    r = baton("compile -q " + model + " -o " + a + " --arch sm_90 " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--"), std::string::npos) << r.output;
  }
}

// -q keeps a compile quiet: no progress and no info lines (a dynamic GPU compile writes several),
// warnings aside, unless BATON_LOG_LEVEL asks for them; without -q the info lines are there.
TEST_F(CliTest, QuietCompilesWriteNoInfoLines) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/torchscript17_mlp_gelu.onnx").string();
  const std::string out = (dir_ / "quiet.baton").string();
  const std::string args =
      "compile " + model + " -o " + out + " --device cuda:0 --arch sm_90 --dim batch=1..16";
  const std::string clean_env = "env -u BATON_LOG_LEVEL";  // whatever the caller's environment
  CliRun r = baton(args, clean_env);
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("baton [info] cuda: partition 'cuda_0' is dynamic"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("wrote "), std::string::npos) << r.output;
  r = baton(args + " -q", clean_env);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("baton [info]"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("wrote "), std::string::npos) << r.output;
  r = baton(args + " -q", "env BATON_LOG_LEVEL=info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("baton [info]"), std::string::npos) << r.output;
  // A variable that names no level leaves the default, which -q lowers.
  r = baton(args + " -q", "env BATON_LOG_LEVEL=loud");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("baton [info]"), std::string::npos) << r.output;
}

// Build options go with --cuda-option KEY=VALUE, are recorded in each engine and shown by inspect;
// load options go with --load-option. Unknown keys and values are refused, naming the valid ones.
TEST_F(CliTest, CudaAndLoadOptionsAreRecordedShownAndRefusedByName) {
  const std::string model = (models_ / "dynamo20_mlp_gelu.onnx").string();
  const std::string a = (dir_ / "options.baton").string();
  const std::string gpu = " --device cuda:0 --arch sm_90";
  CliRun r = baton("compile -q " + model + " -o " + a + gpu +
                   " --cuda-option conv_rows=cudnn --cuda-option tune_candidates=1");
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("inspect --json " + a, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_FALSE(j["methods"][0]["delegates"].empty());
  for (const auto& d : j["methods"][0]["delegates"]) {
    EXPECT_EQ(d["engine"]["options"], nlohmann::json::parse(R"({"conv_rows": "cudnn",
        "conv_patches": "gemm", "conv_hard_activations": "fused", "gemm_gelu": "cudnn",
        "concat": "in_place", "reduce_columns": "split", "kernel_sizes": "arguments",
        "tune_candidates": "1"})"));
  }
  r = baton("inspect " + a);
  EXPECT_NE(r.output.find("options: concat=in_place conv_hard_activations=fused conv_patches=gemm "
                          "conv_rows=cudnn gemm_gelu=cudnn kernel_sizes=arguments "
                          "reduce_columns=split tune_candidates=1"),
            std::string::npos)
      << r.output;

  struct Bad {
    std::string args, message;
  };
  for (const Bad& bad : {
           Bad{"--cuda-option conv_rows=sideways" + gpu,
               "--cuda-option: CUDA build option conv_rows='sideways': the value is one of "
               "kernel, cudnn"},
           Bad{"--cuda-option conv_row=cudnn" + gpu,
               "--cuda-option: unknown CUDA build option 'conv_row': the options are conv_rows, "
               "conv_patches, conv_hard_activations, gemm_gelu, concat, reduce_columns, "
               "kernel_sizes, "
               "tune_candidates, dump_kernel_source"},
           Bad{"--cuda-option tune_candidates=64" + gpu, "a whole number from 1 to 32"},
           Bad{"--cuda-option conv_rows" + gpu, "'conv_rows' is not KEY=VALUE"},
           Bad{"--cuda-option conv_rows=cudnn", "apply to GPU targets: add --device cuda:N"},
       }) {
    SCOPED_TRACE(bad.args);
    r = baton("compile -q " + model + " -o " + a + " " + bad.args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(bad.message), std::string::npos) << r.output;
  }

  // Load options are checked whatever the program runs on: this one is CPU-only, and a valid
  // CUDA load option is accepted while a misspelt one is refused.
  r = baton("run -q " + program() + " --load-option cuda_graphs=0 --load-option graph_edges=full");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const Bad& bad : {
           Bad{"--load-option cuda_graph=0",
               "unknown load option 'cuda_graph': the options are cuda_graphs (cuda), "
               "cuda_graph_shapes (cuda), cuda_pdl "
               "(cuda), strict_staging (cuda), graph_edges (cuda), tune_candidates (cuda)"},
           Bad{"--load-option graph_edges=captured",
               "load option graph_edges='captured': the value is one of own, full"},
           Bad{"--load-option cuda_pdl=off",
               "load option cuda_pdl='off': the value is one of 0, 1"},
           Bad{"--load-option cuda_graphs", "--load-option 'cuda_graphs' is not KEY=VALUE"},
       }) {
    SCOPED_TRACE(bad.args);
    r = baton("run -q " + program() + " " + bad.args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(bad.message), std::string::npos) << r.output;
  }
  // The help lists every key with its values and default.
  r = baton("compile --help");
  EXPECT_NE(r.output.find("conv_rows: kernel, cudnn (default: kernel)"), std::string::npos)
      << r.output;
  r = baton("run --help");
  EXPECT_NE(r.output.find("graph_edges: own, full (default: own)"), std::string::npos) << r.output;
}

TEST_F(CliTest, InspectJsonHasTheDocumentedKeys) {
  const CliRun r = baton("inspect --json " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.contains("methods"));
  EXPECT_EQ(j["format_version"], 4);
  EXPECT_EQ(j["table_checksum"].get<std::string>().size(), 16u);
  ASSERT_FALSE(j["segments"].empty());
  for (const auto& seg : j["segments"]) {
    for (const char* key : {"index", "offset", "size", "checksum"}) {
      EXPECT_TRUE(seg.contains(key)) << key;
    }
  }
  const auto& m = j["methods"][0];
  for (const char* key : {"values", "instructions", "delegates", "arenas", "inputs", "outputs"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  bool saw_tensor = false;
  for (const auto& v : m["values"]) {
    for (const char* key : {"index", "kind"}) EXPECT_TRUE(v.contains(key)) << key;
    if (v["kind"] == "tensor") {
      saw_tensor = true;
      for (const char* key : {"name", "dtype", "shape", "device", "arena", "offset"}) {
        EXPECT_TRUE(v.contains(key)) << key;
      }
      EXPECT_EQ(v["device"], "cpu");
    }
  }
  EXPECT_TRUE(saw_tensor);
  for (const auto& ins : m["instructions"]) {
    EXPECT_TRUE(ins["kind"] == "kernel" || ins["kind"] == "delegate" || ins["kind"] == "copy");
    EXPECT_TRUE(ins.contains("args"));
    if (ins["kind"] == "kernel") {
      EXPECT_TRUE(ins.contains("operator"));
    }
  }
  for (const auto& a : m["arenas"]) {
    EXPECT_TRUE(a.contains("device"));
    EXPECT_TRUE(a.contains("size"));
  }
  // Two Linears with their GELU (fuse-linear) and the last Gemm.
  EXPECT_GE(m["instructions"].size(), 3u);
}

TEST_F(CliTest, InspectTextShowsEverything) {
  const CliRun r = baton("inspect " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"method 'forward'", "arenas:", "instructions:", "values:", "MatMul",
                             "Gelu", "tensor 'x' float32 [8, 64] cpu arena 0"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

// inspect --load loads the method as run would and shows the CPU kernels' scratch: one shared
// area as large as the largest kernel's need (not the sum; the float16 MLP's three Linears each
// hold float copies), growing with the threads where a kernel keeps a piece per thread
// (attention's scores); `run --json` reports the same size.
// The packed copies of constant weights the CPU kernels make at load (a float32 Linear's W, in
// panels of 32 or 16 columns, kernels/cpu/packed_gemm.h) are reported: `baton run` says how much
// and `--json` has cpu_held_bytes; `inspect --load` lists each holder. The odd-sized MLP's two
// Linears hold W of 31 x 63 and 63 x 7 floats, their columns padded to whole panels.
TEST_F(CliTest, RunAndInspectReportThePackedWeightCopies) {
  const std::string mlp = (dir_ / "mlp_packed.baton").string();
  CliRun r = baton("compile " + (models_ / "dynamo18_mlp_relu_odd.onnx").string() + " -o " + mlp);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  using kernels::cpu::packed_size;
  const bool packs = kernels::cpu::packed_gemm_available();
  const uint64_t first = packs ? packed_size(31, 63) * sizeof(float) : 0;
  const uint64_t second = packs ? packed_size(63, 7) * sizeof(float) : 0;
  EXPECT_TRUE(!packs || (first == 31 * 64 * 4 && second >= 63 * 7 * 4)) << first << " " << second;
  r = baton("run --json -n 1 " + mlp, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto run = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(run.is_object()) << r.output;
  EXPECT_EQ(run["cpu_held_bytes"].get<uint64_t>(), first + second);
  r = baton("run -n 1 " + mlp);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (!packs) {
    EXPECT_EQ(r.output.find("cpu packed weights"), std::string::npos) << r.output;
    GTEST_SKIP() << "this CPU has no packed kernels (AVX2 with FMA or AVX-512): nothing is packed";
  }
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex("cpu packed weights [0-9.]+ KiB \\(copies of constant "
                                             "weights made at load for Baton's own GEMM kernels, "
                                             "2 kernels\\)")))
      << r.output;
  r = baton("inspect --json --load " + mlp, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto inspected = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(inspected.is_object()) << r.output;
  const nlohmann::json& loaded = inspected["methods"][0]["loaded"];
  EXPECT_EQ(loaded["held_bytes"].get<uint64_t>(), first + second);
  ASSERT_EQ(loaded["kernel_held"].size(), 2u) << loaded;
  EXPECT_EQ(loaded["kernel_held"][0]["bytes"].get<uint64_t>(), first);
  EXPECT_EQ(loaded["kernel_held"][1]["bytes"].get<uint64_t>(), second);
  EXPECT_NE(loaded["kernel_held"][0]["kernel"].get<std::string>().find("Linear"),
            std::string::npos);
  r = baton("inspect --load " + mlp);
  EXPECT_NE(r.output.find("KiB, held by the kernels (copies of constant weights"),
            std::string::npos)
      << r.output;
  // A CNN's convolutions with shallow weights pack them too (packed_rows_gemm), and say so.
  const std::string cnn = (dir_ / "mobilenet_packed.baton").string();
  r = baton(
      "compile " +
      (fs::path(testing::source_dir()) / "tests/e2e/models/real/dynamo18_mobilenet.onnx").string() +
      " -o " + cnn);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("inspect --json --load " + cnn, "", /*with_stderr=*/false);
  const auto conv = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(conv.is_object()) << r.output;
  int convolutions = 0;
  for (const auto& k : conv["methods"][0]["loaded"]["kernel_held"]) {
    convolutions += k["kernel"].get<std::string>().find("Conv") != std::string::npos;
  }
  EXPECT_GT(convolutions, 0) << conv["methods"][0]["loaded"];
}

TEST_F(CliTest, InspectLoadShowsTheKernelScratch) {
  auto loaded = [&](const std::string& program, unsigned threads) {
    const CliRun i =
        baton("inspect --json --load --threads " + std::to_string(threads) + " " + program, "",
              /*with_stderr=*/false);
    EXPECT_EQ(i.exit_code, 0) << i.output;
    const auto j = nlohmann::json::parse(i.output, nullptr, /*allow_exceptions=*/false);
    return j.is_object() ? j["methods"][0]["loaded"] : nlohmann::json();
  };
  const std::string mlp = (dir_ / "mlp_fp16_scratch.baton").string();
  CliRun r = baton("compile " + (models_ / "dynamo20_mlp_fp16.onnx").string() + " -o " + mlp);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json shared = loaded(mlp, 1);
  ASSERT_TRUE(shared.is_object()) << shared;
  uint64_t largest = 0, sum = 0, holders = 0;
  for (const auto& k : shared["kernel_scratch"]) {
    const uint64_t bytes = k["bytes"].get<uint64_t>();
    largest = std::max(largest, bytes);
    sum += bytes;
    holders += bytes > 0 ? 1 : 0;
  }
  EXPECT_GE(holders, 2u) << shared;
  EXPECT_EQ(shared["scratch_bytes"].get<uint64_t>(), largest);
  EXPECT_LT(largest, sum) << "the kernels share one area";

  const std::string model = (dir_ / "attention_scratch.baton").string();
  r = baton("compile " + (models_ / "attention_ops.onnx").string() + " -o " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json one = loaded(model, 1), four = loaded(model, 4);
  ASSERT_TRUE(one.is_object() && four.is_object()) << one << four;
  EXPECT_EQ(one["cpu_threads"], 1);
  EXPECT_TRUE(one["delegates"].is_array() && one["delegates"].empty()) << "a CPU program";
  uint64_t attention = 0;
  for (const auto& k : one["kernel_scratch"]) {
    if (k["kernel"].get<std::string>().find("Attention") != std::string::npos) {
      attention += k["bytes"].get<uint64_t>();
    }
  }
  EXPECT_GT(attention, 0u) << one;
  EXPECT_GT(four["scratch_bytes"].get<uint64_t>(), one["scratch_bytes"].get<uint64_t>());

  r = baton("run --json -n 1 --threads 4 " + model, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto run = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(run.is_object()) << r.output;
  EXPECT_EQ(run["cpu_scratch_bytes"], four["scratch_bytes"]);

  r = baton("inspect --load --threads 1 " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loaded with 1 cpu threads: kernel scratch"), std::string::npos)
      << r.output;
  r = baton("inspect --load --threads 0 " + model);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
}

void write_model(const fs::path& path, const testing::OnnxBuilder& b) {
  const std::vector<uint8_t> bytes = b.bytes();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A GPU compile names every node it leaves on the CPU and why (issue 38): a warning grouped by
// reason by default, nothing with --fallback allow, a refusal with --fallback error; the program
// keeps the list, which inspect shows (text and JSON). Hardmax has a CPU kernel and no CUDA
// lowering; Relu has one, which does not take int32 (the reason then names the operands); a
// CPU-only compile lists nothing.
TEST_F(CliTest, CpuFallbacksAreNamedAndCanBeRefused) {
  testing::OnnxBuilder b(14);
  b.input("x", {4, 8});
  b.input("n", {4, 8}, onnx::TensorProto::INT32);
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Hardmax", {"r"}, {"c"}, "pick_max");
  b.node("Hardmax", {"c"}, {"c2"}, "pick_max_2");
  b.node("Sigmoid", {"c2"}, {"y"}, "squash");
  b.node("Relu", {"n"}, {"m"}, "int_relu");
  b.output("y", {4, 8});
  b.output("m", {4, 8}, onnx::TensorProto::INT32);
  const fs::path model = dir_ / "hardmax.onnx";
  write_model(model, b);
  const std::string program = (dir_ / "hardmax.baton").string();
  const std::string gpu = " --device cuda:0 --arch sm_90";
  const std::string reason = "no CUDA lowering for Hardmax (2 nodes): 'pick_max', 'pick_max_2'";
  // Default: warn, naming the nodes by reason, and compile.
  CliRun r = baton("compile " + model.string() + " -o " + program + gpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 nodes run on the CPU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(reason), std::string::npos) << r.output;
  const std::string operands =
      "the CUDA lowering of Relu does not take this form of it (inputs "
      "int32[4, 8]; outputs int32[4, 8]) (1 node): 'int_relu'";
  EXPECT_NE(r.output.find(operands), std::string::npos) << r.output;
  // The program keeps the list.
  r = baton("inspect --json " + program, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  const auto& fallbacks = j["methods"][0]["fallbacks"];
  ASSERT_EQ(fallbacks.size(), 3u) << r.output;
  EXPECT_EQ(fallbacks[0]["node"], "pick_max");
  EXPECT_EQ(fallbacks[0]["op"], "Hardmax");
  EXPECT_EQ(fallbacks[0]["reason"], "no CUDA lowering for Hardmax");
  EXPECT_EQ(fallbacks[1]["node"], "pick_max_2");
  // And grouped by reason, as the compile's warning lists them.
  const auto& reasons = j["methods"][0]["fallback_reasons"];
  ASSERT_EQ(reasons.size(), 2u) << r.output;
  EXPECT_EQ(reasons[0]["reason"], "no CUDA lowering for Hardmax");
  EXPECT_EQ(reasons[0]["nodes"], nlohmann::json({"pick_max", "pick_max_2"}));
  EXPECT_EQ(reasons[1]["nodes"], nlohmann::json({"int_relu"}));
  r = baton("inspect " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("on the cpu (3 nodes a GPU backend does not take):\n    Hardmax "
                          "'pick_max': no CUDA lowering for Hardmax"),
            std::string::npos)
      << r.output;
  // allow: the same program, no warning.
  r = baton("compile " + model.string() + " -o " + program + gpu + " --fallback allow");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("run on the CPU"), std::string::npos) << r.output;
  // error: refused, naming them and the way out.
  fs::remove(program);
  r = baton("compile " + model.string() + " -o " + program + gpu + " --fallback error");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 nodes would run on the CPU, and fallbacks are refused (--fallback "
                          "error)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(reason), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(program));
  r = baton("compile " + model.string() + " -o " + program + gpu + " --fallback never");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--fallback"), std::string::npos) << r.output;
  // A CPU program has no fallbacks to name, whatever the policy.
  r = baton("compile " + model.string() + " -o " + program + " --fallback error");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("inspect --json " + program, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(nlohmann::json::parse(r.output)["methods"][0]["fallbacks"].empty()) << r.output;
}

// A node named with bytes that are not UTF-8 compiles; inspect shows the name with those bytes as
// \xNN, in valid JSON and in the text view, instead of dying on a JSON exception.
// --state (docs/state.md) on a small GPT-2 decoder with a static KV cache: the compile lists the
// pairs it bound, inspect shows them (text and JSON), run takes only the remaining inputs, and a
// pair that is not an in-place update is refused naming it.
TEST_F(CliTest, StateIsBoundShownAndRefusedByName) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/decode/gpt2_index_put_full_dynamo.onnx")
          .string();
  const std::string program = (dir_ / "decoder.baton").string();
  const std::string dims = " --dim batch=1..8 --dim new_tokens=1..64";
  CliRun r = baton("compile " + model + " -o " + program + dims + " --state auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("state 'past_key_0', updated in place as 'present_key_0' (no longer an "
                          "input or output)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("state 'past_value_1', updated in place as 'present_value_1'"),
            std::string::npos)
      << r.output;
  r = baton("inspect --json " + program, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["format_version"], 5);
  const auto& method = j["methods"][0];
  ASSERT_EQ(method["state"].size(), 4u) << r.output;
  EXPECT_EQ(method["state"][0]["name"], "past_key_0");
  EXPECT_EQ(method["state"][0]["update_name"], "present_key_0");
  EXPECT_EQ(method["inputs"].size(), 3u);
  EXPECT_EQ(method["outputs"].size(), 1u);
  r = baton("inspect " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("state (kept across calls, updated in place; reset_state() zeroes "
                          "it):\n    'past_key_0' <- 'present_key_0'  arena 0 offset"),
            std::string::npos)
      << r.output;
  // A prefill of 8 tokens of batch 2 through the three inputs that are left: the caches are not
  // asked for, and every run of the call writes the same positions of them.
  std::mt19937 rng(5);
  std::vector<int64_t> positions(8), mask(2 * 64, 0);
  for (int64_t p = 0; p < 8; ++p) {
    positions[p] = p;
    mask[p] = mask[64 + p] = 1;
  }
  const std::vector<int64_t> position_sizes{8}, mask_sizes{2, 64};
  const std::string ids = (dir_ / "ids.npy").string(), pos = (dir_ / "pos.npy").string(),
                    am = (dir_ / "mask.npy").string();
  ASSERT_TRUE(
      extension::write_npy(ids, testing::random_int64_tensor(rng, {2, 8}, 0, 99).view()).ok());
  ASSERT_TRUE(extension::write_npy(pos, {positions.data(), DType::Int64, position_sizes}).ok());
  ASSERT_TRUE(extension::write_npy(am, {mask.data(), DType::Int64, mask_sizes}).ok());
  r = baton("run " + program + " --input input_ids=" + ids + " --input cache_position=" + pos +
            " --input attention_mask=" + am + " --iterations 3 --warmup 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[2, 8, 100]"), std::string::npos) << r.output;
  r = baton("compile " + model + " -o " + program + dims + " --state past_key_0=present_key_1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--state past_key_0=present_key_1: the output is computed by "
                          "ScatterND"),
            std::string::npos)
      << r.output;
  r = baton("compile " + model + " -o " + program + dims + " --state past_key_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--state 'past_key_0': expected INPUT=OUTPUT"), std::string::npos)
      << r.output;
}

// baton generate (docs/generate.md) on the small GPT-2 decoder with its caches as state: the JSON
// report's tokens are the quiet output's, the text report names the time to the first token, the
// per-token latency and what was copied; a program without state, a bad prompt and a sequence
// longer than the cache are refused by name.
TEST_F(CliTest, GenerateReportsTokensAndTimesAndRefusesByName) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/decode/gpt2_index_put_full_dynamo.onnx")
          .string();
  const std::string program = (dir_ / "decoder.baton").string();
  const std::string plain = (dir_ / "plain.baton").string();
  const std::string dims = " --dim batch=1..8 --dim new_tokens=1..64";
  ASSERT_EQ(baton("compile " + model + " -o " + program + dims + " --state auto -q").exit_code, 0);
  CliRun r = baton("generate " + program + " --prompt-ids 5,17,42,3,99 --max-new-tokens 30 --json",
                   "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["tokens"].size(), 30u) << r.output;
  EXPECT_EQ(j["prompt_tokens"], 5);
  EXPECT_EQ(j["prefill_calls"], 1);
  EXPECT_EQ(j["token_ms"]["count"], 29);
  EXPECT_GT(j["first_token_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["state"]["tensors"], 4);
  EXPECT_EQ(j["state"]["device"], "cpu");
  EXPECT_EQ(j["staged_bytes"], 0);
  // Ids, positions and the 64-position mask in, one vocabulary row (100 floats) out, per call.
  EXPECT_EQ(j["bytes_in"], 8 * (5 + 5 + 64) + 29 * 8 * (1 + 1 + 64));
  EXPECT_EQ(j["bytes_out"], 30 * 100 * 4);
  r = baton("generate " + program + " --prompt-ids 5,17,42,3,99 --max-new-tokens 30 -q", "",
            /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string tokens;
  for (const auto& t : j["tokens"])
    tokens += (tokens.empty() ? "" : " ") + std::to_string(t.get<int64_t>());
  EXPECT_EQ(r.output, tokens + "\n");
  r = baton("generate " + program + " --prompt-ids 5,17,42,3,99 --max-new-tokens 30");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line :
       {"tokens: ", "prompt: 5 tokens in 1 call (up to 64 per call)",
        "time to first token: ", "per token: median ", "over 29 tokens", "state: 4 tensors, ",
        "on cpu, updated in place", "moved per call (mean): ",
        "bytes out (the last position's logits); "
        "the cache: none",
        "staged by delegates: 0 bytes"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  ASSERT_EQ(baton("compile " + model + " -o " + plain + dims + " -q").exit_code, 0);
  r = baton("generate " + plain + " --prompt-ids 5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("keeps no state, so every call would start from an empty key/value "
                          "cache; compile the decoder with --state auto"),
            std::string::npos)
      << r.output;
  r = baton("generate " + program + " --prompt-ids 5,,6");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--prompt-ids: '' is not a token id"), std::string::npos) << r.output;
  // Teacher forcing with the generated tokens gives the same choices back.
  std::string forced;
  for (size_t k = 0; k + 1 < j["tokens"].size(); ++k)
    forced += (forced.empty() ? "" : ",") + std::to_string(j["tokens"][k].get<int64_t>());
  r = baton("generate " + program +
                " --prompt-ids 5,17,42,3,99 --max-new-tokens 30 -q --force-ids " + forced,
            "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, tokens + "\n");
  r = baton("generate " + program + " --prompt-ids 5 --force-ids 1,x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--force-ids: 'x' is not a token id"), std::string::npos) << r.output;
  r = baton("generate " + program + " --prompt-ids 5 --max-new-tokens 65");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("65 positions (1 prompt tokens and 65 new) do not fit the model's "
                          "cache of 64"),
            std::string::npos)
      << r.output;
  r = baton("generate " + program);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--prompt-ids is required"), std::string::npos) << r.output;

  // Top-k sampling inside the program: a seed gives one sequence, and another seed another.
  const std::string sampled = (dir_ / "sampled.baton").string();
  ASSERT_EQ(
      baton("compile " + model + " -o " + sampled + dims + " --state auto --sample top-k=10 -q")
          .exit_code,
      0);
  const std::string gen = "generate " + sampled + " --prompt-ids 5,17,42 --max-new-tokens 30 -q";
  CliRun s1 = baton(gen + " --seed 1 --temperature 1.5", "", /*with_stderr=*/false);
  CliRun s1again = baton(gen + " --seed 1 --temperature 1.5", "", /*with_stderr=*/false);
  CliRun s2 = baton(gen + " --seed 2 --temperature 1.5 --top-p 0.9", "", /*with_stderr=*/false);
  ASSERT_EQ(s1.exit_code, 0) << s1.output;
  ASSERT_EQ(s2.exit_code, 0) << s2.output;
  EXPECT_EQ(s1.output, s1again.output);
  EXPECT_NE(s1.output, s2.output);
  r = baton("compile " + model + " -o " + sampled + dims + " --sample top-k=0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--sample top-k=0: expected top-k=K with K from 1 to 1024"),
            std::string::npos)
      << r.output;
  r = baton("compile " + model + " -o " + sampled + dims + " --sample nucleus");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("expected 'greedy' (the most likely token) or 'top-k=K'"),
            std::string::npos)
      << r.output;
}

TEST_F(CliTest, InspectShowsNamesThatAreNotUtf8) {
  testing::OnnxBuilder b;
  b.input("x\xff", {2, 3});
  b.node("Relu", {"x\xff"}, {"y"}, "NODE\xff\xfe");
  b.node("Relu", {"y"}, {"z"}, "line\nbreak\x1b[2J");
  b.output("z", {2, 3});
  const fs::path model = dir_ / "bad_utf8.onnx";
  write_model(model, b);
  const std::string program = (dir_ / "bad_utf8.baton").string();
  CliRun r = baton("compile -q " + model.string() + " -o " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  r = baton("inspect --json " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.output;
  const auto& instructions = j["methods"][0]["instructions"];
  ASSERT_EQ(instructions.size(), 2u);
  EXPECT_EQ(instructions[0]["node"], "NODE\\xff\\xfe");
  EXPECT_EQ(instructions[1]["node"], "line\nbreak\x1b[2J");  // valid UTF-8: kept in the JSON
  bool saw_input = false;
  for (const auto& v : j["methods"][0]["values"]) saw_input = saw_input || v["name"] == "x\\xff";
  EXPECT_TRUE(saw_input) << j["methods"][0]["values"].dump(2);

  r = baton("inspect " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle :
       {"Relu 'NODE\\xff\\xfe'", "tensor 'x\\xff' float32 [2, 3]", "'line\\x0abreak\\x1b[2J'"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "a control character reached the terminal";
}

// The model must be a regular file: /dev/zero would be read until memory runs out, a FIFO would
// block forever.
TEST_F(CliTest, CompileRefusesModelsThatAreNotRegularFiles) {
  const std::string out = (dir_ / "never.baton").string();
  CliRun r = baton("compile -q /dev/zero -o " + out, "timeout 60");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("model '/dev/zero' is a character device, not a regular file"),
            std::string::npos)
      << r.output;
  const fs::path fifo = dir_ / "model.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = baton("compile -q " + fifo.string() + " -o " + out, "timeout 60");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // 124 when it blocked
  EXPECT_NE(r.output.find("is a FIFO (named pipe), not a regular file"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out));
}

// Constant folding within --max-fold-bytes; beyond it the node runs at run time, and a node that
// would make terabytes is refused by the arena limit before anything is allocated.
TEST_F(CliTest, FoldingAndArenaLimits) {
  auto outer_sum = [](int64_t n) {
    testing::OnnxBuilder b;
    b.input("x", {1});
    b.initializer("col", {n, 1}, std::vector<float>(static_cast<size_t>(n), 1.0f));
    b.initializer("row", {1, n}, std::vector<float>(static_cast<size_t>(n), 2.0f));
    b.node("Add", {"col", "row"}, {"grid"}, "outer_sum");
    b.node("Add", {"grid", "x"}, {"y"}, "plus_x");
    b.output("y", {n, n});
    return b;
  };
  const fs::path small = dir_ / "outer_small.onnx";
  write_model(small, outer_sum(1024));  // a 4 MiB folded output
  const std::string program = (dir_ / "outer.baton").string();
  CliRun r = baton("compile " + small.string() + " -o " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 nodes folded,"), std::string::npos) << r.output;
  r = baton("compile " + small.string() + " -o " + program + " --max-fold-bytes 1MiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 nodes folded, 1 left to run time"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Add node 'outer_sum' (4194304 bytes)"), std::string::npos) << r.output;
  r = baton("run -q " + program);
  EXPECT_EQ(r.exit_code, 0) << r.output;

  const fs::path huge = dir_ / "outer_huge.onnx";
  write_model(huge, outer_sum(int64_t{1} << 20));  // 8 MiB of model, a 4 TiB sum
  r = baton("compile -q " + huge.string() + " -o " + program);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* needle : {"memory arena on cpu would be", "--max-arena-bytes",
                             "made by Add node 'outer_sum'", "4398046511104 bytes"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("OutOfMemory"), std::string::npos) << r.output;
}

TEST_F(CliTest, BadFilesGiveErrorsNotCrashes) {
  const fs::path junk = dir_ / "junk.baton";
  {
    FILE* f = std::fopen(junk.c_str(), "wb");
    std::fputs("definitely not a program", f);
    std::fclose(f);
  }
  CliRun r = baton("run " + junk.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("InvalidProgram"), std::string::npos) << r.output;
  r = baton("inspect " + junk.string());
  EXPECT_EQ(r.exit_code, 1);
  r = baton("compile " + junk.string() + " -o " + (dir_ / "x.baton").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("is not an ONNX model"), std::string::npos) << r.output;
  r = baton("run /nonexistent.baton");
  EXPECT_NE(r.exit_code, 0);
  r = baton("compile " + (models_ / "ts17_mlp_gelu.onnx").string() + " -o " +
            (dir_ / "x.baton").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--shape input="), std::string::npos) << r.output;
  r = baton("compile " + (models_ / "ts17_mlp_gelu.onnx").string() + " -o " +
            (dir_ / "x.baton").string() + " --shape input=8xq");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'q' is not a non-negative dimension"), std::string::npos) << r.output;
  // A GPU that is not here, without --arch (cuda:0 would build on a GPU host).
  r = baton("compile " + (models_ / "ts17_mlp_gelu.onnx").string() + " -o " +
            (dir_ / "x.baton").string() + " --device cuda:64 --shape input=8x64");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cuda:64"), std::string::npos) << r.output;
  for (const char* gpu_only : {"--strict-staging", "--max-partition-nodes 3", "--precision fp16"}) {
    SCOPED_TRACE(gpu_only);
    r = baton("compile " + (models_ / "ts17_mlp_gelu.onnx").string() + " -o " +
              (dir_ / "x.baton").string() + " --shape input=8x64 " + gpu_only);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("apply to GPU targets: add --device cuda:N"), std::string::npos)
        << r.output;
  }
  // Command lines that do not parse exit 2, as docs/cli.md says.
  for (const char* bad : {"frobnicate", "compile", "run --iterations -3 x.baton",
                          "compile m.onnx -o x.baton --io sideways"}) {
    SCOPED_TRACE(bad);
    r = baton(bad);
    EXPECT_EQ(r.exit_code, 2) << r.output;
  }
  EXPECT_EQ(baton("--help").exit_code, 0);
}

// A changed weight used to print NaN with exit code 0; now it is an error naming the segment and
// its byte range, and --no-checksums (run and inspect) loads the file anyway.
TEST_F(CliTest, DamagedProgramIsRefusedUnlessChecksumsAreSkipped) {
  const fs::path damaged = dir_ / "damaged.baton";
  fs::copy_file(program(), damaged, fs::copy_options::overwrite_existing);
  const CliRun described = baton("inspect --json " + program());
  ASSERT_EQ(described.exit_code, 0) << described.output;
  const auto seg = nlohmann::json::parse(described.output)["segments"][0];
  const uint64_t begin = seg["offset"].get<uint64_t>();
  const uint64_t end = begin + seg["size"].get<uint64_t>();
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>((begin + end) / 2);
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x40));
  }
  CliRun r = baton("run " + damaged.string() + " -n 1 --warmup 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(fmt::format("segments[0] (constants of method 'forward': ")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("at file bytes [{}, {}) hashes to", begin, end)),
            std::string::npos)
      << r.output;
  r = baton("run " + damaged.string() + " -n 1 --warmup 0 --no-checksums");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(baton("inspect " + damaged.string()).exit_code, 1);
  r = baton("inspect --no-checksums " + damaged.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// compile -o replaces only a regular file (as root it turned /dev/full into one).
TEST_F(CliTest, CompileOutputMustBeARegularFile) {
  const std::string compile = "compile " + (models_ / "dynamo20_mlp_gelu.onnx").string() + " -o ";
  fs::create_directories(dir_ / "out_dir.baton");
  CliRun r = baton(compile + (dir_ / "out_dir.baton").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("it is a directory, not a regular file"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_directory(dir_ / "out_dir.baton"));
  r = baton(compile + "/dev/full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("refusing to write '/dev/full': it is a character device"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  const fs::path fifo = dir_ / "out.fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = baton(compile + fifo.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("it is a FIFO (named pipe), not a regular file"), std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// Issue 14, "errors that lead somewhere": every parse error is prefixed, trtexec's flags get
// Baton's spelling (or mean the same: --shapes, --verbose), a typo gets the closest option, a
// bad -o is refused before compiling, and the GPU options and GPU programs on a machine without a
// GPU say exactly that.
TEST_F(CliTest, ErrorsLeadSomewhere) {
  const std::string model = (models_ / "dynamo20_mlp_gelu.onnx").string();
  const std::string out = (dir_ / "errors.baton").string();
  struct Case {
    std::string args, expected;
  };
  const Case parse_errors[] = {
      {"compile " + model + " -o " + out + " --fp16", "did you mean --precision fp16"},
      {"compile " + model + " --saveEngine=" + out, "did you mean -o FILE"},
      {"run " + program() + " --warmUp=100", "did you mean --warmup N"},
      {"run " + program() + " --loadEngine=" + program(), "did you mean baton run FILE"},
      {"run " + program() + " --warmpu 3", "(did you mean --warmup?)"},
      // The suggestion is for the unknown option, not for a known one before it.
      {"run " + program() + " --iterations 2 --warmpu 3", "(did you mean --warmup?)"},
      {"run " + program() + " --ITERATIONS 3", "(did you mean --iterations?)"},
      {"", "A subcommand is required"},
      {"compile", "model is required"},
  };
  for (const Case& c : parse_errors) {
    const CliRun r = baton(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("baton: error: ", 0), 0u) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << "\n" << r.output;
  }

  // trtexec's --shapes NAME:DIMS means Baton's --shape NAME=DIMS.
  const std::string symbolic =
      (fs::path(testing::source_dir()) / "tests/e2e/models/torchscript17_mlp_gelu.onnx").string();
  CliRun r = baton("compile -q " + symbolic + " -o " + out + " --shapes=input:8x48");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("inspect " + out);
  EXPECT_NE(r.output.find("'input' float32 [8, 48]"), std::string::npos) << r.output;
  r = baton("run " + out + " -n 2 --verbose");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // A bad output path is refused before compiling (no phase was reported).
  r = baton("compile " + model + " -o " + (dir_ / "no_such_folder" / "x.baton").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not exist (create it first: mkdir -p"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("import"), std::string::npos) << r.output;

  // Without a GPU: the GPU options, and a program built for one.
  r = baton("compile -q " + model + " -o " + (dir_ / "sm90.baton").string() +
            " --device cuda:0 --arch sm_90");
  if (r.output.find("has no cuda backend") != std::string::npos) return;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("compile -q " + model + " -o " + out + " --device cuda:0");
  if (r.output.find("this machine has no GPU") == std::string::npos) {
    GTEST_SUCCEED() << "a GPU is here: the no-GPU messages are not reachable";
    return;
  }
  r = baton("run " + program() + " --sms 16 -n 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--sms needs a usable NVIDIA GPU, and this machine has none"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("driver version"), std::string::npos) << r.output;
  r = baton("run " + (dir_ / "sm90.baton").string() + " -n 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("needs cuda:0, and this machine has no usable NVIDIA GPU"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("baton compile dynamo20_mlp_gelu.onnx -o " +
                          (dir_ / "sm90.baton").string() + " --device cpu"),
            std::string::npos)
      << r.output;
}

// ---- compare, machine-readable results, traces, readable output (issue 14) --------------------

// stdout alone (a JSON document), with the exit status.
CliRun baton_stdout(const std::string& args, const std::string& prefix = "") {
  return baton(args, prefix, /*with_stderr=*/false);
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// " --shape NAME=D0xD1 ..." for a manifest case's fixed shapes.
std::string shape_flags(const nlohmann::json& c) {
  std::string out;
  const nlohmann::json shapes = c.value("shapes", nlohmann::json::object());
  for (const auto& [name, dims] : shapes.items()) {
    std::string d;
    for (const auto& x : dims) d += (d.empty() ? "" : "x") + std::to_string(x.get<int64_t>());
    out += " --shape " + name + "=" + d;
  }
  return out;
}

// `baton compare --json` on every model of a manifest: each output matches onnxruntime.
void expect_every_model_matches(const fs::path& dir) {
  const nlohmann::json manifest = read_json(dir / "manifest.json");
  ASSERT_TRUE(manifest.is_object()) << dir;
  size_t compared = 0;
  for (const auto& c : manifest["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const CliRun r = baton_stdout("compare --json " +
                                  (dir / c["model"].get<std::string>()).string() + shape_flags(c));
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.output
                               << baton("compare " +
                                        (dir / c["model"].get<std::string>()).string() +
                                        shape_flags(c))
                                      .output;
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(j["match"], true) << r.output;
    ASSERT_EQ(j["outputs"].size(), c.value("outputs", 1)) << r.output;
    for (const auto& o : j["outputs"]) {
      EXPECT_EQ(o["mismatches"], 0) << r.output;
      EXPECT_GT(o["elements"].get<int64_t>(), 0) << r.output;
      EXPECT_TRUE(o["max_abs_error"].is_number()) << r.output;
    }
    ++compared;
  }
  EXPECT_GT(compared, 0u);
  std::printf("compare: %zu models of %s match onnxruntime\n", compared, dir.string().c_str());
}

TEST_F(CliTest, CompareMatchesEveryCommittedModel) {
  const fs::path models = fs::path(testing::source_dir()) / "tests/e2e/models";
  expect_every_model_matches(models);
  expect_every_model_matches(models / "real");
}

TEST_F(CliTest, CompareMatchesEveryGeneratedModel) { expect_every_model_matches(models_); }

// The float32 constant named `name` in a program: its bytes' offset in the file, and its count.
std::pair<uint64_t, int64_t> constant_in_file(const std::string& program, const std::string& name) {
  const auto j = nlohmann::json::parse(baton_stdout("inspect --json " + program).output, nullptr,
                                       /*allow_exceptions=*/false);
  if (!j.is_object()) return {0, 0};  // the caller's count check fails
  for (const auto& v : j["methods"][0]["values"]) {
    if (v.value("name", "") != name || v["allocation"] != "constant") continue;
    int64_t n = 1;
    for (const auto& d : v["shape"]) n *= d.get<int64_t>();
    const uint64_t segment = j["segments"][v["constant_segment"].get<int>()]["offset"];
    return {segment + v["offset"].get<uint64_t>(), n};
  }
  return {0, 0};
}

// Adds `delta` to the first `count` floats at `offset` of `path`.
void alter_floats(const std::string& path, uint64_t offset, int count, float delta) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  for (int i = 0; i < count; ++i) {
    float v = 0;
    f.seekg(static_cast<std::streamoff>(offset + 4 * i));
    f.read(reinterpret_cast<char*>(&v), 4);
    v += delta;
    f.seekp(static_cast<std::streamoff>(offset + 4 * i));
    f.write(reinterpret_cast<const char*>(&v), 4);
  }
}

// A program whose weights were altered after compiling: compare says where the outputs differ
// most and exits 3; the checksums refuse the file unless told not to look.
TEST_F(CliTest, CompareNamesTheWorstElementOfAlteredWeights) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/torchscript17_mlp_gelu.onnx").string();
  const std::string prog = (dir_ / "altered.baton").string();
  ASSERT_EQ(baton("compile -q " + model + " -o " + prog + " --shape input=8x48").exit_code, 0);
  CliRun r = baton("compare " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("match: 1 output within tolerance"), std::string::npos) << r.output;

  const auto [offset, count] = constant_in_file(prog, "net.4.bias");
  ASSERT_EQ(count, 24);
  alter_floats(prog, offset + 4 * 5, 1, 0.25f);  // output column 5 of every row moves by 0.25
  r = baton("compare " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("checksum"), std::string::npos) << r.output;

  r = baton("compare --no-checksums " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("MISMATCH  8 of 192 outside; worst at ["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", 5]: baton "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MISMATCH: 1 of 1 outputs outside tolerance"), std::string::npos)
      << r.output;

  r = baton_stdout("compare --json --no-checksums " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 3);
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["match"], false);
  const auto& o = j["outputs"][0];
  EXPECT_EQ(o["mismatches"], 8);
  EXPECT_EQ(o["elements"], 192);
  EXPECT_EQ(o["worst"]["index"][1], 5);
  EXPECT_NEAR(o["worst"]["abs_error"].get<double>(), 0.25, 1e-5);
  EXPECT_NEAR(o["max_abs_error"].get<double>(), 0.25, 1e-5);
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["atol"], 1e-5);
  EXPECT_EQ(j["rtol"], 1e-4);

  // Tolerances are the caller's to widen: 0.3 absolute lets the altered column pass.
  r = baton("compare --no-checksums --atol 0.3 " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A model whose output is a scalar (ReduceSum with keepdims=0 over every axis): compare matches it
// (at 52eb145 the reference side wrote every 0-d result as shape (1,), a mismatch every time).
TEST_F(CliTest, CompareMatchesAScalarOutput) {
  testing::OnnxBuilder b;
  b.input("x", {3, 5});
  auto& n = b.node("ReduceSum", {"x"}, {"y"}, "sum");
  testing::OnnxBuilder::attr_int(n, "keepdims", 0);
  b.output("y", {});
  const fs::path model = dir_ / "scalar.onnx";
  write_model(model, b);
  const CliRun r = baton_stdout("compare --json " + model.string());
  ASSERT_EQ(r.exit_code, 0) << baton("compare " + model.string()).output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["match"], true);
  EXPECT_EQ(j["outputs"][0]["elements"], 1);
}

// Negative counts are refused by name (CLI11 read "-5" into an unsigned count as 2^64 - 5 at
// 52eb145, and --max-partition-nodes -5 was accepted).
TEST_F(CliTest, NegativeCountsAreRefused) {
  const std::string model = (models_ / "dynamo20_mlp_gelu.onnx").string();
  CliRun r = baton("compile -q " + model + " -o " + (dir_ / "neg.baton").string() +
                   " --device cuda:0 --arch sm_90 --max-partition-nodes -5");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--max-partition-nodes"), std::string::npos) << r.output;
  r = baton("run -q " + program() + " --seed -1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--seed"), std::string::npos) << r.output;
}

// Report files never write through a symbolic link planted where the report goes: not at the old
// temporary name (PATH.tmp), not at the report's own name (--trace, --export-times,
// --export-profile, -o DIR's outputs.json). At 52eb145 each overwrote the file the link led to.
TEST_F(CliTest, ReportsNeverWriteThroughPlantedLinks) {
  const fs::path d = dir_ / "planted";
  fs::create_directories(d / "out");
  const fs::path victim = d / "victim";
  const auto reset = [&] { std::ofstream(victim, std::ios::trunc) << "precious"; };
  const auto victim_text = [&] {
    std::ifstream in(victim);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const char* flag : {"--trace", "--export-times", "--export-profile"}) {
    for (const char* suffix : {".tmp", ""}) {
      reset();
      const fs::path report = d / "report.json";
      fs::remove(report);
      fs::remove(d / "report.json.tmp");
      fs::create_symlink(victim, d / (std::string("report.json") + suffix));
      const CliRun r =
          baton("run -q " + program() + " -n 2 --profile-runs 1 " + flag + " " + report.string());
      EXPECT_EQ(r.exit_code, 0) << flag << suffix << ": " << r.output;
      EXPECT_EQ(victim_text(), "precious") << flag << ": a link at report.json" << suffix;
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(report))) << flag << suffix;
    }
  }
  reset();
  fs::create_symlink(victim, d / "out" / "outputs.json");
  fs::create_symlink(victim, d / "out" / "outputs.json.tmp");
  const CliRun r = baton("run -q " + program() + " -n 1 -o " + (d / "out").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(victim_text(), "precious") << "-o DIR's outputs.json";
}

// --per-node: the values before the altered weight match; the first that differs is the first
// value computed from it. The program has the values the optimizer kept: each Gemm and the GELU
// after it are one Linear (fuse-linear), whose output is the GELU's ('/net/net.1/Mul_1_output_0',
// the last node of the exporter's GELU chain).
TEST_F(CliTest, ComparePerNodeNamesTheFirstDivergingNode) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/torchscript17_mlp_gelu.onnx").string();
  CliRun r = baton("compare --per-node " + model + " --shape input=8x48");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 intermediate values, in the order the program computes them"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("'/net/net.1/Mul_1_output_0' (Mul node '/net/net.1/Mul_1')"),
            std::string::npos)
      << r.output;

  const std::string prog = (dir_ / "per_node.baton").string();
  ASSERT_EQ(baton("compile -q " + model + " -o " + prog + " --shape input=8x48").exit_code, 0);
  r = baton("compare --per-node " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("has only the model's outputs. Compile it with --expose-intermediates"),
            std::string::npos)
      << r.output;

  ASSERT_EQ(
      baton("compile -q --expose-intermediates " + model + " -o " + prog + " --shape input=8x48")
          .exit_code,
      0);
  const auto [offset, count] = constant_in_file(prog, "net.2.weight");
  ASSERT_EQ(count, 96 * 96);
  alter_floats(prog, offset, 96, 0.5f);
  r = baton_stdout("compare --json --per-node --no-checksums " + model + " " + prog);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["values"].size(), 2u) << r.output;
  EXPECT_EQ(j["values"][0]["name"], "/net/net.1/Mul_1_output_0");
  EXPECT_EQ(j["values"][0]["match"], true);
  EXPECT_EQ(j["values"][1]["match"], false);
  EXPECT_EQ(j["first_mismatch"]["node"], "/net/net.3/Mul_1");
  EXPECT_EQ(j["first_mismatch"]["op"], "Mul");
  EXPECT_EQ(j["first_mismatch"]["intermediate"], true);
  EXPECT_EQ(j["outputs"][0]["match"], false);
  r = baton("compare --per-node --no-checksums " + model + " " + prog);
  EXPECT_NE(r.output.find("the first value that differs is '/net/net.3/Mul_1_output_0' of Mul "
                          "node '/net/net.3/Mul_1'"),
            std::string::npos)
      << r.output;
}

TEST_F(CliTest, CompareErrorsSayWhatToDo) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/torchscript17_mlp_gelu.onnx").string();
  const std::string prog = (dir_ / "cmp_err.baton").string();
  ASSERT_EQ(baton("compile -q " + model + " -o " + prog + " --shape input=8x48").exit_code, 0);
  CliRun r = baton("compare " + model + " " + prog + " --shape input=8x48");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("with PROGRAM given there is nothing to compile"), std::string::npos)
      << r.output;

  // A program compiled from another model: said before onnxruntime runs.
  r = baton("compare " + (models_ / "two_inputs_folded.onnx").string() + " " + prog);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("two_inputs_folded.onnx takes inputs 'a', 'b' and gives outputs"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("takes 'input' and gives 'output': was the program compiled from"),
            std::string::npos)
      << r.output;

  // --per-node on a model with nothing in between: its output is all there is to compare.
  testing::OnnxBuilder one;
  one.input("x", {2, 3});
  one.node("Relu", {"x"}, {"y"}, "relu");
  one.output("y", {2, 3});
  const fs::path one_node = dir_ / "one_node.onnx";
  write_model(one_node, one);
  r = baton("compare --per-node " + one_node.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 intermediate values, in the order"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("match: 1 output and 0 intermediate values within tolerance"),
            std::string::npos)
      << r.output;

  r = baton("compare " + model + " --shape input=8x48", "BATON_PYTHON=/no/such/python");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'/no/such/python' cannot be run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Set BATON_PYTHON"), std::string::npos) << r.output;

  // An interpreter without onnxruntime (a module that fails to import stands in for it).
  const fs::path fake = dir_ / "no_ort";
  fs::create_directories(fake);
  std::ofstream(fake / "onnxruntime.py") << "raise ImportError('No module named onnxruntime', "
                                            "name='onnxruntime')\n";
  r = baton("compare " + model + " --shape input=8x48", "PYTHONPATH=" + fake.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot import onnxruntime"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pip install onnxruntime"), std::string::npos) << r.output;

  r = baton("compare " + model + " --shape input=8x48 --atol -1");
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // --save-dir keeps what both sides read and wrote; a folder it cannot make is named.
  const fs::path kept = dir_ / "kept";
  r = baton("compare -q " + model + " --shape input=8x48 --save-dir " + kept.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"input_0.npy", "baton_0.npy", "reference_0.npy", "request.json",
                        "reference.json", "program.baton"}) {
    EXPECT_TRUE(fs::exists(kept / f)) << f;
  }
  auto ours = extension::read_npy((kept / "baton_0.npy").string());
  auto theirs = extension::read_npy((kept / "reference_0.npy").string());
  ASSERT_TRUE(ours.ok() && theirs.ok());
  EXPECT_LE(
      testing::relative_error(ours->data_as<float>(), theirs->data_as<float>(), theirs->numel()),
      1e-5);
  r = baton("compare " + model + " --shape input=8x48 --save-dir " +
            (fs::path(program()) / "sub").string());  // below a file
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--save-dir '" + (fs::path(program()) / "sub").string() + "': "),
            std::string::npos)
      << r.output;
}

TEST_F(CliTest, RunJsonIsOneDocument) {
  const CliRun r = baton_stdout("run --json -n 7 --warmup 2 --profile-runs 3 " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);  // the whole of stdout
  EXPECT_EQ(j["program"], program());
  EXPECT_EQ(j["devices"], nlohmann::json::array({"cpu"}));
  EXPECT_GT(j["load_ms"]["total"].get<double>(), 0.0);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["source"], "random");
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::array({8, 16}));
  for (const char* k : {"min", "max", "mean", "nan", "first"})
    EXPECT_TRUE(j["outputs"][0]["stats"].contains(k)) << k;
  const auto& l = j["latency_ms"];
  EXPECT_EQ(l["runs"], 7);
  EXPECT_EQ(l["warmup"], 2);
  EXPECT_LE(l["min"].get<double>(), l["median"].get<double>());
  EXPECT_LE(l["median"].get<double>(), l["p90"].get<double>());
  EXPECT_LE(l["p99"].get<double>(), l["max"].get<double>());
  EXPECT_GT(j["throughput_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["staged_bytes"], 0);
  const auto& p = j["profile"];
  EXPECT_EQ(p["runs"], 3);
  ASSERT_FALSE(p["instructions"].empty());
  double share = 0;
  for (const auto& x : p["instructions"]) {
    EXPECT_EQ(x["device"], "cpu");
    EXPECT_FALSE(x["op"].get<std::string>().empty());
    share += x["share"].get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-6);
}

TEST_F(CliTest, RunExportsTimesProfileAndTrace) {
  const fs::path times = dir_ / "times.json", prof = dir_ / "profile.json",
                 trace = dir_ / "trace.json";
  CliRun r =
      baton("run -q -n 9 --warmup 1 --profile-runs 2 --export-times " + times.string() +
            " --export-profile " + prof.string() + " --trace " + trace.string() + " " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto t = read_json(times);
  ASSERT_EQ(t["runs"].size(), 9u);
  double last = -1;
  for (const auto& run : t["runs"]) {
    EXPECT_GT(run["wall_ms"].get<double>(), 0.0);
    EXPECT_TRUE(run["gpu_ms"].is_null());  // a CPU program
    EXPECT_GT(run["start_ms"].get<double>(), last);
    last = run["start_ms"].get<double>();
  }
  const auto p = read_json(prof);
  EXPECT_EQ(p["runs"], 2);
  EXPECT_EQ(p["program"], program());
  const size_t instructions = p["instructions"].size();
  ASSERT_GT(instructions, 0u);
  EXPECT_EQ(p["instructions"][0]["op"], "Linear");  // MatMul + Add, after the optimizer

  // A Chrome trace: every event complete or metadata, the load, every timed execute, and each
  // instruction of each profiled one.
  const auto tr = read_json(trace);
  ASSERT_TRUE(tr.contains("traceEvents")) << tr.dump();
  size_t timed = 0, profiled = 0, spans = 0, loads = 0;
  for (const auto& e : tr["traceEvents"]) {
    ASSERT_TRUE(e["ph"] == "X" || e["ph"] == "M") << e.dump();
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    const std::string name = e["name"];
    timed += name.rfind("execute (timed", 0) == 0;
    profiled += name.rfind("execute (profiled", 0) == 0;
    spans += e["cat"] == "instruction";
    loads += e["cat"] == "load";
  }
  EXPECT_EQ(timed, 9u);
  EXPECT_EQ(profiled, 2u);
  EXPECT_EQ(spans, 2 * instructions);
  EXPECT_EQ(loads, 2u);

  // Report files are checked before anything runs; the profile needs profiled runs.
  r = baton("run -n 2 --trace " + (dir_ / "no_such_folder" / "t.json").string() + " " + program());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--trace: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("latency"), std::string::npos) << r.output;
  r = baton("run -n 2 --profile-runs 0 --export-profile " + prof.string() + " " + program());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("give --profile-runs N with N > 0"), std::string::npos) << r.output;
}

// Short times in microseconds, sizes in KiB, outputs in files named after them with a manifest,
// attributes by name, library versions as their libraries write them.
TEST_F(CliTest, OutputIsReadable) {
  const fs::path out = dir_ / "readable";
  CliRun r = baton("run -n 5 -o " + out.string() + " " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("latency over 5 runs \\(after 3 warm-up\\): "
                                                     "min [0-9.]+ (us|ms)  median")))
      << r.output;
  EXPECT_NE(r.output.find(" us"), std::string::npos) << r.output;  // a CPU kernel under 0.1 ms
  const auto manifest = read_json(out / "outputs.json");
  ASSERT_EQ(manifest["outputs"].size(), 1u);
  EXPECT_EQ(manifest["outputs"][0]["file"], (out / "output_0_linear_2.npy").string());
  EXPECT_EQ(manifest["outputs"][0]["name"], "linear_2");
  EXPECT_TRUE(fs::exists(out / "output_0_linear_2.npy"));

  const std::string ts = (dir_ / "readable_ts.baton").string();
  r = baton(
      "compile " +
      (fs::path(testing::source_dir()) / "tests/e2e/models/torchscript17_mlp_gelu.onnx").string() +
      " -o " + ts + " --shape input=8x48");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("arenas: cpu [0-9.]+ KiB"))) << r.output;
  r = baton("inspect " + ts);
  EXPECT_NE(r.output.find("attributes: alpha=1.0 beta=1.0 transA=0 transB=1"), std::string::npos)
      << r.output;
  // The first Gemm and the GELU after it are one Linear (the fuse-linear pass).
  EXPECT_NE(
      r.output.find("attributes: splits=[] transW=1 activation=\"Gelu\" activation_params=[]"),
      std::string::npos)
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("program .*: [0-9.]+ KiB, format v")))
      << r.output;
  const auto j = nlohmann::json::parse(baton_stdout("inspect --json " + ts).output);
  EXPECT_EQ(j["methods"][0]["instructions"][0]["attribute_names"],
            nlohmann::json::array({"splits", "transW", "activation", "activation_params"}));

  const std::string gpu = (dir_ / "readable_gpu.baton").string();
  r = baton("compile -q " + (models_ / "dynamo20_mlp_gelu.onnx").string() + " -o " + gpu +
            " --device cuda:0 --arch sm_90");
  if (r.output.find("has no cuda backend") != std::string::npos) return;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton("inspect " + gpu);
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("built with CUDA [0-9]+\\.[0-9]+, cuBLASLt [0-9]+\\.[0-9]+\\.[0-9]+, "
                           "cuDNN [0-9]+\\.[0-9]+\\.[0-9]+, NVRTC [0-9]+\\.[0-9]+\n")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("weights [0-9.]+ KiB, scratch"))) << r.output;
}

// On a GPU: the profile lists the engine's steps under its delegate (kernel names, shares), the
// trace has them on a GPU row, every timed run has a GPU time, and compare matches in fp16.
TEST_F(CliTest, GpuProfileTraceAndCompare) {
  const std::string model = (models_ / "dynamo20_mlp_gelu.onnx").string();
  const std::string gpu = (dir_ / "profile_gpu.baton").string();
  CliRun r = baton("compile -q " + model + " -o " + gpu + " --device cuda:0 --io device");
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  if (r.output.find("this machine has no GPU") != std::string::npos)
    GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // inspect --load reports the GPU delegate's device memory at load, as run's counters do.
  r = baton("inspect --load " + gpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("delegate 0: [0-9.]+ [KMG]?i?B of device "
                                                     "memory at load")))
      << r.output;
  r = baton("inspect --json --load " + gpu, "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  {
    const auto j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << r.output;
    const auto& counters = j["methods"][0]["loaded"]["delegates"][0]["counters"];
    EXPECT_GT(counters.value("device_bytes_at_load", uint64_t{0}), 0u) << r.output;
  }
  const fs::path times = dir_ / "gpu_times.json", prof = dir_ / "gpu_profile.json",
                 trace = dir_ / "gpu_trace.json";
  r = baton("run --device-io -n 20 --profile-runs 5 --export-times " + times.string() +
            " --export-profile " + prof.string() + " --trace " + trace.string() + " " + gpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("engine steps, launched one by one"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("step 0 +gemm +cublasLtMatmul"))) << r.output;
  std::printf("%s", r.output.c_str());

  const auto timed = read_json(times);  // kept: a range-for over a temporary's member dangles
  for (const auto& run : timed["runs"]) {
    ASSERT_TRUE(run["gpu_ms"].is_number()) << run.dump();
    EXPECT_GT(run["gpu_ms"].get<double>(), 0.0);
    EXPECT_LE(run["gpu_ms"].get<double>(), run["wall_ms"].get<double>());
  }
  const auto p = read_json(prof);
  bool saw_steps = false;
  for (const auto& x : p["instructions"]) {
    if (!x.contains("steps")) continue;
    saw_steps = true;
    EXPECT_EQ(x["kind"], "delegate");
    EXPECT_GT(x["gpu_ms_mean"].get<double>(), 0.0);
    double share = 0;
    for (const auto& s : x["steps"]) {
      EXPECT_FALSE(s["kernel"].get<std::string>().empty()) << s.dump();
      EXPECT_GT(s["gpu_ms_mean"].get<double>(), 0.0) << s.dump();
      share += s["share"].get<double>();
    }
    EXPECT_NEAR(share, 1.0, 1e-6);
  }
  EXPECT_TRUE(saw_steps) << p.dump();
  size_t gpu_steps = 0;
  bool gpu_row_named = false;
  const auto events = read_json(trace);
  for (const auto& e : events["traceEvents"]) {
    gpu_steps += e.value("cat", "") == "gpu step";
    gpu_row_named = gpu_row_named ||
                    (e["ph"] == "M" && e["args"]["name"].get<std::string>().rfind("GPU: ", 0) == 0);
  }
  EXPECT_GT(gpu_steps, 0u);
  EXPECT_TRUE(gpu_row_named);

  // On a caller stream execute() returns before the GPU is done; each run's GPU time is read
  // once the tool has waited for the stream.
  r = baton("run --device-io --stream caller -n 10 --export-times " + times.string() + " " + gpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto caller = read_json(times);
  for (const auto& run : caller["runs"]) {
    ASSERT_TRUE(run["gpu_ms"].is_number()) << run.dump();
    EXPECT_GT(run["gpu_ms"].get<double>(), 0.0);
  }

  const CliRun c = baton("compare " + model + " --device cuda:0 --precision fp16");
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("(cuda:0, fp16)"), std::string::npos) << c.output;
  std::printf("%s", c.output.c_str());
}

// A dynamic program (--dim) compared at several shapes in one call: each --shape of a dynamic
// input is a run's shape (not a compile option), every run has fresh inputs (the seed plus the
// run's index) and its own block, and the summary counts the shapes (issue 36).
TEST_F(CliTest, CompareDynamicResnetAtThreeBatchSizes) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/real/torchscript17_resnet.onnx")
          .string();
  const std::string shapes =
      " --dim batch=1..6 --shape input=1x3x32x32 --shape input=4x3x32x32 --shape input=6x3x32x32";
  CliRun r = baton("compare " + model + shapes);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text :
       {"shape 1 of 3: input=1x3x32x32\ninput  0 'input' float32 [1, 3, 32, 32] random (seed 0)",
        "shape 2 of 3: input=4x3x32x32\ninput  0 'input' float32 [4, 3, 32, 32] random (seed 1)",
        "float32 [6, 10]: ok", "3 shapes: all match"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }

  // --json: one entry per shape under "runs"; --save-dir: one folder per run.
  const fs::path kept = dir_ / "dynamic_kept";
  r = baton_stdout("compare --json --seed 7 " + model + shapes + " --save-dir " + kept.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["match"], true);
  ASSERT_EQ(j["runs"].size(), 3u) << r.output;
  const int64_t batches[] = {1, 4, 6};
  for (size_t k = 0; k < 3; ++k) {
    const auto& run = j["runs"][k];
    EXPECT_EQ(run["match"], true) << run.dump();
    EXPECT_EQ(run["seed"], 7 + k);
    EXPECT_EQ(run["inputs"][0]["shape"][0], batches[k]);
    EXPECT_EQ(run["outputs"][0]["shape"], nlohmann::json::array({batches[k], 10}));
    EXPECT_EQ(run["outputs"][0]["mismatches"], 0);
    const fs::path folder = kept / ("run_" + std::to_string(k + 1));
    EXPECT_TRUE(fs::exists(folder / "input_0.npy")) << folder;
    EXPECT_TRUE(fs::exists(folder / "reference_0.npy")) << folder;
  }
}

// A dynamic GPU program run with --device-io: its inputs are copied to GPU memory at the shape
// given (--shape, or a file's), not at the largest, and its outputs, whose shape only the call
// knows, stay in the program's GPU memory; each run reports the call's shape and the device
// memory held from load on, as inspect --load does (issue 37 item 4).
TEST_F(CliTest, DynamicGpuProgramsRunWithDeviceIoAtTheShapeGiven) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/real/torchscript17_resnet.onnx")
          .string();
  const std::string program = (dir_ / "dynamic_device_io.baton").string();
  CliRun r =
      baton("compile -q " + model + " --dim batch=1..6 --device cuda:0 --io device -o " + program);
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  if (r.output.find("this machine has no GPU") != std::string::npos)
    GTEST_SKIP() << "no CUDA device here: GPU test skipped";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const int batch : {4, 1, 6}) {
    SCOPED_TRACE(batch);
    r = baton("run " + program + " --device-io -n 3 --warmup 1 --profile-runs 0 --shape input=" +
              std::to_string(batch) + "x3x32x32");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string shape = fmt::format("float32 [{}, 10]", batch);
    EXPECT_NE(r.output.find(shape), std::string::npos) << shape << "\n" << r.output;
    // The device memory held from load on (sized once, for the upper bound) is reported by
    // every run, whatever its shape.
    EXPECT_TRUE(std::regex_search(r.output, std::regex("device_bytes_at_load=[1-9][0-9]*")))
        << r.output;
  }
  // And by inspect --load, which loads the program without running it.
  r = baton("inspect --load " + program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("delegate 0: [0-9.]+ [KMG]?i?B of device "
                                                     "memory at load")))
      << r.output;
}

// --prepare-shape (Method::prepare_shape) on a dynamic CPU program: each shape is prepared and
// reported, the first call is timed on its own, and a bad shape is refused before or at load,
// naming what is wrong. (What preparing does for a GPU engine is DynamicGpuTest's.)
TEST_F(CliTest, RunPreparesTheShapesGivenAndTimesTheFirstCall) {
  const std::string bert =
      (fs::path(testing::source_dir()) / "tests/e2e/models/real/torchscript17_bert.onnx").string();
  const std::string prog = (dir_ / "prepare_bert.baton").string();
  ASSERT_EQ(
      baton("compile -q " + bert + " --dim batch=1..4 --dim sequence=1..16 -o " + prog).exit_code,
      0);
  CliRun r = baton("run " + prog +
                   " -n 2 --warmup 1 --profile-runs 0 --shape input_ids=2x5 --shape "
                   "attention_mask=2x5 --prepare-shape batch=1,sequence=16 --prepare-shape "
                   "sequence=5,batch=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"prepared batch=1,sequence=16 in ", "prepared sequence=5,batch=2 in ",
                           "first call ", "float32 [2, 5, 32]"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  r = baton("run " + prog +
                " -n 1 --warmup 1 --profile-runs 0 --json --prepare-shape "
                "batch=3,sequence=7",
            "", /*with_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc["prepare_ms"].size(), 1u);
  EXPECT_GE(doc["prepare_ms"][0].get<double>(), 0.0);
  EXPECT_GT(doc["first_call_ms"].get<double>(), 0.0);
  r = baton("run " + prog + " -n 1 --prepare-shape batch");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--prepare-shape: 'batch' in the shape 'batch' is not NAME=SIZE"),
            std::string::npos)
      << r.output;
  r = baton("run " + prog + " -n 1 --prepare-shape batch=2,seq=3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--prepare-shape batch=2,seq=3: method 'forward' has no symbol 'seq' to "
                          "prepare a shape for; its symbols are batch, sequence"),
            std::string::npos)
      << r.output;
  r = baton("run " + prog + " -n 1 --prepare-shape batch=5,sequence=3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot prepare batch=5, outside the range 1..4"), std::string::npos)
      << r.output;
  // A static program's one shape is named by nothing.
  r = baton("run " + program() + " -n 1 --warmup 1 --profile-runs 0 --prepare-shape ''");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prepared the program's one shape in "), std::string::npos) << r.output;
  r = baton("run " + program() + " -n 1 --prepare-shape batch=2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("has no dynamic dimension"), std::string::npos) << r.output;
}

// Two dynamic inputs that share symbols: run k takes the k-th --shape of each.
TEST_F(CliTest, CompareDynamicBertAtThreeShapes) {
  const std::string model =
      (fs::path(testing::source_dir()) / "tests/e2e/models/real/torchscript17_bert.onnx").string();
  const CliRun r = baton("compare " + model +
                         " --dim batch=1..4 --dim sequence=1..16"
                         " --shape input_ids=1x1 --shape attention_mask=1x1"
                         " --shape input_ids=2x9 --shape attention_mask=2x9"
                         " --shape input_ids=4x16 --shape attention_mask=4x16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"shape 1 of 3: input_ids=1x1 attention_mask=1x1",
                           "shape 2 of 3: input_ids=2x9 attention_mask=2x9",
                           "shape 3 of 3: input_ids=4x16 attention_mask=4x16", "float32 [1, 1, 32]",
                           "float32 [2, 9, 32]", "float32 [4, 16, 32]", "3 shapes: all match"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
}

// What a wrong set of run shapes is told, and a given dynamic PROGRAM takes them too.
TEST_F(CliTest, CompareDynamicShapeErrors) {
  const fs::path real = fs::path(testing::source_dir()) / "tests/e2e/models/real";
  const std::string resnet = (real / "torchscript17_resnet.onnx").string();
  const std::string bert = (real / "torchscript17_bert.onnx").string();
  CliRun r = baton("compare " + resnet +
                   " --dim batch=1..6 --shape input=2x3x32x32 --shape input=8x3x32x32");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("shape 2 of 2 (input=8x3x32x32): input 0 ('input'): axis 0 ('batch') "
                          "has size 8, outside the range 1..6"),
            std::string::npos)
      << r.output;

  const std::string prog = (dir_ / "dynamic_bert.baton").string();
  ASSERT_EQ(
      baton("compile -q " + bert + " --dim batch=1..4 --dim sequence=1..16 -o " + prog).exit_code,
      0);
  r = baton("compare " + bert + " " + prog +
            " --shape input_ids=1x3 --shape input_ids=2x5 --shape attention_mask=1x3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("input 'input_ids' has 2 shapes and input 'attention_mask' has 1"),
            std::string::npos)
      << r.output;

  // --shape sizes random inputs; an input read from a file has its file's shape.
  const fs::path kept = dir_ / "dynamic_files";
  r = baton("compare -q " + bert + " " + prog +
            " --shape input_ids=2x5 --shape attention_mask=2x5 --save-dir " + kept.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 shape: all match"), std::string::npos) << r.output;
  r = baton("compare " + bert + " " + prog +
            " --input input_ids=" + (kept / "run_1/input_0.npy").string() +
            " --input attention_mask=" + (kept / "run_1/input_1.npy").string() +
            " --shape input_ids=2x5");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--shape input_ids=2x5: input 'input_ids' is read from"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace baton
