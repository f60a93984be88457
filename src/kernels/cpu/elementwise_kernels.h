// The elementwise kernels, shared by the table's rows (op_elementwise.cpp), Gelu and BitShift:
//  - unary: one loop over a functor `template <typename C> static R apply(C x, const
//    ElementwiseArgs&)`;
//  - binary: a broadcasting loop over `template <typename C, typename E> static R apply(C a, E b,
//    const ElementwiseArgs&, bool& error)`;
// computing in compute_t. R is the compute type or bool; a bool result is stored as bool.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/vector_math.h"
#include "ops/elementwise.h"
#include "runtime/thread_pool.h"

namespace baton::kernels::cpu {

// The storage type of results of type R computed from inputs stored as S: a bool byte for
// predicates, else S.
template <typename S, typename R>
using StorageOf = std::conditional_t<std::is_same_v<R, bool>, BoolByte, S>;

// The rows whose float32 loop is one call to a vectorized array function (vector_math.h) rather
// than the row's scalar functor per element: ArrayForm<Fn>::run, where ArrayForm<Fn>::kHas.
// (A flag of its own: comparing a function's address with null is not a constant expression
// under every build, ASan's included.)
template <typename Fn>
struct ArrayForm {
  static constexpr bool kHas = false;
  static void run(const float*, float*, int64_t) {}
};
#define BATON_ARRAY_FORM(Fn, fn)                                          \
  template <>                                                             \
  struct ArrayForm<Fn> {                                                  \
    static constexpr bool kHas = true;                                    \
    static void run(const float* x, float* y, int64_t n) { fn(x, y, n); } \
  };
BATON_ARRAY_FORM(ops::ExpFn, vmath::exp_f32)
BATON_ARRAY_FORM(ops::LogFn, vmath::log_f32)
BATON_ARRAY_FORM(ops::SigmoidFn, vmath::sigmoid_f32)
BATON_ARRAY_FORM(ops::TanhFn, vmath::tanh_f32)
BATON_ARRAY_FORM(ops::ErfFn, vmath::erf_f32)
BATON_ARRAY_FORM(ops::HardSwishFn, vmath::hard_swish_f32)

// An elementwise op's output elements per pool task: large enough that a task's work (tens of
// microseconds for the cheapest rows) outweighs handing it to a worker, small enough that 1M
// elements split over a few threads.
inline constexpr int64_t kElementwiseTaskElements = 64 * 1024;

template <typename S, typename Fn>
class UnaryKernel final : public runtime::Kernel {
 public:
  using Out = StorageOf<S, decltype(Fn::template apply<compute_t<S>>(
                               compute_t<S>{}, std::declval<ops::ElementwiseArgs>()))>;

  UnaryKernel(const runtime::Value* in, runtime::Value* out, const ops::ElementwiseArgs& args,
              runtime::ThreadPool* pool)
      : in_(in), out_(out), args_(args), pool_(pool) {}

  // Dynamic shapes: run() takes the element count from the input.
  Status resize() override { return Status::ok_status(); }
  bool follows_sizes() const override { return true; }

  Status run() override {
    const S* x = in_->tensor.data_as<const S>();
    Out* y = out_->tensor.data_as<Out>();
    const ops::ElementwiseArgs args = args_;  // a local: stores through y cannot change it
    const int64_t numel = in_->tensor.numel();
    // Elements [lo, hi).
    auto range = [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<S, float> && std::is_same_v<Out, float> && ArrayForm<Fn>::kHas) {
        ArrayForm<Fn>::run(x + lo, y + lo, hi - lo);
      } else {
        for (int64_t i = lo; i < hi; ++i) {
          y[i] = store<Out>(Fn::template apply<compute_t<S>>(load(x[i]), args));
        }
      }
    };
    // Over the pool in tasks of kElementwiseTaskElements; below two tasks' worth, on this thread.
    const int64_t tasks = (numel + kElementwiseTaskElements - 1) / kElementwiseTaskElements;
    if (pool_ == nullptr || tasks < 2) {
      range(0, numel);
    } else {
      pool_->parallel_for(tasks, [&](int64_t t, unsigned) {
        range(t * kElementwiseTaskElements, std::min(numel, (t + 1) * kElementwiseTaskElements));
      });
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  ops::ElementwiseArgs args_;
  runtime::ThreadPool* pool_;
};

template <typename Fn, uint32_t kTypes>
Result<std::unique_ptr<runtime::Kernel>> create_unary(const runtime::KernelCall& call,
                                                      const ops::ElementwiseArgs& args = {}) {
  std::unique_ptr<runtime::Kernel> kernel;
  const runtime::Value* in = call.inputs[0];
  dispatch<kTypes>(in->tensor.dtype, [&]<typename S>() {
    kernel = std::make_unique<UnaryKernel<S, Fn>>(in, call.outputs[0], args, call.pool);
  });
  if (!kernel) return no_kernel_for(call, in->tensor.dtype);
  return kernel;
}

// The binary loop over output elements [start, start + count) of a plan: `a` has storage type SA,
// `b` SB, the output SA or bool.
template <typename SA, typename SB, typename Fn>
bool binary_loop(const BroadcastPlan<2>& plan, const void* a_data, const void* b_data,
                 void* out_data, const ops::ElementwiseArgs& attr_args, int64_t start,
                 int64_t count) {
  using CA = compute_t<SA>;
  using CB = compute_t<SB>;
  using Out =
      StorageOf<SA,
                decltype(Fn::template apply<CA, CB>(CA{}, CB{}, attr_args, std::declval<bool&>()))>;
  const SA* a = static_cast<const SA*>(a_data);
  const SB* b = static_cast<const SB*>(b_data);
  Out* out = static_cast<Out*>(out_data);
  bool error = false;
  const ops::ElementwiseArgs args = attr_args;  // a local: stores through out cannot change it
  const int64_t sa = plan.strides[0][plan.rank - 1];
  const int64_t sb = plan.strides[1][plan.rank - 1];
  auto op = [&error, &args](SA x, SB y) {
    return store<Out>(Fn::template apply<CA, CB>(load(x), load(y), args, error));
  };
  for_each_broadcast_range<2>(plan, start, count,
                              [&](int64_t out_offset, const std::array<int64_t, 2>& in, int64_t n) {
                                const SA* x = a + in[0];
                                const SB* y = b + in[1];
                                Out* z = out + out_offset;
                                // Specialized strides let the compiler vectorize the common cases.
                                if (sa == 1 && sb == 1) {
                                  for (int64_t i = 0; i < n; ++i) z[i] = op(x[i], y[i]);
                                } else if (sa == 1 && sb == 0) {
                                  const SB yv = *y;
                                  for (int64_t i = 0; i < n; ++i) z[i] = op(x[i], yv);
                                } else if (sa == 0 && sb == 1) {
                                  const SA xv = *x;
                                  for (int64_t i = 0; i < n; ++i) z[i] = op(xv, y[i]);
                                } else {
                                  for (int64_t i = 0; i < n; ++i) z[i] = op(x[i * sa], y[i * sb]);
                                }
                              });
  return !error;
}

using BinaryLoopFn = bool (*)(const BroadcastPlan<2>&, const void*, const void*, void*,
                              const ops::ElementwiseArgs&, int64_t start, int64_t count);

class BinaryKernel final : public runtime::Kernel {
 public:
  BinaryKernel(const runtime::Value* a, const runtime::Value* b, runtime::Value* out,
               BinaryLoopFn loop, const ops::ElementwiseArgs& args, std::string failure,
               runtime::ThreadPool* pool)
      : a_(a),
        b_(b),
        out_(out),
        loop_(loop),
        args_(args),
        failure_(std::move(failure)),
        pool_(pool) {
    follow();
  }

