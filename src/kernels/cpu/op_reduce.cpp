// ONNX's ten reductions (ops/reduce.h's table): one kernel, instantiated per dtype and reduction.
//
// create: the reduced dimensions (the same reduced_dims() the definition checked), and a walk of
// the input in memory order (broadcast.h) against an accumulator shaped like the output with the
// reduced dimensions kept as 1 (its stride is 0 along them). The accumulators are a buffer sized
// by the output. resize(): the walk again at the new sizes, in the buffer sized at create. run:
// fill the buffer with the reduction's identity, walk the input once (twice for ReduceLogSumExp:
// its maximum first, so that exp cannot overflow), finish each accumulator into the output. Nothing
// is allocated.
//
// Accumulation: float16, bfloat16 and float32 in float, float64 in double; integers in int64,
// wrapping like the output type (computed unsigned: no signed overflow), except ReduceL2,
// ReduceLogSum and ReduceLogSumExp, which compute integers in double and saturate into the
// output (NaN gives 0); bool (ReduceMax, ReduceMin) in bool. ReduceMax and ReduceMin propagate
// NaN. An empty reduction gives the identity: 0, 1 (ReduceProd), the lowest or highest value
// (ReduceMax, ReduceMin: -inf and +inf for floats), -inf (ReduceLogSum, ReduceLogSumExp; the
// lowest value for integers), NaN (ReduceMean; 0 for integers).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/vector_math.h"
#include "ops/elementwise.h"
#include "ops/op_def.h"
#include "ops/reduce.h"

namespace baton::kernels::cpu {
namespace {

using ops::Reduction;

template <typename S, Reduction R>
struct ReduceOp {
  using C = compute_t<S>;
  static constexpr bool kBool = std::is_same_v<C, bool>;
  static constexpr bool kInt = std::is_integral_v<C> && !kBool;
  // Integer inputs whose result is not an integer operation.
  static constexpr bool kReal =
      R == Reduction::L2 || R == Reduction::LogSum || R == Reduction::LogSumExp;
  // bool accumulates in a byte (std::vector<bool> has no data()).
  using A = std::conditional_t<kInt, std::conditional_t<kReal, double, int64_t>,
                               std::conditional_t<kBool, uint8_t, C>>;

  static A identity() {
    if constexpr (R == Reduction::Prod) return A(1);
    if constexpr (R == Reduction::Max) {
      if constexpr (kBool) return 0;
      if constexpr (kInt) return static_cast<A>(std::numeric_limits<S>::lowest());
      if constexpr (!kInt && !kBool) return -std::numeric_limits<A>::infinity();
    }
    if constexpr (R == Reduction::Min) {
      if constexpr (kBool) return 1;
      if constexpr (kInt) return static_cast<A>(std::numeric_limits<S>::max());
      if constexpr (!kInt && !kBool) return std::numeric_limits<A>::infinity();
    }
    if constexpr (R == Reduction::LogSumExp) return -std::numeric_limits<A>::infinity();
    return A(0);
  }

  // The element's contribution (before combining).
  static A pre(S s) {
    const C x = load(s);
    if constexpr (std::is_same_v<A, int64_t>) {
      const auto v = static_cast<int64_t>(x);
      const auto u = static_cast<uint64_t>(v);
      if constexpr (R == Reduction::L1) return static_cast<int64_t>(v < 0 ? 0 - u : u);
      if constexpr (R == Reduction::SumSquare) return static_cast<int64_t>(u * u);
      return v;
    } else {
      const auto v = static_cast<A>(x);
      if constexpr (R == Reduction::L1) return std::abs(v);
      if constexpr (R == Reduction::SumSquare || R == Reduction::L2) return v * v;
      return v;
    }
  }

  static A combine(A a, A v) {
    if constexpr (R == Reduction::Max) {
      if constexpr (kBool) return a | v;
      if constexpr (!kBool) return (v > a || v != v) ? v : a;  // v != v: NaN propagates
    } else if constexpr (R == Reduction::Min) {
      if constexpr (kBool) return a & v;
      if constexpr (!kBool) return (v < a || v != v) ? v : a;
    } else if constexpr (std::is_same_v<A, int64_t>) {
      const auto ua = static_cast<uint64_t>(a), uv = static_cast<uint64_t>(v);
      return static_cast<int64_t>(R == Reduction::Prod ? ua * uv : ua + uv);
    } else {
      return R == Reduction::Prod ? a * v : a + v;
    }
  }

  static A finish(A a, int64_t count) {
    if constexpr (R == Reduction::Mean) {
      if (count == 0) {
        if constexpr (kInt) return 0;
        if constexpr (!kInt) return std::numeric_limits<A>::quiet_NaN();
      }
      return a / static_cast<A>(count);
    }
    if constexpr (R == Reduction::L2) return std::sqrt(a);
    if constexpr (R == Reduction::LogSum) return std::log(a);
    return a;
  }

