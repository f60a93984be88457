// ONNX TopK (ops/topk.cpp): the tensor seen as [outer, n, inner] around the axis; for each of the
// outer x inner lines, the k first elements in the order "larger first" (or smaller first), ties
// by the lower index, NaN above every number. A partial sort of the line's indices, kept in a
// buffer sized at create for the longest line (the upper bound of a dynamic axis), so run()
// allocates nothing. k is a compile-time constant, read at create.
#include <algorithm>
#include <numeric>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"
#include "ops/shape.h"

namespace baton::kernels::cpu {
namespace {

constexpr uint32_t kTypes = DTypeSet{DType::Float32,  DType::Float64, DType::Float16,
                                     DType::BFloat16, DType::Int32,   DType::Int64}
                                .bits();

class TopKKernel final : public runtime::Kernel {
 public:
  TopKKernel(const runtime::Value* in, runtime::Value* values, runtime::Value* indices, size_t axis,
             int64_t k, bool largest)
      : in_(in), values_(values), indices_(indices), axis_(axis), k_(k), largest_(largest) {
    plan();
    order_.resize(static_cast<size_t>(n_));
  }

  Status resize() override {
    plan();
    BATON_CHECK_OR_RETURN(k_ <= n_ && static_cast<size_t>(n_) <= order_.size(), InvalidArgument,
                          "TopK: K is {} but the axis has {} elements at this call", k_, n_);
    return Status::ok_status();
  }

  Status run() override {
    dispatch<kTypes>(in_->tensor.dtype, [&]<typename S>() {
      using C = compute_t<S>;
      const S* x = static_cast<const S*>(in_->tensor.data);
      S* y = static_cast<S*>(values_->tensor.data);
      auto* idx = static_cast<int64_t*>(indices_->tensor.data);
      const auto first = order_.begin();
      const auto kth = first + k_, last = first + n_;
      for (int64_t o = 0; o < outer_; ++o) {
        for (int64_t i = 0; i < inner_; ++i) {
          const S* line = x + o * n_ * inner_ + i;
          auto at = [&](int64_t j) { return load(line[j * inner_]); };
          // A strict total order: NaN above every number, then by value, then the lower index.
          auto before = [&](int64_t a, int64_t b) {
            const C va = at(a), vb = at(b);
            const bool na = va != va, nb = vb != vb;  // never true for integers
            if (na != nb) return largest_ ? na : nb;
            if (!na && va != vb) return largest_ ? va > vb : va < vb;
            return a < b;
          };
          std::iota(first, last, int64_t{0});
          std::partial_sort(first, kth, last, before);
          const int64_t out = o * k_ * inner_ + i;
          for (int64_t j = 0; j < k_; ++j) {
            y[out + j * inner_] = line[order_[static_cast<size_t>(j)] * inner_];
            idx[out + j * inner_] = order_[static_cast<size_t>(j)];
          }
        }
      }
    });
    return Status::ok_status();
  }

 private:
  void plan() {
    const AxisLines l = lines_along(in_->tensor.sizes, axis_);
    outer_ = l.outer;
    n_ = l.n;
    inner_ = l.inner;
  }

  const runtime::Value* in_;
  runtime::Value* values_;
  runtime::Value* indices_;
  size_t axis_;
  int64_t k_;
  bool largest_;
  int64_t outer_ = 0, n_ = 0, inner_ = 0;
  std::vector<int64_t> order_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& kv = call.input(1);
  const int64_t k = ops::int_values_of(kv.dtype, kv.data, 1)[0];
  const int64_t rank = static_cast<int64_t>(call.input(0).sizes.size());
  int64_t axis = call.attr_int("axis");
  if (axis < 0) axis += rank;
  BATON_CHECK_OR_RETURN(axis >= 0 && axis < rank, InvalidArgument, "{}: axis {} is out of range",
                        call.describe(), axis);
  const int64_t n = call.input(0).sizes[static_cast<size_t>(axis)];
  BATON_CHECK_OR_RETURN(k >= 0 && k <= n, InvalidArgument,
                        "{}: K is {} but axis {} has {} elements", call.describe(), k, axis, n);
  BATON_CHECK_OR_RETURN(dispatch<kTypes>(call.input(0).dtype, []<typename S>() {}), NotSupported,
                        "{}: dtype {} is not ordered here", call.describe(),
                        dtype_name(call.input(0).dtype));
  const bool largest = call.def->attr_index("largest") < 0 || call.attr_int("largest") != 0;
  return std::unique_ptr<runtime::Kernel>(std::make_unique<TopKKernel>(
      call.inputs[0], call.outputs[0], call.outputs[1], static_cast<size_t>(axis), k, largest));
}

}  // namespace

void register_topk(runtime::KernelRegistry& registry) { registry.add({"TopK", "", {}, &create}); }

}  // namespace baton::kernels::cpu
