// ONNX Pad (opsets 2, 11, 18, 19): the dimensions ops/pad.h describes, any dtype, moved as 1-, 2-,
// 4- or 8-byte words. Output row by row along the last dimension: the kept input elements are one
// memcpy, the padding before and after them is read element by element (constant, edge, reflect
// or wrap); a row that pads along an outer dimension in constant mode is all constant.
// constant_value (opset 11 on) is read at every run, so it may be a graph input.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"
#include "ops/op_def.h"
#include "ops/pad.h"

namespace baton::kernels::cpu {
namespace {

enum class PadMode : uint8_t { Constant, Edge, Reflect, Wrap };

// The input index (along its dimension) output index i reads, or -1 for the constant.
inline int64_t source_index(const ops::PadDim& p, PadMode mode, int64_t i) {
  const int64_t r = i - std::max<int64_t>(p.begin, 0);  // relative to the first kept element
  if (r >= 0 && r < p.kept) return p.crop_begin + r;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return p.crop_begin + std::clamp<int64_t>(r, 0, p.kept - 1);
    case PadMode::Reflect: {
      if (p.kept == 1) return p.crop_begin;
      const int64_t period = 2 * (p.kept - 1);
      int64_t m = r % period;
      if (m < 0) m += period;
      return p.crop_begin + (m < p.kept ? m : period - m);
    }
    case PadMode::Wrap: {
      int64_t m = r % p.kept;
      if (m < 0) m += p.kept;
      return p.crop_begin + m;
    }
  }
  return -1;
}

template <typename Word>
class PadKernel final : public runtime::Kernel {
 public:
  PadKernel(const runtime::Value* in, const runtime::Value* value, runtime::Value* out,
            std::vector<ops::PadDim> dims, PadMode mode, Word fill)
      : in_(in),
        value_(value),
        out_(out),
        dims_(std::move(dims)),
        mode_(mode),
        fill_(fill),
        in_strides_(element_strides(in->tensor.sizes)),
        index_(dims_.size(), 0) {}

  // Every dimension may change; the pads stay. What each dimension keeps and outputs follows its
  // new size (ops::pad_dims without its vectors and messages).
  Status resize() override {
    const std::span<const int64_t> sizes = in_->tensor.sizes;
    for (size_t d = 0; d < dims_.size(); ++d) {
      ops::PadDim& p = dims_[d];
      const int64_t crop_end = p.end < 0 ? -p.end : 0;
      p.kept = sizes[d] - p.crop_begin - crop_end;
      if (p.kept < 0) return Status(Error::InvalidArgument, "Pad: the pads crop past a dimension");
      p.out = p.kept + std::max<int64_t>(p.begin, 0) + std::max<int64_t>(p.end, 0);
      if (mode_ != PadMode::Constant && p.kept == 0 && p.out != 0) {
        return Status(Error::InvalidArgument,
                      "Pad: a non-constant mode pads a dimension from none");
      }
      if (p.out != out_->tensor.sizes[d]) {
        return Status(Error::Internal, "Pad: an output size is not what the pads give");
      }
    }
    int64_t s = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      in_strides_[d] = s;
      if (__builtin_mul_overflow(s, sizes[d], &s)) s = INT64_MAX;
    }
    return Status::ok_status();
  }