  static S out(A a) {
    if constexpr (kInt && kReal) {
      return ops::scalar::narrow<S>(a);  // saturating, NaN gives 0
    } else if constexpr (kInt) {
      return static_cast<S>(a);  // modular (C++20)
    } else if constexpr (kBool) {
      return BoolByte(a != 0);
    } else {
      return store<S>(static_cast<C>(a));
    }
  }
};

// Which dimensions a reduction reduces (ops::reduced_dims), in a fixed array.
using ReducedDims = std::array<bool, kMaxRank>;

template <typename S, Reduction R>
class ReduceKernel final : public runtime::Kernel {
  using Op = ReduceOp<S, R>;
  using A = typename Op::A;

 public:
  // The accumulators are sized for the created (largest) output.
  ReduceKernel(const runtime::Value* in, runtime::Value* out, const ReducedDims& reduced)
      : in_(in),
        out_(out),
        reduced_(reduced),
        acc_(static_cast<size_t>(out->tensor.numel())),
        shift_(R == Reduction::LogSumExp ? acc_.size() : 0) {
    plan();
  }

  // Every dimension may change, reduced ones too.
  Status resize() override {
    plan();
    return Status::ok_status();
  }

  Status run() override {
    const S* x = in_->tensor.data_as<const S>();
    S* y = out_->tensor.data_as<S>();
    A* acc = acc_.data();
    A* acc_end = acc + n_;
    if constexpr (R == Reduction::LogSumExp) {
      // The maximum of each group (NaN if any is), then the sum of exp(x - maximum); an infinite
      // or NaN maximum is the result itself and shifts by nothing.
      A* shift = shift_.data();
      std::fill(shift, shift + n_, -std::numeric_limits<A>::infinity());
      walk(x, shift, [](A m, A v, size_t) { return (v > m || v != v) ? v : m; });
      for (size_t k = 0; k < n_; ++k) {
        if (!std::isfinite(shift[k])) shift[k] = 0;
      }
      std::fill(acc, acc_end, A(0));
      walk(x, acc, [shift](A a, A v, size_t k) { return a + std::exp(v - shift[k]); });
      for (size_t k = 0; k < n_; ++k) y[k] = Op::out(std::log(acc[k]) + shift[k]);
    } else {
      std::fill(acc, acc_end, Op::identity());
      walk<kFloatSums>(x, acc, [](A a, A v, size_t) { return Op::combine(a, v); });
      for (size_t k = 0; k < n_; ++k) y[k] = Op::out(Op::finish(acc[k], count_));
    }
    return Status::ok_status();
  }

 private:
  // The walk, the group size and the accumulator count at the values' current sizes.
  void plan() {
    const std::span<const int64_t> sizes = in_->tensor.sizes;
    // The accumulators seen along the input's dimensions: the output with reduced dimensions 1.
    std::array<int64_t, kMaxRank> acc_sizes{};
    bool empty_group = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      acc_sizes[d] = reduced_[d] ? 1 : sizes[d];
      empty_group = empty_group || (reduced_[d] && sizes[d] == 0);
    }
    n_ = static_cast<size_t>(out_->tensor.numel());
    // Only needed when there are outputs: then every kept dimension is nonzero, and the product
    // of the reduced ones (unless one is 0) fits like the input's element count.
    count_ = 1;
    if (n_ != 0 && !empty_group) {
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (reduced_[d]) count_ *= sizes[d];
      }
    }
    if (empty_group) count_ = 0;
    plan_ =
        make_broadcast_plan<1>(sizes, {std::span<const int64_t>(acc_sizes.data(), sizes.size())});
  }

  // Float32 sums: a row reduced into one accumulator is summed by vmath::sum_f32 (32 partial
  // sums, vectorized; a plain loop is one chain of dependent adds, 4 cycles an element:
  // EfficientNet-B0's 17 squeeze-excite means took 1.14 ms against onnxruntime's 0.32).
  static constexpr bool kFloatSums =
      std::is_same_v<S, float> && (R == Reduction::Sum || R == Reduction::Mean);

