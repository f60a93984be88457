// Runs ONNX's own backend node tests (Debian's libonnx-testdata, or BATON_ONNX_NODE_DIR) through
// Baton on every available backend: the CPU always, and cuda:0 (fp32, TF32 off) where there is a
// GPU. Writes a report of pass / fail / unsupported per test and backend to
// BATON_BINARY_DIR/reports/onnx_node_tests.<backend>.md (or BATON_REPORT_DIR).
//
// Every test compiles with its inputs' exact shapes (and once more with a dynamic first axis). A
// test whose shape-defining inputs (Reshape's shape, Unsqueeze's axes, Resize's float scales, ...)
// are graph inputs is retried with those inputs (every int64 one, and any other a node reads
// through a shape-input slot of its definition) frozen into initializers from its test data, and
// reported as such. A compile failure with Error::NotSupported (op, dtype, opset, attribute)
// counts as unsupported; anything else that goes wrong is a failure, and the test fails if there
// is any. On cuda:0 a test whose
// nodes the GPU engine does not take runs on the CPU and is reported as "cpu only" - unless it
// runs on the GPU once every input but the first is frozen into an initializer from its test
// data: the GPU takes Conv and ConvTranspose only with constant weights (as every exported model
// has them), and the node tests feed W as an input. Such a test is reported as "pass on the GPU
// (inputs after the first frozen)", and a failure then is a failure.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "baton/baton.h"
#include "baton/compiler/compiler.h"
#include "baton/core/log.h"
#include "baton/runtime/program.h"
#include "compiler/onnx_tensor.h"
#include "ops/op_def.h"
#ifdef BATON_TEST_CUDA
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#endif

namespace baton {
namespace {

namespace fs = std::filesystem;

fs::path node_dir() {
  const char* env = std::getenv("BATON_ONNX_NODE_DIR");
  return env != nullptr ? fs::path(env) : fs::path("/usr/share/libonnx-testdata/data/node");
}

fs::path report_dir() {
  const char* env = std::getenv("BATON_REPORT_DIR");
  return env != nullptr ? fs::path(env) : fs::path(BATON_BINARY_DIR) / "reports";
}

enum class Outcome { Pass, PassFrozen, PassWeightsFrozen, CpuOnly, Fail, Unsupported };

// Which of a test's inputs become initializers: none; the shape-defining ones (every int64 input
// and any read through a shape-input slot); those and every input after the first.
enum class Freeze { None, Shapes, AfterFirst };

struct Row {
  std::string test;
  std::string ops;
  Outcome outcome;
  std::string detail;
};

struct DataSet {
  std::vector<compiler::OnnxTensor> inputs;
  std::vector<compiler::OnnxTensor> outputs;
  Status load;  // the first tensor file that did not load (a dtype Baton lacks, ...)
};

std::vector<compiler::OnnxTensor> load_tensors(const fs::path& dir, const std::string& prefix,
                                               Status* load) {
  std::vector<compiler::OnnxTensor> out;
  for (int i = 0;; ++i) {
    const fs::path p = dir / fmt::format("{}_{}.pb", prefix, i);
    if (!fs::exists(p)) break;
    auto t = compiler::load_onnx_tensor_file(p.string());
    if (!t.ok()) {
      if (load->ok()) *load = t.status();
      break;
    }
    out.push_back(std::move(t).value());
  }
  return out;
}

// The message on one line, without the list of supported ops.
std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find("\nSupported ops:"));
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line.size() > 300 ? line.substr(0, 297) + "..." : line;
}

