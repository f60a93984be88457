// Identity, Reshape, Flatten, Squeeze and Unsqueeze change only the shape: on the GPU they are
// views (the output names the input's bytes), and cost nothing unless the output is a partition
// output, which gets a copy into the caller's buffer. Any stored dtype: integer and bool values
// (indices, masks) are viewed the same way. A strided input (a transposed or split value) stays a
// view when the new shape can be read through strides (dimensions split, or merged where they are
// laid out one after another); otherwise it is copied row-major first.
#include <optional>

#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

// The strides that read a value of `sizes` stored with `strides` as `new_sizes` (same element
// count, row-major order), when there are such strides: each run of input dimensions that are
// laid out one after another is split into output dimensions.
std::optional<std::vector<int64_t>> reshaped_strides(const std::vector<int64_t>& sizes,
                                                     const std::vector<int64_t>& strides,
                                                     const std::vector<int64_t>& new_sizes) {
  std::vector<int64_t> out(new_sizes.size(), 1);
  if (sizes.empty()) return out;
  auto d_new = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t base = strides.back(), run = 1, done = 1;
  for (auto d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    run *= sizes[d];
    const bool run_ends = d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != run * base);
    if (!run_ends) continue;
    while (d_new >= 0 && (done < run || new_sizes[d_new] == 1)) {
      out[d_new] = done * base;
      done *= new_sizes[d_new];
      --d_new;
    }
    if (done != run) return std::nullopt;
    if (d > 0) {
      base = strides[d - 1];
      run = done = 1;
    }
  }
  if (d_new != -1) return std::nullopt;
  return out;
}

Status lower_view(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0], out = n.outputs[0];
  if (ctx.strided(in)) {
    if (auto strides =
            reshaped_strides(ctx.value(in).sizes, ctx.strides_of(in), ctx.value(out).sizes)) {
      ctx.view(out, in, std::move(*strides), 0);
      return Status();
    }
  }
  ctx.alias(out, in);  // a strided input is copied row-major first
  return Status();
}

}  // namespace

const OpLowering kIdentityLowering{.op = "Identity",
                                   .supports = &engine_tensors,
                                   .lower = &lower_view,
                                   .strided = true,
                                   .types = kEngineTypes};
const OpLowering kReshapeLowering{.op = "Reshape",
                                  .supports = &engine_tensors,
                                  .lower = &lower_view,
                                  .strided = true,
                                  .types = kEngineTypes};
const OpLowering kFlattenLowering{.op = "Flatten",
                                  .supports = &engine_tensors,
                                  .lower = &lower_view,
                                  .strided = true,
                                  .types = kEngineTypes};
const OpLowering kSqueezeLowering{.op = "Squeeze",
                                  .supports = &engine_tensors,
                                  .lower = &lower_view,
                                  .strided = true,
                                  .types = kEngineTypes};
const OpLowering kUnsqueezeLowering{.op = "Unsqueeze",
                                    .supports = &engine_tensors,
                                    .lower = &lower_view,
                                    .strided = true,
                                    .types = kEngineTypes};

}  // namespace baton::cuda
