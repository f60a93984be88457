// The backend-conformance test on a GPU (the CPU half is tests/ops/conformance_test.cpp): every
// case of the table the CUDA engine takes, with float32, float16 and bfloat16 tensors (and the
// integer and bool tensors of ops that take every dtype), compiled for cuda:0 in every precision,
// against the CPU kernel's float64 result on the same values.
// Without a GPU it reports itself skipped.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "baton/baton.h"
#include "baton/core/log.h"
#include "baton/cuda/backend.h"
#include "baton/cuda/compiler.h"
#include "testing/conformance/cases.h"
#include "testing/conformance/runner.h"
#include "testing/sanitizer.h"

namespace baton::testing {
namespace {

const std::vector<Case>& cases() {
  static const std::vector<Case> all = conformance_cases();
  return all;
}

// The cases the CUDA engine takes (Case::cuda), by index into cases(); under compute-sanitizer
// (100x slower) every 7th of them, which still covers every op family.
std::vector<size_t> cuda_cases() {
  std::vector<size_t> out;
  const size_t stride = testing::under_sanitizer() ? 7 : 1;
  size_t taken = 0;
  for (size_t i = 0; i < cases().size(); ++i) {
    if (cases()[i].cuda && taken++ % stride == 0) out.push_back(i);
  }
  return out;
}

// One test per case, named after it (Cases/CudaCase.MatchesTheCpuInEveryPrecision/Add_3_1_x_5):
// cuda_conformance_test --gtest_filter='*/Conv_1x1*' runs a few cases on a GPU host quickly.
class CudaCase : public ::testing::TestWithParam<size_t> {
 protected:
  static void SetUpTestSuite() {
    register_builtins();
    cuda::register_backend();
    cuda::register_compiler();
    if (cuda::devices().empty()) return;
    set_log_level(LogLevel::Error);
    for (const char* p : {"fp32", "tf32", "fp16", "bf16"}) {
      auto b = compiler::make_backend_compiler({Device::cuda(0), "", p});
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      backends_[p] = std::move(b).value();
    }
  }
  static void TearDownTestSuite() {
    backends_.clear();
    if (runs_ > 0) {
      std::printf("cuda conformance: %d runs; closest to its bound: %s\n", runs_, worst_.c_str());
    }
  }
  void SetUp() override {
    if (cuda::devices().empty()) {
      GTEST_SKIP() << "no CUDA device here: GPU test skipped (run the bundle on a GPU host)";
    }
  }
  static std::map<std::string, std::unique_ptr<compiler::BackendCompiler>> backends_;
  static int runs_;
  static double worst_ratio_;
  static std::string worst_;
};
std::map<std::string, std::unique_ptr<compiler::BackendCompiler>> CudaCase::backends_;
int CudaCase::runs_ = 0;
double CudaCase::worst_ratio_ = 0.0;
std::string CudaCase::worst_;

TEST_P(CudaCase, MatchesTheCpuInEveryPrecision) {
  const Case& c = cases()[GetParam()];
  // Tensor dtype -> the engine precisions it runs in.
  const std::map<DType, std::vector<std::string>> plan = {
      {DType::Float32, {"fp32", "tf32", "fp16", "bf16"}},
      {DType::Float16, {"fp32", "fp16"}},
      {DType::BFloat16, {"fp32", "bf16"}},
  };
  int ran = 0;
  for (DType t : case_dtypes(c)) {
    // Float tensors in the plan's precisions; integer and bool tensors (ops that take every
    // dtype) in two of them, which must not change their exact results.
    std::vector<std::string> precisions = {"fp32", "fp16"};
    if (auto it = plan.find(t); it != plan.end()) {
      precisions = it->second;
    } else if (!c.cuda_all_types || t == DType::Float64) {
      continue;
    }
    const CaseOutcome ref = run_reference(c, t);
    ASSERT_TRUE(ref.status.ok()) << case_name(c, t) << ": " << ref.status.to_string();
    const CaseModel model = build_case(c, t);
    for (const std::string& p : precisions) {
      const std::string name = case_name(c, t) + " on cuda:0 " + p;
      SCOPED_TRACE(name);
      const CaseOutcome out = run_case(model, backends_.at(p).get());
      ASSERT_TRUE(out.status.ok()) << out.status.to_string();
      EXPECT_EQ(out.summary.delegate_calls, 1u) << "the CUDA engine did not take the node";
      ASSERT_EQ(out.outputs.size(), ref.outputs.size());
      for (size_t o = 0; o < out.outputs.size(); ++o) {
        const double err = normalized_error(out.outputs[o], ref.outputs[o]);
        const double bound = error_bound(t, p);
        EXPECT_LE(err, bound) << name << " output " << o;
        if (bound > 0 && err / bound > worst_ratio_) {
          worst_ratio_ = err / bound;
          worst_ = fmt::format("{} (error {:.3g}, bound {:.3g})", name, err, bound);
        }
      }
      ++ran;
      ++runs_;
    }
  }
  EXPECT_GT(ran, 0) << "no dtype of the case runs on the CUDA engine";
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaCase, ::testing::ValuesIn(cuda_cases()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           static const std::vector<std::string> names =
                               conformance_test_names(cases());
                           return names[info.param];
                         });

}  // namespace
}  // namespace baton::testing
