#include "testing/test_backend.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "baton/core/check.h"

namespace baton::testing {
namespace {

struct Op {
  TestOp code;
  int32_t a, b, out;
};

struct Handle : runtime::DelegateHandle {
  uint32_t inputs = 0, outputs = 0, constants = 0, temps = 0;
  uint64_t numel = 0;
  std::vector<float> constant_data;
  std::vector<float> temp_data;
  std::vector<Op> ops;
  std::vector<float*> slots;  // resolved per execute
  // What the last execute measured (DelegateArgs::profile / profile_steps), on the host clock.
  std::optional<double> last_ms;
  std::vector<double> step_start_ms, step_ms;  // sized at init
  bool steps_timed = false;
};

template <typename T>
bool read(std::span<const uint8_t> blob, size_t& pos, T* out) {
  if (pos + sizeof(T) > blob.size()) return false;
  std::memcpy(out, blob.data() + pos, sizeof(T));
  pos += sizeof(T);
  return true;
}

// Validates the whole blob into `h` (counts, constants, ops), as init and describe_blob need it.
Status parse_blob(std::span<const uint8_t> blob, Handle& h) {
  size_t pos = 0;
  char magic[4];
  BATON_CHECK_OR_RETURN(blob.size() >= 4 && std::memcmp(blob.data(), "TBE1", 4) == 0,
                        InvalidProgram, "test blob has no TBE1 magic");
  std::memcpy(magic, blob.data(), 4);
  pos = 4;
  uint32_t num_ops = 0;
  BATON_CHECK_OR_RETURN(read(blob, pos, &h.inputs) && read(blob, pos, &h.outputs) &&
                            read(blob, pos, &h.constants) && read(blob, pos, &h.temps) &&
                            read(blob, pos, &num_ops) && read(blob, pos, &h.numel),
                        InvalidProgram, "test blob header is truncated");
  BATON_CHECK_OR_RETURN(h.numel < (1u << 24) && h.constants < 1024 && h.temps < 1024 &&
                            num_ops < 4096 && h.inputs < 1024 && h.outputs < 1024,
                        InvalidProgram, "test blob header has implausible counts");
  h.constant_data.resize(h.constants * h.numel);
  for (float& f : h.constant_data) {
    BATON_CHECK_OR_RETURN(read(blob, pos, &f), InvalidProgram, "test blob constants truncated");
  }
  const int32_t slots = static_cast<int32_t>(h.inputs + h.constants + h.temps + h.outputs);
  for (uint32_t i = 0; i < num_ops; ++i) {
    Op op{};
    uint8_t code = 0, pad[3];
    BATON_CHECK_OR_RETURN(read(blob, pos, &code) && read(blob, pos, &pad) &&
                              read(blob, pos, &op.a) && read(blob, pos, &op.b) &&
                              read(blob, pos, &op.out),
                          InvalidProgram, "test blob op {} truncated", i);
    BATON_CHECK_OR_RETURN(code <= 2 && op.a >= 0 && op.a < slots && op.out >= 0 && op.out < slots &&
                              (code == 0 || (op.b >= 0 && op.b < slots)),
                          InvalidProgram, "test blob op {} is malformed", i);
    op.code = static_cast<TestOp>(code);
    h.ops.push_back(op);
  }
  BATON_CHECK_OR_RETURN(pos == blob.size(), InvalidProgram, "test blob has trailing bytes");
  return Status();
}

class TestBackend final : public runtime::BackendInterface {
 public:
  std::string_view id() const override { return kTestBackendId; }
  bool is_available() const override { return test_backend_stats().available; }
  // One load option, "test_flag" = 0 | 1: what the runtime checks load options against.
  std::vector<std::string_view> option_keys() const override { return {"test_flag"}; }
  Status check_option(const runtime::BackendOption& option) const override {
    BATON_CHECK_OR_RETURN(option.value == "0" || option.value == "1", InvalidArgument,
                          "load option test_flag='{}': the value is one of 0, 1", option.value);
    return Status();
  }

  Result<runtime::DelegateHandle*> init(const runtime::BackendInitContext& ctx,
                                        std::span<const uint8_t> blob,
                                        std::span<const runtime::CompileSpec> specs) override {
    TestBackendStats& stats = test_backend_stats();
    stats.last_specs.clear();
    for (const auto& s : specs)
      stats.last_specs[std::string(s.key)] = std::string(s.value_string());
    for (const auto& o : ctx.options) stats.options_seen.push_back(o.key + "=" + o.value);
    stats.last_blob_size = blob.size();
    stats.last_device = ctx.device;
    stats.last_recorded_device = ctx.recorded_device;
    BATON_CHECK_OR_RETURN(stats.last_specs.count("fail_init") == 0, InvalidArgument,
                          "delegate '{}' asked to fail (fail_init)", ctx.delegate_name);
    auto h = std::make_unique<Handle>();
    BATON_TRY(parse_blob(blob, *h));
    h->temp_data.resize(h->temps * h->numel);
    h->step_start_ms.resize(h->ops.size());
    h->step_ms.resize(h->ops.size());
    h->slots.resize(h->inputs + h->constants + h->temps + h->outputs);
    for (uint32_t c = 0; c < h->constants; ++c) {
      h->slots[h->inputs + c] = h->constant_data.data() + c * h->numel;
    }
    for (uint32_t t = 0; t < h->temps; ++t) {
      h->slots[h->inputs + h->constants + t] = h->temp_data.data() + t * h->numel;
    }
    ++stats.inits;
    return static_cast<runtime::DelegateHandle*>(h.release());
  }

