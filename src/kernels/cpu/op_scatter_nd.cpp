// ONNX ScatterND and ScatterElements (opset 13; reduction from 16, max/min from 18): output =
// data, then for each k-tuple of indices (ScatterND) or each index along the axis
// (ScatterElements), in order, the slice or element it names is replaced by, or combined (add,
// mul, max, min) with, the matching part of updates. Any dtype; add and mul wrap for integers
// (computed unsigned), are `or` and `and` for bool; float16 and bfloat16 combine in float. Every
// tuple is checked before the output is written.
#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/indices.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"

namespace baton::kernels::cpu {
namespace {

enum class Reduction : uint8_t { None, Add, Mul, Max, Min };

template <typename S>
S combine(Reduction r, S a, S b) {
  if constexpr (std::is_same_v<S, BoolByte>) {
    const bool x = static_cast<bool>(a), y = static_cast<bool>(b);
    return S((r == Reduction::Add || r == Reduction::Max) ? (x || y) : (x && y));
  } else if constexpr (std::is_integral_v<S>) {
    using U = std::make_unsigned_t<S>;
    switch (r) {
      case Reduction::Add:
        return static_cast<S>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case Reduction::Mul:
        // Promoted to unsigned int at least, so narrow types cannot overflow a signed int.
        return static_cast<S>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                             static_cast<uint64_t>(static_cast<U>(b))));
      case Reduction::Max:
        return std::max(a, b);
      default:
        return std::min(a, b);
    }
  } else {
    const compute_t<S> x = load(a), y = load(b);
    switch (r) {
      case Reduction::Add:
        return store<S>(x + y);
      case Reduction::Mul:
        return store<S>(x * y);
      case Reduction::Max:
        return store<S>(std::max(x, y));
      default:
        return store<S>(std::min(x, y));
    }
  }
}

// What both kernels take from the call: the values, the reduction and the call's description.
struct ScatterCall {
  const runtime::Value* data;
  const runtime::Value* indices;
  const runtime::Value* updates;
  runtime::Value* out;
  Reduction reduction;
  std::string what;
};

struct ScatterShape {
  int64_t tuples = 0;                  // k-tuples in indices
  int64_t slice = 0;                   // elements per slice
  std::vector<int64_t> dims, strides;  // the k indexed dimensions of data and their strides
};

// What a call's sizes give: the indexed dimensions and their strides, the slice, the tuple count.
// Writes into `s`'s vectors in place (k, the tuples' length, is the same at every size: the last
// dimension of indices is never dynamic), so that a resize allocates nothing.
void shape_from(const TensorView& data, const TensorView& indices, ScatterShape& s) {
  const auto k = static_cast<size_t>(indices.sizes.back());  // checked: in [1, rank]
  s.dims.resize(k);
  s.strides.resize(k);
  std::copy_n(data.sizes.begin(), k, s.dims.begin());
  s.slice = 0;
  s.tuples = 0;
  if (data.numel() == 0) return;
  // Row-major strides of the indexed dimensions, innermost first.
  int64_t stride = product(data.sizes, k, data.sizes.size());
  s.slice = stride;
  for (size_t d = k; d-- > 0;) {
    s.strides[d] = stride;
    stride *= data.sizes[d];
  }
  // updates is [tuples..., slice...]; tuples counted from indices (their product is bounded by
  // indices' element count).
  s.tuples = product(indices.sizes, 0, indices.sizes.size() - 1);
}

template <typename S>
class ScatterNdKernel final : public runtime::Kernel {
 public:
  ScatterNdKernel(ScatterCall call, ScatterShape s) : c_(std::move(call)), s_(std::move(s)) {}

  // Dynamic shapes: a KV cache's update scatters as many positions as the call has new tokens,
  // into a cache whose batch may change too.
  Status resize() override {
    shape_from(c_.data->tensor, c_.indices->tensor, s_);
    return Status::ok_status();
  }

  Status run() override {
    BATON_TRY(check_indices<int64_t>(c_.indices->tensor, s_.dims, c_.what));
    const int64_t* idx = c_.indices->tensor.data_as<const int64_t>();
    const auto k = static_cast<int64_t>(s_.dims.size());
    const size_t bytes = c_.out->tensor.nbytes();
    // In place when the output is the data's own bytes (a state's update, Method.state): the
    // cache is not copied, only the new positions are written.
    if (bytes != 0 && c_.out->tensor.data != c_.data->tensor.data) {
      std::memcpy(c_.out->tensor.data, c_.data->tensor.data, bytes);
    }
    if (s_.slice == 0) return Status::ok_status();
    S* out = c_.out->tensor.data_as<S>();
    const S* update = c_.updates->tensor.data_as<const S>();
    for (int64_t t = 0; t < s_.tuples; ++t, idx += k, update += s_.slice) {
      S* dst = out + tuple_offset(idx, s_.dims, s_.strides);
      if (c_.reduction == Reduction::None) {
        std::memcpy(dst, update, static_cast<size_t>(s_.slice) * sizeof(S));
      } else {
        for (int64_t e = 0; e < s_.slice; ++e) dst[e] = combine<S>(c_.reduction, dst[e], update[e]);
      }
    }
    return Status::ok_status();
  }

