// The CUDA backend's typed options (include/baton/cuda/options.h): parsed once from KEY=VALUE
// text, unknown keys and values refused with the valid ones listed, and printed back the same way
// (what an engine header records). No GPU needed.
#include "baton/cuda/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace baton {
namespace {

using cuda::BuildOptions;
using cuda::LoadOptions;

std::string error_of(const Status& s) { return s.ok() ? "accepted" : s.message(); }

TEST(CudaOptionsTest, BuildOptionsRecordEveryValueInAFixedOrder) {
  const std::vector<std::string> defaults = {
      "conv_rows=kernel",       "conv_patches=gemm", "conv_hard_activations=fused",
      "gemm_gelu=cudnn",        "concat=in_place",   "reduce_columns=split",
      "kernel_sizes=arguments", "tune_candidates=4"};
  EXPECT_EQ(BuildOptions{}.recorded(), defaults);

  const std::vector<std::string> given = {
      "conv_rows=cudnn",   "tune_candidates=1",         "gemm_gelu=kernel", "tune_candidates=9",
      "kernel_sizes=code", "dump_kernel_source=/tmp/k", "concat=kernel",    "reduce_columns=whole"};
  auto parsed = BuildOptions::parse(given);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->conv_rows, cuda::ConvRows::Cudnn);
  EXPECT_EQ(parsed->conv_patches, cuda::ConvPatches::Gemm);
  EXPECT_EQ(parsed->gemm_gelu, cuda::GemmGelu::Kernel);
  EXPECT_EQ(parsed->kernel_sizes, cuda::KernelSizes::Code);
  EXPECT_EQ(parsed->concat, cuda::ConcatReads::Kernel);
  EXPECT_EQ(parsed->reduce_columns, cuda::ReduceColumns::Whole);
  EXPECT_EQ(parsed->tune_candidates, 9);  // the later entry wins
  EXPECT_EQ(parsed->dump_kernel_source, "/tmp/k");
  // The diagnostic folder changes nothing in the engine: not recorded, but printed for a caller.
  const std::vector<std::string> recorded = {
      "conv_rows=cudnn",   "conv_patches=gemm", "conv_hard_activations=fused",
      "gemm_gelu=kernel",  "concat=kernel",     "reduce_columns=whole",
      "kernel_sizes=code", "tune_candidates=9"};
  EXPECT_EQ(parsed->recorded(), recorded);
  std::vector<std::string> all = recorded;
  all.push_back("dump_kernel_source=/tmp/k");
  EXPECT_EQ(parsed->to_strings(), all);
  // Printed and parsed again: the same options.
  auto again = BuildOptions::parse(parsed->to_strings());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->to_strings(), all);
}