// Compares floats with the ONNX backend tests' own tolerance (rtol 1e-3, atol 1e-7), whose
// references come from numpy (float64 sums in another order differ in the last bits); integers
// and the rest exactly.
std::string compare(const TensorView& got, const compiler::OnnxTensor& want) {
  if (got.dtype != want.dtype) {
    return fmt::format("dtype {} != expected {}", dtype_name(got.dtype), dtype_name(want.dtype));
  }
  if (!std::equal(got.sizes.begin(), got.sizes.end(), want.sizes.begin(), want.sizes.end())) {
    return fmt::format("shape {} != expected {}", shape_to_string(got.sizes),
                       shape_to_string(want.sizes));
  }
  const int64_t n = got.numel();
  for (int64_t i = 0; i < n; ++i) {
    double a = 0, b = 0;
    switch (got.dtype) {
      case DType::Float32:
        a = got.data_as<const float>()[i];
        b = reinterpret_cast<const float*>(want.data->data())[i];
        break;
      case DType::Float64:
        a = got.data_as<const double>()[i];
        b = reinterpret_cast<const double*>(want.data->data())[i];
        break;
      case DType::Float16:
        a = half_to_float(got.data_as<const uint16_t>()[i]);
        b = half_to_float(reinterpret_cast<const uint16_t*>(want.data->data())[i]);
        break;
      case DType::Int64:
        a = static_cast<double>(got.data_as<const int64_t>()[i]);
        b = static_cast<double>(reinterpret_cast<const int64_t*>(want.data->data())[i]);
        break;
      case DType::Int32:
        a = got.data_as<const int32_t>()[i];
        b = reinterpret_cast<const int32_t*>(want.data->data())[i];
        break;
      default:
        if (std::memcmp(got.data, want.data->data(), want.data->size()) != 0) {
          return "bytes differ";
        }
        return "";
    }
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::fabs(a - b) > 1e-7 + 1e-3 * std::fabs(b) || std::isnan(a) != std::isnan(b)) {
      return fmt::format("element {}: {} != expected {}", i, a, b);
    }
  }
  return "";
}

class NodeTestRunner {
 public:
  // `backend`: the compiler for the device under test; null for the CPU.
  // `dynamic`: every fed input's first axis becomes a symbolic dimension (docs/dynamic_shapes.md)
  // with the range 1..its size in the test data, one symbol per distinct size; the program is
  // compiled once dynamic and run at the test's shape.
  // `build_only`: compile and serialize, run nothing (a GPU backend on a host without a GPU); a
  // test passes when its program builds.
  explicit NodeTestRunner(compiler::BackendCompiler* backend, bool dynamic = false,
                          bool build_only = false)
      : backend_(backend), dynamic_(dynamic), build_only_(build_only) {}

  Row run(const fs::path& dir) {
    Row row{dir.filename().string(), "", Outcome::Fail, ""};
    onnx::ModelProto model;
    {
      std::ifstream in(dir / "model.onnx", std::ios::binary);
      if (!model.ParseFromIstream(&in)) {
        row.detail = "model.onnx does not parse";
        return row;
      }
    }
    std::set<std::string> ops;
    for (const auto& n : model.graph().node()) ops.insert(n.op_type());
    for (const auto& op : ops) row.ops += (row.ops.empty() ? "" : " ") + op;

    std::vector<DataSet> sets;
    for (int s = 0;; ++s) {
      const fs::path sd = dir / fmt::format("test_data_set_{}", s);
      if (!fs::exists(sd)) break;
      DataSet set;
      set.inputs = load_tensors(sd, "input", &set.load);
      set.outputs = load_tensors(sd, "output", &set.load);
      sets.push_back(std::move(set));
    }
    if (sets.empty()) {
      row.detail = "no test data";
      return row;
    }
    // Non-initializer graph inputs, in order: input_<k>.pb feeds the k-th.
    std::vector<std::string> input_names;
    std::set<std::string> initializers;
    for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
    for (const auto& in : model.graph().input()) {
      if (!initializers.count(in.name())) input_names.push_back(in.name());
    }

    shape_inputs_ = shape_input_names(model);
    bool frozen = false;
    std::string failure;
    for (const DataSet& set : sets) {
      auto outcome =
          run_set(model, input_names, set, frozen ? Freeze::Shapes : Freeze::None, &failure);
      if (outcome == Outcome::Unsupported && !frozen && has_frozen_inputs(set, input_names)) {
        // Retry with int64 inputs frozen (shape arguments must be constants in Baton).
        std::string retry_failure;
        const Outcome retry = run_set(model, input_names, set, Freeze::Shapes, &retry_failure);
        if (retry != Outcome::Unsupported) {
          frozen = true;
          outcome = retry;
          failure = retry_failure;
        }
      }
      if (outcome == Outcome::Fail && !set.load.ok()) {
        // The model compiled but its test data did not load: data Baton cannot hold (some
        // bfloat16 tests store theirs as uint16) makes the test unsupported, with the reason.
        outcome = set.load.code() == Error::NotSupported ? Outcome::Unsupported : Outcome::Fail;
        failure = "test data: " + first_line(set.load.to_string());
      }
      if (outcome != Outcome::Pass) {
        row.outcome = outcome;
        row.detail = failure;
        return row;
      }
    }
    row.outcome = frozen ? Outcome::PassFrozen : Outcome::Pass;
    if (backend_ != nullptr && !delegated_) {
      row.outcome = Outcome::CpuOnly;
      if (input_names.size() >= 2) {
        // Retry with the inputs after the first frozen: a node that needs constant weights on
        // the GPU then runs there, and is checked against the test's outputs.
        Outcome weights = Outcome::PassWeightsFrozen;
        for (const DataSet& set : sets) {
          std::string weights_failure;
          const Outcome o = run_set(model, input_names, set, Freeze::AfterFirst, &weights_failure);
          if (o == Outcome::Fail) {
            weights = Outcome::Fail;
            row.detail = "with the inputs after the first frozen: " + weights_failure;
            break;
          }
          if (o != Outcome::Pass || !delegated_) {
            weights = Outcome::CpuOnly;
            break;
          }
        }
        row.outcome = weights;
      }
    }
    return row;
  }

