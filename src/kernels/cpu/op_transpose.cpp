// ONNX Transpose (opset 13): output dimension i is input dimension perm[i] (the canonical perm is
// always present). Any dtype (elements moved as 1-, 2-, 4- or 8-byte words).
#include <array>
#include <cstring>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

// The output walked in order (a one-input broadcast plan whose strides are the input's, permuted);
// rows the input holds contiguously are copied whole.
template <typename Word>
void transpose_words(const BroadcastPlan<1>& p, const void* in_data, void* out_data) {
  const Word* in = static_cast<const Word*>(in_data);
  Word* out = static_cast<Word*>(out_data);
  const int64_t s = p.strides[0][p.rank - 1];
  for_each_broadcast_row<1>(
      p, [&](int64_t out_offset, const std::array<int64_t, 1>& offsets, int64_t n) {
        const Word* src = in + offsets[0];
        Word* dst = out + out_offset;
        if (s == 1) {
          std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(Word));
        } else {
          for (int64_t j = 0; j < n; ++j) dst[j] = src[j * s];
        }
      });
}

using TransposeFn = void (*)(const BroadcastPlan<1>&, const void*, void*);

class TransposeKernel final : public runtime::Kernel {
 public:
  TransposeKernel(const runtime::Value* in, runtime::Value* out, const BroadcastPlan<1>& plan,
                  TransposeFn fn)
      : in_(in), out_(out), plan_(plan), fn_(fn) {}

  Status run() override {
    fn_(plan_, in_->tensor.data, out_->tensor.data);
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  BroadcastPlan<1> plan_;
  TransposeFn fn_;
};

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::KernelCall& call) {
  const TensorView& x = call.inputs[0]->tensor;
  const int rank = x.rank();
  const std::span<const int64_t> perm = call.attr_ints("perm");  // canonical: always present
  std::array<int64_t, kMaxRank> strides{};
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= x.sizes[d];
  }
  // Output dimension i is input dimension perm[i]: its size and the input's stride along it.
  std::array<int64_t, kMaxRank> out_sizes{};
  std::array<std::array<int64_t, kMaxRank>, 1> in_strides{};
  for (int i = 0; i < rank; ++i) {
    out_sizes[i] = x.sizes[perm[i]];
    in_strides[0][i] = strides[perm[i]];
  }
  const BroadcastPlan<1> plan =
      compress_plan<1>(std::span<const int64_t>(out_sizes.data(), rank), in_strides);

  TransposeFn fn = nullptr;
  if (!dispatch_by_size(dtype_size(x.dtype), [&]<typename W>() { fn = &transpose_words<W>; })) {
    return BATON_ERROR(NotSupported, "{}: dtype {} has an element size of {} bytes",
                       call.describe(), dtype_name(x.dtype), dtype_size(x.dtype));
  }
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<TransposeKernel>(call.inputs[0], call.outputs[0], plan, fn));
}

}  // namespace

void register_transpose(runtime::KernelRegistry& registry) {
  registry.add({"Transpose", "", {}, &create});
}

}  // namespace baton::kernels::cpu
