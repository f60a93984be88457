// Kernel::resize for the kernels of sequence models (dynamic shapes, docs/dynamic_shapes.md):
// MatMul, Attention, the normalizations, Softmax, indexing and data movement, created at their
// largest sizes and resized to smaller batch and sequence lengths, compute exactly what a kernel
// created at the smaller sizes computes (bit for bit), allocate nothing while resizing and running,
// and compute the large result again once resized back (resize_util.h).
#include <limits>

#include "kernels/resize_util.h"

namespace baton::testing {
namespace {

// Input builders for mixed dtypes. Each input takes its own seed (resize_util.h's floats() rule):
// an input whose sizes do not change between the two shapes holds the same values at both.
HostTensor f32(uint32_t seed, std::vector<int64_t> sizes) {
  std::mt19937 rng(seed);
  return random_floats(rng, std::move(sizes));
}

HostTensor i64(uint32_t seed, std::vector<int64_t> sizes, int64_t lo, int64_t hi) {
  std::mt19937 rng(seed);
  return random_ints<int64_t>(rng, std::move(sizes), lo, hi);
}

HostTensor bools(uint32_t seed, std::vector<int64_t> sizes) {
  std::mt19937 rng(seed);
  return random_bools(rng, std::move(sizes));
}

HostTensor scalar_i64(int64_t v) { return make_tensor<int64_t>({}, {v}); }

using Inputs = std::vector<HostTensor>;

std::vector<ResizeCase> cases() {
  std::vector<ResizeCase> out;
  auto none = [](OpTester&) {};
  auto axis = [](int64_t a) { return [a](OpTester& t) { t.attr("axis", a); }; };

  // MatMul: every dimension but the contraction one is what exporters make dynamic.
  out.push_back({"MatMul [b,s,k]x[k,n]", "MatMul", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 7 : 3, 16}), f32(2, {16, 12})};
                 }});
  out.push_back(
      {"MatMul batched [b,h,s,d]x[b,h,d,s]", "MatMul", "", none, [](std::mt19937&, bool big) {
         const int64_t b = big ? 2 : 1, s = big ? 5 : 2;
         return Inputs{f32(1, {b, 3, s, 8}), f32(2, {b, 3, 8, s})};
       }});
  out.push_back({"MatMul broadcast B batch", "MatMul", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 2 : 1, 3, big ? 5 : 3, 8}), f32(2, {3, 8, 4})};
                 }});
  // At 32 rows the product is past OpenBLAS's small-matrix limit (no GEMM scratch); at 2 rows it
  // is under it and copies B into scratch, which create must have reserved.
  out.push_back(
      {"MatMul rows cross the small-matrix limit", "MatMul", "", none, [](std::mt19937&, bool big) {
         return Inputs{f32(1, {1, big ? 32 : 2, 256}), f32(2, {256, 256})};
       }});
  out.push_back(
      {"MatMul vector times batched matrix", "MatMul", "", none, [](std::mt19937&, bool big) {
         return Inputs{f32(1, {6}), f32(2, {big ? 4 : 2, 6, big ? 5 : 3})};
       }});

  // Softmax family.
  out.push_back(
      {"Softmax last axis [b,h,s,s]", "Softmax", "", axis(3), [](std::mt19937&, bool big) {
         const int64_t s = big ? 6 : 3;
         return Inputs{f32(1, {big ? 2 : 1, 2, s, s})};
       }});
  out.push_back({"LogSoftmax middle axis", "LogSoftmax", "", axis(1), [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, 5, big ? 4 : 2})};
                 }});
  out.push_back({"Hardmax last axis", "Hardmax", "", axis(2), [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 1, big ? 4 : 2, 7})};
                 }});

  // Normalizations over the fixed hidden size.
  out.push_back(
      {"LayerNormalization last axis", "LayerNormalization", "", axis(2),
       [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 1, 16}), f32(2, {16}), f32(3, {16})};
       }});
  out.push_back(
      {"AddLayerNorm last axis", "AddLayerNorm", "baton", axis(2), [](std::mt19937&, bool big) {
         const int64_t b = big ? 2 : 1, s = big ? 6 : 4;
         return Inputs{f32(1, {b, s, 8}), f32(2, {b, s, 8}), f32(3, {8}), f32(4, {8})};
       }});
  out.push_back({"GroupNormalization batch and length", "GroupNormalization", "",
                 [](OpTester& t) { t.attr("num_groups", int64_t{3}); },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 1, 6, big ? 7 : 4}), f32(2, {6}), f32(3, {6})};
                 }});
  out.push_back({"InstanceNormalization batch and length", "InstanceNormalization", "", none,
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 2 : 1, 4, big ? 9 : 5}), f32(2, {4}), f32(3, {4})};
                 }});

  // Attention: batch and both sequence lengths.
  out.push_back(
      {"Attention batch, query and key lengths", "Attention", "baton",
       [](OpTester& t) { t.attr("scale", 0.25); },
       [](std::mt19937&, bool big) {
         const int64_t b = big ? 2 : 1, sq = big ? 5 : 3, sk = big ? 7 : 4;
         return Inputs{f32(1, {b, 2, sq, 8}), f32(2, {b, 2, sk, 8}), f32(3, {b, 2, sk, 6})};
       }});
  out.push_back({"Attention k_transposed, additive mask", "Attention", "baton",
                 [](OpTester& t) {
                   t.attr("scale", 0.5)
                       .attr("k_transposed", int64_t{1})
                       .attr("mask_kind", std::string("add"));
                 },
                 [](std::mt19937&, bool big) {
                   const int64_t b = big ? 3 : 2, sq = big ? 6 : 2, sk = big ? 6 : 5;
                   return Inputs{f32(1, {b, 2, sq, 4}), f32(2, {b, 2, 4, sk}),
                                 f32(3, {b, 2, sk, 4}), f32(4, {b, 1, sq, sk})};
                 }});
  out.push_back({"Attention causal select mask", "Attention", "baton",
                 [](OpTester& t) {
                   t.attr("scale", 0.5)
                       .attr("mask_kind", std::string("select"))
                       .attr("nan_to_zero", int64_t{1});
                 },
                 [](std::mt19937&, bool big) {
                   const int64_t s = big ? 7 : 3;
                   return Inputs{f32(1, {1, 2, s, 4}), f32(2, {1, 2, s, 4}), f32(3, {1, 2, s, 4}),
                                 bools(4, {s, s})};
                 }});
  // Whole rows of 40000 keys make tiles of one query row; at 30000 keys a tile holds two, more
  // scores than the created tile: create reserved for that.
  out.push_back(
      {"Attention long keys retile", "Attention", "baton",
       [](OpTester& t) { t.attr("scale", 1.0); },
       [](std::mt19937&, bool big) {
         const int64_t sk = big ? 40000 : 30000;
         return Inputs{f32(1, {1, 1, 4, 2}), f32(2, {1, 1, sk, 2}), f32(3, {1, 1, sk, 2})};
       }});

  // Indexing.
  out.push_back(
      {"Gather embedding by ids [b,s]", "Gather", "", axis(0), [](std::mt19937&, bool big) {
         return Inputs{f32(1, {50, 8}), i64(2, {big ? 3 : 2, big ? 5 : 3}, -50, 49)};
       }});
  out.push_back(
      {"Gather last token of [b,s,h]", "Gather", "", axis(1), [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 3 : 2, big ? 6 : 2, 4}), scalar_i64(-1)};
       }});
  out.push_back(
      {"GatherElements last axis", "GatherElements", "", axis(2), [](std::mt19937&, bool big) {
         const int64_t b = big ? 3 : 1, s = big ? 5 : 2;
         return Inputs{f32(1, {b, s, 4}), i64(2, {b, s, 3}, -4, 3)};
       }});
  out.push_back({"ArgMax last axis", "ArgMax", "", axis(2), [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 1, 9})};
                 }});

  // Data movement.
  out.push_back({"Transpose [b,s,h,d] to [b,h,s,d]", "Transpose", "",
                 [](OpTester& t) {
                   t.attr("perm", std::vector<int64_t>{0, 2, 1, 3});
                 },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 2 : 1, big ? 5 : 3, 3, 4})};
                 }});
  out.push_back({"Slice the sequence from 1 on", "Slice", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 6 : 4, 8}), int64s({1}),
                                 int64s({std::numeric_limits<int64_t>::max()}), int64s({1})};
                 }});
  out.push_back(
      {"Slice backwards by 2 from the last", "Slice", "", none, [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 3 : 1, big ? 7 : 4, 5}), int64s({-1, 1}),
                       int64s({std::numeric_limits<int64_t>::min(), 4}), int64s({1, 2}),
                       int64s({-2, 1})};
       }});
  out.push_back(
      {"Where causal mask, scalar fill", "Where", "", none, [](std::mt19937&, bool big) {
         const int64_t s = big ? 6 : 3;
         return Inputs{bools(1, {1, 1, s, s}), f32(2, {big ? 2 : 1, 2, s, s}), f32(3, {})};
       }});
  out.push_back({"Cast to float16", "Cast", "", [](OpTester& t) { t.attr("to", int64_t{10}); },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 2, 4})};
                 }});
  out.push_back(
      {"Split the sequence in two", "Split", "",
       [](OpTester& t) { t.attr("axis", int64_t{1}).attr("num_outputs", int64_t{2}).outputs(2); },
       [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 2 : 1, big ? 7 : 4, 3})};
       }});
  out.push_back({"Split the hidden size", "Split", "",
                 [](OpTester& t) { t.attr("axis", int64_t{2}).outputs(2); },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 4 : 3, 10}), int64s({4, 6})};
                 }});
  out.push_back({"ReduceMean last axis", "ReduceMean", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 6 : 3, 8}), int64s({-1})};
                 }});
  out.push_back({"ReduceSum over the sequence", "ReduceSum", "",
                 [](OpTester& t) { t.attr("keepdims", int64_t{0}); },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 6 : 3, 5}), int64s({1})};
                 }});
  out.push_back(
      {"ReduceLogSumExp last axis", "ReduceLogSumExp", "", none, [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 2 : 1, big ? 5 : 2, 6}), int64s({2})};
       }});
  // GatherND: the dynamo exporter's BERT picks rows with it.
  out.push_back(
      {"GatherND rows by [b,s,1] indices", "GatherND", "", none, [](std::mt19937&, bool big) {
         return Inputs{f32(1, {10, 4}), i64(2, {big ? 3 : 2, big ? 5 : 2, 1}, -10, 9)};
       }});
  out.push_back(
      {"GatherND batch_dims=1 over the sequence", "GatherND", "",
       [](OpTester& t) { t.attr("batch_dims", int64_t{1}); },
       [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 2, 4}), i64(2, {big ? 3 : 2, 2, 1}, 0, 1)};
       }});
  // ScatterND: a static KV cache's update, [b, heads, max, d] written at T new positions by
  // [b, heads, T, 3] index tuples (torch.index_put as the dynamo exporter writes it); the batch
  // and T change between calls, the cache's length does not.
  out.push_back(
      {"ScatterND a KV cache's new positions", "ScatterND", "", none, [](std::mt19937&, bool big) {
         const int64_t b = big ? 3 : 2, heads = 2, t = big ? 4 : 1, first = big ? 0 : 5;
         std::vector<int64_t> tuples;
         for (int64_t i = 0; i < b; ++i) {
           for (int64_t h = 0; h < heads; ++h) {
             for (int64_t p = 0; p < t; ++p) tuples.insert(tuples.end(), {i, h, first + p});
           }
         }
         return Inputs{f32(1, {b, heads, 8, 4}), make_tensor<int64_t>({b, heads, t, 3}, tuples),
                       f32(2, {b, heads, t, 4})};
       }});
  out.push_back({"ScatterND add rows by [s,1] indices", "ScatterND", "",
                 [](OpTester& t) { t.attr("reduction", std::string("add")); },
                 [](std::mt19937&, bool big) {
                   const int64_t s = big ? 6 : 3;
                   return Inputs{f32(1, {big ? 7 : 5, 3}), i64(2, {s, 1}, 0, 4), f32(3, {s, 3})};
                 }});
  out.push_back(
      {"ScatterElements a cache's new positions along axis 2", "ScatterElements", "", axis(2),
       [](std::mt19937&, bool big) {
         const int64_t b = big ? 3 : 2, t = big ? 4 : 1;
         return Inputs{f32(1, {b, 2, 8, 4}), i64(2, {b, 2, t, 4}, -8, 7), f32(3, {b, 2, t, 4})};
       }});
  out.push_back({"Expand [b,1,s] to [b,3,s]", "Expand", "", none, [](std::mt19937&, bool big) {
                   const int64_t b = big ? 3 : 2, s = big ? 5 : 2;
                   return Inputs{f32(1, {b, 1, s}), int64s({b, 3, s})};
                 }});
  out.push_back({"Tile the hidden size", "Tile", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 2 : 1, big ? 5 : 3, 3}), int64s({1, 1, 2})};
                 }});
  out.push_back({"Trilu lower [b,s,s] with k", "Trilu", "",
                 [](OpTester& t) { t.attr("upper", int64_t{0}); },
                 [](std::mt19937&, bool big) {
                   const int64_t s = big ? 6 : 4;
                   return Inputs{f32(1, {big ? 2 : 1, s, s}), scalar_i64(1)};
                 }});
  out.push_back({"Pad constant after the sequence", "Pad", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 2, 4}), int64s({0, 1, 0, 0, 2, 1}),
                                 f32(3, {})};
                 }});
  out.push_back({"Pad reflect the sequence", "Pad", "",
                 [](OpTester& t) { t.attr("mode", std::string("reflect")); },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 2 : 1, big ? 6 : 3, 2}), int64s({0, 2, 0, 0, 1, 0})};
                 }});

  // Gelu is elementwise_kernels.h's UnaryKernel, which resizes its element count.
  out.push_back({"Gelu tanh [b,s,h]", "Gelu", "",
                 [](OpTester& t) { t.attr("approximate", std::string("tanh")); },
                 [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 2, 8})};
                 }});

  // View ops: the kernel copies bytes (or nothing, when the output is planned on the input).
  out.push_back({"Reshape [b,s,12] to [b,s,3,4]", "Reshape", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 2, 12}), int64s({0, 0, 3, 4})};
                 }});
  out.push_back(
      {"Reshape merging batch and sequence", "Reshape", "", none, [](std::mt19937&, bool big) {
         return Inputs{f32(1, {big ? 3 : 1, big ? 5 : 4, 6}), int64s({-1, 6})};
       }});
  out.push_back({"Squeeze [b,1,s]", "Squeeze", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, 1, big ? 5 : 1}), int64s({1})};
                 }});
  out.push_back({"Unsqueeze [b,s]", "Unsqueeze", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 3 : 2, big ? 5 : 4}), int64s({1, 2})};
                 }});
  out.push_back({"Identity", "Identity", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 4 : 2, big ? 3 : 1})};
                 }});

  // Shapes and generated tensors: their kernels read the current sizes at run.
  out.push_back({"Shape", "Shape", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 4 : 2, big ? 3 : 1, 2})};
                 }});
  out.push_back({"Size", "Size", "", none, [](std::mt19937&, bool big) {
                   return Inputs{f32(1, {big ? 4 : 2, big ? 3 : 1})};
                 }});
  out.push_back({"Range up to the sequence length", "Range", "", none, [](std::mt19937&, bool big) {
                   return Inputs{scalar_i64(0), scalar_i64(big ? 9 : 4), scalar_i64(1)};
                 }});
  out.push_back({"ConstantOfShape [b,s]", "ConstantOfShape", "", none, [](std::mt19937&, bool big) {
                   return Inputs{int64s({big ? 3 : 2, big ? 5 : 2})};
                 }});
  return out;
}

TEST(KernelResizeSequence, ASmallerCallComputesWhatAKernelCreatedAtItsSizesComputes) {
  for (const ResizeCase& c : cases()) check_resize(c, nullptr);
}

TEST(KernelResizeSequence, AlsoOnThePool) {
  runtime::ThreadPool pool(3);
  for (const ResizeCase& c : cases()) check_resize(c, &pool);
}

}  // namespace
}  // namespace baton::testing
