// Kernel::resize (dynamic shapes, docs/dynamic_shapes.md): a kernel created at the largest sizes
// of its values and resized to smaller ones computes exactly what a kernel created at the smaller
// sizes computes (bit for bit), allocates nothing while resizing and running, and computes the
// large result again once resized back. Each case is one op call at two shapes, with random
// inputs; the dimensions that change are the ones exporters make dynamic (batch, sequence).
#include "kernels/resize_util.h"

namespace baton::testing {
namespace {

std::vector<ResizeCase> cases() {
  std::vector<ResizeCase> out;
  auto none = [](OpTester&) {};
  out.push_back({"Conv batch", "Conv", "",
                 [](OpTester& t) {
                   t.attr("pads", std::vector<int64_t>{1, 1, 1, 1});
                 },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 5 : 2, 3, 9, 9}, {4, 3, 3, 3}, {4}});
                 }});
  out.push_back({"Conv strided batch", "Conv", "",
                 [](OpTester& t) {
                   t.attr("strides", std::vector<int64_t>{2, 2});
                 },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 4 : 1, 8, 12, 12}, {6, 8, 1, 1}});
                 }});
  out.push_back({"Conv depthwise batch", "Conv", "",
                 [](OpTester& t) {
                   t.attr("group", int64_t{6}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
                 },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 3 : 2, 6, 7, 7}, {6, 1, 3, 3}, {6}});
                 }});
  out.push_back(
      {"FusedConv residual relu batch", "FusedConv", "baton",
       [](OpTester& t) {
         t.attr("pads", std::vector<int64_t>{1, 1, 1, 1}).attr("activation", std::string("Relu"));
       },
       [](std::mt19937& rng, bool big) {
         const int64_t n = big ? 4 : 3;
         return floats(rng, {{n, 3, 6, 6}, {5, 3, 3, 3}, {5}, {n, 5, 6, 6}});
       }});
  out.push_back({"MaxPool batch", "MaxPool", "",
                 [](OpTester& t) {
                   t.attr("kernel_shape", std::vector<int64_t>{3, 3})
                       .attr("strides", std::vector<int64_t>{2, 2})
                       .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
                 },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 4 : 1, 3, 9, 9}});
                 }});
  out.push_back({"AveragePool batch", "AveragePool", "",
                 [](OpTester& t) {
                   t.attr("kernel_shape", std::vector<int64_t>{2, 2});
                 },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 4 : 2, 3, 8, 8}});
                 }});
  out.push_back(
      {"GlobalAveragePool batch", "GlobalAveragePool", "", none, [](std::mt19937& rng, bool big) {
         return floats(rng, {{big ? 6 : 1, 5, 7, 7}});
       }});
  out.push_back({"Flatten batch", "Flatten", "", none, [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 6 : 2, 5, 3}});
                 }});
  out.push_back({"Gemm rows", "Gemm", "", [](OpTester& t) { t.attr("transB", int64_t{1}); },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 9 : 2, 17}, {5, 17}, {5}});
                 }});
  // Created above OpenBLAS's small-matrix limit (m n k > 1e6), run below it, where its path
  // needs a copy of B in scratch the created size did not (found on a dynamic BERT).
  out.push_back({"Gemm rows across the small-matrix limit", "Gemm", "", none,
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 600 : 3, 40}, {40, 64}, {64}});
                 }});
  out.push_back({"Linear rows across the small-matrix limit", "Linear", "baton", none,
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 8 : 1, big ? 64 : 5, 32}, {32, 96}, {96}});
                 }});
  out.push_back({"Linear rows", "Linear", "baton",
                 [](OpTester& t) { t.attr("activation", std::string("Relu")); },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 4 : 3, big ? 7 : 2, 16}, {16, 12}, {12}});
                 }});
  out.push_back({"Relu", "Relu", "", none, [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 5 : 2, 7}});
                 }});
  out.push_back({"Add broadcast row", "Add", "", none, [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 5 : 3, big ? 6 : 1, 4}, {6, 1}});
                 }});
  out.push_back({"Mul per-channel", "Mul", "", none, [](std::mt19937& rng, bool big) {
                   const int64_t n = big ? 4 : 2;
                   return floats(rng, {{n, 3, 5, 5}, {n, 3, 1, 1}});
                 }});
  out.push_back({"Concat channels batch", "Concat", "",
                 [](OpTester& t) { t.attr("axis", int64_t{1}); },
                 [](std::mt19937& rng, bool big) {
                   const int64_t n = big ? 4 : 2;
                   return floats(rng, {{n, 3, 4, 4}, {n, 5, 4, 4}});
                 }});
  out.push_back({"Concat along the dynamic axis", "Concat", "",
                 [](OpTester& t) { t.attr("axis", int64_t{0}); },
                 [](std::mt19937& rng, bool big) {
                   return floats(rng, {{big ? 4 : 1, 3}, {big ? 5 : 2, 3}});
                 }});
  return out;
}

TEST(KernelResize, ASmallerCallComputesWhatAKernelCreatedAtItsSizesComputes) {
  for (const ResizeCase& c : cases()) check_resize(c, nullptr);
}

TEST(KernelResize, AlsoOnThePool) {
  runtime::ThreadPool pool(3);
  for (const ResizeCase& c : cases()) check_resize(c, &pool);
}

}  // namespace
}  // namespace baton::testing