  // acc[k] = f(acc[k], pre(x), k) for every input element x, k its accumulator; with kRowSums
  // (f is the sum of float32 values), a row reduced into one accumulator is added as its
  // vmath::sum_f32.
  template <bool kRowSums = false, typename F>
  void walk(const S* x, A* acc, F f) const {
    const int64_t s = plan_.strides[0][plan_.rank - 1];
    for_each_broadcast_row<1>(
        plan_, [&](int64_t in_offset, const std::array<int64_t, 1>& acc_offset, int64_t count) {
          const S* row = x + in_offset;
          const auto k = static_cast<size_t>(acc_offset[0]);
          if (s == 0) {  // the row is reduced into one accumulator
            if constexpr (kRowSums) {
              // A row shorter than 32 summed inline: sum_f32's bits (one element a partial
              // sum), without its call through the clones' dispatch.
              float sum = 0.0f;
              if (count < 32) {
                for (int64_t j = 0; j < count; ++j) sum += row[j];
              } else {
                sum = vmath::sum_f32(row, count);
              }
              acc[k] += sum;
            } else {
              A a = acc[k];
              for (int64_t j = 0; j < count; ++j) a = f(a, Op::pre(row[j]), k);
              acc[k] = a;
            }
          } else {  // the row is kept: one accumulator per element
            for (int64_t j = 0; j < count; ++j) {
              const size_t kj = k + static_cast<size_t>(j * s);
              acc[kj] = f(acc[kj], Op::pre(row[j]), kj);
            }
          }
        });
  }

  const runtime::Value* in_;
  runtime::Value* out_;
  ReducedDims reduced_;
  BroadcastPlan<1> plan_;
  int64_t count_ = 0;     // elements per group (ReduceMean's divisor)
  size_t n_ = 0;          // output elements now (at most acc_.size())
  std::vector<A> acc_;    // one accumulator per output element
  std::vector<A> shift_;  // ReduceLogSumExp: each group's maximum
};

// Every type some reduction's definition allows (ops/reduce.cpp).
constexpr DTypeSet kKernelTypes =
    ops::kFloatTypes | DTypeSet{DType::Int8, DType::Int32, DType::Int64, DType::UInt8, DType::Bool};

template <Reduction R>
std::unique_ptr<runtime::Kernel> make(DType dtype, const runtime::Value* in, runtime::Value* out,
                                      const ReducedDims& reduced) {
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch<kKernelTypes.bits()>(dtype, [&]<typename S>() {
    // bool only for ReduceMax and ReduceMin (the definitions allow it nowhere else).
    if constexpr (!std::is_same_v<S, BoolByte> || R == Reduction::Max || R == Reduction::Min) {
      kernel = std::make_unique<ReduceKernel<S, R>>(in, out, reduced);
    }
  });
  return kernel;
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const ops::ReduceRow* row = ops::find_reduce_row(call.def->name);
  BATON_CHECK_OR_RETURN(row != nullptr, Internal, "{}: not a reduction", call.describe());
  const TensorView& x = call.input(0);
  std::optional<std::vector<int64_t>> axes;
  bool noop = false;
  if (call.def->attr_index("axes") >= 0) {  // opset 1 form: canonical attribute
    if (!call.attr("axes").is_none()) {
      const std::span<const int64_t> a = call.attr_ints("axes");
      axes.emplace(a.begin(), a.end());
    }
  } else {
    if (call.has_input(1)) {
      const TensorView& a = call.input(1);
      axes = ops::int_values_of(a.dtype, a.data, a.numel());
    }
    noop = call.attr_int("noop_with_empty_axes") != 0;
  }
  BATON_ASSIGN_OR_RETURN(
      const std::vector<bool> reduced_dims,
      ops::reduced_dims(axes, static_cast<int>(x.sizes.size()), noop, call.describe()));
  ReducedDims reduced{};
  for (size_t d = 0; d < reduced_dims.size(); ++d) reduced[d] = reduced_dims[d];

  std::unique_ptr<runtime::Kernel> kernel;
  const runtime::Value* in = call.inputs[0];
  runtime::Value* out = call.outputs[0];
  switch (row->reduction) {
#define BATON_REDUCE_CASE(R)                                \
  case Reduction::R:                                        \
    kernel = make<Reduction::R>(x.dtype, in, out, reduced); \
    break;
    BATON_REDUCE_CASE(Sum)
    BATON_REDUCE_CASE(Mean)
    BATON_REDUCE_CASE(Prod)
    BATON_REDUCE_CASE(SumSquare)
    BATON_REDUCE_CASE(L1)
    BATON_REDUCE_CASE(L2)
    BATON_REDUCE_CASE(LogSum)
    BATON_REDUCE_CASE(LogSumExp)
    BATON_REDUCE_CASE(Max)
    BATON_REDUCE_CASE(Min)
#undef BATON_REDUCE_CASE
  }
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_reduce(runtime::KernelRegistry& registry) {
  for (const ops::ReduceRow& row : ops::reduce_rows()) registry.add({row.name, "", {}, &create});
}

}  // namespace baton::kernels::cpu
