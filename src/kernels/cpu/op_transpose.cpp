// ONNX Transpose (opset 13+): output dimension i is input dimension perm[i]; perm absent means
// reversed dimensions. Any dtype (elements moved as 1-, 2-, 4- or 8-byte words).
#include <array>
#include <cstring>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/kernels.h"

namespace baton::kernels::cpu {
namespace {

constexpr std::string_view kName = "Transpose";
constexpr size_t kPerm = 0;

std::vector<int64_t> permutation(const runtime::OpCall& call, int rank) {
  const runtime::Value* perm = call.attrs[kPerm];
  if (!perm->is_none()) return std::vector<int64_t>(perm->ints.begin(), perm->ints.end());
  std::vector<int64_t> reversed(rank);
  for (int i = 0; i < rank; ++i) reversed[i] = rank - 1 - i;
  return reversed;
}

Status infer(const runtime::OpCall& call, std::span<runtime::TensorMeta> outputs) {
  const std::string what = describe(kName, call);
  const TensorView& x = call.inputs[0]->tensor;
  const int rank = x.rank();
  BATON_TRY(check_rank(x.sizes, what));
  const std::vector<int64_t> perm = permutation(call, rank);
  BATON_CHECK_OR_RETURN(static_cast<int>(perm.size()) == rank, InvalidArgument,
                        "{}: perm {} has {} entries but the input {} has rank {}", what,
                        shape_to_string(perm), perm.size(), shape_to_string(x.sizes), rank);
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    BATON_CHECK_OR_RETURN(p >= 0 && p < rank && !seen[p], InvalidArgument,
                          "{}: perm {} is not a permutation of [0, {})", what,
                          shape_to_string(perm), rank);
    seen[p] = true;
  }
  outputs[0].dtype = x.dtype;
  outputs[0].sizes.resize(rank);
  for (int i = 0; i < rank; ++i) outputs[0].sizes[i] = x.sizes[perm[i]];
  return Status::ok_status();
}

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

Result<std::unique_ptr<runtime::Kernel>> create(const runtime::OpCall& call) {
  const TensorView& x = call.inputs[0]->tensor;
  const int rank = x.rank();
  const std::vector<int64_t> perm = permutation(call, rank);
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
  switch (dtype_size(x.dtype)) {
    case 1:
      fn = &transpose_words<uint8_t>;
      break;
    case 2:
      fn = &transpose_words<uint16_t>;
      break;
    case 4:
      fn = &transpose_words<uint32_t>;
      break;
    case 8:
      fn = &transpose_words<uint64_t>;
      break;
    default:
      return BATON_ERROR(NotSupported, "{}: dtype {} has an element size of {} bytes",
                         describe(kName, call), dtype_name(x.dtype), dtype_size(x.dtype));
  }
  return std::unique_ptr<runtime::Kernel>(
      std::make_unique<TransposeKernel>(call.inputs[0], call.outputs[0], plan, fn));
}

}  // namespace

void register_transpose(runtime::OpRegistry& registry) {
  runtime::OpSchema schema;
  schema.name = kName;
  schema.min_inputs = 1;
  schema.max_inputs = 1;
  schema.attrs = {optional_ints_attr("perm")};
  schema.infer = &infer;
  schema.create = &create;
  registry.add(std::move(schema));
}

}  // namespace baton::kernels::cpu
