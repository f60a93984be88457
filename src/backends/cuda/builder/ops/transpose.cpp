// Transpose on the GPU: a view (Lowering::view) reading the input through permuted strides, no
// kernel. Readers that take strided views (attention, elementwise runs, other views) read it as it
// is; the others get one row-major copy; a partition output gets a gathering kernel.
#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

Status lower(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  const int in = n.inputs[0];
  const std::vector<int64_t>& perm = n.attr_ints("perm");  // canonical: always present
  const std::vector<int64_t> in_strides = ctx.strides_of(in);
  std::vector<int64_t> strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) strides[d] = in_strides[perm[d]];
  ctx.view(n.outputs[0], in, std::move(strides), 0);
  return Status();
}

}  // namespace

const OpLowering kTransposeLowering{.op = "Transpose",
                                    .supports = &engine_tensors,
                                    .lower = &lower,
                                    .layout_aware = true,
                                    .strided = true,
                                    .types = kEngineTypes};

}  // namespace baton::cuda
