// ONNX Trilu (opset 14): each [rows, cols] matrix of the last two dimensions keeps the elements on
// and above (upper=1) or on and below (upper=0) diagonal k and zeroes the rest. k (an optional
// int64 scalar) is read at every run. Any dtype: kept runs are copied, the others zeroed (all-zero
// bytes are zero in every dtype).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

class TriluKernel final : public runtime::Kernel {
 public:
  TriluKernel(const runtime::Value* in, const runtime::Value* k, runtime::Value* out, bool upper)
      : in_(in), k_(k), out_(out), upper_(upper), element_size_(dtype_size(in->tensor.dtype)) {
    plan();
  }

  // Every dimension may change (a causal mask [sequence, sequence]).
  Status resize() override {
    plan();
    return Status::ok_status();
  }

  Status run() override {
    int64_t k = 0;
    if (k_ != nullptr) std::memcpy(&k, k_->tensor.data, sizeof k);
    // Past these bounds every row is kept or zeroed whole; clamping keeps row + k in range.
    k = std::clamp<int64_t>(k, -rows_ - 1, cols_ + 1);
    const char* src = static_cast<const char*>(in_->tensor.data);
    char* dst = static_cast<char*>(out_->tensor.data);
    const size_t row_bytes = static_cast<size_t>(cols_) * element_size_;
    for (int64_t m = 0; m < matrices_; ++m) {
      for (int64_t r = 0; r < rows_; ++r, src += row_bytes, dst += row_bytes) {
        // Columns [lo, hi) are kept: upper keeps c >= r + k, lower keeps c <= r + k.
        const int64_t lo = upper_ ? std::clamp<int64_t>(r + k, 0, cols_) : 0;
        const int64_t hi = upper_ ? cols_ : std::clamp<int64_t>(r + k + 1, 0, cols_);
        const auto at = [&](int64_t c) { return static_cast<size_t>(c) * element_size_; };
        std::memset(dst, 0, at(lo));
        if (hi > lo) std::memcpy(dst + at(lo), src + at(lo), at(hi - lo));
        std::memset(dst + at(std::max(lo, hi)), 0, at(cols_ - std::max(lo, hi)));
      }
    }
    return Status::ok_status();
  }

 private:
  void plan() {
    const TensorView& x = in_->tensor;
    const size_t rank = x.sizes.size();  // >= 2
    matrices_ = rows_ = cols_ = 0;
    if (x.numel() != 0) {
      matrices_ = product(x.sizes, 0, rank - 2);
      rows_ = x.sizes[rank - 2];
      cols_ = x.sizes[rank - 1];
    }
  }

  const runtime::Value* in_;
  const runtime::Value* k_;
  runtime::Value* out_;
  bool upper_;
  int64_t matrices_ = 0, rows_ = 0, cols_ = 0;
  size_t element_size_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<TriluKernel>(call.inputs[0], call.has_input(1) ? call.inputs[1] : nullptr,
                                    call.outputs[0], call.attr_int("upper") != 0));
}

}  // namespace

void register_trilu(runtime::KernelRegistry& registry) { registry.add({"Trilu", "", {}, &create}); }

}  // namespace baton::kernels::cpu
