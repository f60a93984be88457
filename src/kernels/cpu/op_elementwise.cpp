// CPU kernels of the elementwise operators, one per row of ops/elementwise.h: a unary kernel
// over the row's functor, or a broadcasting binary kernel. Every dtype the row allows is
// instantiated (float16 and bfloat16 computed in float).
#include <memory>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/kernels.h"
#include "ops/elementwise.h"

namespace baton::kernels::cpu {
namespace {

// The binary loop over a plan: `a` and the output have storage type SA, `b` SB.
template <typename SA, typename SB, typename Fn>
bool binary_loop(const BroadcastPlan<2>& plan, const void* a_data, const void* b_data,
                 void* out_data) {
  using CA = compute_t<SA>;
  using CB = compute_t<SB>;
  const SA* a = static_cast<const SA*>(a_data);
  const SB* b = static_cast<const SB*>(b_data);
  SA* out = static_cast<SA*>(out_data);
  bool error = false;
  const int64_t sa = plan.strides[0][plan.rank - 1];
  const int64_t sb = plan.strides[1][plan.rank - 1];
  auto op = [&error](SA x, SB y) {
    return store<SA>(Fn::template apply<CA, CB>(load(x), load(y), error));
  };
  for_each_broadcast_row<2>(plan,
                            [&](int64_t out_offset, const std::array<int64_t, 2>& in, int64_t n) {
                              const SA* x = a + in[0];
                              const SB* y = b + in[1];
                              SA* z = out + out_offset;
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

using BinaryLoopFn = bool (*)(const BroadcastPlan<2>&, const void*, const void*, void*);

class BinaryKernel final : public runtime::Kernel {
 public:
  BinaryKernel(const runtime::Value* a, const runtime::Value* b, runtime::Value* out,
               const BroadcastPlan<2>& plan, BinaryLoopFn loop, std::string failure)
      : a_(a), b_(b), out_(out), plan_(plan), loop_(loop), failure_(std::move(failure)) {}

  Status run() override {
    if (!loop_(plan_, a_->tensor.data, b_->tensor.data, out_->tensor.data)) {
      return Status(Error::InvalidArgument, failure_);
    }
    return Status::ok_status();
  }

 private:
  const runtime::Value* a_;
  const runtime::Value* b_;
  runtime::Value* out_;
  BroadcastPlan<2> plan_;
  BinaryLoopFn loop_;
  std::string failure_;  // built at create: run() formats nothing
};

template <typename Fn, uint32_t kA, uint32_t kB>
Result<std::unique_ptr<runtime::Kernel>> create_binary(const runtime::KernelCall& call) {
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
  const auto plan = make_broadcast_plan<2>(call.output(0).sizes, {a.sizes, b.sizes});
  std::string failure =
      fmt::format("{}: integer division by zero (the divisor input holds a 0)", call.describe());
  return std::unique_ptr<runtime::Kernel>(std::make_unique<BinaryKernel>(
      call.inputs[0], call.inputs[1], call.outputs[0], plan, loop, std::move(failure)));
}

}  // namespace

void register_elementwise(runtime::KernelRegistry& registry) {
  using namespace ::baton::ops;  // the rows name their functors and type sets unqualified
#define BATON_UNARY_KERNEL(Name, since, types, cpu, device) \
  registry.add({#Name, "", {}, &create_unary<Name##Fn, (types).bits()>});
#define BATON_BINARY_KERNEL(Name, since, a_types, b_types, cpu, device) \
  registry.add({#Name, "", {}, &create_binary<Name##Fn, (a_types).bits(), (b_types).bits()>});
  BATON_UNARY_OPS(BATON_UNARY_KERNEL)
  BATON_BINARY_OPS(BATON_BINARY_KERNEL)
#undef BATON_UNARY_KERNEL
#undef BATON_BINARY_KERNEL
}

}  // namespace baton::kernels::cpu