 private:
  // Graph inputs some node reads through a shape-input slot of its definition (float scales,
  // ...), whichever their dtype.
  static std::set<std::string> shape_input_names(const onnx::ModelProto& model) {
    int opset = 1;
    for (const auto& imp : model.opset_import()) {
      if (imp.domain().empty() || imp.domain() == "ai.onnx")
        opset = static_cast<int>(imp.version());
    }
    std::set<std::string> names;
    for (const auto& n : model.graph().node()) {
      if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
      const ops::OpDef* def = ops::op_registry().find(n.op_type(), "", opset);
      if (def == nullptr || def->inputs.empty()) continue;
      for (int i = 0; i < n.input_size(); ++i) {
        if (def->input_slot(static_cast<size_t>(i)).shape_input) names.insert(n.input(i));
      }
    }
    return names;
  }

  // Whether `freeze` makes the index-th input an initializer.
  bool frozen_input(const compiler::OnnxTensor& t, const std::string& name, size_t index,
                    Freeze freeze) const {
    if (freeze == Freeze::None) return false;
    return t.dtype == DType::Int64 || shape_inputs_.count(name) != 0 ||
           (freeze == Freeze::AfterFirst && index > 0);
  }

  bool has_frozen_inputs(const DataSet& set, const std::vector<std::string>& names) const {
    for (size_t k = 0; k < set.inputs.size() && k < names.size(); ++k) {
      if (frozen_input(set.inputs[k], names[k], k, Freeze::Shapes)) return true;
    }
    return false;
  }

