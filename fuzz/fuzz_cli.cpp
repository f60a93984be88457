// The command line as a user types it: the input is up to 24 arguments separated by newlines,
// given to the CLI's own entry point (tools/baton/main.cpp: cli_main) after "baton". That reaches
// argument parsing and its range checks, the trtexec translation, every command's option handling,
// the report writers (--trace, --export-times, --export-profile, -o DIR, compare's --save-dir),
// .npy input reading and `compare`'s error paths (its onnxruntime interpreter is /bin/false here,
// so no Python runs).
//
// Oracles: no crash, no sanitizer report, no hang (libFuzzer -timeout), and an exit code of 0, 1 or
// 2. Each input runs in a private folder holding a small model (m.onnx), its program (p.baton) and
// an input (x.npy). Arguments cannot leave it: every '/' becomes '_', and "." and ".." become "_";
// files a command writes are removed after each input. Counts that only make a command run longer
// (-n, --warmup, --profile-runs, --threads) are capped at 4 so that an input cannot pass for a
// hang by asking for a billion runs; their range checks still see zero, negative and non-numbers.
// A crash happens inside the private folder: the scripts give libFuzzer an absolute
// -artifact_prefix so that the reproducer still lands where they look.
#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "baton/core/file.h"
#include "baton/core/log.h"
#include "baton/core/tensor.h"
#include "baton/extension/npy.h"
#include "commands.h"

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxArgs = 24;
constexpr size_t kMaxArgBytes = 128;
const char* const kFixtures[] = {"m.onnx", "p.baton", "x.npy"};

// x[2, 4] -> MatMul with w[4, 3] -> Add b[3] -> Relu -> y[2, 3].
std::string small_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto& g = *model.mutable_graph();
  g.set_name("fuzz_cli");
  auto value = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g.add_input(), "x", {2, 4});
  value(g.add_output(), "y", {2, 3});
  auto init = [&](const char* name, std::vector<int64_t> dims, int count) {
    auto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (int i = 0; i < count; ++i) t->add_float_data(0.25f * static_cast<float>(i % 5) - 0.5f);
  };
  init("w", {4, 3}, 12);
  init("b", {3}, 3);
  auto node = [&](const char* op, std::vector<const char*> in, const char* out) {
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(std::string(op) + "_node");
    for (const char* i : in) n->add_input(i);
    n->add_output(out);
  };
  node("MatMul", {"x", "w"}, "h");
  node("Add", {"h", "b"}, "z");
  node("Relu", {"z"}, "y");
  return model.SerializeAsString();
}

int run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "baton");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int code = baton::tool::cli_main(static_cast<int>(args.size()), argv.data());
  baton::set_log_level(baton::LogLevel::Off);  // -v turns logging on for the rest of the process
  return code;
}

// The fixtures' bytes, to put back after an input that overwrote one (`compile m.onnx -o m.onnx`).
std::vector<std::vector<uint8_t>>& fixture_bytes() {
  static std::vector<std::vector<uint8_t>> bytes;
  return bytes;
}

// The bytes of fixture NAME, or empty when it is gone or is no longer a regular file.
std::vector<uint8_t> read_fixture(const char* name) {
  auto bytes = baton::read_regular_file(name, uint64_t{1} << 20, "fixture");
  return bytes.ok() ? std::move(bytes).value() : std::vector<uint8_t>();
}

void write_fixture(const char* name, std::span<const uint8_t> bytes) {
  if (baton::Status st = baton::write_file_atomically(name, bytes); !st.ok()) {
    std::fprintf(stderr, "baton fuzz_cli: writing %s: %s\n", name, st.to_string().c_str());
    std::abort();
  }
}

bool is_fixture(const fs::path& name) {
  for (const char* f : kFixtures) {
    if (name == f) return true;
  }
  return false;
}

// A count above 4 as 4; anything else (zero, negative, not a number) as given.
std::string capped(const std::string& value) {
  char* end = nullptr;
  const long long n = std::strtoll(value.c_str(), &end, 0);
  return end != value.c_str() && n > 4 ? "4" : value;
}

bool is_capped_count(const std::string& flag) {
  return flag == "-n" || flag == "--iterations" || flag == "--warmup" || flag == "--profile-runs" ||
         flag == "--threads";
}

// The private folder, and the folder the fuzzer started in: each input runs in the first, and
// libFuzzer reads and writes its corpus (relative paths) in the second between inputs.
std::string& sandbox() {
  static std::string dir;
  return dir;
}
int g_start_dir = -1;

void enter(const char* where) {
  if (::chdir(where) != 0) {
    std::perror("baton fuzz_cli: changing folder");
    std::abort();
  }
}

void leave() {
  if (::fchdir(g_start_dir) != 0) {
    std::perror("baton fuzz_cli: returning to the start folder");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  baton::set_log_level(baton::LogLevel::Off);
  char dir[] = "/tmp/baton-fuzz-cli-XXXXXX";
  g_start_dir = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_start_dir < 0 || ::mkdtemp(dir) == nullptr) {
    std::perror("baton fuzz_cli: making its folder");
    std::abort();
  }
  sandbox() = dir;
  // The folder goes with the process (after a crash it stays, with what the input wrote).
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(sandbox(), ec);
  });
  enter(dir);
  ::setenv("BATON_PYTHON", "/bin/false", 1);
  const std::string model = small_model();
  write_fixture("m.onnx", std::span(reinterpret_cast<const uint8_t*>(model.data()), model.size()));
  baton::Tensor x = baton::Tensor::empty(baton::DType::Float32, {2, 4}).value();
  for (int i = 0; i < 8; ++i) x.data_as<float>()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  if (!baton::extension::write_npy("x.npy", x.view()).ok()) std::abort();
  if (run_cli({"compile", "m.onnx", "-o", "p.baton", "-q"}) != 0) {
    std::fprintf(stderr, "baton fuzz_cli: compiling its fixture failed\n");
    std::abort();
  }
  for (const char* f : kFixtures) fixture_bytes().push_back(read_fixture(f));
  leave();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      if (args.size() == kMaxArgs) return 0;
      args.push_back(current);
      current.clear();
      continue;
    }
    if (current.size() == kMaxArgBytes) return 0;
    current.push_back(data[i] == '/' ? '_' : static_cast<char>(data[i]));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "." || args[i] == "..") args[i] = "_";
    // "--warmup=1000000" and "-n 1000000": the value after a count flag, attached or not.
    const size_t eq = args[i].find('=');
    if (!is_capped_count(args[i].substr(0, eq))) continue;
    if (eq != std::string::npos) {
      args[i] = args[i].substr(0, eq + 1) + capped(args[i].substr(eq + 1));
    } else if (i + 1 < args.size()) {
      args[i + 1] = capped(args[i + 1]);
    }
  }
  enter(sandbox().c_str());
  const int code = run_cli(std::move(args));
  if (code < 0 || code > 2) {
    std::fprintf(stderr, "baton fuzz: the CLI exited with %d (expected 0, 1 or 2)\n", code);
    std::abort();
  }
  // Whatever the command wrote goes, so that the next input starts from the fixtures alone.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(".", ec)) {
    if (!is_fixture(entry.path().filename())) fs::remove_all(entry.path(), ec);
  }
  for (size_t i = 0; i < std::size(kFixtures); ++i) {
    if (read_fixture(kFixtures[i]) == fixture_bytes()[i]) continue;
    fs::remove_all(kFixtures[i], ec);  // a folder an input made under the fixture's name
    write_fixture(kFixtures[i], fixture_bytes()[i]);
  }
  leave();
  return 0;
}
