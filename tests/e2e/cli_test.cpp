// The baton command-line tool as a user drives it: compile, run, inspect, and the errors a user
// sees for bad input. Runs the real binary.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "baton/extension/npy.h"
#include "testing/onnx_builder.h"
#include "testing/paths.h"
#include "testing/random.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

// `prefix` goes before the binary (e.g. "timeout 60" for a command that must not hang).
CliRun baton(const std::string& args, const std::string& prefix = "") {
  const char* cli = std::getenv("BATON_CLI");  // a relocated bundle points at its own binary
  const std::string command = prefix + (prefix.empty() ? "" : " ") +
                              std::string(cli ? cli : BATON_CLI) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  CliRun r{-1, ""};
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
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
  auto got = extension::read_npy(out_dir + "/output_0.npy");
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
  auto a = extension::read_npy((one / "output_0.npy").string());
  auto b = extension::read_npy((three / "output_0.npy").string());
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
  auto got = extension::read_npy((dir_ / "two_out/output_0.npy").string());
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
    auto got = extension::read_npy(out + "/output_0.npy");
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
  // builds: BATON_TUNE_CANDIDATES=1 makes the builds reproducible (docs/cli.md).
  const std::string reproducible = "BATON_TUNE_CANDIDATES=1";
  CliRun r =
      baton("compile -q " + model + " -o " + a + " --device cuda --arch sm_90", reproducible);
  if (r.output.find("has no cuda backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = baton(
      "compile -q " + model + " -o " + b + " --device cuda:0 --arch sm_90 --target-device cuda:0",
      reproducible);
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

TEST_F(CliTest, InspectJsonHasTheDocumentedKeys) {
  const CliRun r = baton("inspect --json " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.contains("methods"));
  EXPECT_EQ(j["format_version"], 2);
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
  EXPECT_GE(m["instructions"].size(), 5u);
}

TEST_F(CliTest, InspectTextShowsEverything) {
  const CliRun r = baton("inspect " + program());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"method 'forward'", "arenas:", "instructions:", "values:", "MatMul",
                             "Gelu", "tensor 'x' float32 [8, 64] cpu arena 0"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

void write_model(const fs::path& path, const testing::OnnxBuilder& b) {
  const std::vector<uint8_t> bytes = b.bytes();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A node named with bytes that are not UTF-8 compiles; inspect shows the name with those bytes as
// \xNN, in valid JSON and in the text view, instead of dying on a JSON exception.
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

}  // namespace
}  // namespace baton