 private:
  ScatterCall c_;
  ScatterShape s_;
};

// ScatterElements: indices and updates share one shape; position i of them writes data's element
// at i with i[axis] replaced by the index. Any dimension may change between calls: run() reads
// the sizes each time (a few multiplications for rank <= 8 against the copy of data).
template <typename Index, typename S>
class ScatterElementsKernel final : public runtime::Kernel {
 public:
  ScatterElementsKernel(ScatterCall call, size_t axis) : c_(std::move(call)), axis_(axis) {}

  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

  Status run() override {
    const TensorView& data = c_.data->tensor;
    const TensorView& indices = c_.indices->tensor;
    const int64_t n = data.sizes[axis_];
    BATON_TRY(check_indices<Index>(indices, std::span<const int64_t>(&n, 1), c_.what));
    const size_t bytes = c_.out->tensor.nbytes();
    if (bytes != 0 && c_.out->tensor.data != data.data) {  // in place: see ScatterNDKernel
      std::memcpy(c_.out->tensor.data, data.data, bytes);
    }
    const int64_t count = indices.numel();
    if (count == 0) return Status::ok_status();
    const size_t rank = data.sizes.size();
    std::array<int64_t, kMaxRank> strides{}, at{};
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      strides[d] = stride;
      stride *= data.sizes[d];
    }
    const Index* idx = indices.data_as<const Index>();
    const S* update = c_.updates->tensor.data_as<const S>();
    S* out = c_.out->tensor.data_as<S>();
    // `at` walks indices' shape in order; `base` is data's offset of `at` without the axis.
    int64_t base = 0;
    for (int64_t p = 0; p < count; ++p) {
      S& dst = out[base + normalize_index(idx[p], n) * strides[axis_]];
      dst = c_.reduction == Reduction::None ? update[p] : combine<S>(c_.reduction, dst, update[p]);
      for (size_t d = rank; d-- > 0;) {
        if (d != axis_) base += strides[d];
        if (++at[d] < indices.sizes[d]) break;
        if (d != axis_) base -= at[d] * strides[d];
        at[d] = 0;
      }
    }
    return Status::ok_status();
  }

 private:
  ScatterCall c_;
  size_t axis_;
};

Reduction reduction_of(const runtime::KernelCall& call) {
  if (call.def->attr_index("reduction") < 0) return Reduction::None;  // ScatterND-13
  const std::string_view r = call.attr_string("reduction");           // checked by the definition
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  return Reduction::None;
}

ScatterCall scatter_call(const runtime::KernelCall& call) {
  return {call.inputs[0],  call.inputs[1],     call.inputs[2],
          call.outputs[0], reduction_of(call), call.describe()};
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& data = call.input(0);
  const TensorView& indices = call.input(1);
  ScatterShape s;
  shape_from(data, indices, s);
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kAllTypes.bits()>(data.dtype, [&]<typename S>() {
    kernel = std::make_unique<ScatterNdKernel<S>>(scatter_call(call), std::move(s));
  });
  if (!kernel) return no_kernel_for(call, data.dtype);
  return kernel;
}

Result<std::unique_ptr<runtime::Kernel>> create_elements(const runtime::KernelCall& call) {
  const TensorView& data = call.input(0);
  const auto axis = static_cast<size_t>(call.attr_int("axis"));  // canonical: in [0, rank)
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<ops::kIndexTypes.bits()>(call.input(1).dtype, [&]<typename Index>() {
    dispatch<ops::kAllTypes.bits()>(data.dtype, [&]<typename S>() {
      kernel = std::make_unique<ScatterElementsKernel<Index, S>>(scatter_call(call), axis);
    });
  });
  if (!kernel) return no_kernel_for(call, data.dtype);
  return kernel;
}

}  // namespace

void register_scatter_nd(runtime::KernelRegistry& registry) {
  registry.add({"ScatterND", "", {}, &create});
  registry.add({"ScatterElements", "", {}, &create_elements});
}

}  // namespace baton::kernels::cpu
