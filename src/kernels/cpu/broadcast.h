// Numpy-style (multidirectional) broadcasting, shared by Add, Sub, Mul, Div, Pow, Gemm's C and
// MatMul's batch dimensions.
//
// infer: broadcast_shape() computes the output shape and says which shapes cannot broadcast.
// create: make_broadcast_plan() turns the shapes into per-input element strides (0 along broadcast
// dimensions), drops size-1 dimensions and merges dimensions that stay contiguous, so most calls
// end up as one or two flat loops. run: for_each_broadcast_row() walks the plan with fixed-size
// counters and allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "baton/runtime/operator.h"
#include "kernels/cpu/common.h"

namespace baton::kernels::cpu {

// Multidirectional broadcast of two shapes (ONNX "Broadcasting in ONNX").
inline Result<std::vector<int64_t>> broadcast_shape(std::span<const int64_t> a,
                                                    std::span<const int64_t> b,
                                                    std::string_view what) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Aligned from the right; a missing dimension acts as 1.
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    BATON_CHECK_OR_RETURN(
        da == db || da == 1 || db == 1, InvalidArgument,
        "{}: shapes {} and {} cannot broadcast (dimension {} of the result: {} vs "
        "{})",
        what, shape_to_string(a), shape_to_string(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Unidirectional broadcast: can `from` be broadcast to exactly `to`?
inline bool broadcasts_to(std::span<const int64_t> from, std::span<const int64_t> to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

// N inputs read along one output shape. Strides are in elements.
template <int N>
struct BroadcastPlan {
  int rank = 1;
  int64_t numel = 0;
  std::array<int64_t, kMaxRank> sizes{};
  std::array<std::array<int64_t, kMaxRank>, N> strides{};
};

// The plan for walking `out` in order when input k steps `full[k][d]` elements along output
// dimension d: dimensions of size 1 dropped, and a dimension merged into the previous kept one
// when every input steps through both as through one.
template <int N>
BroadcastPlan<N> compress_plan(std::span<const int64_t> out,
                               const std::array<std::array<int64_t, kMaxRank>, N>& full) {
  BroadcastPlan<N> plan;
  plan.numel = product(out, 0, out.size());
  const int out_rank = static_cast<int>(out.size());
  int rank = 0;
  for (int d = 0; d < out_rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = rank > 0;
    for (int k = 0; k < N && merge; ++k) {
      merge = plan.strides[k][rank - 1] == full[k][d] * out[d];
    }
    if (merge) {
      plan.sizes[rank - 1] *= out[d];
      for (int k = 0; k < N; ++k) plan.strides[k][rank - 1] = full[k][d];
    } else {
      plan.sizes[rank] = out[d];
      for (int k = 0; k < N; ++k) plan.strides[k][rank] = full[k][d];
      ++rank;
    }
  }
  if (rank == 0) {  // a scalar, or all sizes 1
    plan.sizes[0] = 1;
    for (int k = 0; k < N; ++k) plan.strides[k][0] = 0;
    rank = 1;
  }
  plan.rank = rank;
  return plan;
}

// `out` and every input have rank <= kMaxRank and each input broadcasts to `out` (infer checked).
template <int N>
BroadcastPlan<N> make_broadcast_plan(std::span<const int64_t> out,
                                     const std::array<std::span<const int64_t>, N>& inputs) {
  const int out_rank = static_cast<int>(out.size());

  // Element strides of each input, expressed along the output's dimensions.
  std::array<std::array<int64_t, kMaxRank>, N> full{};
  for (int k = 0; k < N; ++k) {
    const std::span<const int64_t> in = inputs[k];
    const int lead = out_rank - static_cast<int>(in.size());
    int64_t stride = 1;
    for (int d = out_rank - 1; d >= 0; --d) {
      const int j = d - lead;
      if (j < 0 || in[j] == 1) {
        full[k][d] = 0;
      } else {
        full[k][d] = stride;
        stride *= in[j];
      }
    }
  }

  return compress_plan<N>(out, full);
}

// Calls body(out_offset, in_offsets, count) for each run of `count` elements along the innermost
// dimension; element e of the run is out[out_offset + e] and input k's
// [in_offsets[k] + e * plan.strides[k][plan.rank - 1]].
template <int N, typename Body>
inline void for_each_broadcast_row(const BroadcastPlan<N>& plan, Body&& body) {
  if (plan.numel == 0) return;
  const int last = plan.rank - 1;
  const int64_t n = plan.sizes[last];
  const int64_t rows = plan.numel / n;
  std::array<int64_t, kMaxRank> index{};
  std::array<int64_t, N> offsets{};
  for (int64_t r = 0; r < rows; ++r) {
    body(r * n, offsets, n);
    for (int d = last - 1; d >= 0; --d) {
      if (++index[d] < plan.sizes[d]) {
        for (int k = 0; k < N; ++k) offsets[k] += plan.strides[k][d];
        break;
      }
      index[d] = 0;
      for (int k = 0; k < N; ++k) offsets[k] -= plan.strides[k][d] * (plan.sizes[d] - 1);
    }
  }
}

// ---- Binary elementwise ops -------------------------------------------------------------------

// Integer arithmetic wraps (two's complement) instead of overflowing into undefined behavior.
template <typename T, bool = std::is_integral_v<T>>
struct Wrapping {
  using type = T;
};
template <typename T>
struct Wrapping<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrappingType = typename Wrapping<T>::type;

// Runs one op over a plan; false when the op reported a failure (integer division by zero).
using BinaryLoopFn = bool (*)(const BroadcastPlan<2>& plan, const void* a, const void* b,
                              void* out);

// Op: a default-constructible functor, TA x TB -> TA; it may have `bool ok() const`, checked after
// the loop.
template <typename TA, typename TB, typename Op>
bool binary_loop(const BroadcastPlan<2>& plan, const void* a_data, const void* b_data,
                 void* out_data) {
  const TA* a = static_cast<const TA*>(a_data);
  const TB* b = static_cast<const TB*>(b_data);
  TA* out = static_cast<TA*>(out_data);
  Op op;
  const int64_t sa = plan.strides[0][plan.rank - 1];
  const int64_t sb = plan.strides[1][plan.rank - 1];
  for_each_broadcast_row<2>(plan,
                            [&](int64_t out_offset, const std::array<int64_t, 2>& in, int64_t n) {
                              const TA* x = a + in[0];
                              const TB* y = b + in[1];
                              TA* z = out + out_offset;
                              // Specialized strides let the compiler vectorize the common cases.
                              if (sa == 1 && sb == 1) {
                                for (int64_t i = 0; i < n; ++i) z[i] = op(x[i], y[i]);
                              } else if (sa == 1 && sb == 0) {
                                const TB yv = *y;
                                for (int64_t i = 0; i < n; ++i) z[i] = op(x[i], yv);
                              } else if (sa == 0 && sb == 1) {
                                const TA xv = *x;
                                for (int64_t i = 0; i < n; ++i) z[i] = op(xv, y[i]);
                              } else {
                                for (int64_t i = 0; i < n; ++i) z[i] = op(x[i * sa], y[i * sb]);
                              }
                            });
  if constexpr (requires { op.ok(); }) {
    return op.ok();
  } else {
    return true;
  }
}

// The loop for Add/Sub/Mul/Div on float32, int32 or int64; nullptr for another dtype.
template <typename Op>
BinaryLoopFn same_dtype_binary_loop(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return &binary_loop<float, float, Op>;
    case DType::Int32:
      return &binary_loop<int32_t, int32_t, Op>;
    case DType::Int64:
      return &binary_loop<int64_t, int64_t, Op>;
    default:
      return nullptr;
  }
}

class BinaryKernel final : public runtime::Kernel {
 public:
  BinaryKernel(const runtime::Value* a, const runtime::Value* b, runtime::Value* out,
               const BroadcastPlan<2>& plan, BinaryLoopFn loop, std::string failure_message)
      : a_(a),
        b_(b),
        out_(out),
        plan_(plan),
        loop_(loop),
        failure_message_(std::move(failure_message)) {}

  Status run() override {
    if (!loop_(plan_, a_->tensor.data, b_->tensor.data, out_->tensor.data)) {
      return Status(Error::InvalidArgument, failure_message_);
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* a_;
  const runtime::Value* b_;
  runtime::Value* out_;
  BroadcastPlan<2> plan_;
  BinaryLoopFn loop_;
  std::string failure_message_;  // built at create: run() formats nothing
};

// Shapes of inputs 0 and 1 broadcast; the output has input 0's dtype. With `same_dtype`, input 1
// must have input 0's dtype (ONNX's T for Add, Sub, Mul, Div).
inline Status infer_broadcast_binary(std::string_view op, const runtime::OpCall& call,
                                     std::span<runtime::TensorMeta> outputs, bool same_dtype) {
  const std::string what = describe(op, call);
  const TensorView& a = call.inputs[0]->tensor;
  const TensorView& b = call.inputs[1]->tensor;
  if (same_dtype) {
    constexpr size_t kOther[] = {1};
    BATON_TRY(check_same_dtype(call, kOther, what));
  }
  BATON_TRY(check_rank(a.sizes, what, "input 0"));
  BATON_TRY(check_rank(b.sizes, what, "input 1"));
  BATON_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, broadcast_shape(a.sizes, b.sizes, what));
  outputs[0].dtype = a.dtype;
  outputs[0].sizes = std::move(sizes);
  return Status::ok_status();
}

// `loop` was chosen by the op for the inputs' dtypes; `failure_message` is returned by run() when
// the loop reports a failure.
inline Result<std::unique_ptr<runtime::Kernel>> create_broadcast_binary(
    const runtime::OpCall& call, BinaryLoopFn loop, std::string failure_message = {}) {
  const runtime::Value* a = call.inputs[0];
  const runtime::Value* b = call.inputs[1];
  runtime::Value* out = call.outputs[0];
  BATON_CHECK_OR_RETURN(loop != nullptr, Internal, "no loop for {} x {}",
                        dtype_name(a->tensor.dtype), dtype_name(b->tensor.dtype));
  const auto plan = make_broadcast_plan<2>(out->tensor.sizes, {a->tensor.sizes, b->tensor.sizes});
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<BinaryKernel>(a, b, out, plan, loop, std::move(failure_message)));
}

// Add, Sub, Mul and Div share everything but the operation. Op is a functor with
// `static constexpr std::string_view kName`; one with `bool ok() const` can fail at run time
// (integer division by zero), and run() then returns the message built here at create time.
template <typename Op>
Status infer_arithmetic(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  return infer_broadcast_binary(Op::kName, call, outputs, /*same_dtype=*/true);
}

template <typename Op>
Result<std::unique_ptr<runtime::Kernel>> create_arithmetic(const runtime::OpCall& call) {
  std::string failure;
  if constexpr (requires(const Op& op) { op.ok(); }) {
    failure = fmt::format("{}: integer division by zero (the divisor input holds a 0)",
                          describe(Op::kName, call));
  }
  return create_broadcast_binary(call, same_dtype_binary_loop<Op>(call.inputs[0]->tensor.dtype),
                                 std::move(failure));
}

template <typename Op>
runtime::OpSchema arithmetic_schema() {
  runtime::OpSchema schema;
  schema.name = Op::kName;
  schema.min_inputs = 2;
  schema.max_inputs = 2;
  schema.dtypes = {DType::Float32, DType::Int32, DType::Int64};
  schema.infer = &infer_arithmetic<Op>;
  schema.create = &create_arithmetic<Op>;
  return schema;
}

}  // namespace baton::kernels::cpu
