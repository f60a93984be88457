// The backend-conformance test on the CPU (the GPU half is tests/backends/cuda/
// cuda_conformance_test.cpp): every case of the table (tests/testing/conformance/cases.cpp) in
// every dtype the op allows, against the CPU kernel's float64 result on the same values; every
// registered op and every CUDA lowering must have a case; every CUDA lowering builds (NVRTC, no
// GPU needed) for every case it takes. The cases are parameterized tests named after the case:
//   conformance_test --gtest_filter='*/Conv_*'        the Conv cases, on the CPU and built for
//                                                       the CUDA engine
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "baton/baton.h"
#include "baton/core/log.h"
#include "ops/op_def.h"
#include "runtime/kernel.h"
#include "testing/conformance/cases.h"
#include "testing/conformance/runner.h"
#ifdef BATON_TEST_CUDA_BUILDER
#include "backends/cuda/builder/ops/registry.h"
#include "baton/cuda/compiler.h"
#endif

namespace baton::testing {
namespace {

std::set<std::string> ops_with_cases() {
  std::set<std::string> out;
  for (const Case& c : conformance_cases()) out.insert(c.op);
  return out;
}

TEST(Conformance, EveryRegisteredOpHasCases) {
  register_builtins();
  const std::set<std::string> covered = ops_with_cases();
  for (std::string_view op : runtime::kernel_registry().names()) {
    EXPECT_TRUE(covered.count(std::string(op)))
        << op << " has a CPU kernel but no conformance case";
  }
}

// The table's cases, computed once, and their test names.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = conformance_cases();
  return all;
}
std::string test_name(const ::testing::TestParamInfo<size_t>& info) {
  static const std::vector<std::string> names = conformance_test_names(cases());
  return names[info.param];
}

// One test per case, named after it (Cases/CpuCase.MatchesTheFloat64ReferenceInEveryDtype/
// Add_3_1_x_5): --gtest_filter='*/Conv_*' runs the Conv cases alone.
class CpuCase : public ::testing::TestWithParam<size_t> {
 protected:
  static void SetUpTestSuite() {
    register_builtins();
    set_log_level(LogLevel::Error);
  }
};

TEST_P(CpuCase, MatchesTheFloat64ReferenceInEveryDtype) {
  const Case& c = cases()[GetParam()];
  const std::vector<DType> dtypes = case_dtypes(c);
  ASSERT_FALSE(dtypes.empty()) << c.op << " " << c.label << ": no dtype to run";
  for (DType t : dtypes) {
    const std::string name = case_name(c, t);
    SCOPED_TRACE(name);
    const CaseOutcome ref = run_reference(c, t);
    ASSERT_TRUE(ref.status.ok()) << "reference: " << ref.status.to_string();
    const CaseOutcome out = run_case(build_case(c, t), nullptr);
    ASSERT_TRUE(out.status.ok()) << out.status.to_string();
    ASSERT_EQ(out.outputs.size(), ref.outputs.size());
    for (size_t o = 0; o < out.outputs.size(); ++o) {
      EXPECT_EQ(out.outputs[o].dtype(), ref.outputs[o].dtype() == DType::Float64
                                            ? out.outputs[o].dtype()
                                            : ref.outputs[o].dtype());
      const double err = normalized_error(out.outputs[o], ref.outputs[o]);
      EXPECT_LE(err, error_bound(t, "")) << name << " output " << o;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuCase, ::testing::Range<size_t>(0, cases().size()), test_name);

#ifdef BATON_TEST_CUDA_BUILDER

TEST(Conformance, EveryCudaLoweringHasCases) {
  const std::set<std::string> covered = ops_with_cases();
  for (const cuda::OpLowering& l : cuda::op_lowerings()) {
    EXPECT_TRUE(covered.count(std::string(l.op)))
        << l.op << " has a CUDA lowering but no conformance case";
  }
}

// Without a GPU: every case builds for the CUDA engine (lowering + NVRTC for sm_90) in float32
// and float16 tensors, and in integer and bool tensors where the case says the engine takes them,
// and the engine takes the node exactly when the case says it does; the GPU suite runs them
// (cuda_conformance_test). One test per case, named as CpuCase's.
class CudaBuildCase : public ::testing::TestWithParam<size_t> {
 protected:
  static void SetUpTestSuite() {
    register_builtins();
    cuda::register_compiler();
    set_log_level(LogLevel::Error);
    auto made = compiler::make_backend_compiler({Device::cuda(0), "sm_90", "fp16"});
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    backend_ = std::move(made).value();
  }
  static void TearDownTestSuite() { backend_.reset(); }
  static std::unique_ptr<compiler::BackendCompiler> backend_;
};
std::unique_ptr<compiler::BackendCompiler> CudaBuildCase::backend_;

TEST_P(CudaBuildCase, BuildsForSm90WhereTheEngineTakesIt) {
  ASSERT_NE(backend_, nullptr);
  const Case& c = cases()[GetParam()];
  std::vector<DType> dtypes;
  for (DType t : case_dtypes(c)) {
    // Float32 and float16 tensors; the integer and bool dtypes of ops that take every dtype
    // (float64 is not an engine dtype).
    const bool float_run = t == DType::Float32 || t == DType::Float16;
    const bool typed_run = c.cuda_all_types && t != DType::Float32 && t != DType::Float16 &&
                           t != DType::BFloat16 && t != DType::Float64;
    if (float_run || typed_run) dtypes.push_back(t);
  }
#ifdef BATON_CONFORMANCE_ONE_DTYPE
  // The sanitizer build (NVRTC dominates this test and is not instrumented) builds one dtype per
  // case, rotating through the case's dtypes, so that every lowering still runs under ASan.
  if (!dtypes.empty()) dtypes = {dtypes[GetParam() % dtypes.size()]};
#endif
  // The operator table's CUDA column (OpLowering::types) names every dtype the GPU takes here.
  const cuda::OpLowering* lowering = cuda::find_lowering(c.op, c.domain);
  for (DType t : dtypes) {
    if (c.cuda && lowering != nullptr) {
      EXPECT_TRUE(lowering->types.contains(t))
          << case_name(c, t) << ": the GPU takes " << dtype_name(t) << " but its lowering's types ("
          << lowering->types.to_string() << ") leave it out";
    }
    const CaseModel model = build_case(c, t);
    compiler::CompileOptions options;
    options.backends.push_back(backend_.get());
    auto compiled = compiler::compile_bytes(model.onnx, options);
    ASSERT_TRUE(compiled.ok()) << case_name(c, t) << ": " << compiled.status().to_string();
    EXPECT_EQ(compiled->summary().delegate_calls, c.cuda ? 1u : 0u)
        << case_name(c, t)
        << (c.cuda ? ": the CUDA engine did not take the node"
                   : ": the CUDA engine took a node the table says it cannot");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBuildCase, ::testing::Range<size_t>(0, cases().size()),
                         test_name);

#endif

}  // namespace
}  // namespace baton::testing
