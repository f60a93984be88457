// BATON_CUDA_GRAPH_EDGES's values (src/backends/cuda/engine.h, GraphEdges): each mode's name
// parses back to it, the default's name is "own", and anything else is refused (the engine then
// fails to load with an error naming the modes; tests/backends/cuda/tuning_test.cpp checks that
// on a GPU). No GPU needed.
#include <gtest/gtest.h>

#include <string_view>

#include "backends/cuda/engine.h"

namespace baton::cuda {
namespace {

TEST(GraphEdgesTest, EveryModeParsesFromItsNameAndNothingElseDoes) {
  for (const GraphEdges mode :
       {GraphEdges::AsCaptured, GraphEdges::Full, GraphEdges::Own, GraphEdges::AfterOwn}) {
    const std::string_view name = graph_edges_name(mode);
    EXPECT_EQ(parse_graph_edges(name), mode) << name;
  }
  EXPECT_EQ(graph_edges_name(GraphEdges::Own), "own");
  EXPECT_EQ(graph_edges_name(GraphEdges::AsCaptured), "captured");
  EXPECT_EQ(graph_edges_name(GraphEdges::AfterOwn), "after-own");
  for (const std::string_view bad : {"", "Own", "FULL", "own ", "sometimes", "1", "0"}) {
    EXPECT_FALSE(parse_graph_edges(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace baton::cuda