  Status run() override {
    const int64_t numel = out_->tensor.numel();
    if (numel == 0) return Status::ok_status();
    Word fill = fill_;
    if (value_ != nullptr && value_->is_tensor()) {
      std::memcpy(&fill, value_->tensor.data, sizeof(Word));
    }
    Word* y = out_->tensor.data_as<Word>();
    if (dims_.empty()) {  // a scalar: nothing to pad
      std::memcpy(y, in_->tensor.data, sizeof(Word));
      return Status::ok_status();
    }
    if (in_->tensor.numel() == 0) {  // every output element pads an empty dimension
      std::fill(y, y + numel, fill);
      return Status::ok_status();
    }
    const Word* x = in_->tensor.data_as<const Word>();
    const size_t last = dims_.size() - 1;
    const ops::PadDim& row = dims_[last];
    const int64_t n = row.out;
    const int64_t before = std::min(std::max<int64_t>(row.begin, 0), n);
    const int64_t kept_end = before + row.kept;
    std::fill(index_.begin(), index_.end(), 0);
    for (int64_t r = 0; r < numel / n; ++r) {
      Word* out = y + r * n;
      int64_t offset = 0;
      bool constant = false;
      for (size_t d = 0; d < last && !constant; ++d) {
        const int64_t s = source_index(dims_[d], mode_, index_[d]);
        constant = s < 0;
        offset += s * in_strides_[d];
      }
      if (constant) {
        std::fill(out, out + n, fill);
      } else {
        const Word* in = x + offset;
        for (int64_t j = 0; j < before; ++j) out[j] = padded(in, row, j, fill);
        std::memcpy(out + before, in + row.crop_begin,
                    static_cast<size_t>(row.kept) * sizeof(Word));
        for (int64_t j = kept_end; j < n; ++j) out[j] = padded(in, row, j, fill);
      }
      for (size_t d = last; d-- > 0;) {
        if (++index_[d] < dims_[d].out) break;
        index_[d] = 0;
      }
    }
    return Status::ok_status();
  }

 private:
  Word padded(const Word* in, const ops::PadDim& p, int64_t j, Word fill) const {
    const int64_t s = source_index(p, mode_, j);
    return s < 0 ? fill : in[s];
  }

  const runtime::Value* in_;
  const runtime::Value* value_;  // constant_value, or null
  runtime::Value* out_;
  std::vector<ops::PadDim> dims_;
  PadMode mode_;
  Word fill_;  // the constant when constant_value is absent
  std::vector<int64_t> in_strides_;
  std::vector<int64_t> index_;  // the output row's index along the outer dimensions
};

// Pad-2's float `value` as the bits of `dtype` (a float type).
uint64_t value_bits(DType dtype, double value) {
  uint64_t bits = 0;
  switch (dtype) {
    case DType::Float64:
      std::memcpy(&bits, &value, 8);
      break;
    case DType::Float16:
      bits = float_to_half(static_cast<float>(value));
      break;
    case DType::BFloat16:
      bits = float_to_bfloat16(static_cast<float>(value));
      break;
    default: {
      const auto f = static_cast<float>(value);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      bits = b;
    }
  }
  return bits;
}

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.input(0);
  const std::string_view mode_name = call.attr_string("mode");
  const PadMode mode = mode_name == "edge"      ? PadMode::Edge
                       : mode_name == "reflect" ? PadMode::Reflect
                       : mode_name == "wrap"    ? PadMode::Wrap
                                                : PadMode::Constant;
  std::vector<int64_t> pads;
  std::optional<std::vector<int64_t>> axes;
  const runtime::Value* value = nullptr;
  uint64_t fill = 0;
  if (call.def->since_version < 11) {
    const std::span<const int64_t> p = call.attr_ints("pads");
    pads.assign(p.begin(), p.end());
    fill = value_bits(x.dtype, call.attr_float("value"));
  } else {
    const TensorView& p = call.input(1);
    pads = ops::int_values_of(p.dtype, p.data, p.numel());
    if (call.has_input(2)) value = call.inputs[2];
    if (call.has_input(3)) {
      const TensorView& a = call.input(3);
      axes = ops::int_values_of(a.dtype, a.data, a.numel());
    }
  }
  BATON_ASSIGN_OR_RETURN(std::vector<ops::PadDim> dims,
                         ops::pad_dims(x.sizes, pads, axes, mode_name, call.describe()));
  std::unique_ptr<runtime::Kernel> kernel;
  dispatch_word(dtype_size(x.dtype), [&]<typename Word>() {
    kernel = std::make_unique<PadKernel<Word>>(call.inputs[0], value, call.outputs[0],
                                               std::move(dims), mode, static_cast<Word>(fill));
  });
  if (!kernel) return no_kernel_for(call, x.dtype);
  return kernel;
}

}  // namespace

void register_pad(runtime::KernelRegistry& registry) { registry.add({"Pad", "", {}, &create}); }

}  // namespace baton::kernels::cpu
