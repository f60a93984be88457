// ONNX Where (opset 9+): out = condition ? X : Y under three-way broadcasting. A select moves
// bits, so the kernel is instantiated per element size, not per dtype.
#include <memory>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

template <typename E>
void select(const BroadcastPlan<3>& plan, const uint8_t* cond, const E* x, const E* y, E* out) {
  const int last = plan.rank - 1;
  const int64_t sc = plan.strides[0][last], sx = plan.strides[1][last], sy = plan.strides[2][last];
  for_each_broadcast_row<3>(plan, [&](int64_t o, const std::array<int64_t, 3>& in, int64_t n) {
    const uint8_t* c = cond + in[0];
    const E* a = x + in[1];
    const E* b = y + in[2];
    E* z = out + o;
    // Bool bytes are read as bytes: any nonzero byte is true.
    for (int64_t i = 0; i < n; ++i) z[i] = c[i * sc] != 0 ? a[i * sx] : b[i * sy];
  });
}

using SelectFn = void (*)(const BroadcastPlan<3>&, const uint8_t*, const void*, const void*, void*);

template <typename E>
void select_erased(const BroadcastPlan<3>& plan, const uint8_t* cond, const void* x, const void* y,
                   void* out) {
  select<E>(plan, cond, static_cast<const E*>(x), static_cast<const E*>(y), static_cast<E*>(out));
}

class WhereKernel final : public runtime::Kernel {
 public:
  WhereKernel(const runtime::KernelCall& call, SelectFn fn)
      : cond_(call.inputs[0]),
        x_(call.inputs[1]),
        y_(call.inputs[2]),
        out_(call.outputs[0]),
        fn_(fn) {
    follow();
  }

  Status run() override {
    follow();
    fn_(plan_, cond_->tensor.data_as<const uint8_t>(), x_->tensor.data, y_->tensor.data,
        out_->tensor.data);
    return Status::ok_status();
  }

  // Any dimension of any input may change; run() plans the broadcast again when the sizes did
  // (PlannedSizes), so the runtime does not resize it per call.
  Status resize() override {
    follow();
    return Status::ok_status();
  }
  bool follows_sizes() const override { return true; }

 private:
  // The broadcast plan for the current sizes, made again only when they changed.
  void follow() {
    if (planned_.changed(
            {cond_->tensor.sizes, x_->tensor.sizes, y_->tensor.sizes, out_->tensor.sizes})) {
      make_broadcast_plan_into<3>(plan_, out_->tensor.sizes,
                                  {cond_->tensor.sizes, x_->tensor.sizes, y_->tensor.sizes});
    }
  }

  const runtime::Value* cond_;
  const runtime::Value* x_;
  const runtime::Value* y_;
  runtime::Value* out_;
  BroadcastPlan<3> plan_;
  PlannedSizes<4> planned_;
  SelectFn fn_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const DType t = call.input(1).dtype;
  SelectFn fn = nullptr;
  if (!dispatch_word(dtype_size(t), [&]<typename W>() { fn = &select_erased<W>; })) {
    return no_kernel_for(call, t);
  }
  return std::unique_ptr<runtime::Kernel>(std::make_unique<WhereKernel>(call, fn));
}

}  // namespace

void register_where(runtime::KernelRegistry& registry) { registry.add({"Where", "", {}, &create}); }

}  // namespace baton::kernels::cpu
