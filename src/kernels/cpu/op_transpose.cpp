// ONNX Transpose (opset 13+): output dimension i is input dimension perm[i]; perm absent means
// reversed dimensions. Any dtype (elements moved as 1-, 2-, 4- or 8-byte words).
#include <array>
#include <cstring>

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

// The output walked in order, with the input's element stride along each output dimension;
// size-1 dimensions dropped and dimensions that stay contiguous in the input merged.
struct TransposePlan {
  int rank = 1;
  int64_t numel = 0;
  std::array<int64_t, kMaxRank> sizes{};
  std::array<int64_t, kMaxRank> in_strides{};
};

template <typename Word>
void transpose_words(const TransposePlan& p, const void* in_data, void* out_data) {
  const Word* in = static_cast<const Word*>(in_data);
  Word* out = static_cast<Word*>(out_data);
  if (p.numel == 0) return;
  const int last = p.rank - 1;
  const int64_t n = p.sizes[last];
  const int64_t s = p.in_strides[last];
  std::array<int64_t, kMaxRank> index{};
  int64_t offset = 0;
  for (int64_t row = 0, rows = p.numel / n; row < rows; ++row) {
    const Word* src = in + offset;
    Word* dst = out + row * n;
    if (s == 1) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(Word));
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = src[j * s];
    }
    for (int d = last - 1; d >= 0; --d) {
      if (++index[d] < p.sizes[d]) {
        offset += p.in_strides[d];
        break;
      }
      index[d] = 0;
      offset -= p.in_strides[d] * (p.sizes[d] - 1);
    }
  }
}

using TransposeFn = void (*)(const TransposePlan&, const void*, void*);

class TransposeKernel final : public runtime::Kernel {
 public:
  TransposeKernel(const runtime::Value* in, runtime::Value* out, const TransposePlan& plan,
                  TransposeFn fn)
      : in_(in), out_(out), plan_(plan), fn_(fn) {}

  Status run() override {
    fn_(plan_, in_->tensor.data, out_->tensor.data);
    return Status::ok_status();
  }

 private:
  const runtime::Value* in_;
  runtime::Value* out_;
  TransposePlan plan_;
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
  TransposePlan plan;
  plan.numel = x.numel();
  int r = 0;
  for (int i = 0; i < rank; ++i) {
    const int64_t size = x.sizes[perm[i]];
    const int64_t stride = strides[perm[i]];
    if (size == 1) continue;
    if (r > 0 && plan.in_strides[r - 1] == stride * size) {
      plan.sizes[r - 1] *= size;
      plan.in_strides[r - 1] = stride;
    } else {
      plan.sizes[r] = size;
      plan.in_strides[r] = stride;
      ++r;
    }
  }
  if (r == 0) {
    plan.sizes[0] = 1;
    plan.in_strides[0] = 1;
    r = 1;
  }
  plan.rank = r;

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
