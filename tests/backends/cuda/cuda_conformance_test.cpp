// The backend-conformance test on a GPU (the CPU half is tests/ops/conformance_test.cpp): every
// case of the table the CUDA engine takes, with float32, float16 and bfloat16 tensors (and the
// integer and bool tensors of ops that take every dtype), compiled for cuda:0 in every precision,
// against the CPU kernel's float64 result on the same values.
// Without a GPU it reports itself skipped.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
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

TEST(CudaConformance, EveryCaseMatchesTheCpuInEveryPrecision) {
  register_builtins();
  cuda::register_backend();
  cuda::register_compiler();
  if (cuda::devices().empty()) {
    GTEST_SKIP() << "no CUDA device here: GPU test skipped (run the bundle on a GPU host)";
  }
  set_log_level(LogLevel::Error);
  // Tensor dtype -> the engine precisions it runs in.
  const std::map<DType, std::vector<std::string>> plan = {
      {DType::Float32, {"fp32", "tf32", "fp16", "bf16"}},
      {DType::Float16, {"fp32", "fp16"}},
      {DType::BFloat16, {"fp32", "bf16"}},
  };
  std::map<std::string, std::unique_ptr<compiler::BackendCompiler>> backends;
  for (const char* p : {"fp32", "tf32", "fp16", "bf16"}) {
    auto b = compiler::make_backend_compiler({Device::cuda(0), "", p});
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    backends[p] = std::move(b).value();
  }
  // Under compute-sanitizer (100x slower) every 7th case, which still covers every op family.
  const size_t stride = testing::under_sanitizer() ? 7 : 1;
  // BATON_CONFORMANCE_ONLY=TEXT: only the cases whose name ("Conv 1x1 of a 1x1 input, ...")
  // contains TEXT, to check a few on a GPU host quickly; matching none is a failure.
  const char* only_env = std::getenv("BATON_CONFORMANCE_ONLY");
  const std::string only = only_env != nullptr ? only_env : "";
  size_t index = 0;
  int runs = 0, worst_case_runs = 0;
  double worst_ratio = 0.0;
  std::string worst;
  for (const Case& c : conformance_cases()) {
    if (!c.cuda || index++ % stride != 0) continue;
    if (!only.empty() && case_name(c, DType::Float32).find(only) == std::string::npos) continue;
    const std::vector<DType> dtypes = case_dtypes(c);
    for (DType t : dtypes) {
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
        const CaseOutcome out = run_case(model, backends[p].get());
        ASSERT_TRUE(out.status.ok()) << out.status.to_string();
        EXPECT_EQ(out.summary.delegate_calls, 1u) << "the CUDA engine did not take the node";
        ASSERT_EQ(out.outputs.size(), ref.outputs.size());
        for (size_t o = 0; o < out.outputs.size(); ++o) {
          const double err = normalized_error(out.outputs[o], ref.outputs[o]);
          const double bound = error_bound(t, p);
          EXPECT_LE(err, bound) << name << " output " << o;
          if (bound > 0 && err / bound > worst_ratio) {
            worst_ratio = err / bound;
            worst = fmt::format("{} (error {:.3g}, bound {:.3g})", name, err, bound);
          }
        }
        ++runs;
      }
    }
    ++worst_case_runs;
  }
  std::printf("cuda conformance: %d cases, %d runs; closest to its bound: %s\n", worst_case_runs,
              runs, worst.c_str());
  EXPECT_GT(runs, 0) << "no case ran"
                     << (only.empty()
                             ? std::string()
                             : ": no case name contains BATON_CONFORMANCE_ONLY='" + only + "'");
}

}  // namespace
}  // namespace baton::testing
