// Index inputs of the indexing kernels (Gather, GatherElements, GatherND, ScatterND): ONNX lets
// an index count from the end of its dimension, and an index outside [-n, n - 1] is an error at
// run time. Kernels check every index before they read or write anything.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/cpu/common.h"

namespace baton::kernels::cpu {

// Every index of `indices` against the dimension it indexes, dims[position % dims.size()] (one
// size for Gather's and GatherElements' indices; the k sizes of GatherND's and ScatterND's
// k-tuples).
template <typename Index>
Status check_indices(const TensorView& indices, std::span<const int64_t> dims,
                     std::string_view what) {
  const Index* idx = indices.data_as<const Index>();
  const int64_t count = indices.numel();
  const auto k = static_cast<int64_t>(dims.size());
  for (int64_t p = 0; p < count; ++p) {
    const int64_t n = dims[static_cast<size_t>(p % k)];
    if (normalize_index(idx[p], n) < 0) return index_out_of_range(what, "indices", p, idx[p], n);
  }
  return Status::ok_status();
}

// The element offset a checked k-tuple names: the sum of its normalized indices times `strides`.
inline int64_t tuple_offset(const int64_t* tuple, std::span<const int64_t> dims,
                            std::span<const int64_t> strides) {
  int64_t offset = 0;
  for (size_t j = 0; j < dims.size(); ++j) {
    offset += normalize_index(tuple[j], dims[j]) * strides[j];
  }
  return offset;
}

}  // namespace baton::kernels::cpu
