// Identity, Reshape, Flatten, Squeeze and Unsqueeze change only the shape: on the GPU they are
// views (the output names the input's bytes), and cost nothing unless the output is a partition
// output, which gets a copy into the caller's buffer. Any stored dtype: integer and bool values
// (indices, masks) are viewed the same way.
#include "backends/cuda/builder/ops/registry.h"

namespace baton::cuda {
namespace {

Status lower_view(Lowering& ctx, int index) {
  const compiler::IrNode& n = ctx.node(index);
  ctx.alias(n.outputs[0], n.inputs[0]);
  return Status();
}

}  // namespace

const OpLowering kIdentityLowering{"Identity", &engine_tensors, &lower_view};
const OpLowering kReshapeLowering{"Reshape", &engine_tensors, &lower_view};
const OpLowering kFlattenLowering{"Flatten", &engine_tensors, &lower_view};
const OpLowering kSqueezeLowering{"Squeeze", &engine_tensors, &lower_view};
const OpLowering kUnsqueezeLowering{"Unsqueeze", &engine_tensors, &lower_view};

}  // namespace baton::cuda