  Outcome run_set(const onnx::ModelProto& original, const std::vector<std::string>& input_names,
                  const DataSet& set, Freeze freeze, std::string* failure) {
    onnx::ModelProto model = original;
    compiler::CompileOptions options;
    if (backend_ != nullptr) options.backends.push_back(backend_);
    std::vector<size_t> fed;  // which data-set inputs stay runtime inputs
    for (size_t k = 0; k < set.inputs.size() && k < input_names.size(); ++k) {
      const auto& t = set.inputs[k];
      if (frozen_input(t, input_names[k], k, freeze)) {
        auto* init = model.mutable_graph()->add_initializer();
        init->set_name(input_names[k]);
        init->set_data_type(static_cast<int>(t.dtype));
        for (int64_t d : t.sizes) init->add_dims(d);
        init->set_raw_data(t.data->data(), t.data->size());
        auto* inputs = model.mutable_graph()->mutable_input();
        for (int i = 0; i < inputs->size(); ++i) {
          if (inputs->Get(i).name() == input_names[k]) {
            inputs->DeleteSubrange(i, 1);
            break;
          }
        }
        continue;
      }
      fed.push_back(k);
      if (dynamic_ && !t.sizes.empty() && t.sizes[0] >= 1) {
        const std::string symbol = fmt::format("d{}", t.sizes[0]);
        auto* inputs = model.mutable_graph()->mutable_input();
        for (int i = 0; i < inputs->size(); ++i) {
          if (inputs->Get(i).name() != input_names[k]) continue;
          auto* shape = inputs->Mutable(i)->mutable_type()->mutable_tensor_type()->mutable_shape();
          shape->clear_dim();
          for (size_t d = 0; d < t.sizes.size(); ++d) {
            if (d == 0) {
              shape->add_dim()->set_dim_param(symbol);
            } else {
              shape->add_dim()->set_dim_value(t.sizes[d]);
            }
          }
        }
        const bool known =
            std::any_of(options.dims.begin(), options.dims.end(),
                        [&](const compiler::DimRange& r) { return r.name == symbol; });
        if (!known) options.dims.push_back({symbol, 1, t.sizes[0], 0, {}});
        continue;
      }
      options.input_shapes.push_back({input_names[k], t.sizes});
    }
    std::string bytes;
    model.SerializeToString(&bytes);
    auto compiled = compiler::compile_bytes(
        {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, options);
    if (!compiled.ok()) {
      *failure = first_line(compiled.status().to_string());
      return compiled.code() == Error::NotSupported ? Outcome::Unsupported : Outcome::Fail;
    }
    delegated_ = compiled->summary().delegate_calls > 0;
    auto serialized = compiled->serialize();
    if (!serialized.ok()) {
      *failure = first_line(serialized.status().to_string());
      return Outcome::Fail;
    }
    if (build_only_) return Outcome::Pass;
    auto program = runtime::Program::load_bytes(*serialized);
    if (!program.ok()) {
      *failure = "load: " + first_line(program.status().to_string());
      return Outcome::Fail;
    }
    auto method = (*program)->load_method("forward");
    if (!method.ok()) {
      *failure = "load_method: " + first_line(method.status().to_string());
      return method.code() == Error::NotSupported ? Outcome::Unsupported : Outcome::Fail;
    }
    if ((*method)->num_inputs() != fed.size()) {
      *failure =
          fmt::format("program has {} inputs, test data {}", (*method)->num_inputs(), fed.size());
      return Outcome::Fail;
    }
    for (size_t i = 0; i < fed.size(); ++i) {
      const auto& t = set.inputs[fed[i]];
      Status s = (*method)->set_input(
          i, TensorView{const_cast<uint8_t*>(t.data->data()), t.dtype, t.sizes, Device::cpu()});
      if (!s.ok()) {
        *failure = "set_input: " + first_line(s.to_string());
        return Outcome::Fail;
      }
    }
    if (Status s = (*method)->execute(); !s.ok()) {
      *failure = "execute: " + first_line(s.to_string());
      return Outcome::Fail;
    }
    if ((*method)->num_outputs() != set.outputs.size()) {
      *failure =
          fmt::format("{} outputs, expected {}", (*method)->num_outputs(), set.outputs.size());
      return Outcome::Fail;
    }
    for (size_t o = 0; o < set.outputs.size(); ++o) {
      const std::string diff = compare((*method)->output(o), set.outputs[o]);
      if (!diff.empty()) {
        *failure = fmt::format("output {}: {}", o, diff);
        return Outcome::Fail;
      }
    }
    return Outcome::Pass;
  }

  compiler::BackendCompiler* backend_;
  bool dynamic_ = false;
  bool build_only_ = false;
  bool delegated_ = false;
  std::set<std::string> shape_inputs_;  // of the test being run
};

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Pass:
      return "pass";
    case Outcome::PassFrozen:
      return "pass (shape inputs frozen)";
    case Outcome::PassWeightsFrozen:
      return "pass on the GPU (inputs after the first frozen)";
    case Outcome::CpuOnly:
      return "pass on the cpu (the GPU took no node)";
    case Outcome::Fail:
      return "FAIL";
    case Outcome::Unsupported:
      return "unsupported";
  }
  return "?";
}

