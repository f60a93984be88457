// ONNX GatherND (opset 13): for each batch (the first batch_dims dimensions, shared by data and
// indices) and each k-tuple in the last dimension of indices, the slice of data the tuple names.
// Any dtype (slices of bytes); int64 indices, negative ones counting from the end. Every tuple is
// checked before anything is read.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/indices.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

struct GatherNdShape {
  int64_t batches = 0;           // product of the batch dimensions
  int64_t tuples = 0;            // index tuples per batch
  int64_t batch_elems = 0;       // data elements per batch
  size_t slice_bytes = 0;        // one gathered slice
  std::vector<int64_t> dims;     // the k dimensions a tuple indexes
  std::vector<int64_t> strides;  // their strides in data, in elements
};

// The counts and strides of `s` at the given sizes. `s.dims` and `s.strides` already hold k
// entries (sized at create), so this allocates nothing and serves resize() too.
void plan_gather_nd(GatherNdShape& s, const TensorView& data, const TensorView& indices, size_t b) {
  const size_t k = s.dims.size();
  for (size_t j = 0; j < k; ++j) s.dims[j] = data.sizes[b + j];
  s.batches = s.tuples = s.batch_elems = 0;
  s.slice_bytes = 0;
  std::fill(s.strides.begin(), s.strides.end(), 0);
  // With data and indices non-empty, the output (batches x tuples x slice, every factor then at
  // least 1) is too, and every product here is bounded by one of the three.
  if (data.numel() == 0 || indices.numel() == 0) return;
  int64_t stride = product(data.sizes, b + k, data.sizes.size());
  for (size_t j = k; j-- > 0;) {
    s.strides[j] = stride;
    stride *= data.sizes[b + j];
  }
  s.batches = product(data.sizes, 0, b);
  s.tuples = product(indices.sizes, b, indices.sizes.size() - 1);
  s.batch_elems = product(data.sizes, b, data.sizes.size());
  s.slice_bytes =
      static_cast<size_t>(product(data.sizes, b + k, data.sizes.size())) * dtype_size(data.dtype);
}

class GatherNdKernel final : public runtime::Kernel {
 public:
  GatherNdKernel(const runtime::Value* data, const runtime::Value* indices, runtime::Value* out,
                 GatherNdShape s, size_t batch_dims, size_t element_size, std::string what)
      : data_(data),
        indices_(indices),
        out_(out),
        s_(std::move(s)),
        batch_dims_(batch_dims),
        element_size_(element_size),
        what_(std::move(what)) {}

  // Dynamic shapes: batch, tuple and data sizes may change; k (the tuple length, the last
  // dimension of indices) is fixed by the op's shape rule.
  Status resize() override {
    if (indices_->tensor.sizes.back() != static_cast<int64_t>(s_.dims.size())) {
      return Status(Error::NotSupported, "GatherND: the index tuples' length cannot change");
    }
    plan_gather_nd(s_, data_->tensor, indices_->tensor, batch_dims_);
    return Status::ok_status();
  }

  Status run() override {
    BATON_TRY(check_indices<int64_t>(indices_->tensor, s_.dims, what_));
    const int64_t* idx = indices_->tensor.data_as<const int64_t>();
    const auto k = static_cast<int64_t>(s_.dims.size());
    if (s_.slice_bytes == 0) return Status::ok_status();
    const char* data = static_cast<const char*>(data_->tensor.data);
    char* out = static_cast<char*>(out_->tensor.data);
    for (int64_t b = 0; b < s_.batches; ++b) {
      for (int64_t t = 0; t < s_.tuples; ++t, idx += k) {
        const int64_t offset = b * s_.batch_elems + tuple_offset(idx, s_.dims, s_.strides);
        std::memcpy(out, data + static_cast<size_t>(offset) * element_size_, s_.slice_bytes);
        out += s_.slice_bytes;
      }
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* data_;
  const runtime::Value* indices_;
  runtime::Value* out_;
  GatherNdShape s_;
  size_t batch_dims_;
  size_t element_size_;
  std::string what_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& data = call.input(0);
  const TensorView& indices = call.input(1);
  const auto b = static_cast<size_t>(call.attr_int("batch_dims"));
  const auto k = static_cast<size_t>(indices.sizes.back());  // checked: in [1, rank - b]
  GatherNdShape s;
  s.dims.resize(k);
  s.strides.resize(k);
  plan_gather_nd(s, data, indices, b);
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<GatherNdKernel>(call.inputs[0], call.inputs[1], call.outputs[0],
                                       std::move(s), b, dtype_size(data.dtype), call.describe()));
}

}  // namespace

void register_gather_nd(runtime::KernelRegistry& registry) {
  registry.add({"GatherND", "", {}, &create});
}

}  // namespace baton::kernels::cpu