  // Dynamic shapes: run() replans the broadcast when its sizes changed (PlannedSizes).
  Status resize() override {
    follow();
    return Status::ok_status();
  }
  bool follows_sizes() const override { return true; }

  Status run() override {
    follow();
    const int64_t numel = plan_.numel;
    // Over the pool in tasks of kElementwiseTaskElements; below two tasks' worth, on this thread.
    const int64_t tasks = (numel + kElementwiseTaskElements - 1) / kElementwiseTaskElements;
    bool ok = true;
    if (pool_ == nullptr || tasks < 2) {
      ok = loop_(plan_, a_->tensor.data, b_->tensor.data, out_->tensor.data, args_, 0, numel);
    } else {
      std::atomic<bool> failed{false};
      pool_->parallel_for(tasks, [&](int64_t t, unsigned) {
        const int64_t lo = t * kElementwiseTaskElements;
        const int64_t len = std::min(numel - lo, kElementwiseTaskElements);
        if (!loop_(plan_, a_->tensor.data, b_->tensor.data, out_->tensor.data, args_, lo, len)) {
          failed.store(true, std::memory_order_relaxed);
        }
      });
      ok = !failed.load(std::memory_order_relaxed);
    }
    if (!ok) return Status(Error::InvalidArgument, failure_);
    return Status::ok_status();
  }

 private:
  const runtime::Value* a_;
  const runtime::Value* b_;
  runtime::Value* out_;
  // The broadcast plan for the current sizes, made again only when they changed.
  void follow() {
    if (planned_.changed({a_->tensor.sizes, b_->tensor.sizes, out_->tensor.sizes})) {
      make_broadcast_plan_into<2>(plan_, out_->tensor.sizes, {a_->tensor.sizes, b_->tensor.sizes});
    }
  }

  BroadcastPlan<2> plan_;
  PlannedSizes<3> planned_;
  BinaryLoopFn loop_;
  ops::ElementwiseArgs args_;
  std::string failure_;  // built at create: run() formats nothing
  runtime::ThreadPool* pool_;
};

// kB == 0: B has A's dtype. Integer division by zero (Fn sets `error`) fails the run.
template <typename Fn, uint32_t kA, uint32_t kB>
Result<std::unique_ptr<runtime::Kernel>> create_binary(const runtime::KernelCall& call,
                                                       const ops::ElementwiseArgs& args = {}) {
  const TensorView& a = call.input(0);
  const TensorView& b = call.input(1);
  BinaryLoopFn loop = nullptr;
  dispatch<kA>(a.dtype, [&]<typename SA>() {
    if constexpr (kB == 0) {
      loop = &binary_loop<SA, SA, Fn>;
    } else {
      dispatch<kB>(b.dtype, [&]<typename SB>() { loop = &binary_loop<SA, SB, Fn>; });
    }
  });
  if (loop == nullptr) return no_kernel_for(call, a.dtype);
  std::string failure =
      fmt::format("{}: integer division by zero (the divisor input holds a 0)", call.describe());
  return std::unique_ptr<runtime::Kernel>(std::make_unique<BinaryKernel>(
      call.inputs[0], call.inputs[1], call.outputs[0], loop, args, std::move(failure), call.pool));
}

}  // namespace baton::kernels::cpu