// Runs every node test on one backend, writes its report, and checks there are no failures, at
// least `min_pass` passes (wherever the nodes ran) and at least `min_on_backend` tests whose
// nodes the backend itself ran.
// `suite` names another suite of libonnx-testdata, beside the node tests (its report is
// onnx_node_tests.<backend>.<suite>.md); empty for the node tests.
void run_all(const std::string& backend_name, compiler::BackendCompiler* backend, int min_pass,
             int min_on_backend, const std::string& suite = "", bool dynamic = false,
             bool build_only = false) {
  const fs::path dir_root = suite.empty() ? node_dir() : node_dir().parent_path() / suite;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(dir_root)) {
    if (e.is_directory()) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  NodeTestRunner runner(backend, dynamic, build_only);
  std::vector<Row> rows;
  std::map<Outcome, int> counts;
  for (const fs::path& dir : dirs) {
    try {
      rows.push_back(runner.run(dir));
    } catch (const std::exception& e) {
      rows.push_back(
          {dir.filename().string(), "", Outcome::Fail, std::string("C++ exception: ") + e.what()});
    }
    ++counts[rows.back().outcome];
  }

  fs::create_directories(report_dir());
  std::string file_name =
      "onnx_node_tests." + backend_name + (suite.empty() ? "" : "." + suite) + ".md";
  std::replace(file_name.begin(), file_name.end(), ':', '_');
  const fs::path report = report_dir() / file_name;
  std::ofstream md(report);
  md << "# ONNX backend " << (suite.empty() ? "node" : suite) << " tests through Baton ("
     << backend_name << ")\n\n"
     << "Source: " << dir_root.string() << " (Debian libonnx-testdata). Tolerance: rtol 1e-3, "
     << "atol 1e-7 (the ONNX backend tests' own).\n\n"
     << "| outcome | tests |\n|---|---|\n";
  const Outcome order[] = {Outcome::Pass,    Outcome::PassFrozen, Outcome::PassWeightsFrozen,
                           Outcome::CpuOnly, Outcome::Fail,       Outcome::Unsupported};
  for (Outcome o : order) md << "| " << outcome_name(o) << " | " << counts[o] << " |\n";
  md << "\n| test | ops | outcome | detail |\n|---|---|---|---|\n";
  // Supported and failing first, then the unsupported ones.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return (a.outcome == Outcome::Unsupported) < (b.outcome == Outcome::Unsupported);
  });
  for (const Row& r : rows) {
    std::string detail = r.detail;
    std::replace(detail.begin(), detail.end(), '|', '/');
    md << "| " << r.test << " | " << r.ops << " | " << outcome_name(r.outcome) << " | " << detail
       << " |\n";
  }
  md.close();

  std::printf(
      "ONNX %s tests on %s: %d pass, %d pass with frozen shape inputs, %d pass on the backend "
      "with the inputs after the first frozen, %d pass on the cpu only, %d fail, %d unsupported "
      "(report: %s)\n",
      suite.empty() ? "node" : suite.c_str(), backend_name.c_str(), counts[Outcome::Pass],
      counts[Outcome::PassFrozen], counts[Outcome::PassWeightsFrozen], counts[Outcome::CpuOnly],
      counts[Outcome::Fail], counts[Outcome::Unsupported], report.c_str());
  for (const Row& r : rows) {
    EXPECT_NE(r.outcome, Outcome::Fail) << r.test << " (" << r.ops << "): " << r.detail;
  }
  EXPECT_GE(counts[Outcome::Pass] + counts[Outcome::PassFrozen] +
                counts[Outcome::PassWeightsFrozen] + counts[Outcome::CpuOnly],
            min_pass);
  EXPECT_GE(
      counts[Outcome::Pass] + counts[Outcome::PassFrozen] + counts[Outcome::PassWeightsFrozen],
      min_on_backend);
}

TEST(OnnxNodeTest, EverySupportedNodeTestPassesOnTheCpu) {
  if (!fs::exists(node_dir())) GTEST_SKIP() << node_dir() << " is missing: run scripts/setup.sh";
  register_builtins();
  set_log_level(LogLevel::Error);
  // 660 node tests of the supported ops pass today (2026-11-30: TopK's three and the twelve of
  // RNN, GRU and LSTM joined); a drop means the runner or a kernel broke.
  run_all("cpu", nullptr, 660, 660);
}

// The same node tests with every input's first axis dynamic (docs/dynamic_shapes.md): compiled
// once for the range 1..its size and run at the test's shape. A test the dynamic path refuses
// (an op whose inference a symbol's range makes invalid, a kernel that cannot resize that axis)
// is "unsupported" and listed in the report; none may fail, and the floor is today's count.
TEST(OnnxNodeTest, SupportedNodeTestsWithADynamicFirstAxisPassOnTheCpu) {
  if (!fs::exists(node_dir())) GTEST_SKIP() << node_dir() << " is missing: run scripts/setup.sh";
  register_builtins();
  set_log_level(LogLevel::Error);
  // 532 pass today (2026-11-30, TopK's three included; 648 pass static): a drop means dynamic
  // inference, a resize() or the runtime's resolving broke.
  run_all("cpu-dynamic", nullptr, 532, 532, "", /*dynamic=*/true);
}