  Status execute(runtime::DelegateHandle* handle, const runtime::DelegateArgs& args) override {
    auto* h = static_cast<Handle*>(handle);
    BATON_CHECK_OR_RETURN(args.inputs.size() == h->inputs && args.outputs.size() == h->outputs,
                          InvalidArgument, "test delegate called with {} inputs / {} outputs",
                          args.inputs.size(), args.outputs.size());
    for (uint32_t i = 0; i < h->inputs; ++i) {
      BATON_CHECK_OR_RETURN(static_cast<uint64_t>(args.inputs[i]->tensor.numel()) == h->numel,
                            InvalidArgument, "test delegate input {} has the wrong size", i);
      h->slots[i] = args.inputs[i]->tensor.data_as<float>();
    }
    const uint32_t out_base = h->inputs + h->constants + h->temps;
    for (uint32_t o = 0; o < h->outputs; ++o) {
      h->slots[out_base + o] = args.outputs[o]->tensor.data_as<float>();
    }
    using Clock = std::chrono::steady_clock;
    const auto call_start = Clock::now();
    auto ms_since = [](Clock::time_point t) {
      return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    };
    for (size_t o = 0; o < h->ops.size(); ++o) {
      const Op& op = h->ops[o];
      const auto op_start = Clock::now();
      if (args.profile_steps) h->step_start_ms[o] = ms_since(call_start);
      const float* a = h->slots[op.a];
      const float* b = op.code == TestOp::Relu ? nullptr : h->slots[op.b];
      float* y = h->slots[op.out];
      for (uint64_t i = 0; i < h->numel; ++i) {
        switch (op.code) {
          case TestOp::Relu:
            y[i] = a[i] > 0.0f ? a[i] : 0.0f;
            break;
          case TestOp::Add:
            y[i] = a[i] + b[i];
            break;
          case TestOp::Mul:
            y[i] = a[i] * b[i];
            break;
        }
      }
      if (args.profile_steps) h->step_ms[o] = ms_since(op_start);
    }
    h->steps_timed = args.profile_steps;
    if (args.profile) {
      h->last_ms = ms_since(call_start);
    } else {
      h->last_ms.reset();
    }
    ++test_backend_stats().executes;
    test_backend_stats().last_symbols.assign(args.symbols.begin(), args.symbols.end());
    return Status();
  }

  std::optional<double> last_device_time_ms(runtime::DelegateHandle* handle) const override {
    return static_cast<Handle*>(handle)->last_ms;
  }

  std::vector<runtime::StepTime> step_times(runtime::DelegateHandle* handle) const override {
    auto* h = static_cast<Handle*>(handle);
    std::vector<runtime::StepTime> out;
    if (!h->steps_timed) return out;
    static constexpr const char* kNames[] = {"relu", "add", "mul"};
    for (size_t o = 0; o < h->ops.size(); ++o) {
      out.push_back({kNames[static_cast<int>(h->ops[o].code)], "test_elementwise loop",
                     fmt::format("op {}", o), h->step_start_ms[o], h->step_ms[o]});
    }
    return out;
  }

  void destroy(runtime::DelegateHandle* handle) override {
    delete static_cast<Handle*>(handle);
    ++test_backend_stats().destroys;
  }

  Result<std::string> describe_blob(std::span<const uint8_t> blob) const override {
    ++test_backend_stats().describes;
    Handle h;
    BATON_TRY(parse_blob(blob, h));
    std::string ops;
    for (const Op& op : h.ops) {
      static constexpr const char* kNames[] = {"relu", "add", "mul"};
      ops += fmt::format("{}\"{} {} {} -> {}\"", ops.empty() ? "" : ", ",
                         kNames[static_cast<int>(op.code)], op.a, op.b, op.out);
    }
    return fmt::format(
        "{{\"format\": \"TBE1\", \"inputs\": {}, \"outputs\": {}, \"constants\": {}, "
        "\"temporaries\": {}, \"elements\": {}, \"ops\": [{}]}}",
        h.inputs, h.outputs, h.constants, h.temps, h.numel, ops);
  }
};

}  // namespace

std::vector<uint8_t> make_test_blob(uint32_t inputs, uint32_t outputs,
                                    const std::vector<std::vector<float>>& constants,
                                    uint32_t temps, const std::vector<TestBlobOp>& ops,
                                    uint64_t numel) {
  std::vector<uint8_t> blob = {'T', 'B', 'E', '1'};
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    blob.insert(blob.end(), b, b + n);
  };
  const uint32_t counts[] = {inputs, outputs, static_cast<uint32_t>(constants.size()), temps,
                             static_cast<uint32_t>(ops.size())};
  put(counts, sizeof counts);
  put(&numel, sizeof numel);
  for (const auto& c : constants) put(c.data(), c.size() * sizeof(float));
  for (const TestBlobOp& op : ops) {
    const uint8_t code[4] = {static_cast<uint8_t>(op.code), 0, 0, 0};
    put(code, 4);
    put(&op.a, 4);
    put(&op.b, 4);
    put(&op.out, 4);
  }
  return blob;
}

void TestBackendStats::reset() {
  inits = 0;
  executes = 0;
  describes = 0;
  destroys = 0;
  available = true;
  last_specs.clear();
  last_blob_size = 0;
  options_seen.clear();
  last_device = Device::cpu();
  last_recorded_device = Device::cpu();
  last_symbols.clear();
}

TestBackendStats& test_backend_stats() {
  static TestBackendStats stats;
  return stats;
}

void register_test_backend() {
  static TestBackend backend;
  runtime::register_backend(&backend);
}

}  // namespace baton::testing