TEST(CudaOptionsTest, UnknownBuildOptionsAndValuesAreRefusedWithTheValidOnes) {
  struct Case {
    std::string text, message;
  };
  for (const Case& c : {
           Case{"conv_row=cudnn",
                "unknown CUDA build option 'conv_row': the options are conv_rows, conv_patches, "
                "conv_hard_activations, gemm_gelu, concat, reduce_columns, kernel_sizes, "
                "tune_candidates, "
                "dump_kernel_source"},
           Case{"conv_rows=sideways",
                "CUDA build option conv_rows='sideways': the value is one of kernel, cudnn"},
           Case{"conv_rows=", "CUDA build option conv_rows='': the value is one of kernel, cudnn"},
           Case{"gemm_gelu=Kernel",
                "CUDA build option gemm_gelu='Kernel': the value is one of cudnn, kernel"},
           Case{"concat=copy",
                "CUDA build option concat='copy': the value is one of in_place, kernel"},
           Case{"tune_candidates=0",
                "CUDA build option tune_candidates='0': the value is a whole number from 1 to 32"},
           Case{"tune_candidates=33", "from 1 to 32"},
           Case{"tune_candidates=4x", "from 1 to 32"},
           Case{"tune_candidates=-1", "from 1 to 32"},
           Case{"conv_rows", "CUDA build option 'conv_rows' is not KEY=VALUE"},
           Case{"=cudnn", "CUDA build option '=cudnn' is not KEY=VALUE"},
       }) {
    SCOPED_TRACE(c.text);
    auto parsed = BuildOptions::parse(std::vector<std::string>{c.text});
    ASSERT_FALSE(parsed.ok()) << "'" << c.text << "' was taken";
    EXPECT_EQ(parsed.status().code(), Error::InvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << parsed.status().message();
  }
}

TEST(CudaOptionsTest, LoadOptionsRoundTripThroughBackendOptions) {
  LoadOptions l;
  l.cuda_graphs = false;
  l.graph_edges = cuda::GraphEdges::Full;
  l.tune_candidates = 2;
  l.cuda_graph_shapes = 7;
  const std::vector<runtime::BackendOption> options = l.to_backend_options();
  ASSERT_EQ(options.size(), LoadOptions::keys().size());
  for (size_t i = 0; i < options.size(); ++i) EXPECT_EQ(options[i].key, LoadOptions::keys()[i]);
  auto parsed = LoadOptions::parse(options);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_FALSE(parsed->cuda_graphs);
  EXPECT_TRUE(parsed->cuda_pdl);
  EXPECT_FALSE(parsed->strict_staging);
  EXPECT_EQ(parsed->graph_edges, cuda::GraphEdges::Full);
  EXPECT_EQ(parsed->tune_candidates, 2);
  EXPECT_EQ(parsed->cuda_graph_shapes, 7);

  LoadOptions d;
  EXPECT_TRUE(d.cuda_graphs);
  EXPECT_TRUE(d.cuda_pdl);
  EXPECT_FALSE(d.strict_staging);
  EXPECT_EQ(d.graph_edges, cuda::GraphEdges::Own);
  EXPECT_EQ(d.tune_candidates, 4);
  EXPECT_EQ(d.cuda_graph_shapes, 32);
}

TEST(CudaOptionsTest, UnknownLoadOptionsAndValuesAreRefusedWithTheValidOnes) {
  LoadOptions l;
  EXPECT_EQ(
      error_of(l.set("cuda_graph", "0")),
      "unknown load option 'cuda_graph': the options are cuda_graphs, cuda_graph_shapes, cuda_pdl, "
      "strict_staging, graph_edges, tune_candidates");
  EXPECT_EQ(error_of(l.set("cuda_graphs", "yes")),
            "load option cuda_graphs='yes': the value is one of 0, 1");
  // The mode that kept the libraries' programmatic edges reproduced a known-wrong result: gone.
  EXPECT_EQ(error_of(l.set("graph_edges", "captured")),
            "load option graph_edges='captured': the value is one of own, full");
  EXPECT_EQ(error_of(l.set("tune_candidates", "100")),
            "load option tune_candidates='100': the value is a whole number from 1 to 32");
  EXPECT_EQ(error_of(l.set("cuda_graph_shapes", "0")),
            "load option cuda_graph_shapes='0': the value is a whole number from 1 to 4096");
  EXPECT_TRUE(l.cuda_graphs) << "a refused value changed the option";
  EXPECT_EQ(l.cuda_graph_shapes, 32) << "a refused value changed the option";
  EXPECT_EQ(error_of(l.set("strict_staging", "1")), "accepted");
  EXPECT_TRUE(l.strict_staging);
}

TEST(CudaOptionsTest, HelpListsEveryOptionWithItsValuesAndDefault) {
  const std::string build = cuda::build_options_help();
  EXPECT_NE(build.find("conv_rows: kernel, cudnn (default: kernel)"), std::string::npos) << build;
  EXPECT_NE(build.find("tune_candidates: 1..32 (default: 4)"), std::string::npos) << build;
  EXPECT_NE(build.find("dump_kernel_source: a folder (default: none)"), std::string::npos) << build;
  const std::string load = cuda::load_options_help();
  EXPECT_NE(load.find("graph_edges: own, full (default: own)"), std::string::npos) << load;
  EXPECT_NE(load.find("cuda_graphs: 0, 1 (default: 1)"), std::string::npos) << load;
  EXPECT_NE(load.find("cuda_graph_shapes: 1..4096 (default: 32)"), std::string::npos) << load;
}

}  // namespace
}  // namespace baton