// The other suites of libonnx-testdata: small models (simple) and PyTorch's own exports of its
// modules and operators, with today's pass counts as floors.
TEST(OnnxNodeTest, TheOtherLibonnxTestdataSuitesPassOnTheCpu) {
  if (!fs::exists(node_dir())) GTEST_SKIP() << node_dir() << " is missing: run scripts/setup.sh";
  register_builtins();
  set_log_level(LogLevel::Error);
  for (const auto& [suite, floor] : {std::pair<const char*, int>{"simple", 7},
                                     {"pytorch-converted", 65},
                                     {"pytorch-operator", 12}}) {
    if (!fs::exists(node_dir().parent_path() / suite)) {
      ADD_FAILURE() << (node_dir().parent_path() / suite) << " is missing";
      continue;
    }
    run_all("cpu", nullptr, floor, floor, suite);
  }
}

TEST(OnnxNodeTest, EverySupportedNodeTestPassesOnCuda0) {
#ifdef BATON_TEST_CUDA
  register_builtins();
  cuda::register_backend();
  cuda::register_compiler();
  if (cuda::devices().empty()) {
    GTEST_SKIP() << "no CUDA device here: GPU test skipped (run the bundle on a GPU host)";
  }
  if (!fs::exists(node_dir())) GTEST_SKIP() << node_dir() << " is missing";
  set_log_level(LogLevel::Error);
  auto backend = compiler::make_backend_compiler({Device::cuda(0), "", "fp32"});
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  // The GPU runs a subset (96 on an H100, 2026-11-23); what it does not take runs on the CPU, so
  // the pass count is the CPU's.
  run_all("cuda:0", backend->get(), 632, 96);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// Without a GPU: every node test the CPU passes builds for cuda:0 on sm_90 (the GPU lowerings and
// NVRTC on ONNX's own corpus of shapes and attributes; what the GPU does not take stays on the
// CPU), its program serialized but not run. "pass" here means built; the GPU suite runs them.
TEST(OnnxNodeTest, EverySupportedNodeTestBuildsForSm90) {
#ifdef BATON_TEST_CUDA
  register_builtins();
  cuda::register_compiler();
  if (!fs::exists(node_dir())) GTEST_SKIP() << node_dir() << " is missing";
  set_log_level(LogLevel::Error);
  auto backend = compiler::make_backend_compiler({Device::cuda(0), "sm_90", "fp32"});
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  // 666 build, 407 of them with nodes on the GPU (2026-11-30, after issue 38's lowerings; 0 fail,
  // 266 unsupported as on the CPU): a drop means a lowering or NVRTC broke.
  run_all("cuda:0-build", backend->get(), 666, 407, "", /*dynamic=*/false, /*build_only=*/true);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

// The node tests with a dynamic first axis on cuda:0 (issue 37): dynamic GPU engines where the
// partition has no cuDNN step (those are refused at compile: "unsupported"); none may fail.
TEST(OnnxNodeTest, SupportedNodeTestsWithADynamicFirstAxisPassOnCuda0) {
#ifdef BATON_TEST_CUDA
  register_builtins();
  cuda::register_backend();
  cuda::register_compiler();
  if (cuda::devices().empty()) {
    GTEST_SKIP() << "no CUDA device here: GPU test skipped (run the bundle on a GPU host)";
  }
  if (!fs::exists(node_dir())) GTEST_SKIP() << node_dir() << " is missing";
  set_log_level(LogLevel::Error);
  auto backend = compiler::make_backend_compiler({Device::cuda(0), "", "fp32"});
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  // 514 pass, 282 of them on the GPU (H200, 2026-11-29, f470de5: Shape, Range, GatherElements
  // and integer arithmetic joined; 418 unsupported, most of them as on the CPU, the others cuDNN
  // steps): a drop means the dynamic engine or its builder broke.
  run_all("cuda:0-dynamic", backend->get(), 514, 282, "", /*dynamic=*/true);
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace baton
